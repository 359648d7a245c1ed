// Package llama is the dense decoder-only transformer of llama.cpp's
// "llama" architecture: RMSNorm, grouped-query attention with RoPE (normal
// mode), a SwiGLU feed-forward, and a tied or separate output head. The
// same code runs "qwen3" (per-head RMS norm of queries and keys, NeoX
// RoPE) and "qwen3moe" (qwen3 with a mixture-of-experts feed-forward)
// through Variant; package qwen3 wraps it. The graph is package decoder's,
// the blocks ml/nn's.
//
// Hyperparameters and tensor names are llama.cpp's GGUF conventions.
package llama

import (
	"fmt"
	"slices"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Variant selects the architecture's differences from llama.
type Variant struct {
	Arch   string // general.architecture
	QKNorm bool   // attn_q_norm / attn_k_norm per head
	NeoX   bool   // NeoX RoPE (rotate halves) instead of adjacent pairs
	MoE    bool   // a mixture-of-experts feed-forward (qwen3moe)
}

// The supported variants.
var (
	Llama    = Variant{Arch: "llama"}
	Qwen3    = Variant{Arch: "qwen3", QKNorm: true, NeoX: true}
	Qwen3MoE = Variant{Arch: "qwen3moe", QKNorm: true, NeoX: true, MoE: true}
)

// Hyper are the model's hyperparameters.
type Hyper struct {
	Hidden, Layers, Heads, KVHeads, HeadDim, FeedForward, Context, Vocab int
	RopeDim                                                              int
	RopeBase, RopeScale, Eps                                             float32
	// MoE: experts, experts used per token, each expert's feed-forward
	// length, and whether the kept weights are normalised to sum 1.
	Experts, ExpertsUsed, ExpertFF int
	NormTopK                       bool
}

// ReadHyper reads the hyperparameters of variant v from the metadata.
func ReadHyper(c fs.Config, v Variant) (Hyper, error) {
	r := load.NewReader(c, v.Arch)
	h := Hyper{
		Hidden:      r.Need("embedding_length"),
		Layers:      r.Need("block_count"),
		Heads:       r.Need("attention.head_count"),
		Context:     r.Int("context_length", 4096),
		Vocab:       r.Vocab(),
		RopeBase:    r.Float("rope.freq_base", 10000),
		RopeScale:   r.RopeScale(),
		Eps:         r.Float("attention.layer_norm_rms_epsilon", 1e-5),
		FeedForward: r.Int("feed_forward_length", 0),
	}
	h.KVHeads = r.Int("attention.head_count_kv", h.Heads)
	h.HeadDim = r.HeadDim(h.Hidden, h.Heads)
	h.RopeDim = r.Int("rope.dimension_count", h.HeadDim)
	if v.MoE {
		h.Experts = r.Need("expert_count")
		h.ExpertsUsed = r.Need("expert_used_count")
		h.ExpertFF = r.Int("expert_feed_forward_length", 0)
		if h.ExpertFF == 0 && h.ExpertsUsed > 0 {
			h.ExpertFF = h.FeedForward / h.ExpertsUsed
		}
		h.NormTopK = r.Bool("expert_weights_norm", true)
		r.Experts(h.Experts, h.ExpertsUsed)
		r.Positive("expert_feed_forward_length", h.ExpertFF)
	} else {
		r.Positive("feed_forward_length", h.FeedForward)
	}
	r.Heads(h.Heads, h.KVHeads)
	r.RopeDim(h.RopeDim, h.HeadDim)
	return h, r.Err()
}

// New reads variant v's hyperparameters and weights from a backend opened
// on its GGUF file (the weights need not be loaded yet).
func New(b ml.Backend, v Variant) (*decoder.Model, error) {
	h, err := ReadHyper(b.Config(), v)
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, v.Arch)
	d, hd := h.Hidden, h.HeadDim
	m := decoder.New(b, v.Arch)
	m.Hidden, m.Vocab, m.Context, m.Eps = d, h.Vocab, h.Context, h.Eps
	m.TokEmb, m.OutNorm, m.Output = w.Embeddings(d, h.Vocab)

	var ropeOpts []func(*rope.Options)
	if v.NeoX {
		ropeOpts = append(ropeOpts, rope.WithTypeNeoX())
	}
	if err := w.Blocks(h.Layers, "attn_norm.weight"); err != nil {
		return nil, err
	}
	for i := 0; i < h.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		// Llama 3.1's frequency factors (rope_freqs.weight, one per rotated
		// pair, dividing each pair's frequency): the backend gives each
		// layer its copy, on the layer's device.
		layerRope := ropeOpts
		if f := w.OptAs(load.F32, p+"rope_freqs.weight", h.RopeDim/2); f != nil {
			layerRope = append(slices.Clip(ropeOpts), rope.WithFactors(f))
		}
		a := &nn.Attention{
			Q:       nn.Linear{Weight: w.Get(p+"attn_q.weight", d, hd*h.Heads)},
			K:       nn.Linear{Weight: w.Get(p+"attn_k.weight", d, hd*h.KVHeads)},
			V:       nn.Linear{Weight: w.Get(p+"attn_v.weight", d, hd*h.KVHeads)},
			Output:  nn.Linear{Weight: w.Get(p+"attn_output.weight", hd*h.Heads, d)},
			Heads:   h.Heads,
			KVHeads: h.KVHeads,
			HeadDim: hd,
			NormEps: h.Eps,
			RoPE:    nn.RoPE{Dim: h.RopeDim, Base: h.RopeBase, Scale: h.RopeScale, Options: layerRope},
		}
		if v.QKNorm {
			a.QNorm = w.GetAs(load.F32, p+"attn_q_norm.weight", hd)
			a.KNorm = w.GetAs(load.F32, p+"attn_k_norm.weight", hd)
		}
		var ffn decoder.FFN
		if v.MoE {
			ffn = &nn.MoE{
				Router:      nn.Linear{Weight: w.Get(p+"ffn_gate_inp.weight", d, h.Experts)},
				Gate:        w.Get(p+"ffn_gate_exps.weight", d, h.ExpertFF, h.Experts),
				Up:          w.Get(p+"ffn_up_exps.weight", d, h.ExpertFF, h.Experts),
				Down:        w.Get(p+"ffn_down_exps.weight", h.ExpertFF, d, h.Experts),
				Experts:     h.Experts,
				Used:        h.ExpertsUsed,
				Gating:      nn.GatingSoftmax,
				NormWeights: h.NormTopK,
			}
		} else {
			ffn = &nn.FFN{
				Gate: w.Get(p+"ffn_gate.weight", d, h.FeedForward),
				Up:   w.Get(p+"ffn_up.weight", d, h.FeedForward),
				Down: w.Get(p+"ffn_down.weight", h.FeedForward, d),
			}
		}
		m.Blocks = append(m.Blocks, decoder.Block{
			AttnNorm: w.GetAs(load.F32, p+"attn_norm.weight", d),
			Mixer:    a,
			FFNNorm:  w.GetAs(load.F32, p+"ffn_norm.weight", d),
			FFN:      ffn,
			Cache:    kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads},
		})
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
