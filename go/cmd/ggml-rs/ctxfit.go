package main

import (
	"fmt"
	"math"
	"os"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/serve"
)

// maxContext bounds -ctx and -batch: a cache's cells keep int32 positions.
const maxContext = kvcache.MaxCapacity

// checkCacheFits refuses a cache the machine cannot hold, before anything
// big is allocated. It opens the model at path without allocating (fit
// mode), sizes the cache o from the model's layer shapes
// (decoder.Model.CacheSize allocates nothing, so an absurd -ctx costs
// nothing) and compares, device by device, what the device would hold —
// the cache of the layers placed there and the model's weights there, on
// the CPU also the cache's bookkeeping — with what it has free: the memory
// the system has available for the CPU, the device's own report for the
// others. ctx is the -ctx the cache was sized from, for the messages. A
// context longer than the model was trained for is allowed, as llama.cpp
// allows it, with a warning on stderr.
func checkCacheFits(path string, mf *modelFlags, o decoder.CacheOptions, ctx int) error {
	b, err := openModel(path, mf, false)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := model.New(b)
	if err != nil {
		return err
	}
	layers, host, err := m.CacheSize(o)
	if err != nil {
		return usagef("-ctx %d: %v", ctx, err)
	}
	mem := b.BackendMemory()
	devices := append([]ml.DeviceMemory{mem.CPU}, mem.GPUs...)
	cache := make([]uint64, len(devices))
	cache[0] = host
	for l, n := range layers {
		d := layerDevice(devices, l)
		cache[d] = addSat(cache[d], n)
	}
	for i, d := range devices {
		weights := sum(d.Weights)
		if i == 0 {
			weights += mem.InputWeights
		}
		have, known := freeMemory(d, i == 0)
		if !known || cache[i] == 0 || addSat(cache[i], weights) <= have {
			continue
		}
		return fmt.Errorf("-ctx %d does not fit in memory: the cache of %d tokens needs %s on %s, the model's weights %s more, and %s is free",
			ctx, o.Capacity, bytesIEC(cache[i]), d.Name, bytesIEC(weights), bytesIEC(have))
	}
	if m.Context > 0 && ctx > m.Context {
		fmt.Fprintf(os.Stderr, "ggml-rs: warning: -ctx %d is longer than the %d tokens the model was trained for\n", ctx, m.Context)
	}
	return nil
}

// layerDevice is the index in devices (the CPU first, then the GPUs) of
// the device that holds block l and so its cache: the GPU holding weights
// of the block (-cpu-moe may leave its experts on the CPU), else the CPU.
func layerDevice(devices []ml.DeviceMemory, l int) int {
	for i := 1; i < len(devices); i++ {
		if w := devices[i].Weights; l < len(w) && w[l] > 0 {
			return i
		}
	}
	return 0
}

// addSat is a+b, or math.MaxUint64 when that overflows.
func addSat(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

func sum(v []uint64) uint64 {
	var s uint64
	for _, x := range v {
		s += x
	}
	return s
}

// freeMemory is what device d has free: for the CPU the memory the system
// has available (MemAvailable), else the device's own report; known is
// false when there is no figure.
func freeMemory(d ml.DeviceMemory, cpu bool) (have uint64, known bool) {
	if cpu {
		if avail, ok := serve.MemAvailable(); ok {
			return avail, true
		}
	}
	for _, dev := range backend.Devices() {
		if dev.Name == d.Name || (d.ID != "" && dev.ID == d.ID && dev.Library == d.Library) {
			return dev.FreeMemory, dev.FreeMemory > 0
		}
	}
	return 0, false
}
