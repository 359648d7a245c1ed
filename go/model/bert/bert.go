// Package bert is the BERT encoder (llama.cpp's "bert" architecture) over
// the github.com/ggml-rs/ggml-rs/go/ml API, for sentence embeddings: token, position and
// token-type embeddings, post-norm transformer layers with biased
// projections, exact-GELU feed-forward, then pooling (mean, CLS or last
// token, as {arch}.pooling_type says) and L2 normalisation.
//
// Nomic BERT ("nomic-bert": nomic-embed-text) is the same encoder with
// NeoX RoPE instead of position embeddings, a fused QKV projection, a
// SwiGLU feed-forward and (in the released files) no biases but the
// norms'. Its MoE variant ("nomic-bert-moe": nomic-embed-text-v2-moe)
// keeps BERT's GELU feed-forward (with biases) and puts a mixture of GELU
// experts (softmax routing, top expert_used_count) in every
// moe_every_n_layers-th layer from the second.
//
// Hyperparameters, tensor names and the vocabulary follow llama.cpp's GGUF
// conventions for the architecture, so files converted by llama.cpp's
// converter load unchanged (Convert in this package writes the same).
package bert

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/wordpiece"
)

// Architectures are the encoders this package reads.
var Architectures = []string{"bert", "nomic-bert", "nomic-bert-moe"}

// Hyper are the model's hyperparameters.
type Hyper struct {
	Arch                                                          string
	Hidden, Layers, Heads, FeedForward, Context, Vocab, TypeVocab int
	Eps                                                           float32
	Pooling                                                       Pooling
	Normalize                                                     bool
	// Nomic: RoPE (NeoX, of base RopeBase) instead of position
	// embeddings, SwiGLU instead of GELU (but in the MoE variant).
	Nomic    bool
	RopeBase float32
	// nomic-bert-moe: experts in layers i with i mod MoEEvery = 1.
	MoEEvery, Experts, ExpertsUsed int
	WeightScale                    float32
}

// moe reports whether layer i has experts.
func (h *Hyper) moe(i int) bool { return h.MoEEvery > 0 && i%h.MoEEvery == 1 }

// Model is a loaded BERT encoder.
type Model struct {
	Hyper
	Tokenizer *wordpiece.Tokenizer

	b                                     ml.Backend
	tokEmb, typeEmb, posEmb, normW, normB ml.Tensor
	layers                                []layer
}

// layer is one encoder layer's weights: separate q, k, v or (Nomic BERT)
// a fused qkv, each bias optional there; gate for SwiGLU.
type layer struct {
	q, qb, k, kb, v, vb, qkv, qkvB, o, ob ml.Tensor
	attnNormW, attnNormB                  ml.Tensor
	up, upB, gate, down, downB            ml.Tensor
	experts                               *nn.MoE // instead of up and down
	outNormW, outNormB                    ml.Tensor
}

// ReadHyper reads the hyperparameters from the model's metadata.
func ReadHyper(c fs.Config) (Hyper, error) {
	a := c.Architecture()
	if !slices.Contains(Architectures, a) {
		return Hyper{}, fmt.Errorf("bert: the model's architecture is %q, not one of %v", a, Architectures)
	}
	h := Hyper{
		Arch:        a,
		Nomic:       a != "bert",
		RopeBase:    c.Float("rope.freq_base", 10000),
		Hidden:      int(c.Uint("embedding_length")),
		Layers:      int(c.Uint("block_count")),
		Heads:       int(c.Uint("attention.head_count")),
		FeedForward: int(c.Uint("feed_forward_length")),
		Context:     int(c.Uint("context_length")),
		Eps:         c.Float("attention.layer_norm_epsilon", 1e-12),
		Pooling:     Pooling(c.Uint("pooling_type", uint32(PoolingMean))),
		Normalize:   c.Bool(KeyNormalize, true),
		TypeVocab:   int(c.Uint("tokenizer.ggml.token_type_count", 2)),
		Vocab:       len(c.Strings("tokenizer.ggml.tokens")),
	}
	for _, v := range []struct {
		key string
		n   int
	}{
		{a + ".embedding_length", h.Hidden}, {a + ".block_count", h.Layers}, {a + ".attention.head_count", h.Heads},
		{a + ".feed_forward_length", h.FeedForward}, {a + ".context_length", h.Context}, {"tokenizer.ggml.tokens", h.Vocab},
	} {
		if v.n <= 0 {
			return h, fmt.Errorf("bert: the model's metadata lacks %s (or it is zero)", v.key)
		}
	}
	if a == "nomic-bert-moe" {
		h.MoEEvery = int(c.Uint("moe_every_n_layers"))
		h.Experts, h.ExpertsUsed = int(c.Uint("expert_count")), int(c.Uint("expert_used_count"))
		h.WeightScale = c.Float("expert_weights_scale", 0)
		if h.MoEEvery > 0 && (h.Experts <= 0 || h.ExpertsUsed <= 0 || h.ExpertsUsed > h.Experts) {
			return h, fmt.Errorf("bert: %s.expert_count = %d and %s.expert_used_count = %d: both must be positive, the second at most the first",
				a, h.Experts, a, h.ExpertsUsed)
		}
	}
	if h.Hidden%h.Heads != 0 {
		return h, fmt.Errorf("bert: embedding length %d is not a multiple of the head count %d", h.Hidden, h.Heads)
	}
	if h.Nomic && (h.Hidden/h.Heads%2 != 0 || !(h.RopeBase > 0) || math.IsInf(float64(h.RopeBase), 0)) {
		return h, fmt.Errorf("bert: RoPE needs an even head size (%d) and a positive finite %s.rope.freq_base (%g)", h.Hidden/h.Heads, a, h.RopeBase)
	}
	switch h.Pooling {
	case PoolingMean, PoolingCLS, PoolingLast:
	default:
		return h, fmt.Errorf("bert: pooling type %s is not supported for sentence embeddings (mean, cls or last)", h.Pooling)
	}
	return h, nil
}

