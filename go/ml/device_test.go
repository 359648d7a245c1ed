package ml

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Ported from Ollama's ml/device_test.go.
func TestMergeEnvWithRunnerEnvOverrides(t *testing.T) {
	devices := []DeviceInfo{
		{
			DeviceID:           DeviceID{Library: "Metal", ID: "0"},
			RunnerEnvOverrides: map[string]string{"GGML_METAL_TENSOR_DISABLE": "1"},
		},
		{
			DeviceID: DeviceID{Library: "CUDA", ID: "3"},
		},
	}

	env := GetDevicesEnv(devices, true)

	if got, want := env["GGML_METAL_TENSOR_DISABLE"], "1"; got != want {
		t.Fatalf("GGML_METAL_TENSOR_DISABLE = %q, want %q", got, want)
	}
	if got, want := env["CUDA_VISIBLE_DEVICES"], "3"; got != want {
		t.Fatalf("CUDA_VISIBLE_DEVICES = %q, want %q", got, want)
	}
}

// Ported from Ollama's ml/device_test.go.
func TestGetDevicesEnvWarnsOnConflictingOverrides(t *testing.T) {
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })

	devices := []DeviceInfo{
		{
			DeviceID:           DeviceID{Library: "Metal", ID: "0"},
			RunnerEnvOverrides: map[string]string{"TEST_OVERRIDE": "one"},
		},
		{
			DeviceID:           DeviceID{Library: "Metal", ID: "1"},
			RunnerEnvOverrides: map[string]string{"TEST_OVERRIDE": "two"},
		},
	}

	env := GetDevicesEnv(devices, false)

	if got, want := env["TEST_OVERRIDE"], "two"; got != want {
		t.Fatalf("TEST_OVERRIDE = %q, want %q", got, want)
	}
	if !strings.Contains(logs.String(), "conflicting device environment override") {
		t.Fatalf("expected warning log, got %q", logs.String())
	}
}

func TestGetDevicesEnvFiltering(t *testing.T) {
	if env := GetDevicesEnv(nil, true); env != nil {
		t.Errorf("empty list: got %v, want nil", env)
	}
	devices := []DeviceInfo{
		{DeviceID: DeviceID{Library: "CUDA", ID: "GPU-a"}, FilterID: "0"},
		{DeviceID: DeviceID{Library: "CUDA", ID: "GPU-b"}},
		{DeviceID: DeviceID{Library: "ROCm", ID: "1"}},
		{DeviceID: DeviceID{Library: "ROCm", ID: "2"}},
		{DeviceID: DeviceID{Library: "Vulkan", ID: "v0"}},
	}
	env := GetDevicesEnv(devices, false)
	if _, ok := env["CUDA_VISIBLE_DEVICES"]; ok {
		t.Errorf("CUDA filtered without mustFilter: %v", env)
	}
	rocm := "ROCR_VISIBLE_DEVICES"
	if got := env[rocm]; got != "1,2" {
		t.Errorf("%s = %q, want 1,2 (env %v)", rocm, got, env)
	}
	if len(env) != 1 {
		t.Errorf("unexpected variables: %v", env)
	}
	env = GetDevicesEnv(devices, true)
	if got := env["CUDA_VISIBLE_DEVICES"]; got != "0,GPU-b" {
		t.Errorf("CUDA_VISIBLE_DEVICES = %q, want FilterID then ID: 0,GPU-b", got)
	}
}

// Ollama v0.17.x's GetVisibleDevicesEnv: the same visible-devices
// variables as GetDevicesEnv, without the runner overrides.
func TestGetVisibleDevicesEnv(t *testing.T) {
	if env := GetVisibleDevicesEnv(nil, true); env != nil {
		t.Errorf("empty list: got %v, want nil", env)
	}
	devices := []DeviceInfo{
		{DeviceID: DeviceID{Library: "CUDA", ID: "GPU-a"}, FilterID: "0", RunnerEnvOverrides: map[string]string{"X": "1"}},
		{DeviceID: DeviceID{Library: "ROCm", ID: "1"}},
		{DeviceID: DeviceID{Library: "Vulkan", ID: "v0"}},
	}
	for _, must := range []bool{false, true} {
		got, want := GetVisibleDevicesEnv(devices, must), GetDevicesEnv(devices, must)
		delete(want, "X")
		if len(got) != len(want) {
			t.Fatalf("mustFilter %v: %v, want %v", must, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("mustFilter %v: %s = %q, want %q", must, k, got[k], v)
			}
		}
		if _, ok := got["X"]; ok {
			t.Errorf("mustFilter %v: runner override in %v", must, got)
		}
	}
}

