package backend

/*
#include <stdlib.h>
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"
	"log/slog"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// ggmlType maps a DType to a ggml type id; DTypeOther panics.
func ggmlType(d ml.DType) C.int32_t {
	switch d {
	case ml.DTypeF32:
		return typeF32
	case ml.DTypeF16:
		return typeF16
	case ml.DTypeQ80:
		return typeQ8_0
	case ml.DTypeQ40:
		return typeQ4_0
	case ml.DTypeI32:
		return typeI32
	case ml.DTypeMXFP4:
		return typeMXFP4
	}
	panic("unsupported dtype")
}

// ggml type ids.
const (
	typeF32   = 0
	typeF16   = 1
	typeQ4_0  = 2
	typeQ8_0  = 8
	typeI32   = 26
	typeBF16  = 30
	typeMXFP4 = 39
)

// newTensor makes a data tensor (Ollama's shape rules) with optional
// initial contents.
func (c *Context) newTensor(op string, dtype C.int32_t, shape []int, data unsafe.Pointer, n int, zero bool) *Tensor {
	use(c, op)
	s := c.f.s
	var dims int
	if len(shape) > 0 && shape[0] != 0 {
		if len(shape) > 4 {
			panic("unsupported number of dimensions")
		}
		for i, d := range shape {
			if d < 1 {
				panic("invalid shape")
			}
			s.ne[i] = C.int64_t(d)
		}
		dims = len(shape)
	}
	// Without memory allocation nothing is uploaded or cleared (Ollama's
	// fit mode).
	alloc := c.f.b.params.AllocMemory
	var p *C.ggml_rs_tensor
	switch {
	case n > 0 && alloc:
		p = C.ggml_rs_ctx_from_data(c.c, dtype, &s.ne[0], C.size_t(dims), (*C.uint8_t)(data), C.size_t(n), &s.err)
	case zero && alloc:
		p = C.ggml_rs_ctx_zeros(c.c, dtype, &s.ne[0], C.size_t(dims), &s.err)
	default:
		p = C.ggml_rs_ctx_empty(c.c, dtype, &s.ne[0], C.size_t(dims), &s.err)
	}
	if p == nil {
		if Status(s.err.status) == StatusOutOfMemory {
			err := errorFrom(&s.err)
			C.ggml_rs_ctx_clear_error(c.c)
			slog.Warn("ggml-rs: tensor allocation failed", "error", err.Message)
			panic(ml.ErrNoMem{BackendMemory: c.f.b.BackendMemory()})
		}
		c.fail()
	}
	return &Tensor{c: p, f: c.f, owned: true}
}

// Empty makes a tensor with its own memory; contents undefined.
func (c *Context) Empty(dtype ml.DType, shape ...int) ml.Tensor {
	return c.newTensor("Empty", ggmlType(dtype), shape, nil, 0, false)
}

// Zeros makes a tensor of zeros.
func (c *Context) Zeros(dtype ml.DType, shape ...int) ml.Tensor {
	return c.newTensor("Zeros", ggmlType(dtype), shape, nil, 0, true)
}

// FromBytes makes a tensor holding s (raw data, e.g. quantized blocks),
// which must be exactly the tensor's size unless empty.
func (c *Context) FromBytes(dtype ml.DType, s []byte, shape ...int) ml.Tensor {
	return c.newTensor("FromBytes", ggmlType(dtype), shape, unsafe.Pointer(unsafe.SliceData(s)), len(s), false)
}

// checkShape panics unless len(s) elements fill shape exactly (an empty s
// is allowed).
func checkShape[E any](s []E, shape []int) {
	n := len(s)
	if n == 0 {
		return
	}
	for _, d := range shape {
		if d == 0 {
			panic(fmt.Errorf("invalid shape: %v", shape))
		}
		n /= d
	}
	if n != 1 {
		panic(fmt.Errorf("invalid shape: %v", shape))
	}
}

// FromFloats makes an F32 tensor holding s.
func (c *Context) FromFloats(s []float32, shape ...int) ml.Tensor {
	checkShape(s, shape)
	return c.newTensor("FromFloats", typeF32, shape, unsafe.Pointer(unsafe.SliceData(s)), 4*len(s), false)
}

// FromInts makes an I32 tensor holding s.
func (c *Context) FromInts(s []int32, shape ...int) ml.Tensor {
	checkShape(s, shape)
	return c.newTensor("FromInts", typeI32, shape, unsafe.Pointer(unsafe.SliceData(s)), 4*len(s), false)
}

// Arange is start, start+step, … below stop: F32 as a graph node, I32 as
// an input tensor.
func (c *Context) Arange(start, stop, step float32, dtype ml.DType) ml.Tensor {
	use(c, "Arange")
	var ty C.int32_t
	switch dtype {
	case ml.DTypeF32:
		ty = typeF32
	case ml.DTypeI32:
		ty = typeI32
	default:
		panic("unsupported dtype for arange")
	}
	t := c.result(C.ggml_rs_ctx_arange(c.c, C.float(start), C.float(stop), C.float(step), ty, &c.f.s.err))
	t.owned = ty == typeI32 // host data; F32 is a graph node
	return t
}
