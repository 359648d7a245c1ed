package backend

// Quantizing the rows of slabs across worker goroutines, each taking
// chunks of rows in turn: the loop over a worker's chunks runs in the
// library (ggml_rs_quantize_slab), so that a worker makes one cgo call per
// slab instead of two per chunk. With a cgo call per chunk (about a
// millisecond of quantizing each), the Go scheduler took the worker's P
// back during most calls and handed it to a woken thread, which put a
// futex wake and sleep and a context switch beside nearly every chunk
// (about 6,000 in a quantize of the 235 MB bench model, 2 threads); that
// was the 2 % by which we trailed llama.cpp.

/*
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A QuantizePool is threads worker goroutines that convert and quantize
// slabs of rows (QuantizeJob) in the order they are submitted, every
// worker taking chunks of each slab in turn (the next one as it finishes
// one, as llama.cpp's threads do; smaller ones at the end of the slab, so
// that they finish together). A worker goes on to the next slab submitted
// as soon as the current one has no chunk left, without waiting for the
// others to finish theirs: submitting slabs ahead keeps the workers busy
// from one slab and tensor to the next. Rows are quantized independently
// (ggml_quantize_chunk), so the bytes depend neither on the threads nor on
// the chunks.
type QuantizePool struct {
	work []chan *QuantizeJob
	wg   sync.WaitGroup
	// shared with C (no Go pointers): set by the first failure, after
	// which the workers skip the rest of every job
	shared *struct{ failed int32 }
	closed bool
}

// A QuantizeJob is one slab submitted to a QuantizePool.
type QuantizeJob struct {
	from, to           uint32
	src, dst           []byte
	srcRow, dstRow     uint64
	ncols, rows, chunk uint64
	imatrix            []float32
	perExpert, first   uint64
	next               *struct{ row uint64 } // shared with C
	pending            atomic.Int32
	errs               []error
	done               chan struct{}
	err                error
}

// NewQuantizePool starts threads workers (at least one).
func NewQuantizePool(threads int) *QuantizePool {
	threads = max(1, threads)
	p := &QuantizePool{work: make([]chan *QuantizeJob, threads), shared: new(struct{ failed int32 })}
	for i := range p.work {
		p.work[i] = make(chan *QuantizeJob, 64)
		p.wg.Add(1)
		go p.worker(i)
	}
	return p
}

// Threads is the number of workers.
func (p *QuantizePool) Threads() int { return len(p.work) }

// Close waits for the jobs submitted to finish and stops the workers.
func (p *QuantizePool) Close() {
	if p.closed {
		return
	}
	p.closed = true
	for _, c := range p.work {
		close(c)
	}
	p.wg.Wait()
}

// Abort makes the workers skip what is left of the jobs submitted (they
// finish with an error) and stops them, as Close.
func (p *QuantizePool) Abort() {
	atomic.StoreInt32(&p.shared.failed, 1)
	p.Close()
}

// Submit queues the conversion of rows rows of ncols elements of type from
// in src to type to in dst (both whole rows, row after row), in chunks of
// at most chunkRows rows. imatrix, when not nil, holds ncols importance
// weights per expert of perExpert rows; the rows are those of the tensor
// from row first on (a chunk never spans two experts). src, dst and
// imatrix must stay untouched until the job is done (Wait). An invalid
// job is returned done, with its error.
func (p *QuantizePool) Submit(from, to uint32, src, dst []byte, ncols, rows, chunkRows uint64, imatrix []float32, perExpert, first uint64) *QuantizeJob {
	j := &QuantizeJob{from: from, to: to, src: src, dst: dst, ncols: ncols, rows: rows, chunk: chunkRows,
		imatrix: imatrix, perExpert: perExpert, first: first, done: make(chan struct{})}
	if j.err = j.check(); j.err != nil || rows == 0 {
		close(j.done)
		return j
	}
	j.srcRow, j.dstRow = uint64(len(src))/rows, uint64(len(dst))/rows
	j.next = new(struct{ row uint64 })
	j.errs = make([]error, len(p.work))
	j.pending.Store(int32(len(p.work)))
	for _, c := range p.work {
		c <- j
	}
	return j
}

func (j *QuantizeJob) check() error {
	if j.rows == 0 {
		return nil
	}
	if j.ncols == 0 || j.chunk == 0 {
		return &Error{Status: StatusInvalidArgument, Message: "QuantizeChunks: no columns or chunk rows"}
	}
	if uint64(len(j.src))%j.rows != 0 || uint64(len(j.dst))%j.rows != 0 || len(j.src) == 0 || len(j.dst) == 0 {
		return &Error{Status: StatusShape, Message: fmt.Sprintf("QuantizeChunks: %d and %d bytes are not %d whole rows", len(j.src), len(j.dst), j.rows)}
	}
	if j.imatrix != nil {
		if j.perExpert == 0 {
			return &Error{Status: StatusShape, Message: "QuantizeChunks: experts of 0 rows"}
		}
		if need := ((j.first+j.rows-1)/j.perExpert + 1) * j.ncols; uint64(len(j.imatrix)) < need {
			return &Error{Status: StatusShape, Message: fmt.Sprintf("QuantizeChunks: %d importance weights, rows %d..%d need %d", len(j.imatrix), j.first, j.first+j.rows, need)}
		}
	}
	return nil
}

// Done is closed when the job is finished (its workers are done with it).
func (j *QuantizeJob) Done() <-chan struct{} { return j.done }

// Wait waits for the job and returns its error: the library's *Error, or
// one saying the pool was aborted.
func (j *QuantizeJob) Wait() error {
	<-j.done
	return j.err
}

func (p *QuantizePool) worker(i int) {
	defer p.wg.Done()
	var f32 []float32
	threads := uint64(len(p.work))
	for j := range p.work[i] {
		if need := j.chunk * j.ncols; uint64(cap(f32)) < need {
			f32 = make([]float32, need)
		}
		j.errs[i] = j.run(i, f32, threads, p.shared)
		if j.pending.Add(-1) == 0 {
			for _, err := range j.errs {
				if err != nil {
					j.err = err
					break
				}
			}
			if j.err == nil && atomic.LoadInt32(&p.shared.failed) != 0 && atomic.LoadUint64(&j.next.row) < j.rows {
				j.err = &Error{Status: StatusAborted, Message: "QuantizeChunks: stopped after another slab failed"}
			}
			close(j.done)
		}
	}
}

// run is worker i's part of the job: one call into the library, which
// takes chunks until none is left.
func (j *QuantizeJob) run(i int, f32 []float32, threads uint64, shared *struct{ failed int32 }) error {
	slab := C.ggml_rs_quantize_slab_rows{
		from: C.uint32_t(j.from), to: C.uint32_t(j.to),
		src: (*C.uint8_t)(unsafe.Pointer(&j.src[0])), src_row: C.uint64_t(j.srcRow),
		dst: (*C.uint8_t)(unsafe.Pointer(&j.dst[0])), dst_row: C.uint64_t(j.dstRow),
		ncols: C.uint64_t(j.ncols), rows: C.uint64_t(j.rows), chunk: C.uint64_t(j.chunk), threads: C.uint64_t(threads),
		per_expert: C.uint64_t(j.perExpert), first: C.uint64_t(j.first),
	}
	// The slab holds pointers to src, dst and imatrix: cgo wants the Go
	// memory among them pinned for the call.
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&j.src[0])
	pin.Pin(&j.dst[0])
	if j.imatrix != nil {
		pin.Pin(&j.imatrix[0])
		slab.imatrix, slab.imatrix_len = (*C.float)(&j.imatrix[0]), C.uint64_t(len(j.imatrix))
	}
	var cerr C.ggml_rs_error
	var inConvert C.int32_t
	st := C.ggml_rs_quantize_slab(&slab, (*C.uint64_t)(&j.next.row), (*C.int32_t)(&shared.failed),
		(*C.float)(&f32[0]), C.uint64_t(len(f32)), &inConvert, &cerr)
	if st != C.GGML_RS_OK {
		e := errorFrom(&cerr)
		if inConvert != 0 && (e.Status == StatusDType || e.Status == StatusUnsupported) {
			e.Message = "unsupported quantization format: " + e.Message
		}
		return e
	}
	return nil
}

// QuantizeChunks is one job on a pool of threads workers of its own,
// waited for: the conversion of rows rows of ncols elements of type from
// in src to type to in dst, as QuantizePool.Submit.
func QuantizeChunks(from, to uint32, src, dst []byte, ncols, rows, chunkRows uint64, threads int, imatrix []float32, perExpert, first uint64) error {
	p := NewQuantizePool(min(max(1, threads), int(min(rows, 1<<20))))
	defer p.Close()
	return p.Submit(from, to, src, dst, ncols, rows, chunkRows, imatrix, perExpert, first).Wait()
}
