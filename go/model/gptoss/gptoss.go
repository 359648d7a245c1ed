// Package gptoss is llama.cpp's "gpt-oss" architecture (OpenAI's
// gpt-oss; C++ class openai-moe): grouped-query attention with biases,
// per-head attention sinks and YaRN RoPE, alternating sliding-window and
// full layers, and a mixture of experts with biases and a clamped SwiGLU.
//
// It reads llama.cpp's GGUF layout (arch "gpt-oss") and Ollama's (arch
// "gptoss": attn_out, ffn_norm, attn_sinks without .weight, YaRN implied
// by rope.scaling.original_context_length, no expert_feed_forward_length).
package gptoss

import (
	"fmt"
	"math"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// The clamped SwiGLU of the experts: x = min(gate, Limit), y = clamp(up,
// ±Limit); out = x·sigmoid(Alpha·x)·(y + 1) (hard-coded in llama.cpp).
const (
	swigluAlpha = 1.702
	swigluLimit = 7.0
)

// Hyper are gpt-oss's hyperparameters.
type Hyper struct {
	load.Common
	KVHeads                        int
	Experts, ExpertsUsed, ExpertFF int
	Window                         int
	SWA                            []bool // per layer: sliding-window attention
	RopeBaseSWA, RopeScale         float32
	Yarn                           load.Yarn
}

// ReadHyper reads the hyperparameters of a gpt-oss model (either
// converter's keys).
func ReadHyper(b ml.Backend) (Hyper, error) {
	c := b.Config()
	arch := c.Architecture()
	if arch != "gpt-oss" && arch != "gptoss" {
		return Hyper{}, fmt.Errorf("gpt-oss: the model's architecture is %q", arch)
	}
	r := load.NewReader(c, arch)
	h := Hyper{Common: r.Common(4096, 1e-5)}
	h.Experts = r.Need("expert_count")
	h.ExpertsUsed = r.Need("expert_used_count")
	h.Window = r.Need("attention.sliding_window")
	h.KVHeads = r.KVHeads(h.Heads)
	h.RopeBaseSWA = r.Float("rope.freq_base_swa", h.RopeBase)
	h.ExpertFF = r.Int("expert_feed_forward_length", 0)
	if h.ExpertFF == 0 {
		// Ollama's converter writes no expert length: take the tensor's.
		if t := b.Get("blk.0.ffn_gate_exps.weight"); t != nil {
			h.ExpertFF = t.Dim(1)
		}
	}
	r.Positive("expert_feed_forward_length", h.ExpertFF)
	r.Experts(h.Experts, h.ExpertsUsed)

	h.Yarn = r.Yarn(h.Context)
	h.RopeScale = 1
	if f := r.Float("rope.scaling.factor", 0); f > 0 && (h.Yarn.On || r.String("rope.scaling.type", "") == "linear") {
		h.RopeScale = 1 / f
	}

	// Sliding-window layers: even ones unless the file says otherwise.
	h.SWA = r.SWA(h.Layers, 2)
	return h, r.Err()
}

// New reads a gpt-oss model from a backend opened on its GGUF file.
func New(b ml.Backend) (*decoder.Model, error) {
	h, err := ReadHyper(b)
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, b.Config().Architecture())
	m, err := w.Start(h.Common)
	if err != nil {
		return nil, err
	}
	m.Arch = "gpt-oss" // Ollama's converter writes gptoss
	m.Window = h.Window
	d, hd, E, ff := h.Hidden, h.HeadDim, h.Experts, h.ExpertFF

	// One of two names (llama.cpp's first, then Ollama's).
	either := func(u load.Use, a, b string, shape ...int) ml.Tensor {
		if t := w.OptAs(u, a, shape...); t != nil {
			return t
		}
		return w.GetAs(u, b, shape...)
	}
	eitherOpt := func(u load.Use, a, b string, shape ...int) ml.Tensor {
		if t := w.OptAs(u, a, shape...); t != nil {
			return t
		}
		return w.OptAs(u, b, shape...)
	}
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		opts := append([]func(*rope.Options){rope.WithTypeNeoX()}, h.Yarn.Options()...)
		base := h.RopeBase
		spec := kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads}
		if h.SWA[i] {
			base = h.RopeBaseSWA
			spec.Kind = kvcache.SlidingWindow
		}
		a := &nn.Attention{
			Q: nn.Linear{Weight: w.Get(p+"attn_q.weight", d, hd*h.Heads), Bias: w.OptAs(load.Bias, p+"attn_q.bias", hd*h.Heads)},
			K: nn.Linear{Weight: w.Get(p+"attn_k.weight", d, hd*h.KVHeads), Bias: w.OptAs(load.Bias, p+"attn_k.bias", hd*h.KVHeads)},
			V: nn.Linear{Weight: w.Get(p+"attn_v.weight", d, hd*h.KVHeads), Bias: w.OptAs(load.Bias, p+"attn_v.bias", hd*h.KVHeads)},
			Output: nn.Linear{
				Weight: either(load.Matrix, p+"attn_output.weight", p+"attn_out.weight", hd*h.Heads, d),
				Bias:   eitherOpt(load.Bias, p+"attn_output.bias", p+"attn_out.bias", d),
			},
			Sinks:   either(load.F32, p+"attn_sinks.weight", p+"attn_sinks", h.Heads),
			Heads:   h.Heads,
			KVHeads: h.KVHeads,
			HeadDim: hd,
			Scale:   1 / sqrtF(h.RopeDim),
			RoPE:    nn.RoPE{Dim: h.RopeDim, Base: base, Scale: h.RopeScale, Options: opts},
			// llama.cpp builds gpt-oss with its sliding-window attention.
			KeysBeforeValues: true,
		}
		moe := &nn.MoE{
			Router:   nn.Linear{Weight: w.Get(p+"ffn_gate_inp.weight", d, E), Bias: w.OptAs(load.Bias, p+"ffn_gate_inp.bias", E)},
			Gate:     w.Get(p+"ffn_gate_exps.weight", d, ff, E),
			Up:       w.Get(p+"ffn_up_exps.weight", d, ff, E),
			Down:     w.Get(p+"ffn_down_exps.weight", ff, d, E),
			GateBias: w.OptAs(load.F32, p+"ffn_gate_exps.bias", ff, E),
			UpBias:   w.OptAs(load.F32, p+"ffn_up_exps.bias", ff, E),
			DownBias: w.OptAs(load.F32, p+"ffn_down_exps.bias", d, E),
			Experts:  E,
			Used:     h.ExpertsUsed,
			Gating:   nn.GatingSoftmaxWeight,
			OAI:      true,
			Alpha:    swigluAlpha,
			Limit:    swigluLimit,
		}
		m.Blocks = append(m.Blocks, decoder.Block{
			AttnNorm: w.Norm(p+"attn_norm.weight", d),
			Mixer:    a,
			FFNNorm:  either(load.F32, p+"post_attention_norm.weight", p+"ffn_norm.weight", d),
			FFN:      moe,
			Cache:    spec,
		})
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func sqrtF(n int) float64 { return math.Sqrt(float64(n)) }
