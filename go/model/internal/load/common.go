package load

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// What every decoder architecture reads and builds the same way (as
// llama.cpp's hparam loaders and create_tensor_qkv): an architecture file
// holds only what differs from this.

// Common are the hyperparameters every decoder has.
type Common struct {
	Hidden, Layers, Heads, HeadDim, RopeDim, Context, Vocab int
	// NextN are the blocks past Layers that hold a multi-token prediction
	// head (nextn_predict_layers), not read by the main model.
	NextN         int
	Eps, RopeBase float32
}

// Common reads the hidden size, the layers (block_count less the MTP
// blocks), heads, head and RoPE sizes, context (default ctx), vocabulary,
// norm epsilon (default eps) and RoPE base, with their checks.
func (r *Reader) Common(ctx int, eps float32) Common {
	c := r.Sizes(ctx, eps)
	c.HeadDim = r.HeadDim(c.Hidden, c.Heads)
	c.RopeDim = r.Int("rope.dimension_count", c.HeadDim)
	r.RopeDim(c.RopeDim, c.HeadDim)
	return c
}

// Sizes is Common without the head and RoPE sizes, for architectures
// whose keys and values differ in size (DeepSeek 2's latent attention).
func (r *Reader) Sizes(ctx int, eps float32) Common {
	c := Common{
		Hidden:   r.Need("embedding_length"),
		Heads:    r.Need("attention.head_count"),
		Context:  r.Int("context_length", ctx),
		Vocab:    r.Vocab(),
		Eps:      r.Float("attention.layer_norm_rms_epsilon", eps),
		RopeBase: r.Float("rope.freq_base", 10000),
		NextN:    r.Int("nextn_predict_layers", 0),
	}
	all := r.Need("block_count")
	if c.Layers = all - c.NextN; c.Layers <= 0 && r.Err() == nil {
		r.Fail("%s = %d leaves no layers after %s = %d", r.Key("block_count"), all, r.Key("nextn_predict_layers"), c.NextN)
	}
	return c
}

// KVHeads reads a scalar attention.head_count_kv (default: heads) and
// checks that it divides heads.
func (r *Reader) KVHeads(heads int) int {
	kv := r.Int("attention.head_count_kv", heads)
	r.Heads(heads, kv)
	return kv
}

// ExpertFF is expert_feed_forward_length, or the dense feed-forward length
// shared among the used experts when the file has none (older Qwen MoE
// files).
func (r *Reader) ExpertFF(feedForward, used int) int {
	ff := r.Int("expert_feed_forward_length", 0)
	if ff == 0 && used > 0 {
		ff = feedForward / used
	}
	r.Positive("expert_feed_forward_length", ff)
	return ff
}

// Start is the model every architecture begins with: its sizes, the token
// embeddings, output norm and head, after checking that the file has the
// layers block_count gives (MTP blocks included), by their attn_norm.
func (w *Weights) Start(c Common) (*decoder.Model, error) {
	return w.StartProbing(c, "attn_norm.weight")
}

// StartProbing is Start for an architecture whose every block has the
// tensor probe rather than attn_norm.weight.
func (w *Weights) StartProbing(c Common, probe string) (*decoder.Model, error) {
	if err := w.Blocks(c.Layers+c.NextN, probe); err != nil {
		return nil, err
	}
	m := decoder.New(w.b, w.arch)
	m.Hidden, m.Vocab, m.Context, m.Eps = c.Hidden, c.Vocab, c.Context, c.Eps
	m.TokEmb, m.OutNorm, m.Output = w.Embeddings(c.Hidden, c.Vocab)
	return m, nil
}

// Attention is layer p's (prefix "blk.N.") attention projections without
// biases: queries of qOut = heads·headDim (twice that with a gate), keys and
// values of kvHeads heads, the output; with the head counts and norm
// epsilon set. The caller adds RoPE, Q/K norms and what else differs.
func (w *Weights) Attention(p string, c Common, kvHeads, qOut int) *nn.Attention {
	d, hd := c.Hidden, c.HeadDim
	return &nn.Attention{
		Q:       nn.Linear{Weight: w.Get(p+"attn_q.weight", d, qOut)},
		K:       nn.Linear{Weight: w.Get(p+"attn_k.weight", d, hd*kvHeads)},
		V:       nn.Linear{Weight: w.Get(p+"attn_v.weight", d, hd*kvHeads)},
		Output:  nn.Linear{Weight: w.Get(p+"attn_output.weight", hd*c.Heads, d)},
		Heads:   c.Heads,
		KVHeads: kvHeads,
		HeadDim: hd,
		NormEps: c.Eps,
	}
}

// QKVBias gives a's query, key and value projections layer p's biases
// (attn_q.bias, attn_k.bias, attn_v.bias: Qwen2's).
func (w *Weights) QKVBias(p string, a *nn.Attention) {
	a.Q.Bias = w.GetAs(F32, p+"attn_q.bias", a.Heads*a.HeadDim)
	a.K.Bias = w.GetAs(F32, p+"attn_k.bias", a.KVHeads*a.HeadDim)
	a.V.Bias = w.GetAs(F32, p+"attn_v.bias", a.KVHeads*a.HeadDim)
}

// QKNorm is layer p's query and key norms (one weight per head dimension).
func (w *Weights) QKNorm(p string, headDim int) (q, k ml.Tensor) {
	return w.GetAs(F32, p+"attn_q_norm.weight", headDim), w.GetAs(F32, p+"attn_k_norm.weight", headDim)
}

// FFN is layer p's dense gated feed-forward (SwiGLU) of width ff.
func (w *Weights) FFN(p string, d, ff int) *nn.FFN {
	return &nn.FFN{
		Gate: w.Get(p+"ffn_gate.weight", d, ff),
		Up:   w.Get(p+"ffn_up.weight", d, ff),
		Down: w.Get(p+"ffn_down.weight", ff, d),
	}
}

// Norm is a norm weight of width d.
func (w *Weights) Norm(name string, d int) ml.Tensor { return w.GetAs(F32, name, d) }

// Layer is the tensor-name prefix of layer i.
func Layer(i int) string { return fmt.Sprintf("blk.%d.", i) }

// SWA reads which of n layers use sliding-window attention, as llama.cpp's
// load_swa_pattern: attention.sliding_window_pattern as a per-layer bool
// array (as Ollama's converters write it), or a number p (default def)
// for every p-th layer global (layers p-1, 2p-1, ...; 0: every layer
// slides).
func (r *Reader) SWA(n, def int) []bool {
	const k = "attention.sliding_window_pattern"
	if _, isArray := r.c.Value(r.Key(k)).([]bool); isArray {
		if a := r.Bools(k, n); a != nil {
			return a
		}
		return make([]bool, n)
	}
	p := r.Int(k, def)
	swa := make([]bool, n)
	for i := range swa {
		swa[i] = p == 0 || i%p < p-1
	}
	return swa
}
