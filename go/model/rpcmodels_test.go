package model_test

// Every architecture the runner supports, computed on a ggml-rs RPC server
// on 127.0.0.1: the server checks each graph node against its op's rules
// before computing it (src/ml/rpc_server/rules.rs), so this test fails if
// a rule refuses a node a real model sends, or if a checked node computes
// differently there.

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// rpcModels: one generated model per architecture, with the weight types
// varied across them.
var rpcModels = []string{
	"llama-small-q8_0", "qwen3-small-q4_0", "qwen3moe-small-f16", "gpt-oss-small-q8_0",
	"qwen3next-small-f32", "qwen35-small-q4_0", "qwen35moe-small-q8_0",
}

// TestEveryArchitectureOverRPC runs everyArchitectureOverRPC in a child
// process whose only "GPU" is the RPC server (GGML_RS_RPC_SERVERS is read
// once per process).
func TestEveryArchitectureOverRPC(t *testing.T) {
	if os.Getenv("GGMLRS_TEST_RPC_MODELS_CHILD") != "" {
		everyArchitectureOverRPC(t)
		return
	}
	for _, name := range rpcModels {
		smallModel(t, name)
	}
	srv, out := runWithRPCServer(t, "TestEveryArchitectureOverRPC", "GGMLRS_TEST_RPC_MODELS_CHILD", "--threads", "1", "--mem", "2048")
	if strings.Contains(srv, "refused") || strings.Contains(srv, "died") {
		t.Fatalf("the server refused a request or lost a connection process:\n%s", srv)
	}
	t.Logf("child:\n%s", out)
}

func everyArchitectureOverRPC(t *testing.T) {
	var rpc *backend.Device
	for _, d := range backend.Devices() {
		if d.Library == "RPC" {
			rpc = &d
			break
		}
	}
	if rpc == nil {
		t.Fatalf("devices %+v: no RPC device", backend.Devices())
	}
	for _, name := range rpcModels {
		t.Run(name, func(t *testing.T) {
			path := smallModel(t, name)
			cpu := runLogits(t, path, nil, nil, true, false)
			blocks := blockCountOf(t, path)
			all := make([]int, blocks+1)
			for l := range all {
				all[l] = l
			}
			// All layers, then every other layer, on the server.
			for _, layers := range [][]int{all, evens(all)} {
				t.Run(fmt.Sprintf("%d of %d layers", len(layers), len(all)), func(t *testing.T) {
					got := runLogits(t, path, ml.GPULayersList{{DeviceID: rpc.DeviceID, Layers: layers}}, nil, true, false)
					// The server runs the same CPU kernels on the same
					// plain buffers.
					if d := maxDiff(got, cpu); d > 1e-4 {
						t.Errorf("the logits differ from the CPU's by %g", d)
					} else {
						t.Logf("|RPC - CPU| <= %.3g", d)
					}
				})
			}
		})
	}
}

func evens(xs []int) []int {
	var out []int
	for i, x := range xs {
		if i%2 == 0 {
			out = append(out, x)
		}
	}
	return out
}
