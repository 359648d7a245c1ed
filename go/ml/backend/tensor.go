package backend

/*
#include <stdlib.h>
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/ml"
)

// Tensor is ml.Tensor over a ggml_rs_tensor handle of a context family.
type Tensor struct {
	c *C.ggml_rs_tensor
	f *family

	// computedBy is the context handle of the last Compute that listed
	// the tensor (nil: never listed, so Bytes/Floats return nil).
	computedBy atomic.Uintptr
	// owned: a data tensor with a buffer of its own (Empty, From*, an I32
	// Arange), whose data no compute of another graph can overwrite.
	owned bool
	// meta is read on first use (shapes never change). It is kept out of
	// line so that an op allocates a 32-byte Tensor, not a 120-byte one.
	meta atomic.Pointer[C.ggml_rs_tensor_meta]
}

var (
	_ ml.Tensor                    = (*Tensor)(nil)
	_ ml.ScaledDotProductAttention = (*Tensor)(nil)
)

// ptr is the tensor's handle, checked to be alive.
func (t *Tensor) ptr(op string) *C.ggml_rs_tensor {
	if t.f != nil && t.f.closed.Load() {
		panic(closedError(op + ": the tensor's context is closed"))
	}
	return t.c
}

// handle is an ml.Tensor argument's handle; nil for an absent one.
func handle(t ml.Tensor, op string) *C.ggml_rs_tensor {
	if t == nil {
		return nil
	}
	tt := t.(*Tensor)
	if tt == nil {
		return nil
	}
	return tt.ptr(op)
}

// m returns the tensor's metadata, reading it on first use. Two
// goroutines may both read it; they store the same values.
func (t *Tensor) m() *C.ggml_rs_tensor_meta {
	if p := t.meta.Load(); p != nil {
		return p
	}
	p := new(C.ggml_rs_tensor_meta)
	var cerr C.ggml_rs_error
	if C.ggml_rs_tensor_get_meta(t.ptr("Shape"), p, &cerr) != C.GGML_RS_OK {
		panic(errorFrom(&cerr))
	}
	t.meta.Store(p)
	return p
}

// Dim is the size of dimension n (0 fastest); dimensions past the last are 1.
func (t *Tensor) Dim(n int) int { return int(t.m().ne[n]) }

// Stride is the byte step of dimension n.
func (t *Tensor) Stride(n int) int { return int(t.m().nb[n]) }

// Shape lists the dimensions up to the last that is not 1 ([1] for a scalar).
func (t *Tensor) Shape() []int {
	m := t.m()
	shape := make([]int, m.n_dims)
	for i := range shape {
		shape[i] = int(m.ne[i])
	}
	return shape
}

// DType is the element type; types ml has no name for are DTypeOther.
func (t *Tensor) DType() ml.DType {
	switch t.m().type_ {
	case typeF32:
		return ml.DTypeF32
	case typeF16:
		return ml.DTypeF16
	case typeQ8_0:
		return ml.DTypeQ80
	case typeQ4_0:
		return ml.DTypeQ40
	case typeI32:
		return ml.DTypeI32
	case typeMXFP4:
		return ml.DTypeMXFP4
	}
	return ml.DTypeOther
}

// typeLayout gives (elements per block, bytes per block) of ggml types, or
// (0, 0) for types package gguf does not know.
func typeLayout(ty C.int32_t) (int, int) {
	if _, block, size, ok := gguf.TensorType(ty).Layout(); ok && ty >= 0 {
		return int(block), int(size)
	}
	return 0, 0
}

// typeName is ggml's name of a type ("q4_K"), and whether it is known.
func typeName(ty C.int32_t) (string, bool) {
	name, _, _, ok := gguf.TensorType(ty).Layout()
	return name, ok && ty >= 0
}

// nelements is the number of elements.
func (t *Tensor) nelements() int {
	m := t.m()
	return int(m.ne[0] * m.ne[1] * m.ne[2] * m.ne[3])
}

// dataSize is the size of the tensor's elements in logical order (what
// ggml_rs_tensor_get copies), which for a view can differ from nbytes.
func (t *Tensor) dataSize() int {
	m := t.m()
	blck, size := typeLayout(m.type_)
	if blck == 0 {
		return int(m.nbytes)
	}
	return int(m.ne[0]) / blck * size * int(m.ne[1]*m.ne[2]*m.ne[3])
}

// dataErr is the error buffer for data transfers of this tensor.
func (t *Tensor) dataErr() *C.ggml_rs_error {
	if t.f != nil {
		return &t.f.s.err
	}
	return (*C.ggml_rs_error)(C.calloc(1, C.size_t(unsafe.Sizeof(C.ggml_rs_error{}))))
}

func (t *Tensor) dataFail(e *C.ggml_rs_error) {
	err := errorFrom(e)
	if t.f == nil {
		C.free(unsafe.Pointer(e))
	}
	panic(err)
}

// Bytes is the tensor's data in logical order, or nil unless the tensor
// was listed in a Compute (or is empty).
func (t *Tensor) Bytes() []byte {
	if t.computedBy.Load() == 0 {
		return nil
	}
	saved, unlock := t.lockOutput("Bytes")
	defer unlock()
	if saved != nil {
		return slices.Clone(saved)
	}
	return t.read("Bytes")
}

// lockOutput holds the backend's compute lock while a computed tensor is
// read, returning the bytes saved from its compute (nil while the compute
// buffers hold them; outputs.go) and the unlock function. It panics if the
// value is gone: another compute ran after it had been read.
func (t *Tensor) lockOutput(op string) ([]byte, func()) {
	// A tensor without elements has no value to lose (Ollama's runner reads
	// the empty logits of a batch that ends inside the prompt).
	if t.f == nil || t.dataSize() == 0 {
		return nil, func() {}
	}
	b := t.f.b
	b.computeMu.Lock()
	if t.owned {
		return nil, b.computeMu.Unlock
	}
	held := true
	defer func() {
		if held { // output panicked
			b.computeMu.Unlock()
		}
	}()
	saved, _ := b.output(t, op)
	held = false
	return saved, b.computeMu.Unlock
}

func (t *Tensor) read(op string) []byte {
	p := t.ptr(op)
	n := t.dataSize()
	if n == 0 {
		return nil
	}
	data := make([]byte, n)
	e := t.dataErr()
	if C.ggml_rs_tensor_get(p, (*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(n), e) != C.GGML_RS_OK {
		t.dataFail(e)
	}
	if t.f == nil {
		C.free(unsafe.Pointer(e))
	}
	return data
}

// Floats is the tensor's data converted to float32 (F16, I32 and
// quantized types are converted), or nil unless the tensor was listed in a
// Compute (or is empty).
func (t *Tensor) Floats() []float32 {
	if t.computedBy.Load() == 0 {
		return nil
	}
	saved, unlock := t.lockOutput("Floats")
	defer unlock()
	if saved != nil {
		return t.savedFloats(saved, nil)
	}
	return t.readFloats("Floats")
}

// FloatsInto is Floats reading into dst's memory when it has room (a new
// slice otherwise): for callers that read an output every step and keep
// no row past the next one, such as the server's decode loop, so that
// each step does not leave a vocabulary-sized row per sequence to the
// garbage collector. (An extension of Ollama's API.)
func (t *Tensor) FloatsInto(dst []float32) []float32 {
	if t.computedBy.Load() == 0 {
		return nil
	}
	saved, unlock := t.lockOutput("FloatsInto")
	defer unlock()
	if saved != nil {
		return t.savedFloats(saved, dst)
	}
	return t.readFloatsInto("FloatsInto", dst)
}

func (t *Tensor) readFloats(op string) []float32 {
	return t.readFloatsInto(op, nil)
}

func (t *Tensor) readFloatsInto(op string, dst []float32) []float32 {
	p := t.ptr(op)
	n := t.nelements()
	if n == 0 {
		return nil
	}
	var data []float32
	if cap(dst) >= n {
		data = dst[:n]
	} else {
		data = make([]float32, n)
	}
	e := t.dataErr()
	if C.ggml_rs_tensor_get_f32(p, (*C.float)(&data[0]), C.size_t(n), e) != C.GGML_RS_OK {
		t.dataFail(e)
	}
	if t.f == nil {
		C.free(unsafe.Pointer(e))
	}
	return data
}

// BackendGet reads the tensor's data as float32 whether or not it was
// listed in a Compute (for data tensors and weights); nil if empty.
func (t *Tensor) BackendGet() []float32 {
	if t.f != nil {
		// Not while a compute may be writing into it.
		t.f.b.computeMu.Lock()
		defer t.f.b.computeMu.Unlock()
	}
	return t.readFloats("BackendGet")
}

func (t *Tensor) write(op string, data unsafe.Pointer, n int) {
	p := t.ptr(op)
	if n == 0 {
		return
	}
	e := t.dataErr()
	if C.ggml_rs_tensor_set(p, (*C.uint8_t)(data), C.size_t(n), e) != C.GGML_RS_OK {
		t.dataFail(e)
	}
	if t.f == nil {
		C.free(unsafe.Pointer(e))
	}
}

// FromBytes overwrites the whole tensor with s (exactly its size; empty: no-op).
func (t *Tensor) FromBytes(s []byte) {
	t.write("FromBytes", unsafe.Pointer(unsafe.SliceData(s)), len(s))
}

// FromFloats overwrites the whole tensor with s.
func (t *Tensor) FromFloats(s []float32) {
	t.write("FromFloats", unsafe.Pointer(unsafe.SliceData(s)), 4*len(s))
}

// FromInts overwrites the whole tensor with s.
func (t *Tensor) FromInts(s []int32) {
	t.write("FromInts", unsafe.Pointer(unsafe.SliceData(s)), 4*len(s))
}

// TypeName is ggml's name of the element type ("f32", "q4_K", "i32", …;
// "typeN" for types this package has no name for). DType folds most of
// them into DTypeOther; model loaders check weight types with this.
func (t *Tensor) TypeName() string {
	if name, ok := typeName(t.m().type_); ok {
		return name
	}
	return fmt.Sprintf("type%d", t.m().type_)
}

// LogValue describes the tensor's type and shape.
func (t *Tensor) LogValue() slog.Value {
	if t.f != nil && t.f.closed.Load() {
		return slog.StringValue("<tensor of a closed context>")
	}
	return slog.GroupValue(slog.String("type", t.TypeName()), slog.Any("shape", t.Shape()))
}