// NewTokenizer builds the WordPiece tokenizer of the model's metadata
// (tokenizer.ggml.model "bert").
func NewTokenizer(c fs.Config) (*wordpiece.Tokenizer, error) {
	if m := c.String("tokenizer.ggml.model"); m != "bert" {
		return nil, fmt.Errorf("bert: tokenizer model is %q, not \"bert\" (WordPiece)", m)
	}
	tokens := c.Strings("tokenizer.ggml.tokens")
	types := c.Ints("tokenizer.ggml.token_type")
	id := func(key string, fallback ...string) int32 {
		if v, ok := c.Value(key).(uint32); ok {
			return int32(v)
		}
		for _, f := range fallback {
			if v, ok := c.Value(f).(uint32); ok {
				return int32(v)
			}
		}
		return -1
	}
	sp := wordpiece.Special{
		CLS:  id("tokenizer.ggml.cls_token_id", "tokenizer.ggml.bos_token_id"),
		SEP:  id("tokenizer.ggml.seperator_token_id", "tokenizer.ggml.eos_token_id"),
		UNK:  id("tokenizer.ggml.unknown_token_id"),
		PAD:  id("tokenizer.ggml.padding_token_id"),
		MASK: id("tokenizer.ggml.mask_token_id"),
	}
	t, err := wordpiece.New(tokens, types, sp)
	if err != nil {
		return nil, fmt.Errorf("bert: %w", err)
	}
	return t, nil
}

