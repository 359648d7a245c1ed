// Package lfm2 is the decoder of llama.cpp's "lfm2" architecture (Liquid
// AI's LFM2), as data over the shared decoder: a hybrid of attention layers
// and gated short-convolution layers, which a per-layer
// attention.head_count_kv of 0 marks. What differs from llama is
//   - the short-convolution layers (nn.ShortConv): in_proj to b, c, x;
//     c ⊙ conv(b ⊙ x) with a depthwise causal kernel of shortconv.l_cache
//     taps over the carried state; out_proj;
//   - per-head RMS norms of queries and keys, NeoX RoPE;
//   - the output norm named token_embd_norm.weight in llama.cpp's files
//     (Ollama's model takes output_norm.weight as well);
//   - the head tied to the embeddings unless output.weight exists;
//   - with attention.sliding_window, every attention layer slides.
//
// The MoE variant (lfm2moe, LFM2-8B-A1B) differs only in its feed-forward:
// after leading_dense_block_count dense layers, experts routed by
// expert_gating_func (a sigmoid in the released files) with a selection
// bias (exp_probs_b) and the kept weights normalised to sum 1.
package lfm2

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Hyper are LFM2's hyperparameters.
type Hyper struct {
	load.Common
	// KVHeads per layer: 0 marks a short-convolution layer.
	KVHeads     []int
	FeedForward int
	ConvWidth   int // shortconv.l_cache: the kernel's taps
	Window      int // attention.sliding_window (0: none)
	RopeScale   float32

	// lfm2moe: the first DenseLead layers are dense, the rest experts.
	MoE                            bool
	DenseLead                      int
	Experts, ExpertsUsed, ExpertFF int
	Gating                         nn.Gating
}

// ReadHyper reads LFM2's hyperparameters.
func ReadHyper(b ml.Backend) (Hyper, error) {
	c := b.Config()
	r := load.NewReader(c, c.Architecture())
	h := Hyper{Common: r.Common(128000, 1e-5)}
	h.FeedForward = r.Need("feed_forward_length")
	r.Positive("feed_forward_length", h.FeedForward)
	h.ConvWidth = r.Need("shortconv.l_cache")
	if h.ConvWidth < 2 && r.Err() == nil {
		r.Fail("%s = %d must be at least 2", r.Key("shortconv.l_cache"), h.ConvWidth)
	}
	h.KVHeads = r.PerLayer("attention.head_count_kv", h.Layers, h.Heads)
	for _, kv := range h.KVHeads {
		if kv != 0 {
			r.Heads(h.Heads, kv)
		}
	}
	h.Window = r.Int("attention.sliding_window", 0)
	if h.Window < 0 {
		r.Fail("%s = %d must not be negative", r.Key("attention.sliding_window"), h.Window)
	}
	h.RopeScale = r.RopeScale()
	if h.MoE = c.Architecture() == "lfm2moe"; h.MoE {
		h.DenseLead = r.Int("leading_dense_block_count", 0)
		if h.DenseLead < 0 || h.DenseLead > h.Layers {
			r.Fail("%s = %d must be between 0 and %s = %d", r.Key("leading_dense_block_count"), h.DenseLead, r.Key("block_count"), h.Layers)
		}
		h.Experts = r.Need("expert_count")
		h.ExpertsUsed = r.Need("expert_used_count")
		r.Experts(h.Experts, h.ExpertsUsed)
		h.ExpertFF = r.Need("expert_feed_forward_length")
		r.Positive("expert_feed_forward_length", h.ExpertFF)
		// llama.cpp's enum: 1 softmax, 2 sigmoid; it requires the key.
		switch g := r.Need("expert_gating_func"); g {
		case 1:
			h.Gating = nn.GatingSoftmax
		case 2:
			h.Gating = nn.GatingSigmoid
		default:
			if r.Err() == nil {
				r.Fail("%s = %d: 1 (softmax) or 2 (sigmoid)", r.Key("expert_gating_func"), g)
			}
		}
	}
	return h, r.Err()
}

// New reads an LFM2 model from a backend opened on its GGUF file.
func New(b ml.Backend) (*decoder.Model, error) {
	h, err := ReadHyper(b)
	if err != nil {
		return nil, err
	}
	arch := b.Config().Architecture()
	w := load.NewWeights(b, arch)
	switch {
	case b.Get("token_embd_norm.weight") != nil:
		w.OutputNorm = "token_embd_norm.weight"
	case b.Get("output_norm.weight") == nil:
		return nil, fmt.Errorf("%s: the model lacks its output norm (token_embd_norm.weight, or output_norm.weight)", arch)
	}
	m, err := w.Start(h.Common)
	if err != nil {
		return nil, err
	}
	d, hd := h.Hidden, h.HeadDim
	m.Window = h.Window
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		var mixer decoder.Mixer
		var spec kvcache.LayerSpec
		if kv := h.KVHeads[i]; kv == 0 {
			mixer = &nn.ShortConv{
				InProj:  w.Get(p+"shortconv.in_proj.weight", d, 3*d),
				Conv:    w.GetAs(load.F32, p+"shortconv.conv.weight", h.ConvWidth, d),
				OutProj: w.Get(p+"shortconv.out_proj.weight", d, d),
			}
			spec = kvcache.LayerSpec{Kind: kvcache.Recurrent, ConvWidth: h.ConvWidth, ConvChannels: d}
		} else {
			a := w.Attention(p, h.Common, kv, hd*h.Heads)
			a.QNorm, a.KNorm = w.QKNorm(p, hd)
			a.RoPE = nn.RoPE{Dim: h.RopeDim, Base: h.RopeBase, Scale: h.RopeScale, Options: []func(*rope.Options){rope.WithTypeNeoX()}}
			mixer = a
			spec = kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: kv}
			if h.Window > 0 {
				spec.Kind = kvcache.SlidingWindow
				a.KeysBeforeValues = true
			}
		}
		var ffn decoder.FFN
		if h.MoE && i >= h.DenseLead {
			ffn = &nn.MoE{
				Router:        nn.Linear{Weight: w.Get(p+"ffn_gate_inp.weight", d, h.Experts)},
				Gate:          w.Get(p+"ffn_gate_exps.weight", d, h.ExpertFF, h.Experts),
				Up:            w.Get(p+"ffn_up_exps.weight", d, h.ExpertFF, h.Experts),
				Down:          w.Get(p+"ffn_down_exps.weight", h.ExpertFF, d, h.Experts),
				SelectionBias: w.GetAs(load.F32, p+"exp_probs_b.bias", h.Experts),
				Experts:       h.Experts,
				Used:          h.ExpertsUsed,
				Gating:        h.Gating,
				NormWeights:   true,
			}
		} else {
			ffn = w.FFN(p, d, h.FeedForward)
		}
		m.Blocks = append(m.Blocks, decoder.Block{
			AttnNorm: w.Norm(p+"attn_norm.weight", d),
			Mixer:    mixer,
			FFNNorm:  w.Norm(p+"ffn_norm.weight", d),
			FFN:      ffn,
			Cache:    spec,
		})
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
