package backend

/*
#include <stdlib.h>
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"
	"log/slog"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// DeviceType is the kind of a ggml device.
type DeviceType int

const (
	DeviceCPU           DeviceType = 0
	DeviceGPU           DeviceType = 1
	DeviceIntegratedGPU DeviceType = 2
	DeviceAccelerator   DeviceType = 3
	DeviceMeta          DeviceType = 4
)

func (t DeviceType) String() string {
	switch t {
	case DeviceCPU:
		return "CPU"
	case DeviceGPU:
		return "GPU"
	case DeviceIntegratedGPU:
		return "IGPU"
	case DeviceAccelerator:
		return "ACCEL"
	case DeviceMeta:
		return "META"
	}
	return fmt.Sprintf("DeviceType(%d)", int(t))
}

// Device is a ggml device of any type (the CPU included).
type Device struct {
	ml.DeviceInfo
	// Index is the device's position in ggml's registry.
	Index int
	Type  DeviceType
}

// Devices lists every device ggml knows in this process, in registry
// order, with current memory. Compute capability and driver version are
// not reported by ggml-rs (ComputeMajor/Minor are -1, as ml.DeviceInfo
// documents for "unsupported").
func Devices() []Device {
	n := int(C.ggml_rs_device_count())
	devices := make([]Device, 0, n)
	var info C.ggml_rs_device_info
	var cerr C.ggml_rs_error
	for i := 0; i < n; i++ {
		if C.ggml_rs_device_get(C.size_t(i), &info, &cerr) != C.GGML_RS_OK {
			slog.Warn("ggml-rs: cannot describe device", "index", i, "error", errorFrom(&cerr))
			continue
		}
		d := Device{Index: int(info.index), Type: DeviceType(info.device_type)}
		d.Name = C.GoString(&info.name[0])
		d.Description = C.GoString(&info.description[0])
		d.PCIID = C.GoString(&info.pci_id[0])
		d.FreeMemory = uint64(info.memory_free)
		d.TotalMemory = uint64(info.memory_total)
		d.ComputeMajor, d.ComputeMinor = -1, -1
		if d.Type != DeviceCPU {
			// Ollama reports empty IDs for the CPU.
			d.ID = C.GoString(&info.id[0])
			d.Library = C.GoString(&info.library[0])
		}
		d.Integrated = d.Type == DeviceIntegratedGPU
		devices = append(devices, d)
	}
	return devices
}
