package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// modelFlags are the flags of commands that open a model.
type modelFlags struct {
	threads *int
	ngl     *int
	flash   *string
	cpuMoE  *bool
	nCPUMoE *int
	fast    *bool
}

func addModelFlags(fs *flag.FlagSet) *modelFlags {
	f := &modelFlags{
		threads: fs.Int("threads", 0, "CPU threads (0: all this process may use)"),
		ngl:     fs.Int("ngl", -1, "layers to place on the first GPU, counted from the output end (-1: all; 0: CPU only)"),
		flash:   fs.String("flash-attention", "auto", "flash attention: auto (on when every device that runs attention supports it), on or off"),
		cpuMoE:  fs.Bool("cpu-moe", false, "keep the mixture-of-experts weights (ffn_*_exps) of all layers in CPU memory"),
		nCPUMoE: fs.Int("n-cpu-moe", 0, "keep the mixture-of-experts weights (ffn_*_exps) of the first N layers in CPU memory"),
		fast:    fs.Bool("fast-kernels", false, "CPU kernels that round differently from ggml's (Q8_0, Q5_0 and Q4_1 block sums converted once; F16 weights as bf16 where the CPU has AVX-512 BF16): faster prompts, logits close to but not bit-identical with llama.cpp's"),
	}
	// llama.cpp's tools spell it -t.
	fs.IntVar(f.threads, "t", 0, "the same as -threads")
	return f
}

// cpuExpertLayers is the layers whose experts -cpu-moe or -n-cpu-moe keep
// on the CPU (none without either), for a model of blocks repeating
// layers. Like llama.cpp's --cpu-moe and --n-cpu-moe: the rest of each
// layer goes where -ngl puts it; without a GPU nothing changes.
func (f *modelFlags) cpuExpertLayers(blocks int) []int {
	n := *f.nCPUMoE
	if *f.cpuMoE {
		n = blocks
	}
	var layers []int
	for l := 0; l < min(n, blocks); l++ {
		layers = append(layers, l)
	}
	return layers
}

// cpuMoESet reports whether -cpu-moe or -n-cpu-moe asks for anything.
func (f *modelFlags) cpuMoESet() bool { return *f.cpuMoE || *f.nCPUMoE > 0 }

// check refuses flag values that make no sense, before any file is read.
func (f *modelFlags) check() error {
	switch strings.ToLower(*f.flash) {
	case "on", "true", "enabled", "off", "false", "disabled", "auto", "":
	default:
		return usagef("-flash-attention %q: auto, on or off", *f.flash)
	}
	if *f.threads < 0 || *f.threads > ml.MaxThreads {
		return usagef("-threads %d: 0 (all this process may use) to %d (ggml's limit)", *f.threads, ml.MaxThreads)
	}
	if *f.ngl < -1 {
		return usagef("-ngl %d: -1 (all layers), 0 (CPU only) or a layer count", *f.ngl)
	}
	if *f.nCPUMoE < 0 {
		return usagef("-n-cpu-moe must be 0 or more")
	}
	return nil
}

// params builds the backend parameters for the model at path, whose
// block count it reads from the file's header.
func (f *modelFlags) params(path string, alloc bool) (ml.BackendParams, error) {
	p := ml.BackendParams{AllocMemory: alloc, NumThreads: *f.threads}
	if err := f.check(); err != nil {
		return p, err
	}
	switch strings.ToLower(*f.flash) {
	case "on", "true", "enabled":
		p.FlashAttention = ml.FlashAttentionEnabled
	case "off", "false", "disabled":
		p.FlashAttention = ml.FlashAttentionDisabled
	default:
		p.FlashAttention = ml.FlashAttentionAuto
	}
	if *f.ngl == 0 {
		return p, nil
	}
	var gpu *backend.Device
	for _, d := range backend.Devices() {
		if d.Type == backend.DeviceGPU || d.Type == backend.DeviceIntegratedGPU {
			gpu = &d
			break
		}
	}
	if gpu == nil {
		if *f.ngl > 0 {
			return p, fmt.Errorf("-ngl %d: no GPU found (see ggml-rs devices)", *f.ngl)
		}
		return p, nil
	}
	blocks, err := blockCount(path)
	if err != nil {
		return p, err
	}
	n := blocks + 1 // the repeating layers and the output layer
	if *f.ngl > 0 {
		n = min(n, *f.ngl)
	}
	g := ml.GPULayers{DeviceID: gpu.DeviceID}
	for l := blocks + 1 - n; l <= blocks; l++ {
		g.Layers = append(g.Layers, l)
	}
	p.GPULayers = ml.GPULayersList{g}
	return p, nil
}

