// Command ggml-rs-demo is `make demo` (it was `make run`'s main job before
// the runner existed). Through the Ollama-style ml API only, it
//
//  1. lists the devices ggml-rs sees;
//  2. builds one transformer block (RMSNorm, grouped-query attention with
//     NeoX RoPE and a causal mask, SwiGLU MLP, residuals) from seeded random
//     weights;
//  3. computes it with the softmax attention path and with flash attention
//     (a backend per path), checks each against a float64 reference written
//     in plain Go, and prints timings.
//
// It exits with status 1 if either path is off by more than the tolerance.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

// config is the block's geometry.
type config struct {
	dModel, heads, kvHeads, headDim, seq, dFF int
	eps, ropeBase                             float64
}

// tolerance bounds the max abs difference from the float64 reference. The
// outputs are O(1); float32 arithmetic over these sizes is off by ~1e-6, so
// any real mistake (a wrong rotation, a missed mask, a swapped head) shows
// up orders of magnitude above it. Flash attention takes the F32 keys and
// values as F16, as llama.cpp does, whose rounding (2^-11 relative) puts
// its outputs up to ~2e-3 away: flashTolerance.
const (
	tolerance      = 1e-3
	flashTolerance = 1e-2
)

// param is a tensor's data (float32, ggml order) and shape.
type param struct {
	shape []int
	data  []float32
}

func (p param) f64() []float64 {
	y := make([]float64, len(p.data))
	for i, v := range p.data {
		y[i] = float64(v)
	}
	return y
}

// weights are the block's parameters plus its input and positions.
type weights struct {
	x                                 param
	attnNorm, wq, wk, wv, wo, ffnNorm param
	wGate, wUp, wDown                 param
	pos                               []int32
}

func newWeights(c config, seed int64) *weights {
	r := rand.New(rand.NewSource(seed))
	normal := func(scale float64, shape ...int) param {
		n := 1
		for _, d := range shape {
			n *= d
		}
		p := param{shape: shape, data: make([]float32, n)}
		for i := range p.data {
			p.data[i] = float32(r.NormFloat64() * scale)
		}
		return p
	}
	gain := func(n int) param {
		p := normal(0.1, n)
		for i := range p.data {
			p.data[i] += 1
		}
		return p
	}
	// A linear layer [in, out] with unit-variance outputs for unit inputs.
	linear := func(in, out int) param { return normal(1/math.Sqrt(float64(in)), in, out) }

	q, kv := c.heads*c.headDim, c.kvHeads*c.headDim
	w := &weights{
		x:        normal(1, c.dModel, c.seq),
		attnNorm: gain(c.dModel),
		wq:       linear(c.dModel, q),
		wk:       linear(c.dModel, kv),
		wv:       linear(c.dModel, kv),
		wo:       linear(q, c.dModel),
		ffnNorm:  gain(c.dModel),
		wGate:    linear(c.dModel, c.dFF),
		wUp:      linear(c.dModel, c.dFF),
		wDown:    linear(c.dFF, c.dModel),
		pos:      make([]int32, c.seq),
	}
	for i := range w.pos {
		w.pos[i] = int32(i)
	}
	return w
}

// roper is the backend tensor's RoPE (Ollama's nn.RoPE reaches it the same
// way, through an interface the ml.Tensor type does not declare).
type roper interface {
	RoPE(ctx ml.Context, positions ml.Tensor, ropeDim int, ropeBase, ropeScale float32, options ...func(*rope.Options)) ml.Tensor
}

// loaded are the weights uploaded into a backend (a long-lived context, as
// model weights would be).
type loaded struct {
	ctx                                                  ml.Context
	x, attnNorm, wq, wk, wv, wo, ffnNorm, gate, up, down ml.Tensor
	pos, mask                                            ml.Tensor
}

// load uploads w; the mask's type follows what the backend's attention
// wants (F16 for flash attention), as a KV cache would provide it.
func load(b ml.Backend, w *weights, c config) *loaded {
	ctx := b.NewContextSize(64)
	in := ctx.Input()
	t := func(p param) ml.Tensor { return in.FromFloats(p.data, p.shape...) }
	l := &loaded{
		ctx: ctx, x: t(w.x), attnNorm: t(w.attnNorm), wq: t(w.wq), wk: t(w.wk), wv: t(w.wv),
		wo: t(w.wo), ffnNorm: t(w.ffnNorm), gate: t(w.wGate), up: t(w.wUp), down: t(w.wDown),
		pos: in.FromInts(w.pos, len(w.pos)),
	}
	maskType := ml.DTypeF32
	if cc, ok := b.(ml.BackendCacheConfig); ok && cc.CacheConfig().MaskDType == ml.DTypeF16 {
		maskType = ml.DTypeF16
	}
	l.mask = causalMask(in, c.seq, maskType)
	return l
}