// New reads the model's hyperparameters, tokenizer and weights from a
// backend opened on a bert GGUF file (weights need not be loaded yet).
func New(b ml.Backend) (*Model, error) {
	c := b.Config()
	h, err := ReadHyper(c)
	if err != nil {
		return nil, err
	}
	tok, err := NewTokenizer(c)
	if err != nil {
		return nil, err
	}
	m := &Model{Hyper: h, Tokenizer: tok, b: b}

	var missing []string
	get := func(name string, shape ...int) ml.Tensor {
		t := b.Get(name)
		if t == nil {
			missing = append(missing, name)
			return nil
		}
		if got := t.Shape(); !slices.Equal(got, shape) && err == nil {
			err = fmt.Errorf("bert: tensor %s has shape %v, the metadata implies %v", name, got, shape)
		}
		return t
	}
	opt := func(name string, shape ...int) ml.Tensor {
		if b.Get(name) == nil {
			return nil
		}
		return get(name, shape...)
	}
	d, ff := h.Hidden, h.FeedForward
	m.tokEmb = get("token_embd.weight", d, h.Vocab)
	if h.Nomic {
		m.typeEmb = opt("token_types.weight", d, h.TypeVocab)
	} else {
		m.typeEmb = get("token_types.weight", d, h.TypeVocab)
		m.posEmb = get("position_embd.weight", d, h.Context)
	}
	m.normW = get("token_embd_norm.weight", d)
	m.normB = get("token_embd_norm.bias", d)
	for i := 0; i < h.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		l := layer{
			attnNormW: get(p+"attn_output_norm.weight", d), attnNormB: get(p+"attn_output_norm.bias", d),
			outNormW: get(p+"layer_output_norm.weight", d), outNormB: get(p+"layer_output_norm.bias", d),
		}
		if h.moe(i) {
			l.experts = &nn.MoE{
				Router:      nn.Linear{Weight: get(p+"ffn_gate_inp.weight", d, h.Experts)},
				Up:          get(p+"ffn_up_exps.weight", d, ff, h.Experts),
				Down:        get(p+"ffn_down_exps.weight", ff, d, h.Experts),
				Experts:     h.Experts,
				Used:        h.ExpertsUsed,
				Gating:      nn.GatingSoftmax,
				WeightScale: h.WeightScale,
				GELU:        true,
			}
		} else {
			l.up, l.down = get(p+"ffn_up.weight", d, ff), get(p+"ffn_down.weight", ff, d)
		}
		if h.Nomic {
			// llama.cpp's create_tensor_qkv: the fused projection, else
			// separate ones; every bias optional.
			if b.Get(p+"attn_qkv.weight") != nil {
				l.qkv, l.qkvB = get(p+"attn_qkv.weight", d, 3*d), opt(p+"attn_qkv.bias", 3*d)
			} else {
				l.q, l.k, l.v = get(p+"attn_q.weight", d, d), get(p+"attn_k.weight", d, d), get(p+"attn_v.weight", d, d)
			}
			if l.qkvB == nil {
				l.qb, l.kb, l.vb = opt(p+"attn_q.bias", d), opt(p+"attn_k.bias", d), opt(p+"attn_v.bias", d)
			}
			l.o, l.ob = get(p+"attn_output.weight", d, d), opt(p+"attn_output.bias", d)
			if h.Arch == "nomic-bert" {
				l.gate = get(p+"ffn_gate.weight", d, ff)
			}
			if l.experts == nil {
				l.upB, l.downB = opt(p+"ffn_up.bias", ff), opt(p+"ffn_down.bias", d)
			}
		} else {
			l.q, l.qb = get(p+"attn_q.weight", d, d), get(p+"attn_q.bias", d)
			l.k, l.kb = get(p+"attn_k.weight", d, d), get(p+"attn_k.bias", d)
			l.v, l.vb = get(p+"attn_v.weight", d, d), get(p+"attn_v.bias", d)
			l.o, l.ob = get(p+"attn_output.weight", d, d), get(p+"attn_output.bias", d)
			l.upB, l.downB = get(p+"ffn_up.bias", ff), get(p+"ffn_down.bias", d)
		}
		m.layers = append(m.layers, l)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("bert: the model lacks %d tensors: %s", len(missing), summarize(missing))
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func summarize(names []string) string {
	if len(names) > 4 {
		return fmt.Sprintf("%v …", names[:4])
	}
	return fmt.Sprint(names)
}

// Tokenize encodes text as [CLS] tokens [SEP], cut to the context length
// (the [SEP] is kept); truncated reports a cut.
func (m *Model) Tokenize(text string) (ids []int32, truncated bool) {
	ids = m.Tokenizer.Encode(text)
	if len(ids) > m.Context {
		last := ids[len(ids)-1]
		ids = append(ids[:m.Context-1], last)
		truncated = true
	}
	return ids, truncated
}

// nodesPerSequence bounds the graph nodes one sequence adds.
func (m *Model) nodesPerSequence() int { return 16 + 40*m.Layers }

// Embed computes the pooled (and, if the model says so, normalised)
// embedding of each token sequence. Sequences are computed together, as
// independent sub-graphs of one graph (no padding), as many at a time as
// the backend's graph size allows.
func (m *Model) Embed(seqs [][]int32) ([][]float32, error) {
	out := make([][]float32, 0, len(seqs))
	for len(seqs) > 0 {
		ctx := m.b.NewContext()
		n := max(1, min(len(seqs), ctx.MaxGraphNodes()/m.nodesPerSequence()))
		embs, err := m.embedBatch(ctx, seqs[:n])
		ctx.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, embs...)
		seqs = seqs[n:]
	}
	return out, nil
}

func (m *Model) embedBatch(ctx ml.Context, seqs [][]int32) (embs [][]float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = fmt.Errorf("bert: %w", e)
			} else {
				err = fmt.Errorf("bert: %v", p)
			}
		}
	}()
	outs := make([]ml.Tensor, len(seqs))
	for i, ids := range seqs {
		if outs[i], err = m.forward(ctx, ids); err != nil {
			return nil, err
		}
	}
	ctx.Forward(outs...).Compute(outs...)
	embs = make([][]float32, len(outs))
	for i, o := range outs {
		embs[i] = o.Floats()
	}
	return embs, nil
}

