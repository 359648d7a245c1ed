package model_test

// Mixture-of-experts models with their experts kept in CPU memory
// (backend.WithCPUExperts, the runner's -cpu-moe and -n-cpu-moe) while the
// rest of every layer runs on a GPU: here a ggml-rs RPC server on
// 127.0.0.1, which placement treats as a GPU.

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// cpuExpertModels are the generated MoE models the test runs: a hybrid
// (recurrent and attention layers, a shared expert, an MTP block whose
// experts count too) with Q4_0 weights (so the CPU-resident experts are
// repacked), and gpt-oss (sliding-window layers, expert biases) with F16.
var cpuExpertModels = []string{"qwen35moe-small-q4_0", "gpt-oss-small-f16"}

// smallModel is where a generated model lives: $GGML_RS_MODELS (make test
// sets it and generates the models first, so a missing one fails) or
// .cache/models (a missing one skips: make models writes them).
func smallModel(t *testing.T, name string) string {
	t.Helper()
	dir, required := os.LookupEnv("GGML_RS_MODELS")
	if !required {
		dir = "../../.cache/models"
	}
	path, err := filepath.Abs(filepath.Join(dir, name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		if required {
			t.Fatalf("%s is missing: make models writes it", path)
		}
		t.Skipf("%s is not there (make models writes it; make test does)", path)
	}
	return path
}

// TestCPUExpertsOverRPC runs cpuExpertsOverRPC in a child process whose
// only "GPU" is an RPC server (GGML_RS_RPC_SERVERS is read once per
// process).
func TestCPUExpertsOverRPC(t *testing.T) {
	if os.Getenv("GGMLRS_TEST_CPU_EXPERTS_CHILD") != "" {
		cpuExpertsOverRPC(t)
		return
	}
	for _, name := range cpuExpertModels {
		smallModel(t, name)
	}
	_, out := runWithRPCServer(t, "TestCPUExpertsOverRPC", "GGMLRS_TEST_CPU_EXPERTS_CHILD", "--threads", "1", "--mem", "1024")
	t.Logf("child:\n%s", out)
}

// isExpert is ggml-rs's name rule for expert tensors: a part ffn_*_exps.
func isExpert(name string) bool {
	return slices.ContainsFunc(strings.Split(name, "."), func(p string) bool {
		return strings.HasPrefix(p, "ffn_") && strings.HasSuffix(p, "_exps")
	})
}

func pad32(n uint64) uint64 { return (n + 31) / 32 * 32 }

func cpuExpertsOverRPC(t *testing.T) {
	var rpc, cpu *backend.Device
	for _, d := range backend.Devices() {
		switch {
		case d.Library == "RPC" && rpc == nil:
			rpc = &d
		case d.Type == backend.DeviceCPU && cpu == nil:
			cpu = &d
		}
	}
	if rpc == nil || cpu == nil {
		t.Fatalf("devices %+v: no RPC device or no CPU", backend.Devices())
	}
	for _, name := range cpuExpertModels {
		t.Run(name, func(t *testing.T) {
			path := smallModel(t, name)
			// The references, CPU only: weights in plain buffers, and
			// repacked as a CPU-only run has them by default.
			cpuPlain := runLogits(t, path, nil, nil, false, false)
			cpuRepacked := runLogits(t, path, nil, nil, false, true)
			repackDrift := maxDiff(cpuRepacked, cpuPlain)

			blocks := blockCountOf(t, path)
			all := make([]int, blocks+1) // the repeating layers and the output layer
			for l := range all {
				all[l] = l
			}
			layers := ml.GPULayersList{{DeviceID: rpc.DeviceID, Layers: all}}
			for _, experts := range [][]int{{0, 1}, all[:blocks]} {
				t.Run(fmt.Sprintf("experts of %d layers on the CPU", len(experts)), func(t *testing.T) {
					b, err := backend.NewWithOptions(path, params(layers), backend.WithCPUExperts(experts...))
					if err != nil {
						t.Fatal(err)
					}
					defer b.Close()

					// (a) The placement: input weights and the experts of
					// the chosen layers on the CPU, everything else on the
					// RPC device.
					ws := b.WeightPlacements()
					cpuW := make([]uint64, blocks+1)
					rpcW := make([]uint64, blocks+1)
					var input uint64
					var nExperts int
					for _, w := range ws {
						want := rpc
						if w.Layer < 0 || (isExpert(w.Name) && slices.Contains(experts, w.Layer)) {
							want = cpu
						}
						if w.Device != want.Index {
							t.Errorf("%s (layer %d): on %s, want %s", w.Name, w.Layer, w.DeviceName, want.Name)
						}
						if isExpert(w.Name) && w.Device == cpu.Index {
							nExperts++
							// Repacked where the CPU has a faster layout
							// for the type (Q4_0's), as a CPU-only run.
							if w.Type == "q4_0" && w.BufferType != "CPU_REPACK" {
								t.Errorf("%s: in a %s buffer, want CPU_REPACK", w.Name, w.BufferType)
							}
						}
						// The sizes as allocated: each tensor at its size
						// rounded up to the buffer's 32-byte alignment, on
						// the CPU (repacked Q4_0 keeps its size) and on the
						// RPC server (a CPU backend: the same sizes). The
						// output layer is on the RPC device, so the tied
						// head (if any) is a copy of its own.
						switch {
						case w.Layer < 0:
							input += pad32(w.Bytes)
						case w.Device == cpu.Index:
							cpuW[w.Layer] += pad32(w.Bytes)
						default:
							rpcW[w.Layer] += pad32(w.Bytes)
						}
					}
					// Every chosen layer has gate, up and down experts
					// (gpt-oss: and their biases).
					if nExperts < 3*len(experts) {
						t.Errorf("%d expert tensors on the CPU, want at least 3 for each of %d layers", nExperts, len(experts))
					}

					// (b) Memory, per device and layer, is exactly that.
					mem := b.BackendMemory()
					gi := slices.IndexFunc(mem.GPUs, func(d ml.DeviceMemory) bool { return d.DeviceID == rpc.DeviceID })
					if gi < 0 {
						t.Fatalf("no memory entry for the RPC device in %+v", mem)
					}
					g := mem.GPUs[gi]
					if mem.InputWeights != input || !slices.Equal(mem.CPU.Weights, cpuW) || !slices.Equal(g.Weights, rpcW) {
						t.Errorf("weights: input %d, CPU %v, RPC %v; want input %d, CPU %v, RPC %v",
							mem.InputWeights, mem.CPU.Weights, g.Weights, input, cpuW, rpcW)
					}
					for l := 0; l < blocks; l++ {
						if (cpuW[l] > 0) != slices.Contains(experts, l) || rpcW[l] == 0 {
							t.Errorf("layer %d: %d bytes on the CPU, %d on the RPC device", l, cpuW[l], rpcW[l])
						}
					}

					if err := b.Load(context.Background(), nil); err != nil {
						t.Fatal(err)
					}
					m, err := model.New(b)
					if err != nil {
						t.Fatal(err)
					}
					// The cache: each layer's on the RPC device, at the
					// sizes of its tensors.
					const sequences, capacity = 2, 300
					cache, err := m.NewCache(decoder.CacheOptions{Capacity: capacity, Sequences: sequences})
					if err != nil {
						t.Fatal(err)
					}
					wantCache := cacheBytes(m, blocks, capacity, sequences)
					mem = b.BackendMemory()
					if !slices.Equal(mem.GPUs[gi].Cache, wantCache) || slices.ContainsFunc(mem.CPU.Cache, func(v uint64) bool { return v != 0 }) {
						t.Errorf("cache: RPC %v, CPU %v; want RPC %v, CPU none", mem.GPUs[gi].Cache, mem.CPU.Cache, wantCache)
					}
					cache.Close()
					b.Close()

					// (c) With plain buffers on both sides (the same kernels),
					// the logits are the CPU's: prompt, then decode steps
					// with graph reuse (and rebuilt: the same bits).
					reused := runLogits(t, path, layers, experts, true, false)
					rebuilt := runLogits(t, path, layers, experts, false, false)
					for i := range cpuPlain {
						if !slices.Equal(reused[i], rebuilt[i]) {
							t.Errorf("step %d: reused and rebuilt graphs give other logits", i)
						}
					}
					if d := maxDiff(reused, cpuPlain); d > 1e-4 {
						t.Errorf("plain buffers: the logits differ from the CPU's by %g", d)
					} else {
						t.Logf("plain buffers: |RPC - CPU| <= %.3g", d)
					}

					// (d) As a user runs it: the CPU-resident experts
					// repacked (Q4_0: other kernels), the rest plain on the
					// RPC device. Its logits lie between the two CPU
					// references': no farther from either than repacking
					// alone moves them (the random weights amplify the
					// kernels' last-bit differences; see docs/notes/decoder-models.md).
					mixed := runLogits(t, path, layers, experts, true, true)
					dPlain, dRepacked := maxDiff(mixed, cpuPlain), maxDiff(mixed, cpuRepacked)
					t.Logf("repacked experts: |RPC - CPU plain| <= %.3g, |RPC - CPU repacked| <= %.3g, |CPU repacked - CPU plain| <= %.3g",
						dPlain, dRepacked, repackDrift)
					if limit := repackDrift + 1e-4; dPlain > limit || dRepacked > limit {
						t.Errorf("repacked experts: the logits are farther from the CPU's (%g plain, %g repacked) than repacking moves them (%g)",
							dPlain, dRepacked, repackDrift)
					}
				})
			}
		})
	}
}

// params: allocated, flash attention on (as the CPU-only reference; the
// cache layout then is the same), the given GPU layers.
func params(layers ml.GPULayersList) ml.BackendParams {
	return ml.BackendParams{AllocMemory: true, NumThreads: 2, FlashAttention: ml.FlashAttentionEnabled, GPULayers: layers}
}

// The prompt and the tokens decoded one at a time after it.
var (
	prompt = []int32{1, 17, 42, 99, 250, 7, 311}
	steps  = []int32{5, 123, 64, 400}
)

// runLogits loads the model (experts of the given layers on the CPU) and
// returns the logits of the prompt's last token and of each decode step.
func runLogits(t *testing.T, path string, layers ml.GPULayersList, experts []int, reuse, repack bool) [][]float32 {
	t.Helper()
	opts := []backend.Option{backend.WithCPUExperts(experts...)}
	if !repack {
		opts = append(opts, backend.WithoutRepacking())
	}
	b, err := backend.NewWithOptions(path, params(layers), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	m, err := model.New(b)
	if err != nil {
		t.Fatal(err)
	}
	m.NoGraphReuse = !reuse
	defer m.ReleaseGraph()
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	out, err := m.Forward(cache, prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	rows := [][]float32{out[0]}
	for _, id := range steps {
		out, err := m.Forward(cache, []int32{id}, false)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, out[0])
	}
	return rows
}

func blockCountOf(t *testing.T, path string) int {
	t.Helper()
	b, err := backend.NewWithOptions(path, ml.BackendParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	return b.BlockCount()
}

// cacheBytes is what a cache of the model for capacity tokens of all
// sequences together holds per layer, from the layers' shapes: F16 keys
// and values of Sequences streams of capacity/sequences cells rounded up
// to 256 (ggml-rs's cache padding), or F32 convolution and delta-net
// states per sequence; every tensor rounded up to 32 bytes. The output
// layer and blocks the decoder does not run (MTP) hold nothing.
func cacheBytes(m *decoder.Model, blocks, capacity, sequences int) []uint64 {
	out := make([]uint64, blocks+1)
	for l, bl := range m.Blocks {
		s := bl.Cache
		switch s.Kind {
		case kvcache.Attention, kvcache.SlidingWindow, kvcache.Chunked:
			perStream := ((capacity+sequences-1)/sequences + 255) / 256 * 256
			cells := uint64(sequences * perStream)
			out[l] = pad32(2*uint64(s.KeyDim*s.KVHeads)*cells) + pad32(2*uint64(s.ValueDim*s.KVHeads)*cells)
		case kvcache.Recurrent:
			out[l] = pad32(4*uint64((s.ConvWidth-1)*s.ConvChannels*sequences)) +
				pad32(4*uint64(s.StateSize*cmp.Or(s.StateRows, s.StateSize)*s.StateHeads*sequences))
		}
	}
	return out
}

// maxDiff is the largest |a - b| over every step's logits.
func maxDiff(a, b [][]float32) float64 {
	var worst float64
	for i := range a {
		for j := range a[i] {
			worst = max(worst, float64(abs(a[i][j]-b[i][j])))
		}
	}
	return worst
}

func abs(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
