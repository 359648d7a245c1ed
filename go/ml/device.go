package ml

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	kibiByte = 1024
	mebiByte = 1024 * kibiByte
	gibiByte = 1024 * mebiByte
)

// humanBytes formats a byte count with binary units ("1.5 GiB").
func humanBytes(n uint64) string {
	switch {
	case n >= gibiByte:
		return fmt.Sprintf("%.1f GiB", float64(n)/gibiByte)
	case n >= mebiByte:
		return fmt.Sprintf("%.1f MiB", float64(n)/mebiByte)
	case n >= kibiByte:
		return fmt.Sprintf("%.1f KiB", float64(n)/kibiByte)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// levelTrace is the level of the most verbose diagnostics (below Debug).
const levelTrace slog.Level = -8

// GPULayers is a set of layers to be allocated on a single GPU
type GPULayers struct {
	DeviceID

	// Layers is a set of layer indicies to load
	Layers []int
}

// FirstLayer returns the smallest layer index scheduled on this GPU, or MaxInt when empty.
func (g GPULayers) FirstLayer() int {
	if len(g.Layers) == 0 {
		return math.MaxInt
	}
	return slices.Min(g.Layers)
}

// String describes the assignment, e.g. "ID:GPU-1 Layers:4(0..3)". It
// sorts Layers in place.
func (g GPULayers) String() string {
	if len(g.Layers) == 0 {
		return ""
	}
	slices.Sort(g.Layers)

	first, last := g.Layers[0], g.Layers[len(g.Layers)-1]
	// Sorted, so a run without gaps spans exactly len-1.
	if last-first == len(g.Layers)-1 && !hasDuplicates(g.Layers) {
		return fmt.Sprintf("ID:%v Layers:%v(%v..%v)", g.ID, len(g.Layers), first, last)
	}
	return fmt.Sprintf("ID:%v Layers:%v%v", g.ID, len(g.Layers), g.Layers)
}

func hasDuplicates(sorted []int) bool {
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return true
		}
	}
	return false
}

// GPULayersList is a set of layer allocations across multiple GPUs
type GPULayersList []GPULayers

func (l GPULayersList) Len() int      { return len(l) }
func (l GPULayersList) Swap(i, j int) { l[i], l[j] = l[j], l[i] }

// Less orders by the first layer each GPU holds.
func (l GPULayersList) Less(i, j int) bool {
	return l[i].FirstLayer() < l[j].FirstLayer()
}

func (l GPULayersList) String() string {
	if n := l.Sum(); n > 0 {
		return fmt.Sprintf("%v%v", n, []GPULayers(l))
	}
	return fmt.Sprintf("%v", []GPULayers(l))
}

// Sum is the total number of layers assigned across all GPUs
func (l GPULayersList) Sum() int {
	n := 0
	for _, g := range l {
		n += len(g.Layers)
	}
	return n
}

// layersHash is shared by all Hash calls (not safe for concurrent use, as
// in Ollama); its seed is random per process.
var layersHash maphash.Hash

// Hash identifies this layer assignment within the process, so that a
// repeated layout can be recognised.
func (l GPULayersList) Hash() uint64 {
	layersHash.Reset()
	for _, g := range l {
		if len(g.Layers) == 0 {
			continue
		}
		layersHash.WriteString(g.ID + g.Library)
		for _, layer := range g.Layers {
			binary.Write(&layersHash, binary.NativeEndian, int64(layer))
		}
	}
	return layersHash.Sum64()
}

// ErrNoMem is the panic value of an allocation that failed. It carries
// the memory the backend tried to allocate, including the failed request.
type ErrNoMem struct {
	BackendMemory
}

func (e ErrNoMem) Error() string {
	return fmt.Sprintf("insufficient memory - required allocations: %+v", e.BackendMemory)
}

// DeviceID identifies a device.
type DeviceID struct {
	// ID is an identifier for the device for matching with system
	// management libraries. It is unique only among devices of the same
	// Library. A numeric ID refers to the device list after filtering.
	ID string `json:"id"`

	// Library identifies which library is used for the device (e.g. CUDA, ROCm, etc.)
	Library string `json:"backend,omitempty"`
}

