//go:build ggml_vulkan

package backend

// The library built with ggml's Vulkan backend (make test-vulkan: the
// machine's Vulkan device, Mesa's llvmpipe where there is no GPU, made
// visible with GGML_VK_VISIBLE_DEVICES). The placement and memory tests of
// model_test.go run again with the Vulkan device as the GPU, alone and
// beside an RPC server.

import (
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"

	"github.com/ggml-rs/ggml-rs/go/internal/rpcserver"
)

// vulkanDevice is the first Vulkan device; the test fails without one.
func vulkanDevice(t *testing.T) Device {
	t.Helper()
	for _, d := range Devices() {
		if d.Library == "Vulkan" {
			return d
		}
	}
	t.Fatalf("no Vulkan device among %+v (GGML_VK_VISIBLE_DEVICES=%q: ggml-vulkan lists a CPU-type device such as llvmpipe only when it is named there)",
		Devices(), os.Getenv("GGML_VK_VISIBLE_DEVICES"))
	return Device{}
}

func TestVulkanDevice(t *testing.T) {
	d := vulkanDevice(t)
	t.Logf("%s: %s, %s, type %v, %d of %d MiB free", d.Name, d.Description, d.Library, d.Type, d.FreeMemory>>20, d.TotalMemory>>20)
	if d.Type != DeviceGPU && d.Type != DeviceIntegratedGPU {
		t.Errorf("%s has type %v, want a GPU", d.Name, d.Type)
	}
	if d.TotalMemory == 0 || d.FreeMemory == 0 || d.FreeMemory > d.TotalMemory {
		t.Errorf("%s: %d bytes free of %d", d.Name, d.FreeMemory, d.TotalMemory)
	}
}

// placementTests are model_test.go's tests that place layers on the GPUs
// present and check placement and memory per device.
const placementTests = "^(TestWeightPlacements|TestModelMemory|TestFitMode|TestInfoModel)$"

// TestVulkanPlacement: the Vulkan device is the only GPU.
func TestVulkanPlacement(t *testing.T) {
	if os.Getenv("GGMLRS_TEST_EXPECT_GPU") != "" {
		t.Skip("already the child")
	}
	g := vulkanDevice(t)
	cmd := exec.Command(os.Args[0], "-test.run", placementTests, "-test.v")
	cmd.Env = append(os.Environ(), "GGMLRS_TEST_EXPECT_GPU=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("placement tests with %s: %v\n%s", g.Name, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestWeightPlacements/layer_1_and_output_on_"+g.Name) {
		t.Fatalf("the placement tests did not run on %s:\n%s", g.Name, out)
	}
	t.Logf("child:\n%s", out)
}

// TestVulkanAndRPCPlacement: the Vulkan device and an RPC server, a layer
// on each.
func TestVulkanAndRPCPlacement(t *testing.T) {
	if os.Getenv("GGMLRS_TEST_EXPECT_GPU") != "" {
		t.Skip("already the child")
	}
	g := vulkanDevice(t)
	_, out := rpcserver.RunChild(t, placementTests, "GGMLRS_TEST_EXPECT_GPU", "--threads", "1", "--mem", "1024")
	want := "--- PASS: TestWeightPlacements/layer_0_on_" + g.Name + ",_layer_1_on_RPC"
	if !strings.Contains(out, want) {
		t.Fatalf("no %q in the child's output:\n%s", want, out)
	}
	t.Logf("child:\n%s", out)
}

// TestVulkanDeltaNetNotInPlace: with the Vulkan device in the scheduler the
// delta-net state is never updated in place (the op could run there, or
// on a copy of the state made for it): the backend declines.
func TestVulkanDeltaNetNotInPlace(t *testing.T) {
	vulkanDevice(t)
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	ctx := b.NewContext()
	defer ctx.Close()
	d := dnInputs(rand.New(rand.NewSource(74)), dnCases[0], 1)
	op := d.q.tensor(ctx).(ml.GatedDeltaNetInPlace)
	if _, ok := op.GatedDeltaNetInPlace(ctx, d.k.tensor(ctx), d.v.tensor(ctx), d.gate.tensor(ctx), d.beta.tensor(ctx), d.state.tensor(ctx), ml.HeadsTiled); ok {
		t.Fatal("a backend with a Vulkan device updates states in place")
	}
}
