// Package llama is the dense decoder-only transformer of llama.cpp's
// "llama" architecture over the ggmlrs/ml API: RMSNorm, grouped-query
// attention with RoPE (normal mode), a SwiGLU feed-forward, and a tied or
// separate output head. The same code runs "qwen3" (per-head RMS norm of
// queries and keys, NeoX RoPE) through Variant; package qwen3 wraps it.
//
// Hyperparameters and tensor names are llama.cpp's GGUF conventions.
package llama

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"ggmlrs/fs"
	"ggmlrs/kvcache"
	"ggmlrs/ml"
	"ggmlrs/ml/nn/rope"
)

// Variant selects the architecture's differences from llama.
type Variant struct {
	Arch   string // general.architecture
	QKNorm bool   // attn_q_norm / attn_k_norm per head
	NeoX   bool   // NeoX RoPE (rotate halves) instead of adjacent pairs
}

// Llama and Qwen3 are the supported variants.
var (
	Llama = Variant{Arch: "llama"}
	Qwen3 = Variant{Arch: "qwen3", QKNorm: true, NeoX: true}
)

// Hyper are the model's hyperparameters.
type Hyper struct {
	Hidden, Layers, Heads, KVHeads, HeadDim, FeedForward, Context, Vocab int
	RopeDim                                                              int
	RopeBase, RopeScale, Eps                                             float32
}

// Model is a loaded decoder.
type Model struct {
	Hyper
	Variant
	b ml.Backend

	tokEmb, outNorm, output, ropeFactors ml.Tensor
	layers                               []layer

	// NoGraphReuse rebuilds every decode step's graph (for tests and
	// comparisons); by default a one-token step whose cache window is
	// unchanged recomputes the previous step's graph with new inputs, as
	// llama.cpp does, saving the graph build (~7% of a small model's step).
	NoGraphReuse bool

	// mu guards last and makes compute+read of one Forward atomic: Forward
	// may run concurrently on other caches.
	mu   sync.Mutex
	last *stepGraph
}

// stepGraph is a computed one-token graph kept for the next step.
type stepGraph struct {
	ctx      ml.Context
	cache    *kvcache.Causal
	window   kvcache.Window
	tok, pos ml.Tensor
	out      ml.Tensor
}

// ReleaseGraph frees the graph kept for the next decode step (Generate
// does this when it ends; callers of Forward do it when they are done).
func (m *Model) ReleaseGraph() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropGraph()
}

// dropGraph closes the kept graph; m.mu must be held.
func (m *Model) dropGraph() {
	if m.last != nil {
		m.last.ctx.Close()
		m.last = nil
	}
}

// reuse computes a one-token step on the previous step's graph, if the
// cache allows it; ok is false when a new graph is needed.
func (m *Model) reuse(cache *kvcache.Causal, token int32) (logits [][]float32, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.last
	if m.NoGraphReuse || g == nil || g.cache != cache || !cache.ReuseForward(g.window, 1) {
		return nil, false, nil
	}
	defer func() {
		if p := recover(); p != nil {
			m.dropGraph()
			err = fmt.Errorf("%s: %v", m.Arch, p)
		}
	}()
	g.tok.FromInts([]int32{token})
	g.pos.FromInts(cache.Positions())
	g.ctx.Compute(g.out)
	cache.Commit()
	return [][]float32{g.out.Floats()}, true, nil
}

type layer struct {
	attnNorm, q, k, v, o, qNorm, kNorm ml.Tensor
	ffnNorm, gate, up, down            ml.Tensor
}