// DeviceMemory breaks down the memory one device (CPU or GPU) needs.
type DeviceMemory struct {
	DeviceID

	// Name is the backend's label for the device; it may differ between
	// runs.
	Name string

	// Weights is the per-layer memory needed for the model weights.
	Weights []uint64

	// Cache is the per-layer memory needed for the KV cache.
	Cache []uint64

	// Graph is the size of the compute graph. It is not per-layer.
	Graph uint64
}

func sumMemory(mem []uint64) uint64 {
	var total uint64
	for _, m := range mem {
		total += m
	}
	return total
}

// Size returns the total size of the memory required by this device
func (m DeviceMemory) Size() uint64 {
	return sumMemory(m.Weights) + sumMemory(m.Cache) + m.Graph
}

func anyNonZero(mem []uint64) bool {
	for _, m := range mem {
		if m != 0 {
			return true
		}
	}
	return false
}

// LogValue lists only the parts that are not zero, the ID first.
func (m DeviceMemory) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 4)
	if anyNonZero(m.Weights) {
		attrs = append(attrs, slog.Any("Weights", m.Weights))
	}
	if anyNonZero(m.Cache) {
		attrs = append(attrs, slog.Any("Cache", m.Cache))
	}
	if m.Graph != 0 {
		attrs = append(attrs, slog.Any("Graph", m.Graph))
	}
	if len(attrs) > 0 && m.ID != "" {
		attrs = slices.Insert(attrs, 0, slog.String("ID", m.ID))
	}
	return slog.GroupValue(attrs...)
}

// BackendMemory is the memory a model needs on each device for the
// current BackendParams. Not every allocation may be known yet, but the
// most recent one (possibly the one that failed) always is.
type BackendMemory struct {
	// InputWeights are always located on the CPU and cannot be moved
	InputWeights uint64

	// CPU model components are located in system memory. This does not
	// include unified memory allocated through the GPU.
	CPU DeviceMemory

	// GPU model components are located on one or more GPUs.
	GPUs []DeviceMemory
}

func (m BackendMemory) LogValue() slog.Value {
	var attrs []slog.Attr
	if m.InputWeights != 0 {
		attrs = append(attrs, slog.Any("InputWeights", m.InputWeights))
	}
	attrs = append(attrs, slog.Any(m.CPU.Name, m.CPU))
	for _, g := range m.GPUs {
		attrs = append(attrs, slog.Any(g.Name, g))
	}
	return slog.GroupValue(attrs...)
}

// Log prints a high level summary of the memory
func (m BackendMemory) Log(level slog.Level) {
	var total uint64
	report := func(what, device string, size uint64) {
		if size == 0 {
			return
		}
		slog.Log(context.TODO(), level, what, "device", device, "size", humanBytes(size))
		total += size
	}

	for _, g := range m.GPUs {
		report("model weights", g.Name, sumMemory(g.Weights))
	}
	report("model weights", m.CPU.Name, m.InputWeights+sumMemory(m.CPU.Weights))

	for _, g := range m.GPUs {
		report("kv cache", g.Name, sumMemory(g.Cache))
	}
	report("kv cache", m.CPU.Name, sumMemory(m.CPU.Cache))

	for _, g := range m.GPUs {
		report("compute graph", g.Name, g.Graph)
	}
	report("compute graph", m.CPU.Name, m.CPU.Graph)

	if total > 0 {
		slog.Log(context.TODO(), level, "total memory", "size", humanBytes(total))
	}
}

// DeviceInfo describes a device that can run models.
type DeviceInfo struct {
	DeviceID

	// Name is the backend's label for the device; it may differ between
	// runs.
	Name string `json:"name"`

	// Description is the longer user-friendly identification of the device
	Description string `json:"description"`

	// FilterID is the unfiltered device ID, set when ID is numeric, so
	// that the device can be selected before filtering.
	FilterID string `json:"filter_id,omitempty"`

	// Integrated is set true for integrated GPUs, false for Discrete GPUs
	Integrated bool `json:"integration,omitempty"`

	// PCIID is the bus, device and domain ID of the device, for spotting
	// one device reported by several backends.
	PCIID string `json:"pci_id,omitempty"`

	// TotalMemory is the total amount of memory the device can use for loading models
	TotalMemory uint64 `json:"total_memory"`

	// FreeMemory is the amount of memory currently available on the device for loading models
	FreeMemory uint64 `json:"free_memory,omitempty"`

	// ComputeMajor is the major version of capabilities of the device
	// if unsupported by the backend, -1 will be returned
	ComputeMajor int

	// ComputeMinor is the minor version of capabilities of the device
	// if unsupported by the backend, -1 will be returned
	ComputeMinor int

	// Driver Information
	DriverMajor int `json:"driver_major,omitempty"`
	DriverMinor int `json:"driver_minor,omitempty"`

	// Where backends were loaded from
	LibraryPath []string

	// RunnerEnvOverrides holds per-device environment variables a runner
	// for this device needs (server-side state, not serialized).
	RunnerEnvOverrides map[string]string `json:"-"`
}

