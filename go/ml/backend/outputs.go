package backend

/*
#include "ggml_rs.h"
*/
import "C"

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// The outputs of a compute live in the scheduler's compute buffers until
// the next compute or reserve of any context of the backend reuses them.
// Ollama's runner reads a batch's logits after its compute, but another
// graph can come first: the recurrent cache of the hybrid models copies
// and restores its state with small graphs of their own while the runner
// sets up the next batch. Ollama's ggml then reads whatever the small
// graph left in those bytes; ggml-rs copies the unread outputs out of the
// buffers before they are reused, so every output reads what its compute
// made. Only outputs not yet read are copied, so the runner's usual order
// (compute, read, compute) copies nothing.

// outputStore is guarded by the backend's computeMu.
type outputStore struct {
	// unread are the outputs listed by the last compute and not read since.
	unread []*Tensor
	// saved are the bytes of outputs whose compute buffers another graph
	// reused before they were read; kept until their context closes.
	saved map[*Tensor][]byte
}

// keepUnread copies the last compute's unread outputs out of the compute
// buffers, which the compute or reserve about to run will reuse. computeMu
// is held.
func (b *Backend) keepUnread() {
	o := &b.outputs
	for _, t := range o.unread {
		if t.f.closed.Load() || t.computedBy.Load() != uintptr(unsafe.Pointer(b.lastCompute)) {
			continue
		}
		if o.saved == nil {
			o.saved = make(map[*Tensor][]byte)
		}
		o.saved[t] = t.read("Compute")
	}
	clear(o.unread)
	o.unread = o.unread[:0]
}

// listOutputs records the outputs of the compute of handle c that just
// ran. computeMu is held.
func (b *Backend) listOutputs(c *C.ggml_rs_context, ts []ml.Tensor) {
	for _, mt := range ts {
		t, _ := mt.(*Tensor)
		if t == nil {
			continue
		}
		t.computedBy.Store(uintptr(unsafe.Pointer(c)))
		delete(b.outputs.saved, t) // computed again
		if !t.owned && t.dataSize() > 0 {
			b.outputs.unread = append(b.outputs.unread, t)
		}
	}
}

// forgetFamily drops the outputs of a context being closed. computeMu is
// held.
func (b *Backend) forgetFamily(f *family) {
	o := &b.outputs
	o.unread = slices.DeleteFunc(o.unread, func(t *Tensor) bool { return t.f == f })
	for t := range o.saved {
		if t.f == f {
			delete(o.saved, t)
		}
	}
}

// output is what a read of the computed tensor t sees, with computeMu held:
// live (the compute buffers hold its value; it is no longer unread), or
// the bytes saved from them. It panics if neither: the value was
// overwritten by another compute after it had been read once.
func (b *Backend) output(t *Tensor, op string) (saved []byte, live bool) {
	if uintptr(unsafe.Pointer(b.lastCompute)) == t.computedBy.Load() {
		o := &b.outputs
		o.unread = slices.DeleteFunc(o.unread, func(u *Tensor) bool { return u == t })
		return nil, true
	}
	if s, ok := b.outputs.saved[t]; ok {
		return s, false
	}
	panic(&Error{Status: StatusInvalidArgument, Message: op + ": the tensor's value was overwritten: another graph was computed (or reserved) on this backend after it had been read; read an output again only before computing the next graph"})
}

// savedFloats converts saved output bytes of t to float32, as
// ggml_rs_tensor_get_f32 converts live ones, into dst when it has room.
func (t *Tensor) savedFloats(s []byte, dst []float32) []float32 {
	n := t.nelements()
	if cap(dst) < n {
		dst = make([]float32, n)
	}
	dst = dst[:n]
	switch t.m().type_ {
	case typeF32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(s[4*i:]))
		}
	case typeI32:
		for i := range dst {
			dst[i] = float32(int32(binary.LittleEndian.Uint32(s[4*i:])))
		}
	default:
		if err := ConvertInto(dst, s, uint32(t.m().type_)); err != nil {
			panic(err)
		}
	}
	return dst
}
