package quantize

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// source gives the bytes of the input model's tensors. The file is
// mapped, as llama.cpp maps it: a slab of rows is then the page cache's
// memory itself, with no copy into a buffer of ours. Pages of a tensor are
// released from this process (MADV_DONTNEED; the page cache keeps them)
// once it is written, so the resident size stays bounded by a tensor, and
// the next tensor's pages are requested ahead (MADV_WILLNEED) while this
// one is quantized. Where the file cannot be mapped, slabs are read into
// one reused buffer instead.
type source struct {
	f    *os.File
	data []byte // the mapping, or nil
	buf  []byte // the read buffer when not mapped
}

func newSource(f *os.File, size int64) *source {
	s := &source{f: f}
	if size > 0 && int64(int(size)) == size {
		if data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
			s.data = data
		}
	}
	return s
}

// mapped reports whether the file is mapped (bytes then stay valid).
func (s *source) mapped() bool { return s.data != nil }

// bytes returns n bytes at off (valid until the next call, when not mapped).
func (s *source) bytes(off, n uint64) ([]byte, error) {
	if s.data != nil {
		if off+n > uint64(len(s.data)) || off+n < off {
			return nil, fmt.Errorf("reading: %d bytes at %d are past the end of the file", n, off)
		}
		return s.data[off : off+n : off+n], nil
	}
	if uint64(cap(s.buf)) < n {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	if _, err := s.f.ReadAt(b, int64(off)); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("reading: %w", err)
	}
	return b, nil
}

// advise passes a hint about [off, off+n) to the kernel, when mapped.
func (s *source) advise(off, n uint64, advice int) {
	if s.data == nil || n == 0 || off >= uint64(len(s.data)) {
		return
	}
	const page = 4096
	lo := off &^ (page - 1)
	hi := min(off+n, uint64(len(s.data)))
	_ = syscall.Madvise(s.data[lo:hi], advice)
}

// prefetch asks for a range to be read ahead; release drops it from this
// process's resident memory.
func (s *source) prefetch(off, n uint64) { s.advise(off, n, syscall.MADV_WILLNEED) }
func (s *source) release(off, n uint64)  { s.advise(off, n, syscall.MADV_DONTNEED) }

func (s *source) close() {
	if s.data != nil {
		syscall.Munmap(s.data)
		s.data = nil
	}
}