// SystemInfo describes the host.
type SystemInfo struct {
	// ThreadCount is the optimal number of threads to use for inference
	ThreadCount int `json:"threads,omitempty"`

	// TotalMemory is the total amount of system memory
	TotalMemory uint64 `json:"total_memory,omitempty"`

	// FreeMemory is the amount of memory currently available on the system for loading models
	FreeMemory uint64 `json:"free_memory,omitempty"`

	// FreeSwap is the amount of system swap space reported as available
	FreeSwap uint64 `json:"free_swap,omitempty"`
}

// Compute is the compute capability: "major.minor", or the gfx target
// name for ROCm (encoded in hex in major and minor).
func (d DeviceInfo) Compute() string {
	if strings.EqualFold(d.Library, "ROCm") {
		return fmt.Sprintf("gfx%x%02x", d.ComputeMajor, d.ComputeMinor)
	}
	return fmt.Sprintf("%d.%d", d.ComputeMajor, d.ComputeMinor)
}

// Driver is the driver version "major.minor".
func (d DeviceInfo) Driver() string {
	return fmt.Sprintf("%d.%d", d.DriverMajor, d.DriverMinor)
}

// MinimumMemory reports the amount of memory that should be set aside
// on the device for overhead (e.g. VRAM consumed by context structures independent
// of model allocations)
func (d DeviceInfo) MinimumMemory() uint64 {
	if d.Library == "Metal" {
		return 512 * mebiByte
	}
	return 457 * mebiByte
}

// ByFreeMemory sorts integrated GPUs first, then by ascending free memory,
// so sort.Reverse puts the largest discrete GPU first.
type ByFreeMemory []DeviceInfo

func (a ByFreeMemory) Len() int      { return len(a) }
func (a ByFreeMemory) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a ByFreeMemory) Less(i, j int) bool {
	if a[i].Integrated != a[j].Integrated {
		return a[i].Integrated
	}
	return a[i].FreeMemory < a[j].FreeMemory
}

// groupBy splits l into groups of equal key, groups in order of first
// appearance.
func groupBy[K comparable](l []DeviceInfo, key func(DeviceInfo) K) [][]DeviceInfo {
	groups := [][]DeviceInfo{}
	var keys []K
	for _, d := range l {
		k := key(d)
		if i := slices.Index(keys, k); i >= 0 {
			groups[i] = append(groups[i], d)
		} else {
			keys = append(keys, k)
			groups = append(groups, []DeviceInfo{d})
		}
	}
	return groups
}

// ByPerformance groups devices by similar speed
func ByPerformance(l []DeviceInfo) [][]DeviceInfo {
	return groupBy(l, func(d DeviceInfo) bool { return d.Integrated })
}

// ByLibrary groups devices by Library.
func ByLibrary(l []DeviceInfo) [][]DeviceInfo {
	return groupBy(l, func(d DeviceInfo) string { return d.Library })
}

// DeviceComparison is the result of DeviceInfo.Compare.
type DeviceComparison int

const (
	UniqueDevice      DeviceComparison = iota
	SameBackendDevice                  // The device is the same, and the library/backend is the same
	DuplicateDevice                    // The same physical device but different library/backend (overlapping device)
)

// Compare tells whether a and b are the same physical device (by PCI ID,
// or by DeviceID when the PCI ID is unknown) and, if so, whether they are
// reached through the same library.
func (a DeviceInfo) Compare(b DeviceInfo) DeviceComparison {
	switch {
	case a.PCIID != b.PCIID:
		return UniqueDevice
	case a.PCIID == "" && a.DeviceID != b.DeviceID:
		return UniqueDevice
	case a.Library == b.Library:
		return SameBackendDevice
	default:
		return DuplicateDevice
	}
}

