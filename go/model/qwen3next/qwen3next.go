// Package qwen3next is the hybrid architectures of the Qwen3-Next family:
// llama.cpp's "qwen3next", "qwen35" (Qwen3.5, dense) and "qwen35moe"
// (Qwen3.5-MoE). Their layers alternate gated delta-net linear attention
// (recurrent) with gated full attention (every full_attention_interval-th
// layer), each followed by a feed-forward network: a mixture of experts
// with a gated shared expert (qwen3next, qwen35moe) or a dense SwiGLU
// (qwen35). Qwen3.5 rotates positions with interleaved multi-section RoPE
// and keeps its value heads tiled; Qwen3-Next uses NeoX RoPE and grouped
// value heads.
//
// Both converters' GGUF layouts load: llama.cpp's (scalar
// attention.head_count_kv, full_attention_interval or
// attention.recurrent_layers, rope.dimension_sections of 4, ssm_dt.bias,
// MTP blocks counted in block_count with nextn_predict_layers) and
// Ollama's (a per-layer head_count_kv array whose zeros mark recurrent
// layers, sections of 3 or under mrope_sections, ssm_dt, no MTP layers in
// block_count but stray mtp.* tensors, a Qwen3-Next model tagged qwen35moe
// without rope sections, known by its ssm_ba or ssm_in tensors). The MTP
// (nextn) blocks are read by the MTP draft model, not here.
package qwen3next

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Hyper are the hyperparameters of the family.
type Hyper struct {
	load.Common
	KVHeads   int
	Recurrent []bool // per main layer
	Sections  []int  // multi-section RoPE (qwen35*), nil for NeoX
	RopeScale float32

	FeedForward                    int // dense FFN (qwen35)
	Experts, ExpertsUsed, ExpertFF int
	SharedFF                       int
	NormTopK                       bool
	ConvKernel, Inner, StateSize   int // ssm.conv_kernel, ssm.inner_size, ssm.state_size
	VHeads, KHeads                 int // ssm.time_step_rank, ssm.group_count
	VLayout                        ml.HeadLayout
	MoE                            bool
}