// blockCount reads {arch}.block_count from a GGUF header.
func blockCount(path string) (int, error) {
	g, err := gguf.Open(path)
	if err != nil {
		return 0, err
	}
	arch, _ := g.Get("general.architecture")
	a, _ := arch.(string)
	v, ok := g.Get(a + ".block_count")
	if n, isU32 := v.(uint32); ok && isU32 {
		return int(n), nil
	}
	return 0, fmt.Errorf("%s: no %s.block_count", path, a)
}

// openModel opens the model at path and, with alloc, loads its weights
// with a progress display on stderr.
func openModel(path string, f *modelFlags, alloc bool) (*backend.Backend, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model file %s does not exist", path)
	} else if err != nil {
		return nil, err
	}
	// A named pipe would block an open (a device reads without end): say
	// so here in the runner's words; the library refuses them too, after
	// its own non-blocking open, should the path change meanwhile.
	if err := regfile.Check(path, st.Mode()); err != nil {
		return nil, fmt.Errorf("model file %w", err)
	}
	p, err := f.params(path, alloc)
	if err != nil {
		return nil, err
	}
	var opts []backend.Option
	if f.cpuMoESet() {
		blocks, err := blockCount(path)
		if err != nil {
			return nil, err
		}
		opts = append(opts, backend.WithCPUExperts(f.cpuExpertLayers(blocks)...))
	}
	if *f.fast {
		opts = append(opts, backend.WithFastKernels())
	}
	b, err := backend.NewWithOptions(path, p, opts...)
	if err != nil {
		return nil, err
	}
	if !alloc {
		return b, nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := newProgress("loading "+filepath.Base(path), isTerminal(os.Stderr))
	if err := b.Load(ctx, bar.update); err != nil {
		bar.abort()
		b.Close()
		return nil, err
	}
	bar.done()
	return b, nil
}

// progress shows a load's progress on stderr: a redrawn bar on a terminal,
// a line every quarter otherwise.
type progress struct {
	label string
	tty   bool
	start time.Time
	last  int // last percentage (tty) or quarter (plain) shown
}

func newProgress(label string, tty bool) *progress {
	return &progress{label: label, tty: tty, start: time.Now(), last: -1}
}

const barWidth = 30

func (p *progress) update(f float32) {
	pct := int(f * 100)
	if p.tty {
		if pct == p.last {
			return
		}
		p.last = pct
		n := pct * barWidth / 100
		fmt.Fprintf(os.Stderr, "\r%s [%s%s] %3d%%", p.label, strings.Repeat("=", n), strings.Repeat(" ", barWidth-n), pct)
		return
	}
	for q := p.last + 1; q <= pct/25; q++ {
		p.last = q
		fmt.Fprintf(os.Stderr, "%s: %d%%\n", p.label, q*25)
	}
}

func (p *progress) done() {
	p.update(1)
	secs := time.Since(p.start).Seconds()
	if p.tty {
		fmt.Fprintf(os.Stderr, " %.2f s\n", secs)
		return
	}
	fmt.Fprintf(os.Stderr, "%s: done in %.2f s\n", p.label, secs)
}

func (p *progress) abort() {
	if p.tty && p.last >= 0 {
		fmt.Fprintln(os.Stderr)
	}
}
