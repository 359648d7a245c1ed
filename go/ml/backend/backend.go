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
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/ml"
)

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
	// outputs keeps computed outputs readable across another graph's
	// compute (outputs.go); guarded by computeMu.
	outputs outputStore

	closeMu sync.Mutex
	closed  atomic.Bool

	// cpuOnly: every device of the scheduler is a CPU (ops may then update
	// cache memory in place: ml.GatedDeltaNetInPlace).
	cpuOnly bool
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
// StatusFormat), never a crash. NewWithOptions takes ggml-rs's extensions;
// of them, New reads one from the environment, for programs such as Ollama
// that call New alone: GGML_RS_FAST_KERNELS=1 (or true) is WithFastKernels.
// A value strconv.ParseBool does not take is an error.
func New(modelPath string, params ml.BackendParams) (ml.Backend, error) {
	var o modelOptions
	if v := os.Getenv(FastKernelsEnv); v != "" {
		fast, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("ggml-rs: %s=%q: want 1, true, 0 or false", FastKernelsEnv, v)
		}
		o.fast = fast
	}
	b, err := create(modelPath, params, o)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// FastKernelsEnv is the environment variable New reads for WithFastKernels.
const FastKernelsEnv = "GGML_RS_FAST_KERNELS"

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
		cpuOnly:       bool(C.ggml_rs_backend_cpu_only(h)),
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
