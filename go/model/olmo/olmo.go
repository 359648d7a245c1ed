// Package olmo is the decoder of llama.cpp's "olmo2" architecture (AI2's
// OLMo 2, and OLMo 3, which llama.cpp's converter also writes as olmo2)
// and of Ollama's converter's "olmo3", as data over the shared decoder.
// What differs from llama is
//   - post-norm blocks: no norm before the attention or the feed-forward,
//     each branch's output RMS-normed before its residual
//     (post_attention_norm, post_ffw_norm);
//   - RMS norms of the whole query and key projections (attn_q_norm over
//     n_embd, attn_k_norm over the KV heads' width) before the heads are
//     split; NeoX RoPE over the whole head (n_embd/n_head);
//   - with attention.sliding_window (OLMo 3), sliding-window layers: three
//     in every four (attention.sliding_window_pattern: another n, or a
//     per-layer bool array as Ollama's converter writes), whose RoPE is
//     plain (rope.freq_base_swa, else rope.freq_base; no scaling, no
//     YaRN), while the global layers take rope.scaling (YaRN for OLMo 3).
package olmo

import (
	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Hyper are OLMo's hyperparameters.
type Hyper struct {
	load.Common
	KVHeads, FeedForward   int
	RopeScale, RopeBaseSWA float32
	Yarn                   load.Yarn
	// Window is the sliding window (0: every layer global); SWA marks the
	// sliding-window layers.
	Window int
	SWA    []bool
}

// ReadHyper reads the hyperparameters of an OLMo model whose
// general.architecture is arch (olmo2 or olmo3).
func ReadHyper(c fs.Config, arch string) (Hyper, error) {
	r := load.NewReader(c, arch)
	h := Hyper{Common: r.Common(4096, 1e-6)}
	h.FeedForward = r.Need("feed_forward_length")
	r.Positive("feed_forward_length", h.FeedForward)
	h.KVHeads = r.KVHeads(h.Heads)
	h.RopeScale = r.RopeScale()
	h.Yarn = r.Yarn(h.Context)
	h.RopeBaseSWA = r.Float("rope.freq_base_swa", h.RopeBase)
	if h.Heads > 0 && h.HeadDim*h.Heads != h.Hidden {
		// llama.cpp sizes the heads n_embd/n_head and asserts the rest.
		r.Fail("%s = %d must be %s / %s = %d", r.Key("attention.key_length"), h.HeadDim,
			r.Key("embedding_length"), r.Key("attention.head_count"), h.Hidden/h.Heads)
	}
	if h.RopeDim != h.HeadDim {
		r.Fail("%s = %d must be the head size %d", r.Key("rope.dimension_count"), h.RopeDim, h.HeadDim)
	}
	h.Window = r.Int("attention.sliding_window", 0)
	if h.Window < 0 {
		r.Fail("%s = %d must not be negative", r.Key("attention.sliding_window"), h.Window)
	}
	h.SWA = make([]bool, h.Layers)
	if h.Window > 0 {
		h.SWA = r.SWA(h.Layers, 4)
	}
	return h, r.Err()
}

// New reads an OLMo model from a backend opened on its GGUF file.
func New(b ml.Backend) (*decoder.Model, error) {
	arch := b.Config().Architecture()
	h, err := ReadHyper(b.Config(), arch)
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, arch)
	m, err := w.StartProbing(h.Common, "post_attention_norm.weight")
	if err != nil {
		return nil, err
	}
	d, hd := h.Hidden, h.HeadDim
	m.Window = h.Window
	swaModel := h.Window > 0
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		spec := kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads}
		ropeOpts := append([]func(*rope.Options){rope.WithTypeNeoX()}, h.Yarn.Options()...)
		ro := nn.RoPE{Dim: hd, Base: h.RopeBase, Scale: h.RopeScale, Options: ropeOpts}
		if h.SWA[i] {
			spec.Kind = kvcache.SlidingWindow
			ro = nn.RoPE{Dim: hd, Base: h.RopeBaseSWA, Scale: 1, Options: []func(*rope.Options){rope.WithTypeNeoX()}}
		}
		a := w.Attention(p, h.Common, h.KVHeads, hd*h.Heads)
		a.QNorm = w.Norm(p+"attn_q_norm.weight", hd*h.Heads)
		a.KNorm = w.Norm(p+"attn_k_norm.weight", hd*h.KVHeads)
		a.QKNormWhole = true
		a.RoPE = ro
		a.KeysBeforeValues = swaModel
		m.Blocks = append(m.Blocks, decoder.Block{
			Mixer:        a,
			AttnPostNorm: w.Norm(p+"post_attention_norm.weight", d),
			FFN:          w.FFN(p, d, h.FeedForward),
			FFNPostNorm:  w.Norm(p+"post_ffw_norm.weight", d),
			Cache:        spec,
		})
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
