// Package deepseek2 is the decoder of llama.cpp's "deepseek2" architecture
// (DeepSeek-V2, V2-Lite, V3; GLM-4.7-Flash, Kimi, GigaChat 3) and of
// Ollama's "glm4moelite" (the same model in its converter's layout). What
// differs from llama is
//   - multi-head latent attention (nn.MLA): low-rank queries (or attn_q
//     in the lite models), a compressed KV of kv_lora_rank values and one
//     shared rotary key, absorbed so that the cache keeps one latent
//     head whose values are its keys' first kv_lora_rank elements;
//   - normal (GPT-J) RoPE on the last rope.dimension_count values of
//     each head, with YaRN whose magnitude scales the attention too
//     (rope.scaling.yarn_log_multiplier, written times 0.1);
//   - leading_dense_block_count dense layers, then routed experts
//     (softmax or sigmoid by expert_gating_func, a selection bias where
//     exp_probs_b exists, the kept weights normalised by
//     expert_weights_norm and scaled by expert_weights_scale) beside
//     always-on shared experts.
//
// The keys that differ between the layouts: llama.cpp's files give the
// cached head (kv_lora_rank + rope; kv_lora_rank) as
// attention.key_length and value_length, one KV head, and the per-head
// sizes as key_length_mla and value_length_mla; Ollama's glm4moelite
// files swap the two pairs and give every head. Files of llama.cpp's
// converter before MLA caching (no *_mla keys) hold attn_kv_b whole and
// run as multi-head attention.
package deepseek2

