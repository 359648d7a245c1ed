package serve

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// errNoFit is a model refused because it would not fit in memory, with
// the figures of the check.
type errNoFit struct{ msg string }

func (e errNoFit) Error() string { return e.msg }

// checkFit compares what each device would hold of a model (its fit-mode
// memory report: weights, cache, graph) with what that device has free:
// system memory available (MemAvailable) for the CPU, the device's own
// report for the others (both already exclude the models loaded).
func checkFit(name string, mem ml.BackendMemory) error {
	devices := backend.Devices()
	free := func(d ml.DeviceMemory) (uint64, bool) {
		for _, dev := range devices {
			if dev.Name == d.Name || (d.ID != "" && dev.ID == d.ID && dev.Library == d.Library) {
				if dev.Type == backend.DeviceCPU {
					if avail, ok := availableMemory(); ok {
						return avail, true
					}
				}
				return dev.FreeMemory, dev.FreeMemory > 0
			}
		}
		return 0, false
	}
	check := func(d ml.DeviceMemory, input uint64) error {
		need := d.Size() + input
		if need == 0 {
			return nil
		}
		have, ok := free(d)
		if !ok || need <= have {
			return nil
		}
		var weights, cache uint64
		for _, w := range d.Weights {
			weights += w
		}
		for _, c := range d.Cache {
			cache += c
		}
		return errNoFit{fmt.Sprintf("model %s does not fit in memory: it needs %s on %s (weights %s, cache %s, graph %s) and %s is free; "+
			"a smaller -ctx or -parallel shrinks the cache", name, gib(need), d.Name, gib(weights+input), gib(cache), gib(d.Graph), gib(have))}
	}
	if err := check(mem.CPU, mem.InputWeights); err != nil {
		return err
	}
	for _, g := range mem.GPUs {
		if err := check(g, 0); err != nil {
			return err
		}
	}
	return nil
}

func gib(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// availableMemory is the system memory a model may take (tests make it
// small).
var availableMemory = MemAvailable

// MemAvailable is Linux's estimate of memory available to a new process
// without swapping (/proc/meminfo MemAvailable), and whether it could be read.
func MemAvailable() (uint64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
