// Package llama is the dense decoder-only transformer of llama.cpp's
// "llama" architecture: RMSNorm, grouped-query attention with RoPE (normal
// mode), a SwiGLU feed-forward, and a tied or separate output head. The
// same code runs "qwen2" (Qwen2/Qwen2.5: biases on the query, key and
// value projections, NeoX RoPE), "qwen3" (per-head RMS norm of queries and
// keys, NeoX RoPE), "qwen3moe" (qwen3 with a mixture-of-experts
// feed-forward) and "mistral3" (Mistral 3's text decoder: YaRN with its own
// magnitude, llama.cpp's yarn_log_multiplier, and Llama 4's attention
// temperature by position) through Variant; package qwen3 wraps two of
// them. The graph is package decoder's,
// the blocks ml/nn's.
//
// Hyperparameters and tensor names are llama.cpp's GGUF conventions.
package llama

import (
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
	Arch    string // general.architecture
	QKNorm  bool   // attn_q_norm / attn_k_norm per head
	NeoX    bool   // NeoX RoPE (rotate halves) instead of adjacent pairs
	MoE     bool   // a mixture-of-experts feed-forward (qwen3moe)
	QKVBias bool   // attn_q/k/v.bias (qwen2)
	// Mistral3: YaRN (its log multiplier), the attention temperature, an
	// optional output-projection bias.
	Mistral3 bool
}

// The supported variants.
var (
	Llama    = Variant{Arch: "llama"}
	Qwen2    = Variant{Arch: "qwen2", NeoX: true, QKVBias: true}
	Qwen3    = Variant{Arch: "qwen3", QKNorm: true, NeoX: true}
	Qwen3MoE = Variant{Arch: "qwen3moe", QKNorm: true, NeoX: true, MoE: true}
	Mistral3 = Variant{Arch: "mistral3", Mistral3: true}
)

// Hyper are the model's hyperparameters: the common ones and llama's.
type Hyper struct {
	load.Common
	KVHeads, FeedForward int
	RopeScale            float32
	// MoE: experts, experts used per token, each expert's feed-forward
	// length, and whether the kept weights are normalised to sum 1.
	Experts, ExpertsUsed, ExpertFF int
	NormTopK                       bool
	// Mistral 3: YaRN, and the attention temperature (nil: none).
	Yarn     load.Yarn
	AttnTemp *decoder.AttnTemp
}

// ReadHyper reads the hyperparameters of variant v from the metadata.
func ReadHyper(c fs.Config, v Variant) (Hyper, error) {
	r := load.NewReader(c, v.Arch)
	h := Hyper{Common: r.Common(4096, 1e-5)}
	h.RopeScale = r.RopeScale()
	h.FeedForward = r.Int("feed_forward_length", 0)
	h.KVHeads = r.KVHeads(h.Heads)
	if v.MoE {
		h.Experts = r.Need("expert_count")
		h.ExpertsUsed = r.Need("expert_used_count")
		h.NormTopK = r.Bool("expert_weights_norm", true)
		r.Experts(h.Experts, h.ExpertsUsed)
		h.ExpertFF = r.ExpertFF(h.FeedForward, h.ExpertsUsed)
	} else {
		r.Positive("feed_forward_length", h.FeedForward)
	}
	if v.Mistral3 {
		readMistral3(r, &h)
	}
	return h, r.Err()
}

// readMistral3 reads Mistral 3's YaRN and attention temperature, by
// llama.cpp's keys or, where they differ, Ollama's converter's.
func readMistral3(r *load.Reader, h *Hyper) {
	h.Yarn = r.Yarn(h.Context)
	if h.Yarn.On {
		// llama.cpp: yarn_log_multiplier (the checkpoint's mscale_all_dim);
		// Ollama's converter writes mscale and mscale_all_dim, and its
		// model takes 1/(1 + 0.1·ln f) when both are set: llama.cpp's
		// factor for mscale_all_dim 1 (its mscale is 1).
		logMul := r.Float("rope.scaling.yarn_log_multiplier", 0)
		if logMul == 0 && r.Float("rope.scaling.mscale", 0) != 0 {
			logMul = r.Float("rope.scaling.mscale_all_dim", 0)
		}
		h.Yarn = h.Yarn.WithLogMul(1/h.RopeScale, logMul)
	}
	// llama.cpp: attention.temperature_scale; Ollama's converter:
	// rope.scaling_beta (the checkpoint's llama_4_scaling_beta). The
	// positions' floor is the original context length.
	scale := r.Float("attention.temperature_scale", r.Float("rope.scaling_beta", 0))
	if scale != 0 {
		floor := r.Int("rope.scaling.original_context_length", h.Context)
		if floor <= 0 {
			r.Fail("%s = %d must be positive for the attention temperature", r.Key("rope.scaling.original_context_length"), floor)
			return
		}
		h.AttnTemp = &decoder.AttnTemp{Scale: scale, Floor: floor}
	}
}

// New reads variant v's hyperparameters and weights from a backend opened
// on its GGUF file (the weights need not be loaded yet).
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
	d, hd := h.Hidden, h.HeadDim
	m.AttnTemp = h.AttnTemp
	var ropeOpts []func(*rope.Options)
	if v.NeoX {
		ropeOpts = append(ropeOpts, rope.WithTypeNeoX())
	}
	ropeOpts = append(ropeOpts, h.Yarn.Options()...)
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		// Llama 3.1's frequency factors (rope_freqs.weight, one per rotated
		// pair, dividing each pair's frequency): the backend gives each
		// layer its copy, on the layer's device.
		layerRope := ropeOpts
		if f := w.OptAs(load.F32, p+"rope_freqs.weight", h.RopeDim/2); f != nil {
			layerRope = append(slices.Clip(ropeOpts), rope.WithFactors(f))
		}
		a := w.Attention(p, h.Common, h.KVHeads, hd*h.Heads)
		a.RoPE = nn.RoPE{Dim: h.RopeDim, Base: h.RopeBase, Scale: h.RopeScale, Options: layerRope}
		if v.QKNorm {
			a.QNorm, a.KNorm = w.QKNorm(p, hd)
		}
		if v.QKVBias {
			w.QKVBias(p, a)
		}
		if v.Mistral3 {
			a.TempScaled = h.AttnTemp != nil
			a.Output.Bias = w.OptAs(load.F32, p+"attn_output.bias", d)
		}
		var ffn decoder.FFN
		if !v.MoE {
			ffn = w.FFN(p, d, h.FeedForward)
		} else {
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
		}
		m.Blocks = append(m.Blocks, decoder.Block{
			AttnNorm: w.Norm(p+"attn_norm.weight", d),
			Mixer:    a,
			FFNNorm:  w.Norm(p+"ffn_norm.weight", d),
			FFN:      ffn,
			Cache:    kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads},
		})
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
