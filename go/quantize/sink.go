package quantize

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// sink writes the output's tensor data on a goroutine of its own, so that
// writing one slab overlaps quantizing the next (llama.cpp writes between
// tensors while its threads wait), in the order given: a quantized slab is
// written once its job is done. It lends the buffers slabs are
// quantized into: two, reused for the whole file, so memory stays two
// slabs and nothing is allocated (and zeroed) per tensor. A slab goes to
// the file in one write of its own (the buffered bytes before it flushed
// first), not through the bufio.Writer: copying it into that 4 MiB buffer
// and writing from there cost more than the copy itself (the kernel's copy
// into the page cache took 10 times llama.cpp's, which writes each
// tensor's buffer straight after quantizing it, while it is in cache).
type sink struct {
	w      *bufio.Writer
	direct io.Writer // w's file
	off    int64     // the file offset after the data given so far
	synced int64     // the offset up to which writeback was started
	jobs   chan sinkJob
	free   chan []byte
	done   chan struct{}
	err    error // the first write error (the writer's; read after close)
	failed atomic.Bool
}

type sinkJob struct {
	data   []byte
	lent   bool                 // data is a buffer of the sink's, returned after writing
	after  func()               // run once data is written (or dropped after an error)
	job    *backend.QuantizeJob // when not nil, quantizes into data: waited for
	tensor string               // the tensor job quantizes (for its error)
}

// tensorError: the quantization of a tensor failed (not the writing).
type tensorError struct{ err error }

func (e *tensorError) Error() string { return e.err.Error() }
func (e *tensorError) Unwrap() error { return e.err }

// errSinkFailed: a write (or a quantization) failed; close returns the
// error.
var errSinkFailed = errors.New("an earlier write failed")

// directMin: data of this many bytes or more is written straight to the
// file; smaller (padding, small tensors) is buffered.
const directMin = 64 << 10

// newSink writes through w, whose file direct holds off bytes before
// (the header, perhaps still in w).
func newSink(w *bufio.Writer, direct io.Writer, off int64) *sink {
	s := &sink{w: w, direct: direct, off: off, synced: 0, jobs: make(chan sinkJob, 8), free: make(chan []byte, 2), done: make(chan struct{})}
	s.free <- nil
	s.free <- nil
	go s.run()
	return s
}

func (s *sink) run() {
	defer close(s.done)
	for j := range s.jobs {
		if j.job != nil {
			if err := j.job.Wait(); err != nil && !s.failed.Load() {
				s.err = &tensorError{fmt.Errorf("tensor %s: %w", j.tensor, err)}
				s.failed.Store(true)
			}
		}
		if !s.failed.Load() && len(j.data) > 0 {
			if err := s.write(j.data); err != nil {
				s.err = err
				s.failed.Store(true)
			}
		}
		if j.after != nil {
			j.after()
		}
		if j.lent {
			s.free <- j.data[:0]
		}
	}
}

// write writes data after what is buffered: large data in a write of its
// own, the rest through the buffer. After a large write, the kernel is
// asked to start writing the file's new bytes to disk (startWriteback).
func (s *sink) write(data []byte) error {
	s.off += int64(len(data))
	if len(data) < directMin {
		_, err := s.w.Write(data)
		return err
	}
	if err := s.w.Flush(); err != nil {
		return err
	}
	if _, err := s.direct.Write(data); err != nil {
		return err
	}
	startWriteback(s.direct, s.synced, s.off-s.synced)
	s.synced = s.off
	return nil
}

// buffer lends a buffer of n bytes, waiting for the writer to give one back.
func (s *sink) buffer(n int) []byte {
	b := <-s.free
	if cap(b) < n {
		b = make([]byte, n)
	}
	return b[:n]
}

// send queues data (a lent buffer, or bytes that stay valid until after
// runs) and after. It fails once a write (or a quantization) has failed.
func (s *sink) send(data []byte, lent bool, after func()) error {
	return s.sendJob(sinkJob{data: data, lent: lent, after: after})
}

// sendJob queues j.
func (s *sink) sendJob(j sinkJob) error {
	s.jobs <- j
	if s.failed.Load() {
		return errSinkFailed
	}
	return nil
}

// close waits for every queued write and returns the first error (a
// *tensorError when a quantization failed).
func (s *sink) close() error {
	close(s.jobs)
	<-s.done
	return s.err
}
