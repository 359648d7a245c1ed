// Package backend implements github.com/ggml-rs/ggml-rs/go/ml's Backend, Context and Tensor on
// top of ggml-rs, a Rust library that drives a pinned upstream ggml and is
// reached through its C ABI (include/ggml_rs.h) only.
//
// Importing the package registers the "ggml" backend with
// ml.RegisterBackend, so ml.NewBackend works.
//
// Errors: Ollama's signatures return no errors, so a failing call panics.
// An op the library rejects panics with an *Error carrying the library's
// message (it names the op and the tensors); the context stays usable. An
// allocation that fails panics with ml.ErrNoMem, as in Ollama. Using a
// closed context, a tensor of a closed context, or a closed backend panics
// with an *Error of status StatusClosed.
package backend

/*
#include <stdlib.h>
#include "ggml_rs.h"
*/
import "C"

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

func init() {
	ml.RegisterBackend("ggml", New)
	installLogger()
}

// Status is a ggml-rs result code (enum ggml_rs_status).
type Status int32

const (
	StatusOK              Status = C.GGML_RS_OK
	StatusInvalidArgument Status = C.GGML_RS_ERR_INVALID_ARGUMENT
	StatusShape           Status = C.GGML_RS_ERR_SHAPE
	StatusDType           Status = C.GGML_RS_ERR_DTYPE
	StatusOutOfMemory     Status = C.GGML_RS_ERR_OUT_OF_MEMORY
	StatusCompute         Status = C.GGML_RS_ERR_COMPUTE
	StatusAborted         Status = C.GGML_RS_ERR_ABORTED
	StatusClosed          Status = C.GGML_RS_ERR_CLOSED
	StatusIO              Status = C.GGML_RS_ERR_IO
	StatusFormat          Status = C.GGML_RS_ERR_FORMAT
	StatusPanic           Status = C.GGML_RS_ERR_PANIC
	StatusUnsupported     Status = C.GGML_RS_ERR_UNSUPPORTED
)

// Error is the panic value (or returned error) for a failed ggml-rs call.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return "ggml-rs: " + e.Message }

// errorFrom converts a filled ggml_rs_error.
func errorFrom(e *C.ggml_rs_error) *Error {
	return &Error{Status: Status(e.status), Message: C.GoString(&e.message[0])}
}

func closedError(what string) *Error {
	return &Error{Status: StatusClosed, Message: what}
}

// ---------------------------------------------------------------------------
// Backend

// Backend is ml.Backend over a ggml_rs_backend: a model's weights placed
// on its devices (or no model), and one scheduler.
type Backend struct {
	c *C.ggml_rs_backend

	params        ml.BackendParams
	maxGraphNodes int
	threads       int
	// flash is the attention kernel choice, with FlashAttentionAuto
	// resolved by ggml-rs (asking each device that runs attention).
	flash bool

	// computeMu serialises Compute across the backend's contexts (Ollama's
	// schedMu), so ComputeWithNotify's callback starts when this compute
	// has the backend. Reading computed outputs holds it too.
	computeMu sync.Mutex
	// lastCompute is the context handle whose graph the scheduler's
	// compute buffers hold now (nil after a Reserve). Outputs of any other
	// handle's compute have been overwritten.
	lastCompute *C.ggml_rs_context

	closeMu sync.Mutex
	closed  atomic.Bool

	// schedDevices are the registry indices of the scheduler's devices
	// (ggml_rs_ctx_reserve's order).
	schedDevices []int
	// devices are every device ggml knows, by registry index, as they
	// were when the backend was made.
	devices map[int]Device
	// lastMemory is the memory report taken by Close.
	lastMemory ml.BackendMemory
	// loadMu is held (shared) by Load while ggml-rs reads the weights;
	// Close takes it exclusively, so it waits for running loads.
	loadMu sync.RWMutex

	// The model (see model.go); zero without one.
	config fs.Config
	blocks int
	// layerDevices is the registry device per layer (-1 or missing: CPU).
	layerDevices []int32
	// weights is the pseudo-family of the weights Get returns.
	weights *family
}

var (
	_ ml.Backend            = (*Backend)(nil)
	_ ml.BackendCacheConfig = (*Backend)(nil)
)

