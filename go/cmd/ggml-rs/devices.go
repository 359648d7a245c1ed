package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

func runDevices(args []string) error {
	fs := newFlags("devices", "", "Lists the devices ggml sees, with their free and total memory.")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("devices takes no arguments")
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\ttype\tname\tlibrary\tfree / total memory\tdescription")
	for _, d := range backend.Devices() {
		lib := d.Library
		if d.Type == backend.DeviceCPU {
			lib = fmt.Sprintf("CPU, %d threads", backend.DefaultThreads())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s / %s\t%s\n", d.Index, d.Type, d.Name, lib,
			bytesIEC(d.FreeMemory), bytesIEC(d.TotalMemory), d.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Printf("CPU features: %s\n", strings.Join(backend.CPUFeatures(), " "))
	return err
}

// bytesIEC formats a byte count with a binary unit.
func bytesIEC(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
