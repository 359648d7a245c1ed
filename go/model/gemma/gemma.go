// Package gemma holds the text decoders of llama.cpp's "gemma2" and
// "gemma3" architectures (Google's Gemma 2 and Gemma 3) as data over the
// shared decoder: a Variant says what differs between the two. What
// differs from llama is
//   - the token embeddings scaled by √n_embd (a float32, as llama.cpp);
//   - "sandwich" norms: each block's attention and feed-forward outputs
//     are RMS-normed again (post_attention_norm, post_ffw_norm) before
//     their residuals;
//   - NeoX RoPE; Gemma 3 also RMS-norms each head's queries and keys;
//   - the queries scaled by 1/√key_length after RoPE (1/√(n_embd/n_head)
//     for the 27B models, as llama.cpp decides by the layer count: 46 for
//     Gemma 2, 62 for Gemma 3), the attention itself unscaled;
//   - a GeGLU feed-forward (tanh GELU);
//   - sliding-window layers (attention.sliding_window_pattern may say
//     which): Gemma 2 alternates them with global layers (even layers
//     sliding, window 4096 unless the file says otherwise), Gemma 3 has
//     five in every six; Gemma 3's sliding layers have a RoPE base of their
//     own (rope.freq_base_swa, Ollama's rope.local.freq_base; default
//     10000) and no frequency scaling, Gemma 2's the global layers' RoPE
//     unless rope.freq_base_swa is set;
//   - Gemma 2 soft-caps the attention scores (attn_logit_softcapping,
//     default 50) and always the final logits (final_logit_softcapping,
//     default 30); Gemma 3 only the logits, and only where the file says;
//   - the output head tied to the embeddings (Gemma 3: unless
//     output.weight exists).
//
// Gemma's RMSNorm multiplies by (1 + w); both converters (llama.cpp's and
// Ollama's) store w + 1 in the GGUF, so the graph multiplies plainly.
package gemma

