package quantize

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// Run quantizes the GGUF model at in to out. The output is written to a
// temporary file in out's directory, renamed to out when complete: a
// failed run leaves no output. Memory stays bounded by a slab of rows of
// one tensor (not the model).
func Run(in, out string, opts Options) (err error) {
	if err := samePath(in, out); err != nil {
		return err
	}
	f, err := gguf.Open(in)
	if err != nil {
		return err
	}
	kvs, items, c, err := plan(f, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	// Opened again for the data: refuse a path swapped for a pipe meanwhile.
	fin, err := regfile.Open(in)
	if err != nil {
		return err
	}
	defer fin.Close()
	st, err := fin.Stat()
	if err != nil {
		return err
	}
	src := newSource(fin, st.Size())
	defer src.close()

	tmp, err := createOutput(filepath.Dir(out), "."+filepath.Base(out)+".tmp*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", out, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 4<<20)
	outInfos := make([]gguf.TensorInfo, len(items))
	for i, it := range items {
		outInfos[i] = it.out
	}
	headerSize, err := gguf.WriteHeader(w, kvs, outInfos, Alignment)
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	t0 := time.Now()
	var sizeIn, sizeOut uint64
	zeros := make([]byte, Alignment)
	snk := newSink(w, tmp, int64(headerSize))
	pool := backend.NewQuantizePool(opts.Threads)
	defer pool.Abort() // after the sink is closed, the jobs are all done
	// closeSink waits for the writer: its error, or a quantization's.
	closeSink := func() error {
		werr := snk.close()
		var te *tensorError
		if werr == nil || errors.As(werr, &te) {
			return werr
		}
		return fmt.Errorf("writing %s: %w", out, werr)
	}
	fail := func(err error) error {
		// the writer's own error (or a quantization's), when it is why we stopped
		if werr := closeSink(); werr != nil && (err == nil || errors.Is(err, errSinkFailed)) {
			return werr
		}
		return err
	}
	for i, it := range items {
		if i+1 < len(items) {
			next := items[i+1].in
			src.prefetch(f.DataOffset+next.Offset, next.Size())
		}
		n, err := writeTensor(snk, pool, src, f.DataOffset, it)
		if err != nil {
			return fail(fmt.Errorf("tensor %s: %w", it.in.Name, err))
		}
		off, size := f.DataOffset+it.in.Offset, it.in.Size()
		if err := snk.send(zeros[:gguf.Padding(n, Alignment)], false, func() { src.release(off, size) }); err != nil {
			return fail(err)
		}
		sizeIn += it.in.Size()
		sizeOut += n
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "[%4d/%4d] %-36s %-22s %6s -> %-6s %8.3f MiB -> %8.3f MiB\n",
				i+1, len(items), it.in.Name, fmt.Sprint(it.in.Shape), it.in.Type, it.out.Type, mib(it.in.Size()), mib(n))
		}
	}
	if err := closeSink(); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := os.Chmod(tmp.Name(), outputMode(out)); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return err
	}
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "model size %.2f MiB -> %.2f MiB (%s) in %.2f s", mib(sizeIn), mib(sizeOut), opts.FileType, time.Since(t0).Seconds())
		if c.nFallback > 0 {
			fmt.Fprintf(opts.Progress, "; %d of %d tensors fell back to another type (row length not a multiple of the block)", c.nFallback, len(items))
		}
		fmt.Fprintln(opts.Progress)
	}
	return nil
}

// outputFile is what Run writes the output through: the temporary file.
type outputFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// createOutput creates the temporary output file (a variable so that a
// test can make its writes fail as on a full disk).
var createOutput = func(dir, pattern string) (outputFile, error) { return os.CreateTemp(dir, pattern) }

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// samePath refuses an output that is the input (by name or by file).
func samePath(in, out string) error {
	ai, err1 := filepath.Abs(in)
	ao, err2 := filepath.Abs(out)
	if err1 == nil && err2 == nil && ai == ao {
		return fmt.Errorf("the output %s is the input", out)
	}
	si, err := os.Stat(in)
	if err != nil {
		return err
	}
	if so, err := os.Stat(out); err == nil && os.SameFile(si, so) {
		return fmt.Errorf("the output %s is the input %s", out, in)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// copySlab bounds the bytes of a tensor copied at a time when the input
// is read rather than mapped.
const copySlab = 64 << 20

// writeTensor queues one tensor's output data on snk and returns its size.
func writeTensor(snk *sink, pool *backend.QuantizePool, src *source, dataOffset uint64, it item) (uint64, error) {
	off := dataOffset + it.in.Offset
	if it.out.Type == it.in.Type {
		size := it.in.Size()
		for done := uint64(0); done < size; {
			n := min(copySlab, size-done)
			b, err := src.bytes(off+done, n)
			if err != nil {
				return done, err
			}
			lent := false
			if !src.mapped() {
				// the read buffer is reused at the next read: copy it
				b, lent = append(snk.buffer(0), b...), true
			}
			if err := snk.send(b, lent, nil); err != nil {
				return done, err
			}
			done += n
		}
		return size, nil
	}
	return quantizeTensor(snk, pool, src, off, it)
}
