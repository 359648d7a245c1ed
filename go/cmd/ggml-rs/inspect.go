package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"ggmlrs/gguf"
	"ggmlrs/ml"
	"ggmlrs/ml/backend"
)

func runInspect(args []string) error {
	fs := newFlags("inspect", "[flags] MODEL",
		"Prints a GGUF model's architecture, key/values, and tensor table with the placement the\n"+
			"backend would choose (flags as for embed), and the memory each device would need.\n"+
			"Nothing is allocated: the backend only sizes the weights.")
	all := fs.Bool("all", false, "print arrays in full (default: the first few values)")
	mf := addModelFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("inspect takes one model, got %d arguments", len(pos))
	}
	path := pos[0]
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	b, err := openModel(path, mf, false)
	if err != nil {
		return err
	}
	defer b.Close()

	w := os.Stdout
	cfg := b.Config()
	fmt.Fprintf(w, "model         %s (%s)\n", path, bytesIEC(uint64(st.Size())))
	fmt.Fprintf(w, "architecture  %s\n", cfg.Architecture())
	if n := cfg.String("general.name"); n != "" {
		fmt.Fprintf(w, "name          %s\n", n)
	}
	fmt.Fprintf(w, "attention     flash attention %s (-flash-attention %s)\n", onOff(b.FlashAttention() == ml.FlashAttentionEnabled), *mf.flash)

	fmt.Fprintf(w, "\nkey/values (%d)\n", cfg.Len())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for k := range cfg.Keys() {
		v := cfg.Value(k)
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", k, gguf.TypeName(v), formatValue(v, *all))
	}
	tw.Flush()

	weights := b.WeightPlacements()
	fmt.Fprintf(w, "\ntensors (%d, placed as the backend would place them)\n", len(weights))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  name\ttype\tshape\tsize\tlayer\tdevice\tbuffer")
	for _, p := range weights {
		layer := fmt.Sprint(p.Layer)
		switch {
		case p.Layer < 0:
			layer = "input"
		case p.Layer == blocksOf(b):
			layer = "output"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%s\t%s\t%s\t%s\n", p.Name, p.Type, p.Shape, bytesIEC(p.Bytes), layer, p.DeviceName, p.BufferType)
	}
	tw.Flush()

	printMemory(w, b.BackendMemory())
	return nil
}

// blocksOf is the model's repeating-layer count (the output layer's index).
func blocksOf(b *backend.Backend) int {
	return int(b.Config().Uint("block_count"))
}

// formatValue prints a metadata value, arrays cut to a few values unless all.
func formatValue(v any, all bool) string {
	const show = 8
	switch a := v.(type) {
	case string:
		return fmt.Sprintf("%q", clip(a, 120))
	case []string:
		return formatArray(len(a), show, all, func(i int) string { return fmt.Sprintf("%q", a[i]) })
	case []int32:
		return formatArray(len(a), show, all, func(i int) string { return fmt.Sprint(a[i]) })
	case []uint32:
		return formatArray(len(a), show, all, func(i int) string { return fmt.Sprint(a[i]) })
	case []float32:
		return formatArray(len(a), show, all, func(i int) string { return fmt.Sprint(a[i]) })
	case []uint8:
		return formatArray(len(a), show, all, func(i int) string { return fmt.Sprint(a[i]) })
	}
	return fmt.Sprint(v)
}

func formatArray(n, show int, all bool, item func(int) string) string {
	m := n
	if !all {
		m = min(n, show)
	}
	parts := make([]string, m)
	for i := range parts {
		parts[i] = item(i)
	}
	s := "[" + strings.Join(parts, " ")
	if m < n {
		s += fmt.Sprintf(" … (%d values)", n)
	}
	return s + "]"
}

// printMemory prints what each device would hold: input weights (always
// CPU), repeating-layer and output-layer weights, caches and graph.
func printMemory(w io.Writer, m ml.BackendMemory) {
	fmt.Fprintln(w, "\nmemory per device")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  device\tinput weights\tlayer weights\toutput layer\tcache\tgraph\ttotal\t")
	row := func(d ml.DeviceMemory, input uint64) {
		var layers, output, cache uint64
		for i, v := range d.Weights {
			if i == len(d.Weights)-1 {
				output += v
			} else {
				layers += v
			}
		}
		for _, v := range d.Cache {
			cache += v
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", d.Name, bytesIEC(input), bytesIEC(layers), bytesIEC(output),
			bytesIEC(cache), bytesIEC(d.Graph), bytesIEC(input+d.Size()))
	}
	row(m.CPU, m.InputWeights)
	for _, g := range m.GPUs {
		row(g, 0)
	}
	tw.Flush()
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