import (
	"math"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Variant is what differs between Gemma 2 and Gemma 3.
type Variant struct {
	Arch       string
	Context    int // default context length
	SWAPattern int // default: every n-th layer global
	Window     int // default sliding window (0: none unless the file says)
	// SWAOwnRoPE: the sliding layers' RoPE has its own base (default
	// 10000) and no frequency scaling (Gemma 3).
	SWAOwnRoPE bool
	QKNorm     bool
	// AttnSoftCap: the attention scores are soft-capped
	// (attn_logit_softcapping, default 50); FinalSoftCap: the default of
	// final_logit_softcapping (0: none).
	AttnSoftCap  bool
	FinalSoftCap float32
	// Layers27B: the layer count of the 27B, whose queries are scaled by
	// 1/√(n_embd/n_head).
	Layers27B int
	// LocalBaseKey is Ollama's converter's key for the sliding layers' RoPE
	// base (llama.cpp's is rope.freq_base_swa).
	LocalBaseKey string
}

// The variants.
var (
	Gemma2 = Variant{Arch: "gemma2", Context: 8192, SWAPattern: 2, Window: 4096, AttnSoftCap: true, FinalSoftCap: 30, Layers27B: 46}
	Gemma3 = Variant{Arch: "gemma3", Context: 131072, SWAPattern: 6, SWAOwnRoPE: true, QKNorm: true, Layers27B: 62,
		LocalBaseKey: "rope.local.freq_base"}
)

// Hyper are Gemma's hyperparameters.
type Hyper struct {
	load.Common
	KVHeads                int
	FeedForward            []int // per layer (one value or an array in the file)
	RopeScale, RopeBaseSWA float32
	RopeScaleSWA           float32
	// Window is the sliding window (0: every layer global); SWA marks the
	// sliding-window layers.
	Window      int
	SWA         []bool
	QScale      float32 // the queries' scale
	AttnSoftCap float32 // attention score soft-capping, 0 for none
	SoftCap     float32 // final logit soft-capping, 0 for none
}

// ReadHyper reads variant v's hyperparameters (llama.cpp's keys, and
// Ollama's converter's where they differ).
func ReadHyper(c fs.Config, v Variant) (Hyper, error) {
	r := load.NewReader(c, v.Arch)
	h := Hyper{Common: r.Common(v.Context, 1e-6)}
	h.RopeScale = r.RopeScale()
	if !r.Has("feed_forward_length") {
		r.Fail("the model's metadata lacks %s", r.Key("feed_forward_length"))
	}
	h.FeedForward = r.PerLayer("feed_forward_length", h.Layers, 0)
	h.Window = r.Int("attention.sliding_window", v.Window)
	h.SoftCap = r.Float("final_logit_softcapping", v.FinalSoftCap)
	if v.AttnSoftCap {
		h.AttnSoftCap = r.Float("attn_logit_softcapping", 50)
	}
	h.KVHeads = r.KVHeads(h.Heads)
	if v.SWAOwnRoPE {
		h.RopeBaseSWA = r.Float("rope.freq_base_swa", r.Float(v.LocalBaseKey, 10000))
		h.RopeScaleSWA = 1
	} else {
		h.RopeBaseSWA = r.Float("rope.freq_base_swa", h.RopeBase)
		h.RopeScaleSWA = h.RopeScale
	}
	for _, ff := range h.FeedForward {
		r.Positive("feed_forward_length", ff)
	}
	if t := r.String("rope.scaling.type", ""); t == "yarn" {
		// Ollama's converter writes YaRN for some checkpoints; its
		// parameters are not read here yet, and linear scaling in their
		// place would be silently wrong.
		r.Fail("%s %q is not supported for %s yet (linear, none)", r.Key("rope.scaling.type"), t, v.Arch)
	}
	for _, sc := range []struct {
		key string
		v   float32
	}{{"final_logit_softcapping", h.SoftCap}, {"attn_logit_softcapping", h.AttnSoftCap}} {
		if sc.v < 0 || math.IsNaN(float64(sc.v)) || math.IsInf(float64(sc.v), 0) {
			r.Fail("%s = %v must be a positive number (or 0: none)", r.Key(sc.key), sc.v)
		}
	}
	if h.Window < 0 {
		r.Fail("%s = %d must not be negative", r.Key("attention.sliding_window"), h.Window)
	}
	h.SWA = make([]bool, h.Layers)
	if h.Window > 0 {
		h.SWA = r.SWA(h.Layers, v.SWAPattern)
	}
	// llama.cpp: 1/√key_length, but 1/√(n_embd/n_head) for the 27B,
	// whose query_pre_attn_scalar is that (the GGUF has no key for it).
	qs := h.HeadDim
	if h.Layers == v.Layers27B && h.Heads > 0 {
		qs = h.Hidden / h.Heads
	}
	h.QScale = 1 / float32(math.Sqrt(float64(qs)))
	return h, r.Err()
}

// New reads a Gemma text model of variant v from a backend opened on its
// GGUF file (the weights need not be loaded yet; a vision tower's tensors,
// if any, are not read).
func New(b ml.Backend, v Variant) (*decoder.Model, error) {
	h, err := ReadHyper(b.Config(), v)
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, v.Arch)
	m, err := w.Start(h.Common)
	if err != nil {
		return nil, err
	}
	m.Window, m.SoftCap = h.Window, h.SoftCap
	m.EmbedScale = float32(math.Sqrt(float64(h.Hidden)))
	for i := 0; i < h.Layers; i++ {
		bl, a, _ := Block(w, &h, v, i)
		a.QScale, a.SoftCap = h.QScale, h.AttnSoftCap
		// llama.cpp's attention over its sliding-window cache adds the keys
		// before the values (only the node order differs).
		a.KeysBeforeValues = h.Window > 0
		m.Blocks = append(m.Blocks, bl)
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// Block is layer i of a Gemma model of variant v, as the variants share it:
// sandwich-normed attention (per-head q/k norms where v has them, NeoX
// RoPE with the sliding layers' own base, the product unscaled) and a GeGLU
// feed-forward, with what the layer keeps; the attention and feed-forward
// are returned for the caller's settings.
func Block(w *load.Weights, h *Hyper, v Variant, i int) (decoder.Block, *nn.Attention, *nn.FFN) {
	p, d, hd := load.Layer(i), h.Hidden, h.HeadDim
	base, scale := h.RopeBase, h.RopeScale
	spec := kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads}
	if h.SWA[i] {
		base, scale = h.RopeBaseSWA, h.RopeScaleSWA
		spec.Kind = kvcache.SlidingWindow
	}
	a := w.Attention(p, h.Common, h.KVHeads, hd*h.Heads)
	if v.QKNorm {
		a.QNorm, a.KNorm = w.QKNorm(p, hd)
	}
	a.Scale = 1
	a.RoPE = nn.RoPE{Dim: h.RopeDim, Base: base, Scale: scale, Options: []func(*rope.Options){rope.WithTypeNeoX()}}
	ffn := w.FFN(p, d, h.FeedForward[i])
	ffn.GELU = true
	return decoder.Block{
		AttnNorm:     w.Norm(p+"attn_norm.weight", d),
		Mixer:        a,
		AttnPostNorm: w.Norm(p+"post_attention_norm.weight", d),
		FFNNorm:      w.Norm(p+"ffn_norm.weight", d),
		FFN:          ffn,
		FFNPostNorm:  w.Norm(p+"post_ffw_norm.weight", d),
		Cache:        spec,
	}, a, ffn
}
