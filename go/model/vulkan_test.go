//go:build ggml_vulkan

package model_test

// Every architecture the runner supports with its layers on the Vulkan
// device (make test-vulkan: Mesa's llvmpipe where there is no GPU): all
// layers, then the last half (the output layer counting as one, as -ngl),
// the rest on the CPU, flash attention on (a CPU-type Vulkan device
// refuses it, ggml patch 09, so the scheduler runs it on the CPU: the
// fallback path). A graph split between the two devices must compute to
// the same bits again, with and without decode graph reuse. How far the
// logits are from the CPU's is logged: they are held to llama.cpp's on the
// same device by go/cmd/ggml-rs/parity_vulkan_test.go.

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

func vulkanDevice(t *testing.T) backend.Device {
	t.Helper()
	for _, d := range backend.Devices() {
		if d.Library == "Vulkan" {
			return d
		}
	}
	t.Fatalf("no Vulkan device among %+v (GGML_VK_VISIBLE_DEVICES=%q)", backend.Devices(), os.Getenv("GGML_VK_VISIBLE_DEVICES"))
	return backend.Device{}
}

// lastLayers is the last n of the layers 0..blocks (blocks: the output
// layer), as -ngl n places them.
func lastLayers(blocks, n int) []int {
	var out []int
	for l := blocks + 1 - n; l <= blocks; l++ {
		out = append(out, l)
	}
	return out
}

func sameBits(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool {
		return slices.EqualFunc(x, y, func(p, q float32) bool { return p == q || (p != p && q != q) })
	})
}

func TestEveryArchitectureOnVulkan(t *testing.T) {
	vk := vulkanDevice(t)
	for _, name := range rpcModels {
		t.Run(name, func(t *testing.T) {
			path := smallModel(t, name)
			cpu := runLogits(t, path, nil, nil, true, false)
			blocks := blockCountOf(t, path)
			for _, n := range []int{blocks + 1, (blocks + 1) / 2} {
				layers := lastLayers(blocks, n)
				t.Run(fmt.Sprintf("%d of %d layers", n, blocks+1), func(t *testing.T) {
					gl := ml.GPULayersList{{DeviceID: vk.DeviceID, Layers: layers}}
					got := runLogits(t, path, gl, nil, true, false)
					again := runLogits(t, path, gl, nil, false, false)
					if !sameBits(got, again) {
						t.Errorf("with decode graph reuse and without, the logits differ by %g (want the same bits)", maxDiff(got, again))
					}
					for _, row := range got {
						for _, v := range row {
							if v != v || v > 1e30 || v < -1e30 {
								t.Fatalf("a logit is %v", v)
							}
						}
					}
					t.Logf("|Vulkan - CPU| <= %.3g (prompt and %d decode steps)", maxDiff(got, cpu), len(steps))
				})
			}
		})
	}
}
