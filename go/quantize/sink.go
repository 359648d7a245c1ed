package quantize

import (
	"errors"
	"io"
	"sync/atomic"
)

// sink writes the output's tensor data on a goroutine of its own, so that
// writing one slab overlaps quantizing the next (llama.cpp writes between
// tensors while its threads wait). It lends the buffers slabs are
// quantized into: two, reused for the whole file, so memory stays two
// slabs and nothing is allocated (and zeroed) per tensor.
type sink struct {
	w      io.Writer
	jobs   chan sinkJob
	free   chan []byte
	done   chan struct{}
	err    error // the first write error (the writer's; read after close)
	failed atomic.Bool
}

type sinkJob struct {
	data  []byte
	lent  bool   // data is a buffer of the sink's, returned after writing
	after func() // run once data is written (or dropped after an error)
}

// errSinkFailed: a write failed; close returns the error.
var errSinkFailed = errors.New("an earlier write failed")

func newSink(w io.Writer) *sink {
	s := &sink{w: w, jobs: make(chan sinkJob, 8), free: make(chan []byte, 2), done: make(chan struct{})}
	s.free <- nil
	s.free <- nil
	go s.run()
	return s
}

func (s *sink) run() {
	defer close(s.done)
	for j := range s.jobs {
		if !s.failed.Load() && len(j.data) > 0 {
			if _, err := s.w.Write(j.data); err != nil {
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

// buffer lends a buffer of n bytes, waiting for the writer to give one back.
func (s *sink) buffer(n int) []byte {
	b := <-s.free
	if cap(b) < n {
		b = make([]byte, n)
	}
	return b[:n]
}

// send queues data (a lent buffer, or bytes that stay valid until after
// runs) and after. It fails once a write has failed.
func (s *sink) send(data []byte, lent bool, after func()) error {
	s.jobs <- sinkJob{data: data, lent: lent, after: after}
	if s.failed.Load() {
		return errSinkFailed
	}
	return nil
}

// close waits for every queued write and returns the first error.
func (s *sink) close() error {
	close(s.jobs)
	<-s.done
	return s.err
}