import (
	"math"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Hyper are DeepSeek 2's hyperparameters.
type Hyper struct {
	load.Common
	QRank, KVRank     int // 0 QRank: queries by attn_q (lite models)
	NopeDim, ValueDim int // per head; the key is NopeDim + RopeDim
	Absorbed          bool

	FeedForward, DenseLead int
	Experts, ExpertsUsed   int
	ExpertFF               []int // per layer
	SharedExperts          int
	Gating                 nn.Gating
	NormWeights            bool
	WeightScale            float32
	RopeScale, KQScale     float32
	Yarn                   load.Yarn
}

// ReadHyper reads DeepSeek 2's hyperparameters.
func ReadHyper(c fs.Config) (Hyper, error) {
	arch := c.Architecture()
	r := load.NewReader(c, arch)
	h := Hyper{Common: r.Sizes(163840, 1e-6)}
	h.QRank = r.Int("attention.q_lora_rank", 0)
	h.KVRank = r.Need("attention.kv_lora_rank")
	r.Positive("attention.kv_lora_rank", h.KVRank)
	if h.QRank < 0 {
		r.Fail("%s = %d must not be negative", r.Key("attention.q_lora_rank"), h.QRank)
	}
	h.RopeDim = r.Need("rope.dimension_count")
	// The per-head sizes, and the cached head's where the latent is cached.
	head, value, cacheKey, cacheValue := "attention.key_length_mla", "attention.value_length_mla", "attention.key_length", "attention.value_length"
	if arch == "glm4moelite" {
		head, value, cacheKey, cacheValue = cacheKey, cacheValue, head, value
	}
	h.Absorbed = arch == "glm4moelite" || r.Has(head) && r.Has(value)
	if !h.Absorbed {
		head, value = cacheKey, cacheValue
	}
	h.HeadDim, h.ValueDim = r.Need(head), r.Need(value)
	r.Positive(head, h.HeadDim)
	r.Positive(value, h.ValueDim)
	r.RopeDim(h.RopeDim, h.HeadDim)
	if h.NopeDim = h.HeadDim - h.RopeDim; h.NopeDim < 1 && r.Err() == nil {
		r.Fail("%s = %d leaves no values without RoPE beside %s = %d", r.Key(head), h.HeadDim, r.Key("rope.dimension_count"), h.RopeDim)
	}
	if h.Absorbed {
		if k, v := r.Int(cacheKey, h.KVRank+h.RopeDim), r.Int(cacheValue, h.KVRank); r.Err() == nil && (k != h.KVRank+h.RopeDim || v != h.KVRank) {
			r.Fail("%s = %d and %s = %d must be kv_lora_rank + rope = %d and kv_lora_rank = %d",
				r.Key(cacheKey), k, r.Key(cacheValue), v, h.KVRank+h.RopeDim, h.KVRank)
		}
		if kv := r.Int("attention.head_count_kv", 1); kv != 1 && arch != "glm4moelite" {
			r.Fail("%s = %d: a latent cache has one head", r.Key("attention.head_count_kv"), kv)
		}
	}
	if r.Float("attention.temperature_scale", 0) != 0 {
		r.Fail("%s (Mistral Large 3's attention temperature) is not supported", r.Key("attention.temperature_scale"))
	}

	h.FeedForward = r.Int("feed_forward_length", 0)
	h.DenseLead = r.Int("leading_dense_block_count", 0)
	if h.DenseLead < 0 || h.DenseLead > h.Layers {
		r.Fail("%s = %d must be between 0 and the %d layers", r.Key("leading_dense_block_count"), h.DenseLead, h.Layers)
	}
	if h.DenseLead > 0 {
		r.Positive("feed_forward_length", h.FeedForward)
	}
	if h.DenseLead < h.Layers {
		h.Experts = r.Need("expert_count")
		h.ExpertsUsed = r.Need("expert_used_count")
		r.Experts(h.Experts, h.ExpertsUsed)
		h.ExpertFF = r.PerLayer("expert_feed_forward_length", h.Layers, 0)
		for i := h.DenseLead; i < h.Layers && i < len(h.ExpertFF); i++ {
			r.Positive("expert_feed_forward_length", h.ExpertFF[i])
		}
		h.SharedExperts = r.Int("expert_shared_count", 0)
		if h.SharedExperts < 0 {
			r.Fail("%s = %d must not be negative", r.Key("expert_shared_count"), h.SharedExperts)
		}
		if g := r.Int("expert_group_count", 0); g > 1 {
			r.Fail("%s = %d: group-limited routing (DeepSeek-V3's) is not supported", r.Key("expert_group_count"), g)
		}
		h.NormWeights = r.Bool("expert_weights_norm", false)
		h.WeightScale = r.Float("expert_weights_scale", 0)
		// llama.cpp's enum: 1 softmax, 2 sigmoid; files without the key
		// are DeepSeek V2's (softmax) or GLM-4.7-Flash's (sigmoid: 47
		// layers and its vocabulary), as llama.cpp guesses.
		switch g := r.Int("expert_gating_func", 0); g {
		case 1:
			h.Gating = nn.GatingSoftmax
		case 2:
			h.Gating = nn.GatingSigmoid
		case 0:
			h.Gating = nn.GatingSoftmax
			if (h.Layers == 47 || h.Layers == 48) && h.Vocab == 154880 {
				h.Gating = nn.GatingSigmoid
			}
		default:
			r.Fail("%s = %d: 1 (softmax) or 2 (sigmoid)", r.Key("expert_gating_func"), g)
		}
	}
	h.RopeScale = r.RopeScale()
	h.Yarn = r.Yarn(h.Context)
	h.KQScale = kqScale(&h, r.Float("rope.scaling.yarn_log_multiplier", 0)/0.1)
	return h, r.Err()
}

// kqScale sets h.Yarn's attention factor and returns the scale of the
// query·key products, as llama.cpp's context and deepseek2 graph compute
// them in float32 (logMul is the checkpoint's mscale_all_dim): the YaRN
// magnitude mscale = 1 + 0.1·logMul·ln(factor) scales the products by
// mscale², and the rotation's own magnitude is cancelled.
func kqScale(h *Hyper, logMul float32) float32 {
	ln := func(x float32) float32 { return float32(math.Log(float64(x))) }
	factor := 1 / h.RopeScale
	attn := h.Yarn.AttnFactor
	if h.Yarn.On && logMul != 0 && factor > 1 {
		// get_mscale(f, logMul)/get_mscale(f, logMul) = 1, then the
		// cancelled magnitude of ggml's YaRN.
		attn = 1 / (1 + 0.1*ln(factor)) * h.Yarn.AttnFactor
		h.Yarn.AttnFactor = attn
	}
	orig := attn * (1 + 0.1*ln(1/h.RopeScale))
	mscale := orig * (1 + 0.1*logMul*ln(1/h.RopeScale))
	return 1 * mscale * mscale / float32(math.Sqrt(float64(h.HeadDim)))
}

// New reads a DeepSeek 2 model from a backend opened on its GGUF file.
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
	d := h.Hidden
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		a, spec := attention(w, p, &h)
		var ffn decoder.FFN
		if i < h.DenseLead {
			ffn = w.FFN(p, d, h.FeedForward)
		} else {
			ff := h.ExpertFF[i]
			moe := &nn.MoE{
				Router:        nn.Linear{Weight: w.Get(p+"ffn_gate_inp.weight", d, h.Experts)},
				Gate:          w.Get(p+"ffn_gate_exps.weight", d, ff, h.Experts),
				Up:            w.Get(p+"ffn_up_exps.weight", d, ff, h.Experts),
				Down:          w.Get(p+"ffn_down_exps.weight", ff, d, h.Experts),
				SelectionBias: w.OptAs(load.F32, p+"exp_probs_b.bias", h.Experts),
				Experts:       h.Experts,
				Used:          h.ExpertsUsed,
				Gating:        h.Gating,
				NormWeights:   h.NormWeights,
				WeightScale:   h.WeightScale,
			}
			if h.SharedExperts > 0 {
				moe.Shared = &nn.FFN{
					Gate: w.Get(p+"ffn_gate_shexp.weight", d, ff*h.SharedExperts),
					Up:   w.Get(p+"ffn_up_shexp.weight", d, ff*h.SharedExperts),
					Down: w.Get(p+"ffn_down_shexp.weight", ff*h.SharedExperts, d),
				}
			}
			ffn = moe
		}
		m.Blocks = append(m.Blocks, decoder.Block{
			AttnNorm: w.Norm(p+"attn_norm.weight", d),
			Mixer:    a,
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

// attention is layer p's latent attention and what its cache keeps.
func attention(w *load.Weights, p string, h *Hyper) (*nn.MLA, kvcache.LayerSpec) {
	d, heads, hk := h.Hidden, h.Heads, h.HeadDim
	a := &nn.MLA{
		Heads:    heads,
		NopeDim:  h.NopeDim,
		RopeDim:  h.RopeDim,
		KVRank:   h.KVRank,
		ValueDim: h.ValueDim,
		NormEps:  h.Eps,
		Scale:    float64(h.KQScale),
		RoPE:     nn.RoPE{Dim: h.RopeDim, Base: h.RopeBase, Scale: h.RopeScale, Options: h.Yarn.Options()},
	}
	// In llama.cpp's order, so that the first error is the one it names.
	if h.QRank > 0 {
		a.QA = nn.Linear{Weight: w.Get(p+"attn_q_a.weight", d, h.QRank)}
		a.QANorm = w.Norm(p+"attn_q_a_norm.weight", h.QRank)
		a.QB = nn.Linear{Weight: w.Get(p+"attn_q_b.weight", h.QRank, heads*hk)}
	} else {
		a.Q = nn.Linear{Weight: w.Get(p+"attn_q.weight", d, heads*hk)}
	}
	a.KVA = nn.Linear{Weight: w.Get(p+"attn_kv_a_mqa.weight", d, h.KVRank+h.RopeDim)}
	a.KVANorm = w.Norm(p+"attn_kv_a_norm.weight", h.KVRank)
	spec := kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: h.KVRank + h.RopeDim, ValueDim: h.KVRank, KVHeads: 1, ValuesInKeys: true}
	if h.Absorbed {
		a.KB = w.Get(p+"attn_k_b.weight", h.NopeDim, h.KVRank, heads)
		a.VB = w.Get(p+"attn_v_b.weight", h.KVRank, h.ValueDim, heads)
	} else {
		a.KVB = nn.Linear{Weight: w.Get(p+"attn_kv_b.weight", h.KVRank, heads*(h.NopeDim+h.ValueDim))}
		spec = kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hk, ValueDim: h.ValueDim, KVHeads: heads}
	}
	a.Output = nn.Linear{Weight: w.Get(p+"attn_output.weight", heads*h.ValueDim, d)}
	return a, spec
}