// causalMask is [seqK, seqQ]: 0 where key j <= query i, -inf elsewhere.
func causalMask(ctx ml.Context, n int, dtype ml.DType) ml.Tensor {
	if dtype == ml.DTypeF16 {
		const zero, negInf = 0x0000, 0xfc00 // IEEE half bit patterns
		b := make([]byte, 2*n*n)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				v := uint16(zero)
				if j > i {
					v = negInf
				}
				b[2*(i*n+j)], b[2*(i*n+j)+1] = byte(v), byte(v>>8)
			}
		}
		return ctx.FromBytes(ml.DTypeF16, b, n, n)
	}
	f := make([]float32, n*n)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			f[i*n+j] = float32(math.Inf(-1))
		}
	}
	return ctx.FromFloats(f, n, n)
}

// block builds the transformer block on the loaded weights in ctx. It
// returns the block's output and the attention output (before the output
// projection), [heads*headDim, seq].
func block(ctx ml.Context, b ml.Backend, l *loaded, c config) (out, attn ml.Tensor) {
	hd, n := c.headDim, c.seq
	var cc ml.CacheConfig
	if bc, ok := b.(ml.BackendCacheConfig); ok {
		cc = bc.CacheConfig()
	}

	// Attention.
	h := l.x.RMSNorm(ctx, l.attnNorm, float32(c.eps))
	q := l.wq.Mulmat(ctx, h).Reshape(ctx, hd, c.heads, n)
	k := l.wk.Mulmat(ctx, h).Reshape(ctx, hd, c.kvHeads, n)
	v := l.wv.Mulmat(ctx, h).Reshape(ctx, hd, c.kvHeads, n)
	q = q.(roper).RoPE(ctx, l.pos, hd, float32(c.ropeBase), 1, rope.WithTypeNeoX())
	k = k.(roper).RoPE(ctx, l.pos, hd, float32(c.ropeBase), 1, rope.WithTypeNeoX())
	if cc.PermutedV {
		// What a KV cache would store for the softmax path: [seq, hd, kvHeads].
		v = v.Permute(ctx, 1, 2, 0, 3).Contiguous(ctx)
	}
	scale := 1 / math.Sqrt(float64(hd))
	a := q.(ml.ScaledDotProductAttention).ScaledDotProductAttention(ctx, k, v, l.mask, nil, nil, scale, true)
	a = a.Reshape(ctx, c.heads*hd, n)
	x1 := l.x.Add(ctx, l.wo.Mulmat(ctx, a))

	// SwiGLU MLP.
	h2 := x1.RMSNorm(ctx, l.ffnNorm, float32(c.eps))
	m := l.gate.Mulmat(ctx, h2).SILU(ctx, l.up.Mulmat(ctx, h2))
	return x1.Add(ctx, l.down.Mulmat(ctx, m)), a
}

// result is one attention path's outcome.
type result struct {
	path            string
	upload          time.Duration
	build, compute  []time.Duration
	maxErr, attnErr float64
	tol             float64 // the bound this path is held to
	ok              bool
}

func run(path string, fa ml.FlashAttentionType, threads int, w *weights, c config, ref, refAttn []float64, runs int) (res result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: %v", path, p)
		}
	}()
	res.path = path
	b, err := ml.NewBackend("", ml.BackendParams{AllocMemory: true, NumThreads: threads, FlashAttention: fa})
	if err != nil {
		return res, err
	}
	defer b.Close()

	t0 := time.Now()
	l := load(b, w, c)
	defer l.ctx.Close()
	res.upload = time.Since(t0)

	var out, attn []float32
	for i := 0; i < runs; i++ {
		ctx := b.NewContext()
		t0 := time.Now()
		y, a := block(ctx, b, l, c)
		t1 := time.Now()
		ctx.Forward(y, a).Compute(y, a)
		t2 := time.Now()
		out, attn = y.Floats(), a.Floats()
		ctx.Close()
		res.build = append(res.build, t1.Sub(t0))
		res.compute = append(res.compute, t2.Sub(t1))
	}
	if res.maxErr, err = maxDiff(out, ref); err != nil {
		return res, fmt.Errorf("%s: block output: %v", path, err)
	}
	if res.attnErr, err = maxDiff(attn, refAttn); err != nil {
		return res, fmt.Errorf("%s: attention output: %v", path, err)
	}
	tol := tolerance
	if fa == ml.FlashAttentionEnabled {
		tol = flashTolerance
	}
	res.tol = tol
	res.ok = res.maxErr <= tol && res.attnErr <= tol
	return res, nil
}

