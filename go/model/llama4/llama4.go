// Package llama4 is the text decoder of llama.cpp's "llama4" architecture
// (Llama 4 Scout and Maverick; Ollama's converter writes the same name).
// What differs from llama:
//   - chunked attention: three layers in four (attention.sliding_window_pattern,
//     default 4) see only their token's chunk of 8192 positions, the
//     fourth every earlier position (llama.cpp fixes the chunk at 8192
//     whatever attention.sliding_window says, 0 aside);
//   - the chunked layers rotate queries and keys (normal RoPE, their own
//     rope.freq_base_swa if the file has one), then, with use_qk_norm
//     (llama.cpp: all but the 128-expert model), take unweighted RMS
//     norms of them; every fourth layer has no RoPE and scales its queries
//     by the attention temperature of their positions (1 + 0.1·ln(⌊(p+1)
//     / 8192⌋ + 1));
//   - every interleave_moe_layer_step-th layer has routed experts chosen
//     by the router's logits, their sigmoids scaling each expert's input,
//     beside one always-on shared expert; the others a dense SwiGLU.
//
// Ollama's converter gives the dense and expert feed-forward lengths as
// intermediate_size and intermediate_size_moe (its feed_forward_length is
// the expert's) and use_qk_norm as a key; llama.cpp's files give
// feed_forward_length and expert_feed_forward_length. A vision tower's
// tensors, if any, are not read.
package llama4

import (
	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/internal/load"
)

// Chunk is the chunk of the chunked layers in positions, and the floor of
// the attention temperature: llama.cpp's fixed values.
const Chunk = 8192

// Hyper are Llama 4's hyperparameters.
type Hyper struct {
	load.Common
	KVHeads, FeedForward           int
	Experts, ExpertsUsed, ExpertFF int
	MoEStep                        int    // every MoEStep-th layer is MoE (0: none)
	Chunked                        []bool // per layer: chunked attention with RoPE
	QKNorm                         bool
	RopeScale, RopeBaseChunked     float32
}

// ReadHyper reads Llama 4's hyperparameters (llama.cpp's keys, and
// Ollama's converter's where they differ).
func ReadHyper(c fs.Config) (Hyper, error) {
	r := load.NewReader(c, "llama4")
	h := Hyper{Common: r.Common(10485760, 1e-5)}
	h.KVHeads = r.KVHeads(h.Heads)
	h.RopeScale = r.RopeScale()
	h.RopeBaseChunked = r.Float("rope.freq_base_swa", h.RopeBase)
	if r.Has("attention.sliding_window") && r.Int("attention.sliding_window", 1) == 0 {
		// llama.cpp's graph for it (RoPE on all but the last layer, which
		// scales by an unset temperature) aborts; no checkpoint has it.
		r.Fail("%s = 0 (no chunked attention) is not supported", r.Key("attention.sliding_window"))
	}
	h.Chunked = r.SWA(h.Layers, 4)

	h.Experts = r.Need("expert_count")
	h.ExpertsUsed = r.Need("expert_used_count")
	r.Experts(h.Experts, h.ExpertsUsed)
	h.MoEStep = r.Int("interleave_moe_layer_step", 1)
	if h.MoEStep < 0 {
		r.Fail("%s = %d must not be negative", r.Key("interleave_moe_layer_step"), h.MoEStep)
	}
	if r.Has("intermediate_size") {
		h.FeedForward = r.Int("intermediate_size", 0)
		h.ExpertFF = r.Int("intermediate_size_moe", r.Int("feed_forward_length", 0))
		r.Positive("intermediate_size_moe", h.ExpertFF)
	} else {
		h.FeedForward = r.Int("feed_forward_length", 0)
		h.ExpertFF = r.ExpertFF(h.FeedForward, h.ExpertsUsed)
	}
	if h.MoEStep != 1 {
		r.Positive("feed_forward_length", h.FeedForward)
	}
	h.QKNorm = r.Bool("use_qk_norm", h.Experts != 128)
	return h, r.Err()
}

// moe reports whether layer i has experts (llama.cpp's is_moe_layer).
func (h *Hyper) moe(i int) bool { return h.MoEStep > 0 && (i+1)%h.MoEStep == 0 }

// New reads a Llama 4 text model from a backend opened on its GGUF file
// (the weights need not be loaded yet).
func New(b ml.Backend) (*decoder.Model, error) {
	h, err := ReadHyper(b.Config())
	if err != nil {
		return nil, err
	}
	w := load.NewWeights(b, "llama4")
	m, err := w.Start(h.Common)
	if err != nil {
		return nil, err
	}
	d, hd := h.Hidden, h.HeadDim
	m.Window = Chunk
	m.AttnTemp = &decoder.AttnTemp{Scale: 0.1, Offset: 1, Floor: Chunk}
	for i := 0; i < h.Layers; i++ {
		p := load.Layer(i)
		a := w.Attention(p, h.Common, h.KVHeads, hd*h.Heads)
		a.KeysBeforeValues = true // llama.cpp's order over its iSWA cache
		spec := kvcache.LayerSpec{Kind: kvcache.Attention, KeyDim: hd, ValueDim: hd, KVHeads: h.KVHeads}
		// RoPE on all layers but every fourth (llama.cpp's
		// n_no_rope_layer_step); the defaults make them the chunked ones.
		if (i+1)%4 != 0 {
			base := h.RopeBase
			if h.Chunked[i] {
				base = h.RopeBaseChunked
			}
			var opts []func(*rope.Options)
			// Llama 3.1's frequency factors, where the file has them.
			if f := w.OptAs(load.F32, p+"rope_freqs.weight", h.RopeDim/2); f != nil {
				opts = append(opts, rope.WithFactors(f))
			}
			a.RoPE = nn.RoPE{Dim: h.RopeDim, Base: base, Scale: h.RopeScale, Options: opts}
			a.NormAfterRoPE = h.QKNorm
		} else {
			a.NoRoPE, a.TempScaled = true, true
		}
		if h.Chunked[i] {
			spec.Kind = kvcache.Chunked
		}
		var ffn decoder.FFN
		if h.moe(i) {
			ffn = &nn.MoE{
				Router:           nn.Linear{Weight: w.Get(p+"ffn_gate_inp.weight", d, h.Experts)},
				Gate:             w.Get(p+"ffn_gate_exps.weight", d, h.ExpertFF, h.Experts),
				Up:               w.Get(p+"ffn_up_exps.weight", d, h.ExpertFF, h.Experts),
				Down:             w.Get(p+"ffn_down_exps.weight", h.ExpertFF, d, h.Experts),
				Experts:          h.Experts,
				Used:             h.ExpertsUsed,
				Gating:           nn.GatingSigmoid,
				SelectByLogits:   true,
				WeightsBeforeFFN: true,
				Shared: &nn.FFN{
					Gate: w.Get(p+"ffn_gate_shexp.weight", d, h.ExpertFF),
					Up:   w.Get(p+"ffn_up_shexp.weight", d, h.ExpertFF),
					Down: w.Get(p+"ffn_down_shexp.weight", h.ExpertFF, d),
				},
			}
		} else {
			ffn = w.FFN(p, d, h.FeedForward)
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
