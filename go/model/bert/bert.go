// Package bert is the BERT encoder (llama.cpp's "bert" architecture) over
// the github.com/ggml-rs/ggml-rs/go/ml API, for sentence embeddings: token, position and
// token-type embeddings, post-norm transformer layers with biased
// projections, exact-GELU feed-forward, then pooling (mean, CLS or last
// token, as {arch}.pooling_type says) and L2 normalisation.
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
	"github.com/ggml-rs/ggml-rs/go/tokenizer/wordpiece"
)

// Hyper are the model's hyperparameters.
type Hyper struct {
	Hidden, Layers, Heads, FeedForward, Context, Vocab, TypeVocab int
	Eps                                                           float32
	Pooling                                                       Pooling
	Normalize                                                     bool
}

// Model is a loaded BERT encoder.
type Model struct {
	Hyper
	Tokenizer *wordpiece.Tokenizer

	b                                     ml.Backend
	tokEmb, typeEmb, posEmb, normW, normB ml.Tensor
	layers                                []layer
}

type layer struct {
	q, qb, k, kb, v, vb, o, ob ml.Tensor
	attnNormW, attnNormB       ml.Tensor
	up, upB, down, downB       ml.Tensor
	outNormW, outNormB         ml.Tensor
}

// ReadHyper reads the hyperparameters from the model's metadata.
func ReadHyper(c fs.Config) (Hyper, error) {
	if a := c.Architecture(); a != "bert" {
		return Hyper{}, fmt.Errorf("bert: the model's architecture is %q, not \"bert\"", a)
	}
	h := Hyper{
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
		{"bert.embedding_length", h.Hidden}, {"bert.block_count", h.Layers}, {"bert.attention.head_count", h.Heads},
		{"bert.feed_forward_length", h.FeedForward}, {"bert.context_length", h.Context}, {"tokenizer.ggml.tokens", h.Vocab},
	} {
		if v.n <= 0 {
			return h, fmt.Errorf("bert: the model's metadata lacks %s (or it is zero)", v.key)
		}
	}
	if h.Hidden%h.Heads != 0 {
		return h, fmt.Errorf("bert: embedding length %d is not a multiple of the head count %d", h.Hidden, h.Heads)
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
	d, ff := h.Hidden, h.FeedForward
	m.tokEmb = get("token_embd.weight", d, h.Vocab)
	m.typeEmb = get("token_types.weight", d, h.TypeVocab)
	m.posEmb = get("position_embd.weight", d, h.Context)
	m.normW = get("token_embd_norm.weight", d)
	m.normB = get("token_embd_norm.bias", d)
	for i := 0; i < h.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		m.layers = append(m.layers, layer{
			q: get(p+"attn_q.weight", d, d), qb: get(p+"attn_q.bias", d),
			k: get(p+"attn_k.weight", d, d), kb: get(p+"attn_k.bias", d),
			v: get(p+"attn_v.weight", d, d), vb: get(p+"attn_v.bias", d),
			o: get(p+"attn_output.weight", d, d), ob: get(p+"attn_output.bias", d),
			attnNormW: get(p+"attn_output_norm.weight", d), attnNormB: get(p+"attn_output_norm.bias", d),
			up: get(p+"ffn_up.weight", d, ff), upB: get(p+"ffn_up.bias", ff),
			down: get(p+"ffn_down.weight", ff, d), downB: get(p+"ffn_down.bias", d),
			outNormW: get(p+"layer_output_norm.weight", d), outNormB: get(p+"layer_output_norm.bias", d),
		})
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
	x := m.tokEmb.Rows(ctx, in.FromInts(ids, n)).
		Add(ctx, m.posEmb.Rows(ctx, in.FromInts(pos, n))).
		Add(ctx, m.typeEmb.Rows(ctx, in.FromInts(make([]int32, 1), 1)))
	x = x.LayerNorm(ctx, m.normW, m.normB, m.Eps)

	d, heads := m.Hidden, m.Heads
	hd := d / heads
	scale := 1 / math.Sqrt(float64(hd))
	for _, l := range m.layers {
		q := l.q.Mulmat(ctx, x).Add(ctx, l.qb).Reshape(ctx, hd, heads, n)
		k := l.k.Mulmat(ctx, x).Add(ctx, l.kb).Reshape(ctx, hd, heads, n)
		v := l.v.Mulmat(ctx, x).Add(ctx, l.vb).Reshape(ctx, hd, heads, n)
		a := q.(ml.ScaledDotProductAttention).ScaledDotProductAttention(ctx, k, v, nil, nil, nil, scale, false)
		a = l.o.Mulmat(ctx, a.Reshape(ctx, d, n)).Add(ctx, l.ob)
		x = x.Add(ctx, a).LayerNorm(ctx, l.attnNormW, l.attnNormB, m.Eps)

		f := l.up.Mulmat(ctx, x).Add(ctx, l.upB).GELU_ERF(ctx)
		f = l.down.Mulmat(ctx, f).Add(ctx, l.downB)
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
