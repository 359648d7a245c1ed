package llama_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/rpcserver"
	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

// TestDecodeOverRPC decodes with one layer on a ggml-rs RPC server (in a
// child process, since GGML_RS_RPC_SERVERS is read once per process): the
// graph then has splits on two devices, and recomputing it (decode graph
// reuse) must give exactly the logits of rebuilt graphs, and the CPU-only
// logits up to rounding.
func TestDecodeOverRPC(t *testing.T) {
	if os.Getenv("GGMLRS_TEST_RPC_CHILD") != "" {
		decodeOverRPC(t)
		return
	}
	srv, out := rpcserver.RunChild(t, "^TestDecodeOverRPC$", "GGMLRS_TEST_RPC_CHILD", "--threads", "1")
	if !strings.Contains(out, "--- PASS: TestDecodeOverRPC") {
		t.Fatalf("decode with an RPC device did not pass:\n%s\nserver:\n%s", out, srv)
	}
	t.Logf("child:\n%s", out)
}

func decodeOverRPC(t *testing.T) {
	var rpc *backend.Device
	for _, d := range backend.Devices() {
		if d.Library == "RPC" {
			rpc = &d
			break
		}
	}
	if rpc == nil {
		t.Fatal("the RPC server is not among the devices")
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := tinymodel.WriteTiny(path, llama.Qwen3, tinymodel.DefaultTiny, 42); err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, 24)
	for i := range ids {
		ids[i] = int32((i*29 + 5) % 300)
	}
	decode := func(layers ml.GPULayersList, reuse bool) [][]float32 {
		p := ml.BackendParams{AllocMemory: true, NumThreads: 2, FlashAttention: ml.FlashAttentionEnabled, GPULayers: layers}
		b, err := ml.NewBackend(path, p)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Load(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		m, err := llama.New(b, llama.Qwen3)
		if err != nil {
			t.Fatal(err)
		}
		m.NoGraphReuse = !reuse
		defer m.ReleaseGraph()
		cache := newCache(t, m, 64)
		defer cache.Close()
		rows, err := decodeEach(m, cache, ids)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	cpu := decode(nil, false)
	t.Logf("RPC device %s (%s)", rpc.Name, rpc.DeviceID.ID)
	remote := ml.GPULayersList{{DeviceID: rpc.DeviceID, Layers: []int{1}}}
	rebuilt, reused := decode(remote, false), decode(remote, true)
	for i := range ids {
		if !slices.Equal(reused[i], rebuilt[i]) {
			t.Fatalf("step %d: the reused graph over RPC gives other logits than rebuilt graphs", i)
		}
		var worst float64
		for j := range cpu[i] {
			worst = max(worst, float64(abs(rebuilt[i][j]-cpu[i][j])))
		}
		if worst > 1e-4 {
			t.Fatalf("step %d: RPC placement differs from the CPU by %g", i, worst)
		}
	}
}

func abs(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