// ReadHyper reads the hyperparameters of variant v from the metadata.
func ReadHyper(c fs.Config, v Variant) (Hyper, error) {
	if a := c.Architecture(); a != v.Arch {
		return Hyper{}, fmt.Errorf("%s: the model's architecture is %q", v.Arch, a)
	}
	h := Hyper{
		Hidden:      int(c.Uint("embedding_length")),
		Layers:      int(c.Uint("block_count")),
		Heads:       int(c.Uint("attention.head_count")),
		FeedForward: int(c.Uint("feed_forward_length")),
		Context:     int(c.Uint("context_length", 4096)),
		Vocab:       len(c.Strings("tokenizer.ggml.tokens")),
		RopeBase:    c.Float("rope.freq_base", 10000),
		RopeScale:   1,
		Eps:         c.Float("attention.layer_norm_rms_epsilon", 1e-5),
	}
	if h.Vocab == 0 {
		h.Vocab = int(c.Uint("vocab_size"))
	}
	for _, x := range []struct {
		key string
		n   int
	}{{"embedding_length", h.Hidden}, {"block_count", h.Layers}, {"attention.head_count", h.Heads},
		{"feed_forward_length", h.FeedForward}, {"tokenizer.ggml.tokens", h.Vocab}} {
		if x.n <= 0 {
			return h, fmt.Errorf("%s: the model's metadata lacks %s (or it is zero)", v.Arch, x.key)
		}
	}
	h.KVHeads = int(c.Uint("attention.head_count_kv", uint32(h.Heads)))
	if h.KVHeads <= 0 || h.Heads%h.KVHeads != 0 {
		return h, fmt.Errorf("%s: %d heads are not a multiple of %d key/value heads", v.Arch, h.Heads, h.KVHeads)
	}
	h.HeadDim = int(c.Uint("attention.key_length", uint32(h.Hidden/h.Heads)))
	if vl := int(c.Uint("attention.value_length", uint32(h.HeadDim))); vl != h.HeadDim {
		return h, fmt.Errorf("%s: key length %d differs from value length %d", v.Arch, h.HeadDim, vl)
	}
	h.RopeDim = int(c.Uint("rope.dimension_count", uint32(h.HeadDim)))
	if f := c.Float("rope.scaling.factor", 0); f > 0 && c.String("rope.scaling.type", "linear") == "linear" {
		h.RopeScale = 1 / f
	}
	return h, nil
}

