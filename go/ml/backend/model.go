package backend

// Model backends: opening a GGUF file with Ollama's layer placement
// (ggml_rs_backend_open), loading the weights, the memory report, and the
// weight list for tools.

/*
#include <stdlib.h>
#include "ggml_rs.h"

// Declared here, defined by the //export below.
extern bool ggmlrsGoLoadProgress(float fraction, void *user_data);
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/cgo"
	"slices"
	"sync"
	"unsafe"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// maxLayerIndex bounds the layer numbers passed to ggml-rs (it accepts at
// most 65536 repeating layers, plus the output layer).
const maxLayerIndex = 1 << 16

// Option adjusts how NewWithOptions opens a model. Options are ggml-rs
// extensions; ml.BackendParams keeps Ollama's fields only.
type Option func(*modelOptions)

type modelOptions struct {
	cpuExperts []int
	noRepack   bool
	fast       bool
}

// WithCPUExperts keeps the mixture-of-experts expert weights of the given
// layers (tensors with a name part ffn_*_exps: ffn_up_exps, ffn_gate_exps,
// ffn_down_exps, ffn_gate_up_exps, with their biases and scales) in CPU
// memory, while the rest of each layer goes where GPULayers puts it. This
// is llama.cpp's "--n-cpu-moe": attention and shared weights stay on the
// GPU, the large, sparsely used expert matrices do not take its memory.
// BackendMemory accounts the experts to the CPU. Layers are 0-based;
// listing the output layer or a layer the model does not have is harmless.
func WithCPUExperts(layers ...int) Option {
	return func(o *modelOptions) { o.cpuExperts = append(o.cpuExperts, layers...) }
}

// WithoutRepacking keeps CPU-resident weights in ggml's plain CPU buffer
// type. By default a 2-D matmul weight that stays on the CPU goes to one
// of the CPU's extra buffer types when the CPU can use it ("CPU_REPACK",
// "AMX": the layout is rearranged for faster matmuls), as llama.cpp does
// and Ollama's engine did not.
func WithoutRepacking() Option {
	return func(o *modelOptions) { o.noRepack = true }
}

// WithFastKernels lets CPU-resident matmul weights take kernels that are
// faster but round differently from ggml's, as ik_llama.cpp's run-time
// repacking does: Q8_0, Q5_0 and Q4_1 products sum each 32-value block in
// integers and convert it once (ggml converts every 4 values), and on CPUs with AVX-512
// BF16, F16 weights are rounded to bf16 at load and F16 and BF16 products
// run in bf16 (prefill about twice as fast as f16). Logits then stay close
// to, but are no longer bit-identical with, llama.cpp's; F16 weights lose
// three bits of precision. It has no effect with WithoutRepacking, on
// weights placed on a GPU, or where the CPU lacks the instructions; other
// types are unchanged.
func WithFastKernels() Option {
	return func(o *modelOptions) { o.fast = true }
}

// NewWithOptions is New with ggml-rs extensions (see Option). It returns
// the concrete backend, whose extra methods (WeightPlacements) tools can
// use. With an empty modelPath the options have no effect.
func NewWithOptions(modelPath string, params ml.BackendParams, opts ...Option) (*Backend, error) {
	var o modelOptions
	for _, f := range opts {
		f(&o)
	}
	for _, l := range o.cpuExperts {
		if l < 0 {
			return nil, fmt.Errorf("ggml-rs: WithCPUExperts: layer %d is negative", l)
		}
	}
	return create(modelPath, params, o)
}

// ---------------------------------------------------------------------------
// Opening

// layerDevices turns Ollama's GPULayers into ggml_rs_model_params'
// layer_devices: for every layer, the first entry that lists it decides;
// its DeviceID must equal a GPU's (ID, Library) as Devices reports them,
// giving that GPU's registry index, otherwise the layer stays on the CPU
// (-1), as in Ollama. The result ends at the last layer placed on a GPU
// (missing layers stay on the CPU). Negative layers and layers beyond
// ggml-rs's limit are ignored.
func layerDevices(list ml.GPULayersList, devices []Device) []int32 {
	decided := map[int]int32{}
	last := -1
	for _, g := range list {
		gpu := int32(-1)
		for _, d := range devices {
			if (d.Type == DeviceGPU || d.Type == DeviceIntegratedGPU) && d.DeviceID == g.DeviceID {
				gpu = int32(d.Index)
				break
			}
		}
		for _, l := range g.Layers {
			if l < 0 || l > maxLayerIndex {
				continue
			}
			if _, seen := decided[l]; seen {
				continue
			}
			decided[l] = gpu
			if gpu >= 0 {
				last = max(last, l)
			}
		}
	}
	out := make([]int32, last+1)
	for l := range out {
		out[l] = -1
		if d, ok := decided[l]; ok {
			out[l] = d
		}
	}
	return out
}

// cInt32s copies v into C memory (nil for an empty v); free it with C.free.
func cInt32s(v []int32) *C.int32_t {
	if len(v) == 0 {
		return nil
	}
	p := (*C.int32_t)(C.malloc(C.size_t(4 * len(v))))
	copy(unsafe.Slice((*int32)(unsafe.Pointer(p)), len(v)), v)
	return p
}

// openModel opens the model at path with Ollama's placement. Layers of
// GPULayers the model does not have are ignored, as in Ollama: ggml-rs
// refuses them, so after such a refusal the model's block count is read
// (a second, CPU-only sizing open) and the placement is cut to it. Weights
// that do not fit panic with ml.ErrNoMem (see create).
func openModel(path string, p C.ggml_rs_backend_params, list ml.GPULayersList, devices []Device, o modelOptions) (*C.ggml_rs_backend, []int32, error) {
	layers := layerDevices(list, devices)
	h, err := tryOpen(path, &p, layers, o, devices)
	var e *Error
	if errors.As(err, &e) && e.Status == StatusInvalidArgument && len(layers) > 0 {
		if blocks, ok := blockCountOf(path, p); ok && len(layers) > blocks+1 {
			layers = layers[:blocks+1]
			h, err = tryOpen(path, &p, layers, o, devices)
		}
	}
	return h, layers, err
}

// blockCountOf opens path CPU-only without allocating, for its block count.
func blockCountOf(path string, p C.ggml_rs_backend_params) (int, bool) {
	p.alloc_memory = false
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var h *C.ggml_rs_backend
	var cerr C.ggml_rs_error
	if C.ggml_rs_backend_open(cpath, &p, nil, &h, nil, &cerr) != C.GGML_RS_OK {
		return 0, false
	}
	defer C.ggml_rs_backend_free(h)
	return int(C.ggml_rs_backend_block_count(h)), true
}

func tryOpen(path string, p *C.ggml_rs_backend_params, layers []int32, o modelOptions, devices []Device) (*C.ggml_rs_backend, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))

	experts := make([]int32, 0, len(o.cpuExperts))
	for _, l := range o.cpuExperts {
		if l <= maxLayerIndex {
			experts = append(experts, int32(l))
		}
	}
	var mp C.ggml_rs_model_params
	mp.layer_devices = cInt32s(layers)
	mp.n_layer_devices = C.size_t(len(layers))
	mp.cpu_expert_layers = cInt32s(experts)
	mp.n_cpu_expert_layers = C.size_t(len(experts))
	mp.no_extra_bufts = C.bool(o.noRepack)
	mp.fast_kernels = C.bool(o.fast)
	defer C.free(unsafe.Pointer(mp.layer_devices))
	defer C.free(unsafe.Pointer(mp.cpu_expert_layers))

	var h *C.ggml_rs_backend
	var mem *C.ggml_rs_memory
	var cerr C.ggml_rs_error
	status := C.ggml_rs_backend_open(cpath, p, &mp, &h, &mem, &cerr)
	defer C.ggml_rs_memory_free(mem)
	switch Status(status) {
	case StatusOK:
		return h, nil
	case StatusOutOfMemory:
		// Ollama's contract: New panics with ErrNoMem, filled with what
		// every device would need; the runner recovers it and reports it
		// to the server, which retries with fewer layers on the GPUs.
		err := errorFrom(&cerr)
		slog.Warn("ggml-rs: model weights do not fit", "error", err.Message)
		var m ml.BackendMemory
		if mem != nil {
			m = convertMemory(mem, deviceMap(devices), nil)
		}
		panic(ml.ErrNoMem{BackendMemory: m})
	}
	return nil, errorFrom(&cerr)
}

var logModelOnce sync.Once

// initModel reads what the Go side keeps of an opened model: block count,
// metadata, the weights' pseudo-family.
func (b *Backend) initModel(layers []int32) error {
	b.blocks = int(C.ggml_rs_backend_block_count(b.c))
	b.layerDevices = layers
	n := C.ggml_rs_backend_kv_json(b.c, nil, 0)
	doc := make([]byte, int(n)+1)
	C.ggml_rs_backend_kv_json(b.c, (*C.char)(unsafe.Pointer(&doc[0])), C.size_t(len(doc)))
	kv, err := decodeKV(doc[:n])
	if err != nil {
		return err
	}
	b.config = kv
	// Weights belong to the backend: Backend.Close closes this family, so
	// a weight used after Close panics instead of touching freed memory.
	// Its scratch is Go memory (it holds no Go pointers): weights are read
	// rarely, and the GC frees it with the last weight tensor.
	b.weights = &family{b: b, s: new(scratch)}
	logModelOnce.Do(func() {
		slog.Info("",
			"architecture", kv.Architecture(),
			"file_type", kv.Uint("general.file_type"),
			"name", kv.String("general.name"),
			"description", kv.String("general.description"),
			"num_tensors", int(C.ggml_rs_backend_weight_count(b.c)),
			"num_key_values", kv.Len())
	})
	return nil
}

// ---------------------------------------------------------------------------
// Weights

// weight is Get: the weight named name as a *Tensor, or a nil interface.
func (b *Backend) weight(name string) ml.Tensor {
	if b.weights == nil {
		return nil
	}
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Load() {
		panic(closedError("Get: the backend is closed"))
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	p := C.ggml_rs_backend_get(b.c, cname)
	if p == nil {
		return nil
	}
	// owned: no compute ever overwrites a weight.
	return &Tensor{c: p, f: b.weights, owned: true}
}

// BlockCount is the number of repeating layers of the model (0 without
// one): the index of the output layer in GPULayers, WeightPlacement.Layer
// and the BackendMemory layer vectors.
func (b *Backend) BlockCount() int { return b.blocks }

// name is the tensor's ggml name.
func (t *Tensor) name() string {
	p := t.ptr("name")
	var buf [64]C.char
	n := C.ggml_rs_tensor_name(p, &buf[0], C.size_t(len(buf)))
	if int(n) < len(buf) {
		return C.GoString(&buf[0])
	}
	long := make([]C.char, int(n)+1)
	C.ggml_rs_tensor_name(p, &long[0], C.size_t(len(long)))
	return C.GoString(&long[0])
}

// WeightPlacement says where one weight of the model went.
type WeightPlacement struct {
	// Name is the weight's name as Get takes it (copies of rope
	// frequencies are "blk.N.rope_freqs.weight"; a tied output is
	// "output.weight").
	Name string
	// BufferType is ggml's name of the buffer type holding it: "CPU",
	// "CPU_REPACK" (rearranged for faster CPU matmuls), "CUDA0", ….
	BufferType string
	// Device is the registry index (Device.Index) of the device holding
	// it; DeviceName its name.
	Device     int
	DeviceName string
	// Layer is the repeating layer (0 to block count - 1), the output
	// layer (the block count), or -1 for input weights (token embeddings
	// and other weights Ollama keeps on the CPU).
	Layer int
	// Type is ggml's name of the element type ("f32", "q4_0", …; "typeN"
	// for types this package has no name for), TypeID its ggml id.
	Type   string
	TypeID int
	// Shape is in ggml order (dimension 0 varies fastest), without
	// trailing dimensions of 1.
	Shape []int
	// Bytes is the size of the data.
	Bytes uint64
}

// WeightPlacements lists every weight in creation order (file order, with
// each file tensor's copies after it) with its placement; nil without a
// model. It panics if the backend is closed.
func (b *Backend) WeightPlacements() []WeightPlacement {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Load() {
		panic(closedError("WeightPlacements: the backend is closed"))
	}
	n := int(C.ggml_rs_backend_weight_count(b.c))
	if n == 0 {
		return nil
	}
	out := make([]WeightPlacement, 0, n)
	var info C.ggml_rs_weight_info
	var cerr C.ggml_rs_error
	for i := 0; i < n; i++ {
		if C.ggml_rs_backend_weight_info(b.c, C.size_t(i), &info, &cerr) != C.GGML_RS_OK {
			panic(errorFrom(&cerr))
		}
		w := WeightPlacement{
			Name:       C.GoString(&info.name[0]),
			BufferType: C.GoString(&info.buffer_type[0]),
			Device:     int(info.device),
			DeviceName: b.devices[int(info.device)].Name,
			Layer:      int(info.layer),
			TypeID:     int(info.type_),
			Bytes:      uint64(info.nbytes),
		}
		if name, ok := typeName(info.type_); ok {
			w.Type = name
		} else {
			w.Type = fmt.Sprintf("type%d", int(info.type_))
		}
		dims := 4
		for dims > 1 && info.ne[dims-1] == 1 {
			dims--
		}
		for d := 0; d < dims; d++ {
			w.Shape = append(w.Shape, int(info.ne[d]))
		}
		out = append(out, w)
	}
	return out
}

// ---------------------------------------------------------------------------
// Loading

// loadState is what the progress callback reaches through its cgo.Handle.
type loadState struct {
	ctx      context.Context
	progress func(float32)
	// panicked is a panic of progress, re-raised after ggml-rs returns
	// (a Go panic must not unwind through Rust frames).
	panicked any
}

//export ggmlrsGoLoadProgress
func ggmlrsGoLoadProgress(fraction C.float, user unsafe.Pointer) (keepGoing C.bool) {
	s := (*(*cgo.Handle)(user)).Value().(*loadState)
	defer func() {
		if r := recover(); r != nil {
			s.panicked = r
			keepGoing = false
		}
	}()
	if s.ctx.Err() != nil {
		return false
	}
	if s.progress != nil {
		s.progress(float32(fraction))
	}
	return C.bool(s.ctx.Err() == nil)
}

// load is Load: ggml-rs reads the weights on its own threads and calls
// progress on this goroutine (fractions 0 to 1, never decreasing);
// cancelling ctx stops it at the next report.
func (b *Backend) load(ctx context.Context, progress func(float32)) error {
	if !b.params.AllocMemory {
		return errors.New("cannot load model without memory allocation")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Holding loadMu (not closeMu) lets contexts be made and memory be
	// read while the weights load; Close waits.
	b.loadMu.RLock()
	defer b.loadMu.RUnlock()
	if b.closed.Load() {
		return closedError("Load: the backend is closed")
	}
	if b.weights != nil {
		b.logOffload()
	}

	s := &loadState{ctx: ctx, progress: progress}
	h := cgo.NewHandle(s)
	defer h.Delete()
	var cerr C.ggml_rs_error
	status := C.ggml_rs_backend_load(b.c, C.ggml_rs_progress_fn(C.ggmlrsGoLoadProgress), unsafe.Pointer(&h), &cerr)
	if s.panicked != nil {
		panic(s.panicked)
	}
	if status == C.GGML_RS_OK {
		return nil
	}
	if Status(status) == StatusAborted && ctx.Err() != nil {
		return ctx.Err()
	}
	err := errorFrom(&cerr)
	slog.Warn("ggml-rs: loading the model failed", "error", err.Message)
	return err
}

// layerDevice is layer l's registry device, -1 for the CPU.
func (b *Backend) layerDevice(l int) int {
	if l < len(b.layerDevices) {
		return int(b.layerDevices[l])
	}
	return -1
}

// logOffload logs where the layers went, as Ollama's Load does.
func (b *Backend) logOffload() {
	gpuLayers := 0
	for l := 0; l < b.blocks; l++ {
		if b.layerDevice(l) >= 0 {
			gpuLayers++
		}
	}
	slog.Info(fmt.Sprintf("offloading %d repeating layers to GPU", gpuLayers))
	if b.layerDevice(b.blocks) >= 0 {
		slog.Info("offloading output layer to GPU")
		gpuLayers++
	} else {
		slog.Info("offloading output layer to CPU")
	}
	slog.Info(fmt.Sprintf("offloaded %d/%d layers to GPU", gpuLayers, b.blocks+1))
}

// ---------------------------------------------------------------------------
// Memory

func deviceMap(devices []Device) map[int]Device {
	m := make(map[int]Device, len(devices))
	for _, d := range devices {
		m[d.Index] = d
	}
	return m
}

// convertMemory turns a ggml-rs memory report (the CPU first, then every
// GPU in registry order) into Ollama's BackendMemory. graph, if not nil,
// holds compute buffer sizes per registry device that a failed Reserve
// attempted; each raises its device's Graph (devices outside the report,
// accelerators, count as the CPU, as in ggml-rs).
func convertMemory(m *C.ggml_rs_memory, devs map[int]Device, graph map[int]uint64) ml.BackendMemory {
	var out ml.BackendMemory
	out.InputWeights = uint64(C.ggml_rs_memory_input_weights(m))
	layers := int(C.ggml_rs_memory_layers(m))
	n := int(C.ggml_rs_memory_device_count(m))
	indices := make([]int, n)
	for i := 0; i < n; i++ {
		idx := int(C.ggml_rs_memory_device(m, C.size_t(i)))
		indices[i] = idx
		d := devs[idx]
		dm := ml.DeviceMemory{
			Name:    d.Name,
			Weights: make([]uint64, layers),
			Cache:   make([]uint64, layers),
			Graph:   uint64(C.ggml_rs_memory_graph(m, C.size_t(i))),
		}
		for l := 0; l < layers; l++ {
			dm.Weights[l] = uint64(C.ggml_rs_memory_weights(m, C.size_t(i), C.size_t(l)))
			dm.Cache[l] = uint64(C.ggml_rs_memory_cache(m, C.size_t(i), C.size_t(l)))
		}
		if i == 0 {
			// The CPU: Ollama reports empty ID and Library for it.
			out.CPU = dm
			continue
		}
		dm.DeviceID = d.DeviceID
		out.GPUs = append(out.GPUs, dm)
	}
	for idx, size := range graph {
		entry := &out.CPU
		if i := slices.Index(indices, idx); i > 0 {
			entry = &out.GPUs[i-1]
		}
		entry.Graph = max(entry.Graph, size)
	}
	return out
}

// memoryReport is the backend's current report (graph: see convertMemory). The
// caller holds closeMu and has checked that the backend is open.
func (b *Backend) memoryReport(graph map[int]uint64) ml.BackendMemory {
	m := C.ggml_rs_backend_memory(b.c)
	if m == nil {
		return ml.BackendMemory{}
	}
	defer C.ggml_rs_memory_free(m)
	return convertMemory(m, b.devices, graph)
}

// backendMemory is BackendMemory: ggml-rs's report (weights placed at
// open, data tensors of Layer contexts as Cache, Reserve's compute buffers
// as Graph), or after Close the report taken when closing.
func (b *Backend) backendMemory(graph map[int]uint64) ml.BackendMemory {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Load() {
		return b.lastMemory
	}
	return b.memoryReport(graph)
}

// reserveFailed is the ErrNoMem of a Reserve that could not allocate:
// the report with the compute buffer sizes it attempted (sizes, per
// scheduler device).
func (b *Backend) reserveFailed(sizes []C.uint64_t) ml.ErrNoMem {
	graph := map[int]uint64{}
	for i, s := range sizes {
		if i < len(b.schedDevices) {
			idx := b.schedDevices[i]
			graph[idx] = max(graph[idx], uint64(s))
		}
	}
	return ml.ErrNoMem{BackendMemory: b.backendMemory(graph)}
}