// ReadHyper reads the hyperparameters of a model of the family.
func ReadHyper(b ml.Backend) (Hyper, error) {
	c := b.Config()
	arch := c.Architecture()
	if arch != "qwen3next" && arch != "qwen35" && arch != "qwen35moe" {
		return Hyper{}, fmt.Errorf("qwen3next: the model's architecture is %q (qwen3next, qwen35 or qwen35moe)", arch)
	}
	r := load.NewReader(c, arch)
	h := Hyper{Common: r.Common(4096, 1e-6)}
	h.RopeScale = r.RopeScale()
	h.FeedForward = r.Int("feed_forward_length", 0)
	h.ConvKernel = r.Need("ssm.conv_kernel")
	h.Inner = r.Need("ssm.inner_size")
	h.StateSize = r.Need("ssm.state_size")
	h.VHeads = r.Need("ssm.time_step_rank")
	h.KHeads = r.Need("ssm.group_count")
	if h.Layers <= 0 {
		return h, r.Err()
	}
	all := h.Layers + h.NextN

	// Which layers are recurrent: attention.recurrent_layers; else
	// Ollama's per-layer head_count_kv array (0: recurrent); else every
	// full_attention_interval-th layer is attention (default 4).
	kv := r.PerLayer("attention.head_count_kv", all, h.Heads)
	h.Recurrent = make([]bool, h.Layers)
	switch {
	case r.Has("attention.recurrent_layers"):
		rec := r.PerLayer("attention.recurrent_layers", all, 0)
		for i := range h.Recurrent {
			h.Recurrent[i] = rec[i] != 0
		}
	case isArray(c.Value(r.Key("attention.head_count_kv"))):
		for i := range h.Recurrent {
			h.Recurrent[i] = kv[i] == 0
		}
	default:
		n := r.Int("full_attention_interval", 4)
		if n <= 0 {
			r.Fail("%s must be positive", r.Key("full_attention_interval"))
			n = 4
		}
		for i := range h.Recurrent {
			h.Recurrent[i] = (i+1)%n != 0
		}
	}
	for i, rec := range h.Recurrent {
		if rec {
			continue
		}
		if kv[i] <= 0 {
			r.Fail("%s: attention layer %d has %d key/value heads", r.Key("attention.head_count_kv"), i, kv[i])
		}
		if h.KVHeads == 0 {
			h.KVHeads = kv[i]
		}
		if kv[i] != h.KVHeads {
			r.Fail("%s: attention layer %d has %d key/value heads, another %d", r.Key("attention.head_count_kv"), i, kv[i], h.KVHeads)
		}
	}
	if h.KVHeads == 0 {
		h.KVHeads = h.Heads // no attention layers
	}
	r.Heads(h.Heads, h.KVHeads)

	// A Qwen3-Next model: the arch says so (llama.cpp), or its delta-net
	// has Qwen3-Next's merged beta/alpha or legacy QKVZ projection, whatever
	// the arch says (Ollama's converter tags Qwen3-Next qwen35moe, with no
	// rope sections and no ssm.v_head_reordered).
	next := arch == "qwen3next" || hasAny(b, "ssm_ba.weight", "ssm_in.weight")

	// RoPE: Qwen3.5 interleaves sections (rope.dimension_sections, or
	// Ollama's 3-entry arrays and aliases); Qwen3-Next is NeoX.
	if !next {
		h.Sections = r.Sections(h.RopeDim)
	}
	r.DeltaNet(h.ConvKernel, h.Inner, h.StateSize, h.VHeads, h.KHeads)

	// Value heads: tiled (Qwen3.5's reordered GGUFs) or grouped (Qwen3-Next's
	// checkpoint order). An explicit key decides; else the model: grouped
	// for Qwen3-Next (not Ollama's default for a qwen35moe file), tiled for
	// Qwen3.5.
	switch {
	case r.Has("ssm.v_head_reordered"):
		h.VLayout = ml.HeadsInterleaved
		if r.Bool("ssm.v_head_reordered", false) {
			h.VLayout = ml.HeadsTiled
		}
	case next:
		h.VLayout = ml.HeadsInterleaved
	default:
		h.VLayout = ml.HeadsTiled
	}

	// Feed-forward: experts (qwen3next, qwen35moe) or dense (qwen35).
	if arch == "qwen35" {
		h.Experts = r.Int("expert_count", 0)
	} else {
		h.Experts = r.Need("expert_count")
	}
	h.MoE = h.Experts > 0
	if h.MoE {
		h.ExpertsUsed = r.Need("expert_used_count")
		r.Experts(h.Experts, h.ExpertsUsed)
		h.ExpertFF = r.ExpertFF(h.FeedForward, h.ExpertsUsed)
		h.SharedFF = r.Int("expert_shared_feed_forward_length", h.FeedForward)
		// llama.cpp always normalises; Ollama's converter may say.
		h.NormTopK = r.Bool("norm_top_k_prob", true)
	} else {
		r.Positive("feed_forward_length", h.FeedForward)
	}
	return h, r.Err()
}

func isArray(v any) bool {
	switch v.(type) {
	case []uint32, []int32, []uint64, []int64, []uint16, []int16, []uint8, []int8:
		return true
	}
	return false
}

func hasAny(b ml.Backend, suffixes ...string) bool {
	for _, s := range suffixes {
		for i := 0; i < 4; i++ {
			if b.Get(fmt.Sprintf("blk.%d.%s", i, s)) != nil {
				return true
			}
		}
	}
	return false
}

