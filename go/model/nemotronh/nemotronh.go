// Package nemotronh is the decoder of llama.cpp's "nemotron_h"
// architecture (NVIDIA Nemotron-H, Nemotron Nano 2; Ollama reads the same
// files): a hybrid whose every layer is one of three kinds, each a single
// branch after its own RMS norm (attn_norm) with a residual:
//   - Mamba-2 (nn.Mamba2): where attention.head_count_kv and
//     feed_forward_length are both 0 for the layer;
//   - attention without RoPE (the Mamba layers carry the positions), where
//     only feed_forward_length is 0; grouped KV heads, optional biases, the
//     scale attention.scale if set;
//   - a feed-forward of ReLU² without a gate (up, relu², down; optional
//     biases) elsewhere.
//
// The Mamba-2 layers read ssm.conv_kernel, ssm.inner_size,
// ssm.state_size, ssm.time_step_rank (the heads) and ssm.group_count.
//
// In the mixture-of-experts variant (nemotron_h_moe, Nemotron 3) the
// feed-forward layers are experts of ReLU² without a gate, routed by a
// sigmoid with a selection bias (exp_probs_b; the kept weights normalised
// by expert_weights_norm and scaled by expert_weights_scale), optionally
// in a latent size (moe_latent_size: ffn_latent_down before them,
// ffn_latent_up after; Ollama's files name them ffn_latent_in and _out),
// beside a shared ReLU² expert. Its MTP block, if any, is not read.
package nemotronh

