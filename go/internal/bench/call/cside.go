// Package bench measures what one graph-building call costs through ggml-rs
// (Go → C ABI → Rust checks → ggml) against the same ggml function called
// directly through raw cgo (package rawggml), in the same process, linking
// the same static ggml.
//
// Two levels, reported side by side:
//
//   - C: one cgo call each, C.ggml_rs_<op>(ctx, ..., err) against
//     C.ggml_<op>(gctx, ...), with raw pointers;
//   - API: ml.Tensor methods of the ggml-rs backend against an Ollama-style
//     wrapper (rawggml.Tensor: the raw pointer in a Go struct, the op's cgo
//     call(s), a new &Tensor{}), both called through an interface.
//
// Contexts fill up, so both sides build into contexts of the same capacity
// and recreate them outside the timed region every chunk of ops. Each
// benchmark reports ns/op for its side; BenchmarkRatio runs both sides
// interleaved and reports the ratio ours/raw as a metric. `go run
// ./internal/bench/call/table` (or `make bench-table`) prints the table.
//
// The cgo code is in this file because cgo is not allowed in _test.go files.
package bench

/*
#cgo pkg-config: --static ggml-rs
#include <stdlib.h>
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/internal/rawggml"
)

// Chunk is how many ops are built into one context before it is recreated
// (outside the timed region). Both sides and both levels use it.
const Chunk = 2048

// ctxCap is the tensor capacity of every op context: room for up to four
// tensors per op (a composite op makes two or three). It is the backend's
// default maximum, so the API level can use it too.
const ctxCap = 4 * Chunk

// Shapes of the operands (ggml order): a small decoder's activations.
const (
	dModel = 256
	dFF    = 768
	seq    = 16
	heads  = 8
	headD  = dModel / heads
)

// cSide is ggml-rs at the C level: a backend, a long-lived family holding
// the operands, and an op context recreated every chunk.
type cSide struct {
	b    *C.ggml_rs_backend
	data *C.ggml_rs_context // root of the operands' family
	in   *C.ggml_rs_context // its input sibling (operands have CPU memory)
	ctx  *C.ggml_rs_context // where ops build
	err  *C.ggml_rs_error   // C memory: no Go pointer crosses
	ne   *C.int64_t         // C memory: the reshape's shape
	x    *C.ggml_rs_tensor  // [dModel, seq]
	y    *C.ggml_rs_tensor  // [dModel, seq]
	w    *C.ggml_rs_tensor  // [dModel, dFF]
	q    *C.ggml_rs_tensor  // [headD, heads, seq]
}

func cError(e *C.ggml_rs_error) error {
	return fmt.Errorf("ggml-rs: status %d: %s", int(e.status), C.GoString(&e.message[0]))
}

func newCSide() (*cSide, error) {
	s := &cSide{err: (*C.ggml_rs_error)(C.calloc(1, C.sizeof_ggml_rs_error))}
	s.ne = (*C.int64_t)(C.calloc(4, 8))
	ne := unsafe.Slice(s.ne, 4)
	ne[0], ne[1], ne[2] = headD, heads, seq
	p := C.ggml_rs_backend_params_default()
	p.max_graph_nodes = C.uint32_t(ctxCap)
	p.n_threads = 1
	if C.ggml_rs_backend_new(&p, &s.b, s.err) != C.GGML_RS_OK {
		return nil, cError(s.err)
	}
	if s.data = C.ggml_rs_ctx_new(s.b, 64, s.err); s.data == nil {
		return nil, cError(s.err)
	}
	s.in = C.ggml_rs_ctx_input(s.data)
	mk := func(ne ...int64) *C.ggml_rs_tensor {
		t := C.ggml_rs_ctx_zeros(s.in, 0, (*C.int64_t)(unsafe.Pointer(&ne[0])), C.size_t(len(ne)), s.err)
		if t == nil {
			panic(cError(s.err))
		}
		return t
	}
	s.x, s.y = mk(dModel, seq), mk(dModel, seq)
	s.w = mk(dModel, dFF)
	s.q = mk(headD, heads, seq)
	s.reset()
	return s, nil
}

// reset recreates the op context (call outside the timed region).
func (s *cSide) reset() {
	if s.ctx != nil {
		C.ggml_rs_ctx_free(s.ctx)
	}
	if s.ctx = C.ggml_rs_ctx_new(s.b, ctxCap, s.err); s.ctx == nil {
		panic(cError(s.err))
	}
}

func (s *cSide) close() {
	C.ggml_rs_ctx_free(s.ctx)
	C.ggml_rs_ctx_free(s.in)
	C.ggml_rs_ctx_free(s.data)
	C.ggml_rs_backend_free(s.b)
	C.free(unsafe.Pointer(s.err))
	C.free(unsafe.Pointer(s.ne))
}

// Each loop makes n ops; a NULL result is an error the caller must see, so
// the check is part of the measured cost (the raw side cannot fail: ggml
// aborts instead).

func (s *cSide) add(n int) {
	for i := 0; i < n; i++ {
		if C.ggml_rs_add(s.ctx, s.x, s.y, s.err) == nil {
			panic(cError(s.err))
		}
	}
}

func (s *cSide) mulMat(n int) {
	for i := 0; i < n; i++ {
		if C.ggml_rs_mul_mat(s.ctx, s.w, s.x, s.err) == nil {
			panic(cError(s.err))
		}
	}
}

func (s *cSide) reshape(n int) {
	for i := 0; i < n; i++ {
		if C.ggml_rs_reshape(s.ctx, s.x, s.ne, 3, s.err) == nil {
			panic(cError(s.err))
		}
	}
}

func (s *cSide) permute(n int) {
	for i := 0; i < n; i++ {
		if C.ggml_rs_permute(s.ctx, s.q, 0, 2, 1, 3, s.err) == nil {
			panic(cError(s.err))
		}
	}
}

func (s *cSide) rmsNorm(n int) {
	for i := 0; i < n; i++ {
		if C.ggml_rs_rms_norm(s.ctx, s.x, nil, 1e-5, s.err) == nil {
			panic(cError(s.err))
		}
	}
}

// rawSide is the anchor at the C level: the same operand shapes as headers
// in a long-lived ggml context, ops built into a context recreated every
// chunk.
type rawSide struct {
	data       *rawggml.Context
	ctx        *rawggml.Context
	x, y, w, q rawggml.Ptr
}

func newRawSide() *rawSide {
	s := &rawSide{data: rawggml.NewContext(64)}
	s.x = s.data.NewTensor(rawggml.TypeF32, dModel, seq).Ptr()
	s.y = s.data.NewTensor(rawggml.TypeF32, dModel, seq).Ptr()
	s.w = s.data.NewTensor(rawggml.TypeF32, dModel, dFF).Ptr()
	s.q = s.data.NewTensor(rawggml.TypeF32, headD, heads, seq).Ptr()
	s.reset()
	return s
}

func (s *rawSide) reset() {
	s.ctx.Close()
	s.ctx = rawggml.NewContext(ctxCap)
}

func (s *rawSide) close() {
	s.ctx.Close()
	s.data.Close()
}

func (s *rawSide) add(n int) {
	for i := 0; i < n; i++ {
		rawggml.Add(s.ctx, s.x, s.y)
	}
}

func (s *rawSide) mulMat(n int) {
	for i := 0; i < n; i++ {
		rawggml.MulMat(s.ctx, s.w, s.x)
	}
}

func (s *rawSide) reshape(n int) {
	for i := 0; i < n; i++ {
		rawggml.Reshape3D(s.ctx, s.x, headD, heads, seq)
	}
}

func (s *rawSide) permute(n int) {
	for i := 0; i < n; i++ {
		rawggml.Permute(s.ctx, s.q, 0, 2, 1, 3)
	}
}

func (s *rawSide) rmsNorm(n int) {
	for i := 0; i < n; i++ {
		rawggml.RMSNorm(s.ctx, s.x, 1e-5)
	}
}

// Case is one op compared at one level.
type Case struct {
	Level string // "C" or "API"
	Op    string
	Ours  Side
	Raw   Side
	// Note says what each side does when it is not one call each.
	Note string
}

// CCases are the C-level comparisons. close releases both sides.
func CCases() (cases []Case, close func(), err error) {
	o, err := newCSide()
	if err != nil {
		return nil, nil, err
	}
	r := newRawSide()
	add := func(op string, ours, raw func(int), note string) {
		cases = append(cases, Case{Level: "C", Op: op, Ours: Side{ours, o.reset}, Raw: Side{raw, r.reset}, Note: note})
	}
	add("add", o.add, r.add, "ggml_rs_add vs ggml_add, f32 [256,16] + [256,16]")
	add("mul_mat", o.mulMat, r.mulMat, "ggml_rs_mul_mat vs ggml_mul_mat, [256,768] x [256,16]")
	add("reshape", o.reshape, r.reshape, "ggml_rs_reshape vs ggml_reshape_3d, [256,16] to [32,8,16]")
	add("permute", o.permute, r.permute, "ggml_rs_permute vs ggml_permute, [32,8,16] (0,2,1,3)")
	add("rms_norm", o.rmsNorm, r.rmsNorm, "ggml_rs_rms_norm (no weight) vs ggml_rms_norm, [256,16]")
	return cases, func() { o.close(); r.close() }, nil
}
