// Package rawggml is the benchmark's anchor: the way Ollama's Go engine drove
// ggml, one raw cgo call per graph op straight into ggml, with no checks.
//
// It is the only Go code in the module that sees a ggml header. It compiles
// no ggml C source: it links target/static/libggml_raw.a, the very ggml
// build (the same objects) that target/static/libggml_rs.a bundles and
// keeps private, so both sides of a comparison run the same ggml code (each
// its own copy of it, in one process).
//
// Two levels are offered, matching the two levels of the benchmark:
//
//   - bare calls (Add, MulMat, ...): one cgo call, raw pointers in and out;
//   - an Ollama-style wrapper (Tensor, Context): a Go struct holding the raw
//     tensor pointer, methods reached through an interface, each doing what
//     Ollama's engine did for that op (type-assert the arguments, make the
//     cgo call(s), return a freshly allocated &Tensor{}).
//
// Nothing here is meant for production use: bad arguments abort the process
// (GGML_ASSERT), which is exactly what ggml-rs exists to prevent.
package rawggml

/*
#cgo CFLAGS: -I${SRCDIR}/../../../vendor/ggml/include
#cgo LDFLAGS: ${SRCDIR}/../../../target/static/libggml_raw.a -lstdc++ -lm -ldl -lpthread
#include <stdlib.h>
#include "ggml.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Ptr is a raw ggml tensor pointer (struct ggml_tensor *), for the bare level.
type Ptr = unsafe.Pointer

// Type ids (ggml's enum ggml_type).
const (
	TypeF32 = C.GGML_TYPE_F32
	TypeF16 = C.GGML_TYPE_F16
	TypeI32 = C.GGML_TYPE_I32
)

// TensorOverhead is ggml's per-tensor header cost in a context, in bytes.
func TensorOverhead() int { return int(C.ggml_tensor_overhead()) }

// Context is a ggml context holding tensor headers only (no_alloc): enough
// for building graphs, which is all the benchmark does.
type Context struct {
	ctx *C.struct_ggml_context
	n   int
}

// NewContext makes a context with room for n tensor headers.
func NewContext(n int) *Context {
	params := C.struct_ggml_init_params{
		mem_size:   C.size_t(n) * C.ggml_tensor_overhead(),
		mem_buffer: nil,
		no_alloc:   true,
	}
	c := C.ggml_init(params)
	if c == nil {
		panic("rawggml: ggml_init failed")
	}
	return &Context{ctx: c, n: n}
}

// Close frees the context and every tensor header in it.
func (c *Context) Close() {
	if c != nil && c.ctx != nil {
		C.ggml_free(c.ctx)
		c.ctx = nil
	}
}

// Capacity is the number of tensor headers the context was made for.
func (c *Context) Capacity() int { return c.n }

// Room is how many more tensor headers fit.
func (c *Context) Room() int {
	free := C.ggml_get_mem_size(c.ctx) - C.ggml_used_mem(c.ctx)
	return int(free / C.ggml_tensor_overhead())
}

// NewTensor makes a tensor header (no data) of a ggml type and shape (ggml
// order, 1 to 4 dims).
func (c *Context) NewTensor(dtype int, shape ...int) *Tensor {
	if len(shape) < 1 || len(shape) > 4 {
		panic(fmt.Sprintf("rawggml: unsupported number of dimensions %d", len(shape)))
	}
	var ne [4]C.int64_t
	for i := range ne {
		ne[i] = 1
	}
	for i, d := range shape {
		ne[i] = C.int64_t(d)
	}
	t := C.ggml_new_tensor(c.ctx, C.enum_ggml_type(dtype), C.int(len(shape)), &ne[0])
	return &Tensor{t: t}
}

// ---- bare level: one cgo call each ---------------------------------------

func cc(c *Context) *C.struct_ggml_context { return c.ctx }
func ct(p Ptr) *C.struct_ggml_tensor       { return (*C.struct_ggml_tensor)(p) }

// Add is ggml_add.
func Add(c *Context, a, b Ptr) Ptr { return Ptr(C.ggml_add(cc(c), ct(a), ct(b))) }

// MulMat is ggml_mul_mat.
func MulMat(c *Context, a, b Ptr) Ptr { return Ptr(C.ggml_mul_mat(cc(c), ct(a), ct(b))) }

// Reshape2D is ggml_reshape_2d.
func Reshape2D(c *Context, a Ptr, ne0, ne1 int64) Ptr {
	return Ptr(C.ggml_reshape_2d(cc(c), ct(a), C.int64_t(ne0), C.int64_t(ne1)))
}

// Reshape3D is ggml_reshape_3d.
func Reshape3D(c *Context, a Ptr, ne0, ne1, ne2 int64) Ptr {
	return Ptr(C.ggml_reshape_3d(cc(c), ct(a), C.int64_t(ne0), C.int64_t(ne1), C.int64_t(ne2)))
}

// Permute is ggml_permute.
func Permute(c *Context, a Ptr, o0, o1, o2, o3 int) Ptr {
	return Ptr(C.ggml_permute(cc(c), ct(a), C.int(o0), C.int(o1), C.int(o2), C.int(o3)))
}

// RMSNorm is ggml_rms_norm (no weight).
func RMSNorm(c *Context, a Ptr, eps float32) Ptr {
	return Ptr(C.ggml_rms_norm(cc(c), ct(a), C.float(eps)))
}

// ---- Ollama-style level --------------------------------------------------

// Ctx and T mirror the shape of ml.Context and ml.Tensor for the methods the
// benchmark uses, so that calls pay the same interface dispatch and type
// assertions as model code calling through package ml.
type Ctx interface {
	Close()
}

type T interface {
	Ptr() Ptr
	Shape() []int
	Add(ctx Ctx, t2 T) T
	Mulmat(ctx Ctx, t2 T) T
	Reshape(ctx Ctx, shape ...int) T
	Permute(ctx Ctx, order ...int) T
	RMSNorm(ctx Ctx, weight T, eps float32) T
}

// Tensor is laid out like Ollama's ggml Tensor: the owning backend, the raw
// tensor, and a sync hook set by Compute. Only t is used here.
type Tensor struct {
	b    *struct{}
	t    *C.struct_ggml_tensor
	sync func()
}

var (
	_ Ctx = (*Context)(nil)
	_ T   = (*Tensor)(nil)
)

// Ptr is the raw tensor pointer.
func (t *Tensor) Ptr() Ptr { return Ptr(t.t) }

// Add: one cgo call, a new wrapper.
func (t *Tensor) Add(ctx Ctx, t2 T) T {
	return &Tensor{b: t.b, t: C.ggml_add(ctx.(*Context).ctx, t.t, t2.(*Tensor).t)}
}

// Mulmat: one cgo call, a new wrapper.
func (t *Tensor) Mulmat(ctx Ctx, t2 T) T {
	return &Tensor{b: t.b, t: C.ggml_mul_mat(ctx.(*Context).ctx, t.t, t2.(*Tensor).t)}
}

// Reshape as Ollama's engine did it: ask ggml whether the tensor is
// contiguous (a cgo call), then one ggml_reshape_Nd call. (A non-contiguous
// tensor would be copied first; the benchmark reshapes contiguous ones.)
func (t *Tensor) Reshape(ctx Ctx, shape ...int) T {
	c := ctx.(*Context).ctx
	if !C.ggml_is_contiguous(t.t) {
		panic("rawggml: Reshape of a non-contiguous tensor is not part of the benchmark")
	}
	switch len(shape) {
	case 1:
		return &Tensor{b: t.b, t: C.ggml_reshape_1d(c, t.t, C.int64_t(shape[0]))}
	case 2:
		return &Tensor{b: t.b, t: C.ggml_reshape_2d(c, t.t, C.int64_t(shape[0]), C.int64_t(shape[1]))}
	case 3:
		return &Tensor{b: t.b, t: C.ggml_reshape_3d(c, t.t, C.int64_t(shape[0]), C.int64_t(shape[1]), C.int64_t(shape[2]))}
	case 4:
		return &Tensor{b: t.b, t: C.ggml_reshape_4d(c, t.t, C.int64_t(shape[0]), C.int64_t(shape[1]), C.int64_t(shape[2]), C.int64_t(shape[3]))}
	}
	panic("rawggml: unsupported number of dimensions")
}

// Shape as Ollama's engine did it: ggml_n_dims (a cgo call), then the
// sizes read from the tensor struct into a new slice.
func (t *Tensor) Shape() []int {
	shape := make([]int, C.ggml_n_dims(t.t))
	for i := range shape {
		shape[i] = int(t.t.ne[i])
	}
	return shape
}

// Permute as Ollama's engine did it: the order must cover the tensor's
// dimensions (len(Shape())) or all four; missing axes keep their place;
// then one ggml_permute call.
func (t *Tensor) Permute(ctx Ctx, order ...int) T {
	if len(order) != len(t.Shape()) && len(order) != 4 {
		panic("rawggml: invalid number of dimensions for permute")
	}
	var o [4]C.int
	for i := range o {
		o[i] = C.int(i)
	}
	for i, v := range order {
		o[i] = C.int(v)
	}
	return &Tensor{b: t.b, t: C.ggml_permute(ctx.(*Context).ctx, t.t, o[0], o[1], o[2], o[3])}
}

// RMSNorm as Ollama's engine did it: ggml_rms_norm, then ggml_mul by the
// weight when there is one (two cgo calls with a weight).
func (t *Tensor) RMSNorm(ctx Ctx, w T, eps float32) T {
	c := ctx.(*Context).ctx
	out := C.ggml_rms_norm(c, t.t, C.float(eps))
	if w != nil {
		out = C.ggml_mul(c, out, w.(*Tensor).t)
	}
	return &Tensor{b: t.b, t: out}
}