import (
	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Layer kinds.
const (
	mamba = iota
	attention
	feedForward
)

// Hyper are Nemotron-H's hyperparameters.
type Hyper struct {
	load.Common
	Kinds       []int // per layer: mamba, attention or feedForward
	KVHeads, FF []int // per layer
	AttnScale   float32

	ConvKernel, Inner, State, SSMHeads, Groups int

	// nemotron_h_moe: the experts of the feed-forward layers.
	Experts, ExpertsUsed, SharedFF, Latent int
	ExpertFF                               []int // per layer
	NormWeights                            bool
	WeightScale                            float32
}

// ReadHyper reads Nemotron-H's hyperparameters.
func ReadHyper(c fs.Config) (Hyper, error) {
	arch := c.Architecture()
	r := load.NewReader(c, arch)
	// llama.cpp reads layer_norm_epsilon, and layer_norm_rms_epsilon in
	// its place where the file has one.
	h := Hyper{Common: r.Common(8192, r.Float("attention.layer_norm_epsilon", 1e-5))}
	h.KVHeads = r.PerLayer("attention.head_count_kv", h.Layers, h.Heads)
	h.FF = r.PerLayer("feed_forward_length", h.Layers, 0)
	h.Kinds = make([]int, h.Layers)
	anyMamba := false
	for i := range h.Kinds {
		switch {
		case h.KVHeads[i] == 0 && h.FF[i] == 0:
			h.Kinds[i], anyMamba = mamba, true
		case h.FF[i] == 0:
			h.Kinds[i] = attention
			r.Heads(h.Heads, h.KVHeads[i])
		default:
			h.Kinds[i] = feedForward
		}
	}
	h.AttnScale = r.Float("attention.scale", 0)
	if arch == "nemotron_h_moe" {
		h.Experts = r.Need("expert_count")
		h.ExpertsUsed = r.Need("expert_used_count")
		r.Experts(h.Experts, h.ExpertsUsed)
		h.ExpertFF = r.PerLayer("expert_feed_forward_length", h.Layers, 0)
		for i, k := range h.Kinds {
			if k != feedForward {
				continue
			}
			if h.ExpertFF[i] == 0 && h.ExpertsUsed > 0 {
				h.ExpertFF[i] = h.FF[i] / h.ExpertsUsed // llama.cpp's fallback for older files
			}
			r.Positive("expert_feed_forward_length", h.ExpertFF[i])
		}
		h.SharedFF = r.Need("expert_shared_feed_forward_length")
		h.NormWeights = r.Bool("expert_weights_norm", false)
		h.WeightScale = r.Float("expert_weights_scale", 0)
		h.Latent = r.Int("moe_latent_size", 0)
	}
	if anyMamba {
		h.ConvKernel = r.Need("ssm.conv_kernel")
		h.Inner = r.Need("ssm.inner_size")
		h.State = r.Need("ssm.state_size")
		h.SSMHeads = r.Need("ssm.time_step_rank")
		h.Groups = r.Need("ssm.group_count")
		switch {
		case r.Err() != nil:
		case h.ConvKernel < 2:
			r.Fail("%s = %d must be at least 2", r.Key("ssm.conv_kernel"), h.ConvKernel)
		case h.Inner%h.SSMHeads != 0:
			r.Fail("%s = %d is not a multiple of %s = %d", r.Key("ssm.inner_size"), h.Inner, r.Key("ssm.time_step_rank"), h.SSMHeads)
		case h.SSMHeads%h.Groups != 0 || h.Inner%h.Groups != 0:
			r.Fail("%s = %d must divide %s = %d and %s = %d", r.Key("ssm.group_count"), h.Groups,
				r.Key("ssm.time_step_rank"), h.SSMHeads, r.Key("ssm.inner_size"), h.Inner)
		}
	}
	return h, r.Err()
}

// New reads a Nemotron-H model from a backend opened on its GGUF file (the
// weights need not be loaded yet).
func New(b ml.Backend) (*decoder.Model, error) {
	h, err := ReadHyper(b.Config())
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, b.Config().Architecture())
	m, err := w.Start(h.Common)
	if err != nil {
		return nil, err
	}
	d, hd := h.Hidden, h.HeadDim
	m.RowsAfterNorm = true // as llama.cpp's graph: its last layer computes every row
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		norm := w.Norm(p+"attn_norm.weight", d)
		bl := decoder.Block{AttnNorm: norm}
		switch h.Kinds[i] {
		case mamba:
			mx := &nn.Mamba2{Inner: h.Inner, State: h.State, Heads: h.SSMHeads, Groups: h.Groups, Eps: h.Eps}
			ch := mx.Channels()
			mx.In = w.Get(p+"ssm_in.weight", d, h.Inner+ch+h.SSMHeads)
			mx.Conv = w.GetAs(load.F32, p+"ssm_conv1d.weight", h.ConvKernel, ch)
			mx.ConvBias = w.OptAs(load.F32, p+"ssm_conv1d.bias", ch)
			mx.DtBias = w.GetAs(load.F32, p+"ssm_dt.bias", h.SSMHeads)
			mx.A = w.GetAs(load.F32, p+"ssm_a", 1, h.SSMHeads)
			mx.D = w.GetAs(load.F32, p+"ssm_d", 1, h.SSMHeads)
			mx.Norm = w.GetAs(load.F32, p+"ssm_norm.weight", h.Inner/h.Groups, h.Groups)
			mx.Out = w.Get(p+"ssm_out.weight", h.Inner, d)
			bl.Mixer = mx
			bl.Cache = kvcache.LayerSpec{Kind: kvcache.Recurrent, ConvWidth: h.ConvKernel, ConvChannels: ch,
				StateSize: h.State, StateRows: h.Inner / h.SSMHeads, StateHeads: h.SSMHeads}
		case attention:
			a := w.Attention(p, h.Common, h.KVHeads[i], hd*h.Heads)
			a.NoRoPE = true
			a.Scale = float64(h.AttnScale)
			a.Q.Bias = w.OptAs(load.F32, p+"attn_q.bias", hd*h.Heads)
			a.K.Bias = w.OptAs(load.F32, p+"attn_k.bias", hd*h.KVHeads[i])
			a.V.Bias = w.OptAs(load.F32, p+"attn_v.bias", hd*h.KVHeads[i])
			a.Output.Bias = w.OptAs(load.F32, p+"attn_output.bias", d)
			bl.Mixer = a
			bl.Cache = kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads[i]}
		default:
			ff := h.FF[i]
			bl.AttnNorm, bl.FFNNorm = nil, norm
			if h.Experts > 0 {
				bl.FFN = experts(w, p, h, h.ExpertFF[i])
				break
			}
			bl.FFN = &nn.FFN{
				Up:          w.Get(p+"ffn_up.weight", d, ff),
				Down:        w.Get(p+"ffn_down.weight", ff, d),
				UpBias:      w.OptAs(load.F32, p+"ffn_up.bias", ff),
				DownBias:    w.OptAs(load.F32, p+"ffn_down.bias", d),
				ReLUSquared: true,
			}
		}
		m.Blocks = append(m.Blocks, bl)
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// experts is layer p's mixture of experts (nemotron_h_moe), of width ff.
func experts(w *load.Weights, p string, h Hyper, ff int) *nn.MoE {
	d, e := h.Hidden, h.Hidden
	m := &nn.MoE{
		Router:        nn.Linear{Weight: w.Get(p+"ffn_gate_inp.weight", d, h.Experts)},
		Experts:       h.Experts,
		Used:          h.ExpertsUsed,
		Gating:        nn.GatingSigmoid,
		SelectionBias: w.GetAs(load.F32, p+"exp_probs_b.bias", h.Experts),
		NormWeights:   h.NormWeights,
		WeightScale:   h.WeightScale,
		ReLUSquared:   true,
		Shared: &nn.FFN{
			Up:          w.Get(p+"ffn_up_shexp.weight", d, h.SharedFF),
			Down:        w.Get(p+"ffn_down_shexp.weight", h.SharedFF, d),
			ReLUSquared: true,
		},
	}
	if h.Latent > 0 {
		e = h.Latent
		out := "ffn_latent_up.weight"
		if m.LatentIn = w.Opt(p+"ffn_latent_down.weight", d, e); m.LatentIn == nil {
			// Ollama's names.
			m.LatentIn, out = w.Get(p+"ffn_latent_in.weight", d, e), "ffn_latent_out.weight"
		}
		m.LatentOut = w.Get(p+out, e, d)
	}
	m.Up = w.Get(p+"ffn_up_exps.weight", e, ff, h.Experts)
	m.Down = w.Get(p+"ffn_down_exps.weight", ff, e, h.Experts)
	return m
}