// maxDiff is the largest |got-want| (+Inf for a NaN).
func maxDiff(got []float32, want []float64) (float64, error) {
	if len(got) != len(want) {
		return 0, fmt.Errorf("got %d values, want %d", len(got), len(want))
	}
	m := 0.0
	for i, v := range got {
		d := math.Abs(float64(v) - want[i])
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		m = math.Max(m, d)
	}
	return m, nil
}

func mean(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s / time.Duration(len(ds))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

func listDevices(threads int) {
	fmt.Println("Devices")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\ttype\tname\tlibrary\tfree / total memory\tthreads\tdescription")
	for _, d := range backend.Devices() {
		lib, th := d.Library, "-"
		if d.Type == backend.DeviceCPU {
			lib, th = "CPU", fmt.Sprint(threads)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s / %s\t%s\t%s\n", d.Index, d.Type, d.Name, lib,
			gib(d.FreeMemory), gib(d.TotalMemory), th, d.Description)
	}
	tw.Flush()
	fmt.Println()
}

func main() {
	runs := flag.Int("runs", 5, "graph builds and computes per attention path")
	threads := flag.Int("threads", 0, "CPU threads (0: the default)")
	seed := flag.Int64("seed", 1, "random seed of the weights and input")
	flag.Parse()
	if *runs < 1 {
		*runs = 1
	}
	if *threads <= 0 {
		*threads = backend.DefaultThreads()
	}

	c := config{dModel: 256, heads: 8, kvHeads: 2, headDim: 32, seq: 16, dFF: 512, eps: 1e-5, ropeBase: 10000}
	listDevices(*threads)

	fmt.Printf("Transformer block: d_model %d, %d heads (%d KV heads, GQA), head dim %d, seq %d, SwiGLU d_ff %d,\n",
		c.dModel, c.heads, c.kvHeads, c.headDim, c.seq, c.dFF)
	fmt.Printf("RMSNorm eps %g, NeoX RoPE base %g, causal mask; f32 weights, seed %d; %d threads.\n",
		c.eps, c.ropeBase, *seed, *threads)

	w := newWeights(c, *seed)
	t0 := time.Now()
	ref, refAttn := reference(w, c)
	refTime := time.Since(t0)

	paths := []struct {
		name string
		fa   ml.FlashAttentionType
	}{
		{"softmax", ml.FlashAttentionDisabled},
		{"flash attention", ml.FlashAttentionEnabled},
	}
	var results []result
	failed := false
	for _, p := range paths {
		r, err := run(p.name, p.fa, *threads, w, c, ref, refAttn, *runs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			failed = true
			continue
		}
		results = append(results, r)
		failed = failed || !r.ok
	}

	fmt.Printf("\nAgainst the float64 Go reference (max |ref| %.3f, tolerance %.0e, flash %.0e; reference took %s):\n", maxAbs(ref), tolerance, flashTolerance, ms(refTime))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "attention path\tmax|err| block\tmax|err| attn\tcheck\tupload\tbuild 1st\tbuild mean\tcompute 1st\tcompute mean\tcompute min\t")
	for _, r := range results {
		check := "PASS"
		if !r.ok {
			check = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%.2e\t%.2e\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.path, r.maxErr, r.attnErr, check, ms(r.upload),
			ms(r.build[0]), ms(mean(r.build)), ms(r.compute[0]), ms(mean(r.compute)), ms(slices.Min(r.compute)))
	}
	tw.Flush()
	fmt.Printf("(%d runs per path, each building the graph in a fresh context and computing it; upload: weights into the backend, once)\n", *runs)

	if failed {
		fmt.Println("\nFAIL")
		os.Exit(1)
	}
	fmt.Println("\nPASS")
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}