// New reads a model of the family from a backend opened on its GGUF file.
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
	d := h.Hidden
	ropeOpts, multi := ropeOptions(h)
	m.MultiPositions = multi
	dk, dv := h.StateSize, h.StateSize
	kdim, vdim := h.KHeads*dk, h.VHeads*dv
	ch := 2*kdim + vdim
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		var mixer decoder.Mixer
		var spec kvcache.LayerSpec
		if h.Recurrent[i] {
			w.Hint = "ssm.state_size, ssm.group_count, ssm.time_step_rank, ssm.conv_kernel"
			dn := &nn.DeltaNet{
				QKV:      w.Opt(p+"attn_qkv.weight", d, ch),
				Z:        w.Opt(p+"attn_gate.weight", d, vdim),
				Conv:     w.GetAs(load.F32, p+"ssm_conv1d.weight", h.ConvKernel, ch),
				A:        w.GetAs(load.F32, p+"ssm_a", h.VHeads),
				Norm:     w.GetAs(load.F32, p+"ssm_norm.weight", dv),
				Out:      w.Get(p+"ssm_out.weight", vdim, d),
				KHeads:   h.KHeads,
				VHeads:   h.VHeads,
				HeadKDim: dk,
				HeadVDim: dv,
				Heads:    h.VLayout,
				Eps:      h.Eps,
			}
			if dn.QKV == nil || dn.Z == nil {
				dn.QKV, dn.Z = nil, nil
				dn.QKVZ = w.Get(p+"ssm_in.weight", d, 2*kdim+2*vdim)
			}
			if dn.DtBias = w.OptAs(load.Bias, p+"ssm_dt.bias", h.VHeads); dn.DtBias == nil {
				dn.DtBias = w.GetAs(load.Bias, p+"ssm_dt", h.VHeads)
			}
			if dn.BetaAlpha = w.Opt(p+"ssm_ba.weight", d, 2*h.VHeads); dn.BetaAlpha == nil {
				dn.Beta = w.Get(p+"ssm_beta.weight", d, h.VHeads)
				dn.Alpha = w.Get(p+"ssm_alpha.weight", d, h.VHeads)
			}
			w.Hint = ""
			mixer = dn
			spec = kvcache.LayerSpec{Kind: kvcache.Recurrent, ConvWidth: h.ConvKernel, ConvChannels: ch,
				StateSize: dv, StateHeads: h.VHeads}
		} else {
			mixer, spec = attention(w, p, h, ropeOpts)
		}
		m.Blocks = append(m.Blocks, block(w, p, h, mixer, spec))
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// block is layer p's pre-norm block around mixer: attention norm, post-
// attention norm and the layer's feed-forward.
func block(w *load.Weights, p string, h Hyper, mixer decoder.Mixer, spec kvcache.LayerSpec) decoder.Block {
	return decoder.Block{
		AttnNorm: w.Norm(p+"attn_norm.weight", h.Hidden),
		Mixer:    mixer,
		FFNNorm:  w.Norm(p+"post_attention_norm.weight", h.Hidden),
		FFN:      feedForward(w, p, h),
		Cache:    spec,
	}
}

// ropeOptions is the family's RoPE: interleaved multi-section for Qwen3.5
// (the model then takes 4 position rows), NeoX for Qwen3-Next.
func ropeOptions(h Hyper) (opts []func(*rope.Options), multi bool) {
	if h.Sections != nil {
		return []func(*rope.Options){rope.WithInterleaveMRoPE(h.Sections)}, true
	}
	return []func(*rope.Options){rope.WithTypeNeoX()}, false
}

// attention is a full-attention layer (prefix p): gated queries, Q/K
// norms, partial RoPE, GQA.
func attention(w *load.Weights, p string, h Hyper, ropeOpts []func(*rope.Options)) (*nn.Attention, kvcache.LayerSpec) {
	hd := h.HeadDim
	a := w.Attention(p, h.Common, h.KVHeads, 2*hd*h.Heads)
	a.QNorm, a.KNorm = w.QKNorm(p, hd)
	a.GatedQ = true
	a.RoPE = nn.RoPE{Dim: h.RopeDim, Base: h.RopeBase, Scale: h.RopeScale, Options: ropeOpts}
	return a, kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads}
}

// feedForward is a layer's (prefix p) experts with their sigmoid-gated
// shared expert, or a dense SwiGLU.
func feedForward(w *load.Weights, p string, h Hyper) decoder.FFN {
	d := h.Hidden
	var ffn decoder.FFN
	if h.MoE {
		E, eff := h.Experts, h.ExpertFF
		moe := &nn.MoE{
			Router:      nn.Linear{Weight: w.Get(p+"ffn_gate_inp.weight", d, E)},
			Down:        w.Get(p+"ffn_down_exps.weight", eff, d, E),
			Experts:     E,
			Used:        h.ExpertsUsed,
			Gating:      nn.GatingSoftmax,
			NormWeights: h.NormTopK,
		}
		if moe.GateUp = w.Opt(p+"ffn_gate_up_exps.weight", d, 2*eff, E); moe.GateUp == nil {
			moe.Gate = w.Get(p+"ffn_gate_exps.weight", d, eff, E)
			moe.Up = w.Get(p+"ffn_up_exps.weight", d, eff, E)
		}
		if up := w.Opt(p+"ffn_up_shexp.weight", d, h.SharedFF); up != nil {
			moe.Shared = &nn.FFN{
				Gate: w.Get(p+"ffn_gate_shexp.weight", d, h.SharedFF),
				Up:   up,
				Down: w.Get(p+"ffn_down_shexp.weight", h.SharedFF, d),
			}
			moe.SharedGate = w.Get(p+"ffn_gate_inp_shexp.weight", d)
		}
		ffn = moe
	} else {
		ffn = w.FFN(p, d, h.FeedForward)
	}
	return ffn
}
