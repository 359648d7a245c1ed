// Package gemma3 is the text decoder of llama.cpp's "gemma3" architecture
// (Google's Gemma 3), as data over the shared decoder: what differs from
// llama is
//   - the token embeddings scaled by √n_embd (a float32, as llama.cpp);
//   - "sandwich" norms: each block's attention and feed-forward outputs
//     are RMS-normed again (post_attention_norm, post_ffw_norm) before
//     their residuals;
//   - per-head RMS norms of queries and keys, NeoX RoPE;
//   - the queries scaled by 1/√key_length after RoPE (1/√(n_embd/n_head)
//     for the 62-layer 27B, as llama.cpp decides by the layer count), the
//     attention itself unscaled;
//   - a GeGLU feed-forward (tanh GELU);
//   - sliding-window layers, five in every six (the sixth global;
//     attention.sliding_window_pattern may say otherwise), whose RoPE has a
//     base of its own (rope.freq_base_swa, Ollama's rope.local.freq_base;
//     default 10000) and no frequency scaling, while the global layers take
//     rope.freq_base and rope.scaling;
//   - optional final logit soft-capping (final_logit_softcapping);
//   - the output head tied to the embeddings unless output.weight exists.
//
// Gemma's RMSNorm multiplies by (1 + w); both converters (llama.cpp's and
// Ollama's) store w + 1 in the GGUF, so the graph multiplies plainly.
package gemma3

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

// Hyper are Gemma 3's hyperparameters.
type Hyper struct {
	load.Common
	KVHeads, FeedForward   int
	RopeScale, RopeBaseSWA float32
	// Window is the sliding window (0: every layer global); SWA marks the
	// sliding-window layers.
	Window  int
	SWA     []bool
	QScale  float32 // the queries' scale
	SoftCap float32 // final logit soft-capping, 0 for none
}

// ReadHyper reads Gemma 3's hyperparameters (llama.cpp's keys, and
// Ollama's converter's where they differ).
func ReadHyper(c fs.Config) (Hyper, error) {
	const arch = "gemma3"
	r := load.NewReader(c, arch)
	h := Hyper{Common: r.Common(131072, 1e-6)}
	h.RopeScale = r.RopeScale()
	h.FeedForward = r.Need("feed_forward_length")
	h.Window = r.Int("attention.sliding_window", 0)
	h.SoftCap = r.Float("final_logit_softcapping", 0)
	h.KVHeads = r.KVHeads(h.Heads)
	h.RopeBaseSWA = r.Float("rope.freq_base_swa", r.Float("rope.local.freq_base", 10000))
	r.Positive("feed_forward_length", h.FeedForward)
	if t := r.String("rope.scaling.type", ""); t == "yarn" {
		// Ollama's converter writes YaRN for some checkpoints; its
		// parameters are not read here yet, and linear scaling in their
		// place would be silently wrong.
		r.Fail("%s %q is not supported for gemma3 yet (linear, none)", r.Key("rope.scaling.type"), t)
	}
	if h.SoftCap < 0 || math.IsNaN(float64(h.SoftCap)) || math.IsInf(float64(h.SoftCap), 0) {
		r.Fail("%s = %v must be a positive number (or 0: none)", r.Key("final_logit_softcapping"), h.SoftCap)
	}
	if h.Window < 0 {
		r.Fail("%s = %d must not be negative", r.Key("attention.sliding_window"), h.Window)
	}
	h.SWA = make([]bool, h.Layers)
	if h.Window > 0 {
		// A per-layer array, or every n-th layer global (default 6: layers
		// 5, 11, ...), as llama.cpp's set_swa_pattern.
		if _, isArray := c.Value(r.Key("attention.sliding_window_pattern")).([]bool); isArray {
			if a := r.Bools("attention.sliding_window_pattern", h.Layers); a != nil {
				h.SWA = a
			}
		} else {
			n := r.Int("attention.sliding_window_pattern", 6)
			for i := range h.SWA {
				h.SWA[i] = n == 0 || i%n < n-1
			}
		}
	}
	// llama.cpp: 1/√key_length, but 1/√(n_embd/n_head) for the 27B (62
	// layers), whose query_pre_attn_scalar is that (the GGUF has no key
	// for it).
	qs := h.HeadDim
	if h.Layers == 62 && h.Heads > 0 {
		qs = h.Hidden / h.Heads
	}
	h.QScale = 1 / float32(math.Sqrt(float64(qs)))
	return h, r.Err()
}

// New reads a Gemma 3 text model from a backend opened on its GGUF file
// (the weights need not be loaded yet; a vision tower's tensors, if any,
// are not read).
func New(b ml.Backend) (*decoder.Model, error) {
	h, err := ReadHyper(b.Config())
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, "gemma3")
	m, err := w.Start(h.Common)
	if err != nil {
		return nil, err
	}
	d, hd := h.Hidden, h.HeadDim
	m.Window, m.SoftCap = h.Window, h.SoftCap
	m.EmbedScale = float32(math.Sqrt(float64(d)))
	swaModel := h.Window > 0
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		base, scale := h.RopeBase, h.RopeScale
		spec := kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads}
		if h.SWA[i] {
			base, scale = h.RopeBaseSWA, 1
			spec.Kind = kvcache.SlidingWindow
		}
		a := w.Attention(p, h.Common, h.KVHeads, hd*h.Heads)
		a.QNorm, a.KNorm = w.QKNorm(p, hd)
		a.QScale, a.Scale = h.QScale, 1
		a.RoPE = nn.RoPE{Dim: h.RopeDim, Base: base, Scale: scale, Options: []func(*rope.Options){rope.WithTypeNeoX()}}
		// llama.cpp's attention over its sliding-window cache adds the keys
		// before the values (only the node order differs).
		a.KeysBeforeValues = swaModel
		ffn := w.FFN(p, d, h.FeedForward)
		ffn.GELU = true
		m.Blocks = append(m.Blocks, decoder.Block{
			AttnNorm:     w.Norm(p+"attn_norm.weight", d),
			Mixer:        a,
			AttnPostNorm: w.Norm(p+"post_attention_norm.weight", d),
			FFNNorm:      w.Norm(p+"ffn_norm.weight", d),
			FFN:          ffn,
			FFNPostNorm:  w.Norm(p+"post_ffw_norm.weight", d),
			Cache:        spec,
		})
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