// IsBetter reports, for a SameBackendDevice pair, whether b's library is
// better (a newer variant, e.g. cuda_v13 over cuda_v12) than a's.
func (a DeviceInfo) IsBetter(b DeviceInfo) bool {
	aLib := a.LibraryPath[len(a.LibraryPath)-1]
	bLib := b.LibraryPath[len(b.LibraryPath)-1]
	if aLib == bLib {
		return false
	}
	aName, aVariant, aOK := strings.Cut(aLib, "_")
	bName, bVariant, bOK := strings.Cut(bLib, "_")
	if !aOK || !bOK {
		return false
	}
	if aName != bName {
		slog.Debug("unexpected libraries", "a", aLib, "b", bLib)
		return false
	}
	// The lexicographically larger variant wins.
	return bVariant > aVariant
}

// FlashAttentionSupported reports whether every device in l can run the
// flash attention kernels.
func FlashAttentionSupported(l []DeviceInfo) bool {
	for _, d := range l {
		var ok bool
		switch {
		case d.Library == "cpu", d.Name == "Metal", d.Library == "Metal":
			ok = true
		case d.Library == "CUDA":
			ok = d.DriverMajor >= 7 && !(d.ComputeMajor == 7 && d.ComputeMinor == 2)
		case d.Library == "ROCm", d.Library == "Vulkan":
			ok = true
		}
		if !ok {
			return false
		}
	}
	return true
}

// FlashAttentionType chooses the attention kernel.
type FlashAttentionType int32

const (
	// Aligned with llama_flash_attn_type
	FlashAttentionAuto     FlashAttentionType = -1
	FlashAttentionDisabled FlashAttentionType = 0
	FlashAttentionEnabled  FlashAttentionType = 1
)

func (f FlashAttentionType) LogValue() slog.Value {
	return slog.AnyValue(f.String())
}

func (f FlashAttentionType) String() string {
	switch f {
	case FlashAttentionAuto:
		return "Auto"
	case FlashAttentionDisabled:
		return "Disabled"
	case FlashAttentionEnabled:
		return "Enabled"
	}
	return "unknown"
}

// GetDevicesEnv returns the environment a runner for the devices in l
// needs: the visible-devices variable of their library (CUDA only when
// mustFilter) and every device's RunnerEnvOverrides. When two devices set
// one variable differently, the later one wins and a warning is logged.
func GetDevicesEnv(l []DeviceInfo, mustFilter bool) map[string]string {
	if len(l) == 0 {
		return nil
	}
	env := map[string]string{}
	for _, d := range l {
		d.updateVisibleDevicesEnv(env, mustFilter)
		for k, v := range d.RunnerEnvOverrides {
			if old, ok := env[k]; ok && old != v {
				slog.Warn("conflicting device environment override", "key", k, "existing", old, "new", v, "library", d.Library, "id", d.ID)
			}
			env[k] = v
		}
	}
	return env
}

// GetVisibleDevicesEnv is Ollama v0.17.x's name for the environment a
// runner for the devices in l needs: the visible-devices variables only,
// without the devices' RunnerEnvOverrides (which GetDevicesEnv, its later
// name, adds).
func GetVisibleDevicesEnv(l []DeviceInfo, mustFilter bool) map[string]string {
	if len(l) == 0 {
		return nil
	}
	env := map[string]string{}
	for _, d := range l {
		d.updateVisibleDevicesEnv(env, mustFilter)
	}
	return env
}

// NeedsInitValidation returns true if the device in question has the potential
// to crash at inference time and requires deeper validation before we include
// it in the supported devices list.
func (d DeviceInfo) NeedsInitValidation() bool {
	// ROCm: rocBLAS crashes on unsupported devices; CUDA: the library may
	// not support the device's compute capability.
	return d.Library == "ROCm" || d.Library == "CUDA"
}

// AddInitValidation sets the variable that makes the runner initialise
// the device fully (so an unsupported GPU fails during discovery).
func (d DeviceInfo) AddInitValidation(env map[string]string) {
	env["GGML_CUDA_INIT"] = "1"
}

