package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

func runInspect(args []string) error {
	fs := newFlags("inspect", "[flags] MODEL",
		"Prints a GGUF model's architecture, key/values, and tensor table with the placement the\n"+
			"backend would choose (flags as for embed), and the memory each device would need.\n"+
			"For a decoder: each layer's kind (attention, sliding-window attention or recurrent) and\n"+
			"feed-forward (dense, or experts), and the KV and recurrent cache of -ctx tokens and\n"+
			"-parallel sequences on each device. Nothing is allocated: the backend only sizes.")
	all := fs.Bool("all", false, "print arrays in full (default: the first few values)")
	ctxSize := fs.Int("ctx", 4096, "size the cache of a decoder for this many tokens, all sequences together (llama.cpp's n_ctx)")
	parallel := fs.Int("parallel", 1, "size the cache for this many sequences at once (llama.cpp's n_seq_max)")
	mf := addModelFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("inspect takes one model, got %d arguments", len(pos))
	}
	if *ctxSize < 1 || *parallel < 1 {
		return usagef("-ctx and -parallel must be positive")
	}
	if *ctxSize > maxContext {
		return usagef("-ctx %d: 1 to %d tokens", *ctxSize, maxContext)
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

	// A decoder the runner can run: read its layers (from the weights'
	// shapes; nothing is loaded) for their kinds and feed-forwards.
	var dec *decoder.Model
	if slices.Contains(model.Architectures(), cfg.Architecture()) {
		if dec, err = model.New(b); err != nil {
			fmt.Fprintf(w, "layers        cannot read the model's layers: %v\n", err)
			dec = nil
		} else {
			printLayerSummary(w, dec)
		}
	}

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

	if dec != nil {
		printLayers(w, dec, weights)
		// The cache, made on this sizing-only backend: its tensors live
		// in the layers' contexts, so BackendMemory counts them as each
		// layer's Cache on that layer's device, as kvcache.New on a real
		// backend would allocate them.
		cache, err := dec.NewCache(decoder.CacheOptions{Capacity: *ctxSize, Sequences: *parallel})
		if err != nil {
			return err
		}
		defer cache.Close()
		printCache(w, dec, b.BackendMemory(), *ctxSize, *parallel)
	}
	printMemory(w, b.BackendMemory())
	return nil
}

// printLayerSummary prints the decoder's layer kinds and its experts.
func printLayerSummary(w io.Writer, m *decoder.Model) {
	var order []string
	count := map[string]int{}
	kinds := map[kvcache.Kind]int{}
	for _, bl := range m.Blocks {
		name := bl.Cache.Kind.String()
		if a, ok := bl.Mixer.(*nn.Attention); ok && a.SharedKV {
			name = "attention over an earlier layer's cache" // Gemma 3n's last layers
		} else if bl.Cache.Kind == kvcache.None {
			name = "feed-forward only" // a layer that keeps nothing (Nemotron-H's)
		}
		if count[name] == 0 {
			order = append(order, name)
		}
		count[name]++
		kinds[bl.Cache.Kind]++
	}
	var parts []string
	for _, name := range order {
		parts = append(parts, fmt.Sprintf("%d %s", count[name], name))
	}
	fmt.Fprintf(w, "layers        %d: %s", len(m.Blocks), strings.Join(parts, ", "))
	if m.Window > 0 && kinds[kvcache.SlidingWindow] > 0 {
		fmt.Fprintf(w, " (window %d)", m.Window)
	}
	if m.Window > 0 && kinds[kvcache.Chunked] > 0 {
		fmt.Fprintf(w, " (chunks of %d)", m.Window)
	}
	fmt.Fprintln(w)
	for _, bl := range m.Blocks {
		if moe, ok := bl.FFN.(*nn.MoE); ok {
			fmt.Fprintf(w, "experts       %s\n", describeFFN(moe))
			break
		}
	}
}

// describeFFN says what a block's feed-forward is: "dense (ff N)" or
// "N experts, K used per token (ff F)" and its shared experts (always
// used; one FFN of their total width in the files).
func describeFFN(f decoder.FFN) string {
	switch f := f.(type) {
	case nil:
		return "none"
	case *nn.FFN:
		return fmt.Sprintf("dense (ff %d)", f.Up.Dim(1))
	case *nn.MoE:
		s := fmt.Sprintf("%d experts, %d used per token (ff %d)", f.Experts, f.Used, f.Down.Dim(0))
		if f.Shared != nil {
			s += fmt.Sprintf(", shared experts (ff %d in all)", f.Shared.Up.Dim(1))
		}
		return s
	}
	return fmt.Sprintf("%T", f)
}

// printLayers prints each layer's kind, feed-forward and the devices of
// its weights (the experts' apart: -cpu-moe keeps them on the CPU).
func printLayers(w io.Writer, m *decoder.Model, weights []backend.WeightPlacement) {
	devices := make([][]string, len(m.Blocks))
	experts := make([][]string, len(m.Blocks))
	for _, p := range weights {
		if p.Layer < 0 || p.Layer >= len(m.Blocks) {
			continue
		}
		list := &devices[p.Layer]
		if isExpert(p.Name) {
			list = &experts[p.Layer]
		}
		if !slices.Contains(*list, p.DeviceName) {
			*list = append(*list, p.DeviceName)
		}
	}
	fmt.Fprintf(w, "\nlayers (%d)\n", len(m.Blocks))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  layer\tkind\tfeed-forward\tdevice\texperts on")
	for i, bl := range m.Blocks {
		exp := strings.Join(experts[i], ",")
		if exp == "" {
			exp = "-"
		}
		kind := bl.Cache.Kind.String()
		if a, ok := bl.Mixer.(*nn.Attention); ok && a.SharedKV {
			kind = fmt.Sprintf("attention over layer %d's cache", a.KVLayer)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", i, kind, describeFFN(bl.FFN), strings.Join(devices[i], ","), exp)
	}
	tw.Flush()
}

// isExpert is ggml-rs's rule for the tensors -cpu-moe keeps on the CPU: a
// name part ffn_*_exps.
func isExpert(name string) bool {
	for _, part := range strings.Split(name, ".") {
		if strings.HasPrefix(part, "ffn_") && strings.HasSuffix(part, "_exps") {
			return true
		}
	}
	return false
}

// printCache prints the cache memory per device, split into attention
// layers' keys and values and recurrent layers' states, from the memory
// report of a backend holding only the model's cache.
func printCache(w io.Writer, m *decoder.Model, mem ml.BackendMemory, ctx, parallel int) {
	fmt.Fprintf(w, "\ncache for -ctx %d -parallel %d (keys and values f16, recurrent states f32)\n", ctx, parallel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  device\tkeys and values\trecurrent states\ttotal\tbytes\t")
	row := func(d ml.DeviceMemory) {
		var kv, rec uint64
		for l, v := range d.Cache {
			if l < len(m.Blocks) && m.Blocks[l].Cache.Kind == kvcache.Recurrent {
				rec += v
			} else {
				kv += v
			}
		}
		if kv+rec == 0 {
			return
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t\n", d.Name, bytesIEC(kv), bytesIEC(rec), bytesIEC(kv+rec), kv+rec)
	}
	row(mem.CPU)
	for _, g := range mem.GPUs {
		row(g)
	}
	tw.Flush()
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