// New creates a backend. With an empty modelPath it has devices and a
// scheduler but no weights (enough to build and compute graphs of data
// tensors). Otherwise it opens the GGUF model at modelPath and places its
// weights as Ollama's engine did: token embeddings on the CPU, layer i on
// the GPU that params.GPULayers gives it (matched by DeviceID as
// BackendDevices reports it; an unknown device or an unlisted layer stays
// on the CPU), the output layer (index block_count) likewise. With
// params.AllocMemory the weights are allocated (read them with Load);
// without, they are only sized (BackendMemory tells what the model needs).
//
// Weights that cannot be allocated make New panic with ml.ErrNoMem, its
// BackendMemory filled with what every device would need, as Ollama's New
// did (its runner recovers the panic and reports the memory). An
// unreadable or invalid file is an error (*Error, StatusIO or
// StatusFormat), never a crash. NewWithOptions takes ggml-rs's extensions.
func New(modelPath string, params ml.BackendParams) (ml.Backend, error) {
	b, err := create(modelPath, params, modelOptions{})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// cParams converts Ollama's parameters to ggml-rs's.
func cParams(params ml.BackendParams) (C.ggml_rs_backend_params, error) {
	p := C.ggml_rs_backend_params_default()
	if params.NumThreads > 0 {
		p.n_threads = C.uint32_t(params.NumThreads)
	}
	switch params.FlashAttention {
	case ml.FlashAttentionEnabled, ml.FlashAttentionDisabled, ml.FlashAttentionAuto:
		p.flash_attention = C.int32_t(params.FlashAttention)
	default:
		return p, fmt.Errorf("ggml-rs: invalid flash attention setting %d", params.FlashAttention)
	}
	p.alloc_memory = C.bool(params.AllocMemory)
	return p, nil
}

func create(modelPath string, params ml.BackendParams, opts modelOptions) (*Backend, error) {
	p, err := cParams(params)
	if err != nil {
		return nil, err
	}

	devices := Devices()
	var h *C.ggml_rs_backend
	var layers []int32
	if modelPath == "" {
		var cerr C.ggml_rs_error
		if C.ggml_rs_backend_new(&p, &h, &cerr) != C.GGML_RS_OK {
			return nil, errorFrom(&cerr)
		}
	} else {
		if h, layers, err = openModel(modelPath, p, params.GPULayers, devices, opts); err != nil {
			return nil, err
		}
	}

	b := &Backend{
		c:             h,
		params:        params,
		maxGraphNodes: int(C.ggml_rs_backend_max_graph_nodes(h)),
		threads:       int(C.ggml_rs_backend_n_threads(h)),
		flash:         C.ggml_rs_backend_flash_attention(h) == 1,
		devices:       deviceMap(devices),
	}
	n := int(C.ggml_rs_backend_device_count(h))
	b.schedDevices = make([]int, n)
	for i := range b.schedDevices {
		b.schedDevices[i] = int(C.ggml_rs_backend_device_index(h, C.size_t(i)))
	}
	if modelPath != "" {
		if err := b.initModel(layers); err != nil {
			C.ggml_rs_backend_free(h)
			return nil, err
		}
	}
	return b, nil
}

// Cancel stops the compute in progress at its next node (or, when none is
// running, the next one): that Compute panics with an *Error of status
// StatusAborted, and the backend stays usable. Safe to call from any
// goroutine; an extension beside Ollama's API (ggml's abort callback).
func (b *Backend) Cancel() {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Load() || b.c == nil {
		return
	}
	C.ggml_rs_backend_cancel(b.c)
}

// Close frees the backend. Contexts made from it stay usable until they
// are closed (they keep the devices alive). Closing twice is a no-op.
func (b *Backend) Close() {
	if b == nil {
		return
	}
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Load() {
		return
	}
	b.lastMemory = b.memoryReport(nil)
	// Not while a load or a compute runs, or a weight is read (computes
	// and reads hold computeMu).
	b.loadMu.Lock()
	defer b.loadMu.Unlock()
	b.computeMu.Lock()
	defer b.computeMu.Unlock()
	b.closed.Store(true)
	if b.weights != nil {
		b.weights.closed.Store(true)
	}
	C.ggml_rs_backend_free(b.c)
	b.c = nil
}

// Load reads the model's weights from its file (in parallel, on ggml-rs's
// threads), calling progress on this goroutine with the fraction loaded
// (0 to 1, never decreasing; progress may be nil). Cancelling ctx stops
// the load promptly and Load returns ctx.Err(); the weights are then
// incomplete until a later Load succeeds. Without memory allocation it
// fails with "cannot load model without memory allocation". Without a
// model there is nothing to load.
func (b *Backend) Load(ctx context.Context, progress func(float32)) error {
	return b.load(ctx, progress)
}

// BackendMemory returns the memory the backend needs per device:
// InputWeights (CPU), then for the CPU and for every GPU (registry order)
// the weights and cache per layer (block_count + 1 entries, the output
// layer last) and the compute graph. Weights are counted when the model is
// opened, the data tensors of Layer(i) contexts as Cache[i], Reserve's
// compute buffers as Graph; sizes are what ggml allocates (or would,
// without AllocMemory). After Close it returns the report taken at Close.
func (b *Backend) BackendMemory() ml.BackendMemory { return b.backendMemory(nil) }

// Config returns the model's metadata (see kvConfig for the rules of
// Ollama's getters); empty, with an empty Architecture, without a model.
func (b *Backend) Config() fs.Config {
	if b.config == nil {
		return emptyConfig{}
	}
	return b.config
}

// Get returns the weight called name (e.g. "blk.3.attn_q.weight"; a model
// without an output tensor has "output.weight" tied to the token
// embeddings; rope frequencies exist per layer as
// "blk.N.rope_freqs.weight"), or a nil interface when there is none. As in
// Ollama, Bytes and Floats of a weight are nil (it was never computed);
// BackendGet reads it. Weights live as long as the backend: using one
// after Close panics, and so does Get.
func (b *Backend) Get(name string) ml.Tensor { return b.weight(name) }

// NewContext is NewContextSize(MaxGraphNodes of the backend).
func (b *Backend) NewContext() ml.Context {
	return b.NewContextSize(b.maxGraphNodes)
}

// NewContextSize makes a root context for up to n tensors and graph nodes.
// It panics if n exceeds the backend's maximum, or the backend is closed.
func (b *Backend) NewContextSize(n int) ml.Context {
	if n > b.maxGraphNodes {
		panic(fmt.Errorf("requested number of graph nodes (%v) for new context exceeds maximum (%v)", n, b.maxGraphNodes))
	}
	if n < 1 {
		panic(fmt.Errorf("requested number of graph nodes (%v) for new context must be positive", n))
	}

	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Load() {
		panic(closedError("NewContext: the backend is closed"))
	}

	scratch := (*scratch)(C.malloc(C.size_t(unsafe.Sizeof(scratch{}))))
	h := C.ggml_rs_ctx_new(b.c, C.size_t(n), &scratch.err)
	if h == nil {
		err := errorFrom(&scratch.err)
		C.free(unsafe.Pointer(scratch))
		panic(err)
	}
	f := &family{
		b:             b,
		s:             scratch,
		handles:       []*C.ggml_rs_context{h},
		maxGraphNodes: int(C.ggml_rs_ctx_max_graph_nodes(h)),
	}
	return &Context{f: f, c: h}
}

// FlashAttention is the attention kernel this backend uses: Enabled or
// Disabled, FlashAttentionAuto having been resolved when it was made by
// asking ggml whether every device that runs attention supports the op.
// (An extension: Ollama's engine decided this before creating a backend.)
func (b *Backend) FlashAttention() ml.FlashAttentionType {
	if b.flash {
		return ml.FlashAttentionEnabled
	}
	return ml.FlashAttentionDisabled
}

// CacheConfig asks KV caches for the layout this backend's attention
// wants: an F16 mask for flash attention, else a pre-permuted V.
func (b *Backend) CacheConfig() ml.CacheConfig {
	if b.flash {
		return ml.CacheConfig{CachePadding: 256, MaskDType: ml.DTypeF16}
	}
	return ml.CacheConfig{CachePadding: 256, PermutedV: true}
}

// BackendDevices lists the GPUs (discrete and integrated) the backend can
// use, with their current free memory. The CPU is never listed.
func (b *Backend) BackendDevices() []ml.DeviceInfo {
	infos := []ml.DeviceInfo{}
	for _, d := range Devices() {
		if d.Type != DeviceGPU && d.Type != DeviceIntegratedGPU {
			continue
		}
		// With memory allocated, skip GPUs the scheduler does not use (as
		// Ollama does, to avoid touching idle devices).
		if b.params.AllocMemory && !slices.Contains(b.schedDevices, d.Index) {
			slog.Debug("skipping unused backend device", "description", d.Description)
			continue
		}
		infos = append(infos, d.DeviceInfo)
	}
	return infos
}

// Threads is the number of CPU threads the backend computes with.
func (b *Backend) Threads() int { return b.threads }

// Threads returns the thread count to pass as BackendParams.NumThreads for
// a request of n (Ollama's hook for debug builds; the identity here).
func Threads(n int) int { return n }

// DefaultThreads is the thread count a backend uses when NumThreads is 0:
// the CPUs this process may run on, limited by any cgroup CPU quota.
func DefaultThreads() int { return int(C.ggml_rs_default_threads()) }

// CPUFeatures is the instruction sets the bundled ggml's CPU backend was
// built for and uses, as it names them ("AVX2", "AVX512", "AVX512_BF16",
// "AMX_INT8", "REPACK", ...; a feature with a value other than 1 as
// NAME=VALUE). Float results are reproducible to the bit only between
// machines with the same list (and thread count).
func CPUFeatures() []string { return strings.Fields(C.GoString(C.ggml_rs_cpu_features())) }

// emptyConfig is the fs.Config of a backend without a model.
type emptyConfig struct{}

func (emptyConfig) Architecture() string { return "" }
func (emptyConfig) String(_ string, d ...string) string {
	return first(d)
}
func (emptyConfig) Uint(_ string, d ...uint32) uint32        { return first(d) }
func (emptyConfig) Float(_ string, d ...float32) float32     { return first(d) }
func (emptyConfig) Bool(_ string, d ...bool) bool            { return first(d) }
func (emptyConfig) Strings(_ string, d ...[]string) []string { return first(d) }
func (emptyConfig) Ints(_ string, d ...[]int32) []int32      { return first(d) }
func (emptyConfig) Floats(_ string, d ...[]float32) []float32 {
	return first(d)
}
func (emptyConfig) Bools(_ string, d ...[]bool) []bool { return first(d) }
func (emptyConfig) Len() int                           { return 0 }
func (emptyConfig) Keys() iter.Seq[string]             { return func(func(string) bool) {} }
func (emptyConfig) Value(string) any                   { return nil }

func first[T any](d []T) (v T) {
	if len(d) > 0 {
		v = d[0]
	}
	return v
}

// ---------------------------------------------------------------------------
// Devices

// DeviceType is the kind of a ggml device.
type DeviceType int

const (
	DeviceCPU           DeviceType = 0
	DeviceGPU           DeviceType = 1
	DeviceIntegratedGPU DeviceType = 2
	DeviceAccelerator   DeviceType = 3
	DeviceMeta          DeviceType = 4
)

func (t DeviceType) String() string {
	switch t {
	case DeviceCPU:
		return "CPU"
	case DeviceGPU:
		return "GPU"
	case DeviceIntegratedGPU:
		return "IGPU"
	case DeviceAccelerator:
		return "ACCEL"
	case DeviceMeta:
		return "META"
	}
	return fmt.Sprintf("DeviceType(%d)", int(t))
}

// Device is a ggml device of any type (the CPU included).
type Device struct {
	ml.DeviceInfo
	// Index is the device's position in ggml's registry.
	Index int
	Type  DeviceType
}

// Devices lists every device ggml knows in this process, in registry
// order, with current memory. Compute capability and driver version are
// not reported by ggml-rs (ComputeMajor/Minor are -1, as ml.DeviceInfo
// documents for "unsupported").
func Devices() []Device {
	n := int(C.ggml_rs_device_count())
	devices := make([]Device, 0, n)
	var info C.ggml_rs_device_info
	var cerr C.ggml_rs_error
	for i := 0; i < n; i++ {
		if C.ggml_rs_device_get(C.size_t(i), &info, &cerr) != C.GGML_RS_OK {
			slog.Warn("ggml-rs: cannot describe device", "index", i, "error", errorFrom(&cerr))
			continue
		}
		d := Device{Index: int(info.index), Type: DeviceType(info.device_type)}
		d.Name = C.GoString(&info.name[0])
		d.Description = C.GoString(&info.description[0])
		d.PCIID = C.GoString(&info.pci_id[0])
		d.FreeMemory = uint64(info.memory_free)
		d.TotalMemory = uint64(info.memory_total)
		d.ComputeMajor, d.ComputeMinor = -1, -1
		if d.Type != DeviceCPU {
			// Ollama reports empty IDs for the CPU.
			d.ID = C.GoString(&info.id[0])
			d.Library = C.GoString(&info.library[0])
		}
		d.Integrated = d.Type == DeviceIntegratedGPU
		devices = append(devices, d)
	}
	return devices
}

// ---------------------------------------------------------------------------
// Contexts

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
	b.lastCompute = nil
	if C.ggml_rs_ctx_compute(c.c, firstOrNil(ptrs), C.size_t(len(ptrs)), &c.f.s.err) != C.GGML_RS_OK {
		c.fail()
	}
	b.lastCompute = c.c
	for _, t := range ts {
		if t != nil {
			t.(*Tensor).computedBy.Store(uintptr(unsafe.Pointer(c.c)))
		}
	}
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

// ---------------------------------------------------------------------------
// Data tensors

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

// ---------------------------------------------------------------------------
// Tensors

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
// (0, 0) for types this package does not know.
func typeLayout(ty C.int32_t) (int, int) {
	switch ty {
	case typeF32, typeI32:
		return 1, 4
	case typeF16, typeBF16:
		return 1, 2
	case typeQ4_0:
		return 32, 18
	case typeQ8_0:
		return 32, 34
	case typeMXFP4:
		return 32, 17
	case 3: // q4_1
		return 32, 20
	case 6: // q5_0
		return 32, 22
	case 7: // q5_1
		return 32, 24
	case 10: // q2_K
		return 256, 84
	case 11: // q3_K
		return 256, 110
	case 12: // q4_K
		return 256, 144
	case 13: // q5_K
		return 256, 176
	case 14: // q6_K
		return 256, 210
	case 24: // i8
		return 1, 1
	case 25: // i16
		return 1, 2
	case 27, 28: // i64, f64
		return 1, 8
	}
	return 0, 0
}

var typeNames = map[C.int32_t]string{
	typeF32: "f32", typeF16: "f16", typeQ4_0: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1",
	typeQ8_0: "q8_0", 10: "q2_K", 11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K",
	24: "i8", 25: "i16", typeI32: "i32", 27: "i64", 28: "f64", typeBF16: "bf16", typeMXFP4: "mxfp4",
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
	defer t.lockOutputs("Bytes")()
	return t.read("Bytes")
}

// lockOutputs holds the backend's compute lock while a computed tensor is
// read, and panics if its graph's outputs have since been overwritten by
// a compute of another context (read outputs before computing the next
// graph, as Ollama's runner does). It returns the unlock function.
func (t *Tensor) lockOutputs(op string) func() {
	if t.f == nil {
		return func() {}
	}
	b := t.f.b
	b.computeMu.Lock()
	if !t.owned && uintptr(unsafe.Pointer(b.lastCompute)) != t.computedBy.Load() {
		b.computeMu.Unlock()
		panic(&Error{Status: StatusInvalidArgument, Message: op + ": the tensor's value was overwritten: another graph was computed (or reserved) on this backend after the one that listed it; read outputs before computing the next graph"})
	}
	return b.computeMu.Unlock
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
	defer t.lockOutputs("Floats")()
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
	defer t.lockOutputs("FloatsInto")()
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
	if name, ok := typeNames[t.m().type_]; ok {
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