// PreferredLibrary returns true if this library is preferred over the other input
// library (CUDA and ROCm are preferred over Vulkan).
func (d DeviceInfo) PreferredLibrary(other DeviceInfo) bool {
	return d.Library == "CUDA" || d.Library == "ROCm"
}

// updateVisibleDevicesEnv appends d to its library's visible-devices
// variable in env.
func (d DeviceInfo) updateVisibleDevicesEnv(env map[string]string, mustFilter bool) {
	var name string
	switch d.Library {
	case "ROCm":
		// Unsupported ROCm devices can crash the runner, so always filter.
		name = "ROCR_VISIBLE_DEVICES"
		if runtime.GOOS != "linux" {
			name = "HIP_VISIBLE_DEVICES"
		}
	case "CUDA":
		// ROCm also reads the CUDA variable, which confuses mixed-vendor
		// machines, so CUDA is filtered only on request.
		if !mustFilter {
			return
		}
		name = "CUDA_VISIBLE_DEVICES"
	default:
		// Vulkan and others are selected by scheduling, not environment.
		return
	}

	id := d.ID
	if d.FilterID != "" {
		id = d.FilterID
	}
	if old, ok := env[name]; ok {
		env[name] = old + "," + id
	} else {
		env[name] = id
	}
}

// BaseRunner is a runner process as the server sees it.
type BaseRunner interface {
	// GetPort returns the localhost port number the runner is running on
	GetPort() int

	// HasExited indicates if the runner is no longer running.  This can be used during
	// bootstrap to detect if a given filtered device is incompatible and triggered an assert
	HasExited() bool
}

// RunnerDiscovery is a runner that can report devices.
type RunnerDiscovery interface {
	BaseRunner

	// GetDeviceInfos will perform a query of the underlying device libraries
	// for device identification and free VRAM information
	// During bootstrap scenarios, this routine may take seconds to complete
	GetDeviceInfos(ctx context.Context) []DeviceInfo
}

// FilteredRunnerDiscovery is a runner restricted to some devices.
type FilteredRunnerDiscovery interface {
	RunnerDiscovery

	// GetActiveDeviceIDs returns the filtered set of devices actively in
	// use by this runner for running models.  If the runner is a bootstrap runner, no devices
	// will be active yet so no device IDs are returned.
	// This routine will not query the underlying device and will return immediately
	GetActiveDeviceIDs() []DeviceID
}

// GetDevicesFromRunner asks a runner on localhost for its devices (GET
// /info), retrying every 10 ms until it answers, it exits, or ctx ends.
func GetDevicesFromRunner(ctx context.Context, runner BaseRunner) ([]DeviceInfo, error) {
	url := "http://127.0.0.1:" + strconv.Itoa(runner.GetPort()) + "/info"
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("failed to finish discovery before timeout")
		case <-tick.C:
		}

		devices, retry, err := queryDevices(ctx, url)
		if err != nil {
			return nil, err
		}
		if retry {
			if runner.HasExited() {
				return nil, fmt.Errorf("runner crashed")
			}
			continue
		}
		return devices, nil
	}
}

// queryDevices makes one /info request. retry reports a failure worth
// trying again (the runner is not up yet, or sent something unreadable).
func queryDevices(ctx context.Context, url string) (devices []DeviceInfo, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, false, fmt.Errorf("failed to create request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, true, nil
	}
	defer resp.Body.Close()

	if resp.StatusCode == http.StatusNotFound {
		return nil, false, fmt.Errorf("llamarunner free vram reporting not supported")
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		slog.Warn("failed to read response", "error", err)
		return nil, true, nil
	}
	if resp.StatusCode != http.StatusOK {
		slog.Log(ctx, levelTrace, "runner failed to discover free VRAM", "status", resp.StatusCode, "response", body)
		return nil, false, fmt.Errorf("runner error: %s", string(body))
	}
	if err := json.Unmarshal(body, &devices); err != nil {
		slog.Warn("unmarshal encode response", "error", err)
		return nil, true, nil
	}
	return devices, false, nil
}

var _ sort.Interface = ByFreeMemory(nil)
var _ sort.Interface = GPULayersList(nil)