// New reads variant v's hyperparameters and weights from a backend opened
// on its GGUF file (the weights need not be loaded yet).
func New(b ml.Backend, v Variant) (*Model, error) {
	h, err := ReadHyper(b.Config(), v)
	if err != nil {
		return nil, err
	}
	m := &Model{Hyper: h, Variant: v, b: b}
	var missing []string
	get := func(name string, shape ...int) ml.Tensor {
		t := b.Get(name)
		if t == nil {
			missing = append(missing, name)
			return nil
		}
		if got := t.Shape(); !slices.Equal(got, shape) && err == nil {
			err = fmt.Errorf("%s: tensor %s has shape %v, the metadata implies %v", v.Arch, name, got, shape)
		}
		return t
	}
	d, ff, hd := h.Hidden, h.FeedForward, h.HeadDim
	m.tokEmb = get("token_embd.weight", d, h.Vocab)
	m.outNorm = get("output_norm.weight", d)
	if b.Get("output.weight") != nil {
		m.output = get("output.weight", d, h.Vocab)
	} else {
		m.output = m.tokEmb // tied
	}
	m.ropeFactors = b.Get("rope_freqs.weight")
	for i := 0; i < h.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		l := layer{
			attnNorm: get(p+"attn_norm.weight", d),
			q:        get(p+"attn_q.weight", d, hd*h.Heads),
			k:        get(p+"attn_k.weight", d, hd*h.KVHeads),
			v:        get(p+"attn_v.weight", d, hd*h.KVHeads),
			o:        get(p+"attn_output.weight", hd*h.Heads, d),
			ffnNorm:  get(p+"ffn_norm.weight", d),
			gate:     get(p+"ffn_gate.weight", d, ff),
			up:       get(p+"ffn_up.weight", d, ff),
			down:     get(p+"ffn_down.weight", ff, d),
		}
		if v.QKNorm {
			l.qNorm = get(p+"attn_q_norm.weight", hd)
			l.kNorm = get(p+"attn_k_norm.weight", hd)
		}
		m.layers = append(m.layers, l)
	}
	if len(missing) > 0 {
		if len(missing) > 4 {
			missing = append(missing[:4], "…")
		}
		return nil, fmt.Errorf("%s: the model lacks tensors: %v", v.Arch, missing)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Backend is the model's backend.
func (m *Model) Backend() ml.Backend { return m.b }

// NewCache makes a KV cache for up to n tokens.
func (m *Model) NewCache(n int) *kvcache.Causal { return kvcache.New(m.b, m.Layers, n) }

type roper interface {
	RoPE(ctx ml.Context, positions ml.Tensor, ropeDim int, ropeBase, ropeScale float32, options ...func(*rope.Options)) ml.Tensor
}

// Forward runs tokens (which follow those in cache) through the model,
// storing their keys and values in cache, and returns the logits of every
// token (allLogits) or of the last only: a row of Vocab values each.
func (m *Model) Forward(cache *kvcache.Causal, tokens []int32, allLogits bool) (logits [][]float32, err error) {
	n := len(tokens)
	if n == 0 {
		return nil, errors.New(m.Arch + ": empty batch")
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= m.Vocab {
			return nil, fmt.Errorf("%s: token id %d is outside the %d-token vocabulary", m.Arch, id, m.Vocab)
		}
	}
	if n == 1 && !allLogits {
		if out, ok, err := m.reuse(cache, tokens[0]); ok || err != nil {
			return out, err
		}
	}
	ctx := m.b.NewContext()
	keep := false
	defer func() {
		if !keep {
			ctx.Close()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = fmt.Errorf("%s: %w", m.Arch, e)
			} else {
				err = fmt.Errorf("%s: %v", m.Arch, p)
			}
		}
	}()
	ctx.SetBatchSize(n)
	if err := cache.StartForward(ctx, n); err != nil {
		return nil, err
	}
	in := ctx.Input()
	window := cache.Window()
	pos := in.FromInts(cache.Positions(), n)

	var ropeOpts []func(*rope.Options)
	if m.NeoX {
		ropeOpts = append(ropeOpts, rope.WithTypeNeoX())
	}
	if m.ropeFactors != nil {
		ropeOpts = append(ropeOpts, rope.WithFactors(m.ropeFactors))
	}
	hd, heads, kvh := m.HeadDim, m.Heads, m.KVHeads
	scale := 1 / math.Sqrt(float64(hd))

	tok := in.FromInts(tokens, n)
	x := m.tokEmb.Rows(ctx, tok)
	var last ml.Tensor // the row to keep for the logits, when only the last is wanted
	if !allLogits && n > 1 {
		last = in.FromInts([]int32{int32(n - 1)}, 1)
	}
	for i, l := range m.layers {
		h := x.RMSNorm(ctx, l.attnNorm, m.Eps)
		q := l.q.Mulmat(ctx, h).Reshape(ctx, hd, heads, n)
		k := l.k.Mulmat(ctx, h).Reshape(ctx, hd, kvh, n)
		v := l.v.Mulmat(ctx, h).Reshape(ctx, hd, kvh, n)
		if m.QKNorm {
			q = q.RMSNorm(ctx, l.qNorm, m.Eps)
			k = k.RMSNorm(ctx, l.kNorm, m.Eps)
		}
		q = q.(roper).RoPE(ctx, pos, m.RopeDim, m.RopeBase, m.RopeScale, ropeOpts...)
		k = k.(roper).RoPE(ctx, pos, m.RopeDim, m.RopeBase, m.RopeScale, ropeOpts...)
		cache.Put(ctx, i, k, v)
		kc, vc, mask := cache.Get(ctx, i)
		a := q.(ml.ScaledDotProductAttention).ScaledDotProductAttention(ctx, kc, vc, mask, nil, nil, scale, true)
		attn := l.o.Mulmat(ctx, a.Reshape(ctx, hd*heads, n))
		if last != nil && i == len(m.layers)-1 {
			// Only the last token's logits are wanted: the last layer's
			// feed-forward (most of its weights) runs on that row alone,
			// as llama.cpp does (a tenth of a prefill's matmul work here).
			attn, x = attn.Rows(ctx, last), x.Rows(ctx, last)
		}
		x = x.Add(ctx, attn)

		h = x.RMSNorm(ctx, l.ffnNorm, m.Eps)
		f := l.gate.Mulmat(ctx, h).SILU(ctx, l.up.Mulmat(ctx, h))
		x = x.Add(ctx, l.down.Mulmat(ctx, f))
	}
	rows := n
	if last != nil {
		rows = 1
	}
	out := m.output.Mulmat(ctx, x.RMSNorm(ctx, m.outNorm, m.Eps))
	ctx.Forward(out)
	// Outputs live in the backend's shared compute buffers until its next
	// compute: compute and read under the model's lock, so that concurrent
	// Forwards (on other caches) cannot overwrite them in between.
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx.Compute(out)
	cache.Commit()
	all := out.Floats()
	if n == 1 && !allLogits && !m.NoGraphReuse {
		m.dropGraph()
		m.last = &stepGraph{ctx: ctx, cache: cache, window: window, tok: tok, pos: pos, out: out}
		keep = true
	}
	logits = make([][]float32, rows)
	for r := range logits {
		logits[r] = all[r*m.Vocab : (r+1)*m.Vocab]
	}
	return logits, nil
}
