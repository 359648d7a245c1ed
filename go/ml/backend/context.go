package backend

/*
#include <stdlib.h>
#include "ggml_rs.h"
*/
import "C"

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

// scratch is C memory owned by a context family: the error every fallible
// call of the family reports into, and argument arrays, so that ops pass
// no Go memory to C (which would make it escape to the heap).
type scratch struct {
	err  C.ggml_rs_error
	ne   [8]C.int64_t
	nb   [8]C.size_t
	rope C.ggml_rs_rope_params
}

// family is what a root context and its Input/Layer siblings share.
// Closing any of them closes all (Ollama's rule).
type family struct {
	b             *Backend
	s             *scratch
	maxGraphNodes int

	mu      sync.Mutex
	closed  atomic.Bool
	handles []*C.ggml_rs_context

	// ropeOpts is RoPE's reusable option struct (options are applied
	// through its address, which would otherwise escape per call).
	ropeOpts rope.Options
}

// Context is ml.Context over one ggml_rs_context handle. It must not be
// used from two goroutines at once (nor must its siblings).
type Context struct {
	f *family
	c *C.ggml_rs_context
}

var _ ml.Context = (*Context)(nil)

// use returns ctx as a *Context after checking it is open.
func use(ctx ml.Context, op string) *Context {
	c := ctx.(*Context)
	if c.f.closed.Load() {
		panic(closedError(op + ": the context is closed"))
	}
	return c
}

// fail panics with the error the last call of this context's family
// reported, after clearing it from the context so later computes succeed.
func (c *Context) fail() {
	err := errorFrom(&c.f.s.err)
	C.ggml_rs_ctx_clear_error(c.c)
	if err.Status == StatusOutOfMemory {
		slog.Warn("ggml-rs: out of memory", "error", err.Message)
	}
	panic(err)
}

// result wraps an op's tensor, panicking if the op failed.
func (c *Context) result(p *C.ggml_rs_tensor) *Tensor {
	if p == nil {
		c.fail()
	}
	return &Tensor{c: p, f: c.f}
}

func (c *Context) sibling(op string, layer int) ml.Context {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		panic(closedError(op + ": the context is closed"))
	}
	var h *C.ggml_rs_context
	if layer < 0 {
		h = C.ggml_rs_ctx_input(c.c)
	} else {
		h = C.ggml_rs_ctx_layer(c.c, C.size_t(layer))
	}
	if h == nil {
		panic(&Error{Status: StatusPanic, Message: op + ": could not create a sibling context"})
	}
	f.handles = append(f.handles, h)
	return &Context{f: f, c: h}
}

// Input returns a sibling whose data tensors live in host memory.
func (c *Context) Input() ml.Context { return c.sibling("Input", -1) }

// Layer returns a sibling whose data tensors live on layer i's device. A
// negative i returns the receiver (as Ollama does for non-layers).
func (c *Context) Layer(i int) ml.Context {
	if i < 0 {
		return c
	}
	return c.sibling("Layer", i)
}

// Close frees the whole family (this context, its root and every sibling)
// and every tensor made in it. Closing again is a no-op.
func (c *Context) Close() {
	if c == nil {
		return
	}
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Swap(true) {
		return
	}
	f.b.computeMu.Lock()
	f.b.forgetFamily(f)
	f.b.computeMu.Unlock()
	for _, h := range f.handles {
		C.ggml_rs_ctx_free(h)
	}
	f.handles = nil
	C.free(unsafe.Pointer(f.s))
	f.s = nil
}

// MaxGraphNodes is the node capacity the family was created with.
func (c *Context) MaxGraphNodes() int { return c.f.maxGraphNodes }

// SetBatchSize stores a batch-size hint for this context's computes.
func (c *Context) SetBatchSize(n int) {
	use(c, "SetBatchSize")
	C.ggml_rs_ctx_set_batch_size(c.c, C.int32_t(n))
}

// SetNormLayer says which layer the ops built next belong to (-1: none):
// its norms with a weight then run on that layer's device for batches of
// fewer than 32 tokens (SetBatchSize) or when every layer is offloaded, as
// llama.cpp pins its layers' norms (ml.NormLayers).
func (c *Context) SetNormLayer(layer int) {
	use(c, "SetNormLayer")
	C.ggml_rs_ctx_set_norm_layer(c.c, C.int64_t(layer))
}

// SetRowWise implements ml.RowWise.
func (c *Context) SetRowWise(on bool) {
	use(c, "SetRowWise")
	C.ggml_rs_ctx_set_row_wise(c.c, C.bool(on))
}

// tensorArray converts ts to C handles (checking they are open).
func tensorArray(op string, ts []ml.Tensor) []*C.ggml_rs_tensor {
	ptrs := make([]*C.ggml_rs_tensor, len(ts))
	for i, t := range ts {
		ptrs[i] = handle(t, op)
	}
	return ptrs
}

func firstOrNil(p []*C.ggml_rs_tensor) **C.ggml_rs_tensor {
	if len(p) == 0 {
		return nil
	}
	return &p[0]
}

// Forward adds ts and what they depend on to this context's graph.
func (c *Context) Forward(ts ...ml.Tensor) ml.Context {
	use(c, "Forward")
	ptrs := tensorArray("Forward", ts)
	if C.ggml_rs_ctx_forward(c.c, firstOrNil(ptrs), C.size_t(len(ptrs)), &c.f.s.err) != C.GGML_RS_OK {
		c.fail()
	}
	return c
}

// Compute runs this context's graph; ts can be read afterwards with
// Bytes and Floats.
func (c *Context) Compute(ts ...ml.Tensor) {
	c.ComputeWithNotify(nil, ts...)
}

// ComputeWithNotify is Compute, calling cb in a new goroutine once this
// compute has the backend (computes of one backend run one at a time).
func (c *Context) ComputeWithNotify(cb func(), ts ...ml.Tensor) {
	use(c, "Compute")
	ptrs := tensorArray("Compute", ts)

	b := c.f.b
	b.computeMu.Lock()
	defer b.computeMu.Unlock()
	if cb != nil {
		go cb()
	}
	b.keepUnread()
	b.lastCompute = nil
	if C.ggml_rs_ctx_compute(c.c, firstOrNil(ptrs), C.size_t(len(ptrs)), &c.f.s.err) != C.GGML_RS_OK {
		c.fail()
	}
	b.lastCompute = c.c
	b.listOutputs(c.c, ts)
}

// Reserve sizes (and, with AllocMemory, allocates) the compute buffers
// for this context's graph and records them as each device's Graph
// memory. It panics with ml.ErrNoMem if they cannot be allocated.
func (c *Context) Reserve() {
	use(c, "Reserve")
	b := c.f.b
	sizes := make([]C.uint64_t, len(b.schedDevices))
	var sp *C.uint64_t
	if len(sizes) > 0 {
		sp = &sizes[0]
	}
	b.computeMu.Lock()
	b.keepUnread()
	b.lastCompute = nil // reserving resets the scheduler's buffers
	status := C.ggml_rs_ctx_reserve(c.c, sp, C.size_t(len(sizes)), &c.f.s.err)
	b.computeMu.Unlock()
	if status == C.GGML_RS_OK {
		// ggml-rs records the sizes in the backend's memory report.
		slog.Debug("compute graph reserved", "sizes", sizes)
		return
	}
	if Status(status) == StatusOutOfMemory {
		err := errorFrom(&c.f.s.err)
		C.ggml_rs_ctx_clear_error(c.c)
		slog.Warn("ggml-rs: reserve failed", "error", err.Message)
		panic(b.reserveFailed(sizes))
	}
	c.fail()
}