// forward builds one sequence's graph: its pooled embedding [hidden].
func (m *Model) forward(ctx ml.Context, ids []int32) (ml.Tensor, error) {
	n := len(ids)
	if n == 0 {
		return nil, errors.New("bert: empty token sequence")
	}
	if n > m.Context {
		return nil, fmt.Errorf("bert: %d tokens exceed the context length %d", n, m.Context)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.Vocab {
			return nil, fmt.Errorf("bert: token id %d is outside the %d-token vocabulary", id, m.Vocab)
		}
	}
	in := ctx.Input()
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	// All tokens are of the first segment ("sentence A").
	x := m.tokEmb.Rows(ctx, in.FromInts(ids, n))
	if m.typeEmb != nil {
		x = x.Add(ctx, m.typeEmb.Rows(ctx, in.FromInts(make([]int32, 1), 1)))
	}
	if m.posEmb != nil {
		x = m.posEmb.Rows(ctx, in.FromInts(pos, n)).Add(ctx, x)
	}
	x = x.LayerNorm(ctx, m.normW, m.normB, m.Eps)

	d, heads := m.Hidden, m.Heads
	hd := d / heads
	scale := 1 / math.Sqrt(float64(hd))
	var positions ml.Tensor
	ropeHD := nn.RoPE{Dim: hd, Base: m.RopeBase, Scale: 1, Options: []func(*rope.Options){rope.WithTypeNeoX()}}
	if m.Nomic {
		positions = in.FromInts(pos, n)
	}
	bias := func(t, b ml.Tensor) ml.Tensor {
		if b == nil {
			return t
		}
		return t.Add(ctx, b)
	}
	for _, l := range m.layers {
		var q, k, v ml.Tensor
		if l.qkv != nil {
			qkv := bias(l.qkv.Mulmat(ctx, x), l.qkvB)
			if l.qkvB == nil && l.qb != nil && l.kb != nil && l.vb != nil {
				qkv = qkv.Add(ctx, l.qb.Concat(ctx, l.kb, 0).Concat(ctx, l.vb, 0))
			}
			es := qkv.Stride(0)
			q = qkv.View(ctx, 0, hd, hd*es, heads, qkv.Stride(1), n)
			k = qkv.View(ctx, d*es, hd, hd*es, heads, qkv.Stride(1), n)
			v = qkv.View(ctx, 2*d*es, hd, hd*es, heads, qkv.Stride(1), n)
		} else {
			q = bias(l.q.Mulmat(ctx, x), l.qb).Reshape(ctx, hd, heads, n)
			k = bias(l.k.Mulmat(ctx, x), l.kb).Reshape(ctx, hd, heads, n)
			v = bias(l.v.Mulmat(ctx, x), l.vb).Reshape(ctx, hd, heads, n)
		}
		if positions != nil {
			q = ropeHD.Apply(ctx, q, positions)
			k = ropeHD.Apply(ctx, k, positions)
		}
		a := q.(ml.ScaledDotProductAttention).ScaledDotProductAttention(ctx, k, v, nil, nil, nil, scale, false)
		a = bias(l.o.Mulmat(ctx, a.Reshape(ctx, d, n)), l.ob)
		x = x.Add(ctx, a).LayerNorm(ctx, l.attnNormW, l.attnNormB, m.Eps)

		var f ml.Tensor
		switch {
		case l.experts != nil:
			f = l.experts.Forward(ctx, x)
		case l.gate != nil:
			// SwiGLU: silu(gate·x) ⊙ up·x (llama.cpp's LLM_FFN_SILU, PAR).
			f = bias(l.down.Mulmat(ctx, bias(l.gate.Mulmat(ctx, x), nil).SILU(ctx, bias(l.up.Mulmat(ctx, x), l.upB))), l.downB)
		case m.Nomic:
			// llama.cpp's LLM_FFN_GELU: ggml_gelu (the tanh form).
			f = bias(l.down.Mulmat(ctx, bias(l.up.Mulmat(ctx, x), l.upB).GELU(ctx)), l.downB)
		default:
			f = bias(l.down.Mulmat(ctx, bias(l.up.Mulmat(ctx, x), l.upB).GELU_ERF(ctx)), l.downB)
		}
		x = x.Add(ctx, f).LayerNorm(ctx, l.outNormW, l.outNormB, m.Eps)
	}

	var pooled ml.Tensor
	switch m.Pooling {
	case PoolingMean:
		// Mean over tokens: transpose to [n, hidden], average each row.
		pooled = x.Permute(ctx, 1, 0, 2, 3).Contiguous(ctx).Mean(ctx).Reshape(ctx, d)
	case PoolingCLS:
		pooled = x.View(ctx, 0, d)
	case PoolingLast:
		pooled = x.View(ctx, (n-1)*x.Stride(1), d)
	default:
		return nil, fmt.Errorf("bert: pooling %s is not supported", m.Pooling)
	}
	if m.Normalize {
		// sentence-transformers' Normalize: x / max(‖x‖, 1e-12).
		pooled = pooled.L2Norm(ctx, 1e-12)
	} else if m.Pooling != PoolingMean {
		pooled = pooled.Contiguous(ctx)
	}
	return pooled, nil
}