func TestGPULayers(t *testing.T) {
	g := GPULayers{DeviceID: DeviceID{ID: "GPU-1"}, Layers: []int{3, 1, 2, 0}}
	if got := g.FirstLayer(); got != 0 {
		t.Errorf("FirstLayer = %d", got)
	}
	if got, want := g.String(), "ID:GPU-1 Layers:4(0..3)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if !slices.Equal(g.Layers, []int{0, 1, 2, 3}) {
		t.Errorf("String did not sort in place: %v", g.Layers)
	}
	gap := GPULayers{DeviceID: DeviceID{ID: "x"}, Layers: []int{5, 1, 2}}
	if got, want := gap.String(), "ID:x Layers:3[1 2 5]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	dup := GPULayers{DeviceID: DeviceID{ID: "x"}, Layers: []int{1, 1, 2}}
	if got, want := dup.String(), "ID:x Layers:3[1 1 2]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := (GPULayers{}).FirstLayer(); got != math.MaxInt {
		t.Errorf("empty FirstLayer = %d", got)
	}
	if got := (GPULayers{}).String(); got != "" {
		t.Errorf("empty String = %q", got)
	}

	l := GPULayersList{
		{DeviceID: DeviceID{ID: "b"}, Layers: []int{4, 5}},
		{DeviceID: DeviceID{ID: "a"}, Layers: []int{0, 1, 2, 3}},
		{DeviceID: DeviceID{ID: "c"}},
	}
	sort.Sort(l)
	if l[0].ID != "a" || l[1].ID != "b" || l[2].ID != "c" {
		t.Errorf("sorted order: %v", l)
	}
	if l.Sum() != 6 {
		t.Errorf("Sum = %d", l.Sum())
	}
	if got, want := l.String(), "6[ID:a Layers:4(0..3) ID:b Layers:2(4..5) ]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := (GPULayersList{{}}).String(), "[]"; got != want {
		t.Errorf("empty list String = %q, want %q", got, want)
	}

	// Hash: equal layouts hash equal; empty entries do not count; any
	// change to IDs or layers changes it.
	h := l.Hash()
	same := GPULayersList{l[0], l[1]}
	if same.Hash() != h {
		t.Error("dropping an empty entry changed the hash")
	}
	moved := GPULayersList{{DeviceID: DeviceID{ID: "a"}, Layers: []int{0, 1, 2}}, {DeviceID: DeviceID{ID: "b"}, Layers: []int{3, 4, 5}}}
	if moved.Hash() == h {
		t.Error("different layout, same hash")
	}
	lib := GPULayersList{{DeviceID: DeviceID{ID: "a", Library: "CUDA"}, Layers: []int{0, 1, 2, 3}}, l[1]}
	if lib.Hash() == h {
		t.Error("different library, same hash")
	}
}

