package backend

// Quantizing the rows of slabs across worker goroutines, each taking
// chunks of rows in turn: the loop over a worker's chunks runs in C, so
// that a worker makes one cgo call per slab instead of two per chunk. With a cgo
// call per chunk (about a millisecond of quantizing each), the Go
// scheduler took the worker's P back during most calls and handed it to a
// woken thread, which put a futex wake and sleep and a context switch
// beside nearly every chunk (about 6,000 in a quantize of the 235 MB bench
// model, 2 threads); that was the 2 % by which we trailed llama.cpp.

/*
#include <stdint.h>
#include "ggml_rs.h"

// Converts and quantizes chunks of rows taken in turn from *next (the
// first row not yet taken, among rows), until none is left or *failed is
// set: ggml's to_float of each chunk into f32 (room for chunk * ncols
// values), then ggml_quantize_chunk into dst, through the C ABI. A chunk
// is chunk rows, fewer towards the end of the slab (a (2 * threads)th of
// the rows left, at least one), so that the threads finish together
// rather than one waiting for another's last chunk. imatrix (nullable)
// holds ncols weights per expert of per_expert rows; the slab's first row
// is row first of the tensor, and a chunk is split where an expert ends.
// Returns GGML_RS_OK, a failure's status (err set, *failed set; *in_convert
// set when the conversion failed), or -1 when the quantizer wrote *bad
// bytes instead of the rows' size.
static int32_t ggml_rs_go_quantize_chunks(uint32_t from, uint32_t to,
		const uint8_t *src, uint64_t src_row, uint8_t *dst, uint64_t dst_row,
		float *f32, uint64_t ncols, uint64_t rows, uint64_t chunk, uint64_t threads,
		const float *imatrix, uint64_t per_expert, uint64_t first,
		uint64_t *next, int32_t *failed, int32_t *in_convert, uint64_t *bad, ggml_rs_error *err) {
	uint64_t lo = __atomic_load_n(next, __ATOMIC_RELAXED);
	for (;;) {
		if (__atomic_load_n(failed, __ATOMIC_RELAXED) || lo >= rows) {
			return GGML_RS_OK;
		}
		uint64_t take = (rows - lo) / (2 * threads);
		take = take < 1 ? 1 : take > chunk ? chunk : take;
		if (!__atomic_compare_exchange_n(next, &lo, lo + take, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			continue; // lo is now the row another thread left
		}
		uint64_t hi = lo + take;
		for (uint64_t a = lo; a < hi;) {
			uint64_t b = hi;
			const float *im = NULL;
			if (imatrix) {
				uint64_t e = (first + a) / per_expert;
				uint64_t end = (e + 1) * per_expert - first;
				im = imatrix + e * ncols;
				if (end < b) {
					b = end;
				}
			}
			ggml_rs_status st = ggml_rs_convert_to_f32(from, src + a * src_row, (b - a) * src_row, (b - a) * ncols, f32, err);
			size_t written = 0;
			if (st != GGML_RS_OK) {
				*in_convert = 1;
			} else {
				st = ggml_rs_quantize(to, f32, ncols, b - a, im, dst + a * dst_row, (b - a) * dst_row, &written, err);
			}
			if (st != GGML_RS_OK) {
				__atomic_store_n(failed, 1, __ATOMIC_RELAXED);
				return st;
			}
			if (written != (b - a) * dst_row) {
				*bad = written;
				__atomic_store_n(failed, 1, __ATOMIC_RELAXED);
				return -1;
			}
			a = b;
		}
		lo = __atomic_load_n(next, __ATOMIC_RELAXED);
	}
}
*/
import "C"

import (
	"fmt"
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

// run is worker i's part of the job: one call into C, which takes chunks
// until none is left.
func (j *QuantizeJob) run(i int, f32 []float32, threads uint64, shared *struct{ failed int32 }) error {
	var imp *C.float
	if j.imatrix != nil {
		imp = (*C.float)(&j.imatrix[0])
	}
	var cerr C.ggml_rs_error
	var bad C.uint64_t
	var inConvert C.int32_t
	st := C.ggml_rs_go_quantize_chunks(C.uint32_t(j.from), C.uint32_t(j.to),
		(*C.uint8_t)(unsafe.Pointer(&j.src[0])), C.uint64_t(j.srcRow), (*C.uint8_t)(unsafe.Pointer(&j.dst[0])), C.uint64_t(j.dstRow),
		(*C.float)(&f32[0]), C.uint64_t(j.ncols), C.uint64_t(j.rows), C.uint64_t(j.chunk), C.uint64_t(threads),
		imp, C.uint64_t(j.perExpert), C.uint64_t(j.first),
		(*C.uint64_t)(&j.next.row), (*C.int32_t)(&shared.failed), &inConvert, &bad, &cerr)
	switch {
	case st == -1:
		return fmt.Errorf("quantized %d bytes, not whole rows of %d", uint64(bad), j.dstRow)
	case st != C.GGML_RS_OK:
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