func TestMemory(t *testing.T) {
	m := DeviceMemory{DeviceID: DeviceID{ID: "GPU-1"}, Name: "CUDA0", Weights: []uint64{1, 2}, Cache: []uint64{0, 4}, Graph: 8}
	if m.Size() != 15 {
		t.Errorf("Size = %d", m.Size())
	}
	v := m.LogValue().Group()
	var keys []string
	for _, a := range v {
		keys = append(keys, a.Key)
	}
	if !slices.Equal(keys, []string{"ID", "Weights", "Cache", "Graph"}) {
		t.Errorf("LogValue keys = %v", keys)
	}
	if got := (DeviceMemory{DeviceID: DeviceID{ID: "x"}, Weights: []uint64{0}}).LogValue().Group(); len(got) != 0 {
		t.Errorf("zero memory LogValue = %v", got)
	}

	bm := BackendMemory{InputWeights: 1 << 20, CPU: DeviceMemory{Name: "CPU", Weights: []uint64{1 << 20}}, GPUs: []DeviceMemory{m}}
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(old)
	bm.Log(slog.LevelInfo)
	out := logs.String()
	for _, want := range []string{`"model weights" device=CPU size="2.0 MiB"`, `"model weights" device=CUDA0 size="3 B"`, `"kv cache" device=CUDA0 size="4 B"`, `"compute graph" device=CUDA0 size="8 B"`, `"total memory" size="2.0 MiB"`} {
		if !strings.Contains(out, want) {
			t.Errorf("Log output lacks %q:\n%s", want, out)
		}
	}

	err := ErrNoMem{BackendMemory: bm}
	var target ErrNoMem
	if !errors.As(error(err), &target) || !strings.HasPrefix(err.Error(), "insufficient memory - required allocations: {InputWeights:1048576") {
		t.Errorf("ErrNoMem: %v", err)
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDeviceInfo(t *testing.T) {
	cuda := DeviceInfo{DeviceID: DeviceID{Library: "CUDA", ID: "GPU-1"}, ComputeMajor: 8, ComputeMinor: 6, DriverMajor: 12, DriverMinor: 4}
	if cuda.Compute() != "8.6" || cuda.Driver() != "12.4" {
		t.Errorf("Compute/Driver = %s/%s", cuda.Compute(), cuda.Driver())
	}
	rocm := DeviceInfo{DeviceID: DeviceID{Library: "ROCm"}, ComputeMajor: 0x9, ComputeMinor: 0x0a}
	if got := rocm.Compute(); got != "gfx90a" {
		t.Errorf("ROCm Compute = %q", got)
	}
	if (DeviceInfo{DeviceID: DeviceID{Library: "Metal"}}).MinimumMemory() != 512<<20 || cuda.MinimumMemory() != 457<<20 {
		t.Error("MinimumMemory")
	}
	if !cuda.NeedsInitValidation() || !rocm.NeedsInitValidation() || (DeviceInfo{DeviceID: DeviceID{Library: "Vulkan"}}).NeedsInitValidation() {
		t.Error("NeedsInitValidation")
	}
	env := map[string]string{}
	cuda.AddInitValidation(env)
	if env["GGML_CUDA_INIT"] != "1" {
		t.Errorf("AddInitValidation: %v", env)
	}
	vk := DeviceInfo{DeviceID: DeviceID{Library: "Vulkan"}}
	if !cuda.PreferredLibrary(vk) || !rocm.PreferredLibrary(vk) || vk.PreferredLibrary(cuda) {
		t.Error("PreferredLibrary")
	}

	// Compare: by PCI ID, falling back to DeviceID.
	a := DeviceInfo{DeviceID: DeviceID{Library: "CUDA", ID: "0"}, PCIID: "0000:01:00.0"}
	b := DeviceInfo{DeviceID: DeviceID{Library: "Vulkan", ID: "7"}, PCIID: "0000:01:00.0"}
	c := DeviceInfo{DeviceID: DeviceID{Library: "CUDA", ID: "1"}, PCIID: "0000:02:00.0"}
	if a.Compare(b) != DuplicateDevice || a.Compare(a) != SameBackendDevice || a.Compare(c) != UniqueDevice {
		t.Error("Compare with PCI IDs")
	}
	x := DeviceInfo{DeviceID: DeviceID{Library: "CUDA", ID: "0"}}
	y := DeviceInfo{DeviceID: DeviceID{Library: "CUDA", ID: "1"}}
	if x.Compare(y) != UniqueDevice || x.Compare(x) != SameBackendDevice {
		t.Error("Compare without PCI IDs")
	}

	// IsBetter: newer library variant wins.
	v12 := DeviceInfo{LibraryPath: []string{"/lib", "cuda_v12"}}
	v13 := DeviceInfo{LibraryPath: []string{"/lib", "cuda_v13"}}
	other := DeviceInfo{LibraryPath: []string{"/lib", "rocm_v6"}}
	plain := DeviceInfo{LibraryPath: []string{"/lib"}}
	if !v12.IsBetter(v13) || v13.IsBetter(v12) || v12.IsBetter(v12) || v12.IsBetter(other) || v12.IsBetter(plain) {
		t.Error("IsBetter")
	}
}

func TestDeviceOrdering(t *testing.T) {
	l := []DeviceInfo{
		{Name: "big", FreeMemory: 20},
		{Name: "igpu", Integrated: true, FreeMemory: 100},
		{Name: "small", FreeMemory: 10},
	}
	sort.Sort(sort.Reverse(ByFreeMemory(l)))
	var names []string
	for _, d := range l {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"big", "small", "igpu"}) {
		t.Errorf("Reverse(ByFreeMemory) = %v", names)
	}

	devs := []DeviceInfo{
		{Name: "a", DeviceID: DeviceID{Library: "CUDA"}},
		{Name: "b", DeviceID: DeviceID{Library: "Vulkan"}, Integrated: true},
		{Name: "c", DeviceID: DeviceID{Library: "CUDA"}},
	}
	groups := ByLibrary(devs)
	if len(groups) != 2 || len(groups[0]) != 2 || groups[0][1].Name != "c" || groups[1][0].Name != "b" {
		t.Errorf("ByLibrary = %v", groups)
	}
	perf := ByPerformance(devs)
	if len(perf) != 2 || len(perf[0]) != 2 || perf[1][0].Name != "b" {
		t.Errorf("ByPerformance = %v", perf)
	}
}

func TestFlashAttention(t *testing.T) {
	ok := []DeviceInfo{
		{DeviceID: DeviceID{Library: "cpu"}},
		{Name: "Metal"},
		{DeviceID: DeviceID{Library: "CUDA"}, DriverMajor: 12, ComputeMajor: 8},
		{DeviceID: DeviceID{Library: "ROCm"}},
		{DeviceID: DeviceID{Library: "Vulkan"}},
	}
	if !FlashAttentionSupported(ok) || !FlashAttentionSupported(nil) {
		t.Error("supported list reported unsupported")
	}
	for _, bad := range []DeviceInfo{
		{DeviceID: DeviceID{Library: "CUDA"}, DriverMajor: 6},
		{DeviceID: DeviceID{Library: "CUDA"}, DriverMajor: 12, ComputeMajor: 7, ComputeMinor: 2},
		{DeviceID: DeviceID{Library: "SYCL"}},
	} {
		if FlashAttentionSupported(append(slices.Clone(ok), bad)) {
			t.Errorf("%+v reported supported", bad)
		}
	}
	for f, want := range map[FlashAttentionType]string{FlashAttentionAuto: "Auto", FlashAttentionDisabled: "Disabled", FlashAttentionEnabled: "Enabled", 7: "unknown"} {
		if f.String() != want || f.LogValue().String() != want {
			t.Errorf("%d: %s", f, f.String())
		}
	}
}

type testRunner struct {
	port   int
	exited bool
}

func (r testRunner) GetPort() int    { return r.port }
func (r testRunner) HasExited() bool { return r.exited }

func TestGetDevicesFromRunner(t *testing.T) {
	want := []DeviceInfo{{DeviceID: DeviceID{ID: "GPU-1", Library: "CUDA"}, Name: "CUDA0", TotalMemory: 1 << 30}}
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/info" {
			http.NotFound(w, r)
			return
		}
		calls++
		if calls == 1 {
			w.Write([]byte("not json yet")) // retried
			return
		}
		json.NewEncoder(w).Encode(want)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := GetDevicesFromRunner(ctx, testRunner{port: port})
	if err != nil || len(got) != 1 || got[0].ID != "GPU-1" || got[0].TotalMemory != 1<<30 || calls != 2 {
		t.Fatalf("got %+v, %v after %d calls", got, err, calls)
	}

	// A runner that is gone.
	srv.Close()
	if _, err := GetDevicesFromRunner(ctx, testRunner{port: port, exited: true}); err == nil || err.Error() != "runner crashed" {
		t.Errorf("exited runner: %v", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := GetDevicesFromRunner(short, testRunner{port: port}); err == nil {
		t.Error("no error after the context ended")
	}
}
