package nn

import (
	"fmt"
	"math"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn/rope"
)

// RoPE is a rotary position embedding: the first Dim values of each head
// are rotated (Dim below the head size is partial rotary), with the mode,
// YaRN and multi-section settings in Options.
type RoPE struct {
	Dim         int
	Base, Scale float32
	Options     []func(*rope.Options)
}

type roper interface {
	RoPE(ctx ml.Context, positions ml.Tensor, ropeDim int, ropeBase, ropeScale float32, options ...func(*rope.Options)) ml.Tensor
}

// Apply rotates t [headDim, heads, n] by the positions.
func (r RoPE) Apply(ctx ml.Context, t, positions ml.Tensor) ml.Tensor {
	rp, ok := t.(roper)
	if !ok {
		panic(fmt.Errorf("nn: the backend's tensors have no RoPE"))
	}
	return rp.RoPE(ctx, positions, r.Dim, r.Base, r.Scale, r.Options...)
}

// Attention is multi-head attention with grouped key/value heads over a
// cache (llama.cpp's build_qkv + build_attn), with the options the
// supported architectures use:
//   - Q, K, V and Output projections, each with an optional bias (gpt-oss);
//   - GatedQ: the Q projection yields 2·HeadDim values per head, the
//     query and then an output gate: the attention output is multiplied by
//     sigmoid(gate) before Output (Qwen3-Next, Qwen3.5);
//   - QNorm, KNorm: per-head RMS norms of queries and keys (Qwen3 family),
//     or, with QKNormWhole, RMS norms over each token's whole query and
//     key projections before the heads are split (OLMo 2);
//   - RoPE of the first RoPE.Dim values of each head (none with NoRoPE),
//     then, with NormAfterRoPE, unweighted RMS norms of queries and keys
//     per head (Llama 4's L2 norm);
//   - Sinks: one attention-sink logit per head (gpt-oss);
//   - VNorm: unweighted RMS norms of each value head (Gemma 3n);
//   - SharedKV: no keys and values of the layer's own, its queries attend
//     to those an earlier layer stored (Gemma 3n's last layers);
//   - QScale: queries scaled before the attention (Gemma 2 and 3);
//   - SoftCap: scores soft-capped before the softmax (Gemma 2);
//   - the cache's mask decides causality and any sliding window.
type Attention struct {
	Q, K, V, Output Linear
	QNorm, KNorm    ml.Tensor
	Sinks           ml.Tensor

	Heads, KVHeads, HeadDim int
	GatedQ                  bool
	QKNormWhole             bool
	NormEps                 float32
	// Scale multiplies the query·key products; 0 means 1/√HeadDim.
	Scale float64
	// QScale, when not 0, multiplies the queries after RoPE, before the
	// attention (a scale op of its own, as llama.cpp's Gemma 3 graph; the
	// product is then scaled by Scale, 1 there).
	QScale float32
	// SoftCap, when not 0, caps the scaled scores before the mask and the
	// softmax: SoftCap·tanh(s/SoftCap) (attn_logit_softcapping).
	SoftCap float32
	// TempScaled multiplies the queries after RoPE by the batch's
	// per-token attention temperature (Batch.AttnScale; Llama 4 and
	// Mistral 3's long-context scaling).
	TempScaled bool
	RoPE       RoPE
	// NoRoPE: the layer's queries and keys are not rotated (Llama 4's
	// every fourth layer).
	NoRoPE bool
	// NormAfterRoPE: unweighted RMS norms (eps NormEps) of each head's
	// query and key after RoPE and the query scales (Llama 4).
	NormAfterRoPE bool
	// KeysBeforeValues adds the keys to the graph before the values, as
	// llama.cpp's attention over a sliding-window cache does (gpt-oss);
	// its other attention adds the queries, the values, then the keys.
	// The order is that of the graph's nodes, along which ggml's scheduler
	// assigns the ops without weights to devices when the layers span
	// several: the same order puts the same ops on the same devices.
	KeysBeforeValues bool
	// VNorm: each value head is RMS-normed without a weight (eps NormEps)
	// before it is stored (Gemma 3n).
	VNorm bool
	// SharedKV: the layer computes queries only (K and V unused) and they
	// attend to the keys and values layer KVLayer stored in the cache, with
	// that layer's mask (Gemma 3n's last layers reuse the cache of the last
	// earlier layer of their kind).
	SharedKV bool
	KVLayer  int
}

// Forward maps the normed hidden states x [d, n] of a batch to the
// attention block's output [d, n], storing the batch's keys and values in
// the cache as layer.
func (a *Attention) Forward(ctx ml.Context, x ml.Tensor, b *Batch, layer int) ml.Tensor {
	if a.SharedKV {
		return a.forwardShared(ctx, x, b)
	}
	n, hd := b.Tokens, a.HeadDim
	var q, gate ml.Tensor
	if a.GatedQ {
		qg := a.Q.Forward(ctx, x).Reshape(ctx, 2*hd, a.Heads, n)
		q = qg.View(ctx, 0, hd, qg.Stride(1), a.Heads, qg.Stride(2), n)
		gate = qg.View(ctx, hd*qg.Stride(0), hd, qg.Stride(1), a.Heads, qg.Stride(2), n)
	} else if a.QKNormWhole {
		q = a.Q.Forward(ctx, x)
	} else {
		q = a.Q.Forward(ctx, x).Reshape(ctx, hd, a.Heads, n)
	}
	k := a.K.Forward(ctx, x)
	v := a.V.Forward(ctx, x).Reshape(ctx, hd, a.KVHeads, n)
	if a.QKNormWhole {
		q = q.RMSNorm(ctx, a.QNorm, a.NormEps).Reshape(ctx, hd, a.Heads, n)
		k = k.RMSNorm(ctx, a.KNorm, a.NormEps)
	} else if a.QNorm != nil {
		q = q.RMSNorm(ctx, a.QNorm, a.NormEps)
	}
	k = k.Reshape(ctx, hd, a.KVHeads, n)
	if !a.QKNormWhole && a.KNorm != nil {
		k = k.RMSNorm(ctx, a.KNorm, a.NormEps)
	}
	if a.VNorm {
		v = v.RMSNorm(ctx, nil, a.NormEps)
	}
	if !a.NoRoPE {
		q = a.RoPE.Apply(ctx, q, b.Positions)
		k = a.RoPE.Apply(ctx, k, b.Positions)
	}
	if a.QScale != 0 {
		q = q.Scale(ctx, float64(a.QScale))
	}
	if a.TempScaled {
		if b.AttnScale == nil {
			panic(fmt.Errorf("nn: attention with temperature scaling in a batch without AttnScale"))
		}
		q = q.Mul(ctx, b.AttnScale)
	}
	if a.NormAfterRoPE {
		q = q.RMSNorm(ctx, nil, a.NormEps)
		k = k.RMSNorm(ctx, nil, a.NormEps)
	}
	if a.KeysBeforeValues {
		ctx.Forward(q, k, v)
	} else {
		ctx.Forward(q, v, k)
	}

	b.Cache.Put(ctx, layer, k, v)
	return a.attend(ctx, q, gate, b, layer)
}

// forwardShared is Forward for a SharedKV layer: queries only, attending
// to layer KVLayer's keys and values.
func (a *Attention) forwardShared(ctx ml.Context, x ml.Tensor, b *Batch) ml.Tensor {
	if a.GatedQ || a.QKNormWhole || a.NormAfterRoPE || a.TempScaled {
		panic(fmt.Errorf("nn: a layer sharing another's keys and values takes plain queries"))
	}
	q := a.Q.Forward(ctx, x).Reshape(ctx, a.HeadDim, a.Heads, b.Tokens)
	if a.QNorm != nil {
		q = q.RMSNorm(ctx, a.QNorm, a.NormEps)
	}
	if !a.NoRoPE {
		q = a.RoPE.Apply(ctx, q, b.Positions)
	}
	if a.QScale != 0 {
		q = q.Scale(ctx, float64(a.QScale))
	}
	ctx.Forward(q)
	return a.attend(ctx, q, nil, b, a.KVLayer)
}

// attend is the attention of queries q [hd, heads, n] over layer's cached
// keys and values, gated by gate (when not nil), through the output
// projection.
func (a *Attention) attend(ctx ml.Context, q, gate ml.Tensor, b *Batch, layer int) ml.Tensor {
	n, hd := b.Tokens, a.HeadDim
	scale := a.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(hd))
	}
	// sdpa is the attention of queries q over keys kc and values vc.
	sdpa := func(q, kc, vc, mask ml.Tensor) ml.Tensor {
		if a.SoftCap != 0 {
			op, ok := q.(ml.SoftCappedAttention)
			if !ok {
				panic(fmt.Errorf("nn: the backend's tensors have no SoftCappedAttention"))
			}
			return op.SoftCappedAttention(ctx, kc, vc, mask, a.Sinks, scale, float64(a.SoftCap))
		}
		op, ok := q.(ml.ScaledDotProductAttention)
		if !ok {
			panic(fmt.Errorf("nn: the backend's tensors have no ScaledDotProductAttention"))
		}
		return op.ScaledDotProductAttention(ctx, kc, vc, mask, a.Sinks, nil, scale, true)
	}
	out := attendCached(ctx, q, b, layer, sdpa)
	out = out.Reshape(ctx, hd*a.Heads, n)
	// The attention's output goes into the graph now, before the output
	// projection, as llama.cpp's build_attn_mha expands it: what the next
	// layer puts in first (a recurrent layer's state reads) then follows
	// it there too, and ggml's scheduler places the ops as it does
	// llama.cpp's where layers meet devices.
	ctx.Forward(out)
	if gate != nil {
		out = out.Mul(ctx, gate.Contiguous(ctx, hd*a.Heads, n).Sigmoid(ctx))
	}
	return a.Output.Forward(ctx, out)
}

// attendCached is the attention of the batch's queries q [dk, heads, n]
// over the cache's keys and values of layer, by sdpa (the attention of
// queries over keys kc, values vc and a mask): one op for a batch of one
// sequence, token by token for a row-wise batch, per sequence (or per run
// of consecutive streams) for several. Its result is [dv', heads, n].
func attendCached(ctx ml.Context, q ml.Tensor, b *Batch, layer int, sdpa func(q, kc, vc, mask ml.Tensor) ml.Tensor) ml.Tensor {
	n, hd, heads := b.Tokens, q.Dim(0), q.Dim(1)
	attend := func(q ml.Tensor, seq int) ml.Tensor {
		kc, vc, mask := b.Cache.Get(ctx, layer, seq)
		return sdpa(q, kc, vc, mask)
	}
	var out ml.Tensor
	if rw, ok := b.Cache.(RowWiseKV); ok && rw.RowWise() {
		// Token by token, each with the history of a one-token batch.
		for t := range n {
			kc, vc, mask := rw.GetRow(ctx, layer, t)
			qt := q.View(ctx, t*q.Stride(2), hd, q.Stride(1), heads, q.Stride(2), 1)
			o := sdpa(qt, kc, vc, mask)
			if out == nil {
				out = o
			} else {
				out = out.Concat(ctx, o, 2)
			}
		}
		return out
	}
	if b.Seqs <= 1 {
		return attend(q, 0)
	}
	// Several sequences: each one's queries attend to its own cells,
	// as llama.cpp's per-sequence KV streams do (its CPU kernels pick
	// their path and precision by the rows of one stream).
	//
	// Sequences whose streams follow one another go through one
	// attention op over 4-D views (the stream the 4th dimension), as
	// llama.cpp computes them: one op per layer instead of one per
	// sequence and a concatenation, whose barriers cost more than the
	// attention of a decode step. Only where ggml's CPU kernel computes
	// every row as the op of its sequence alone would (rows are
	// independent outside its split-KV path, which it takes for one
	// query row of one stream over 512 cells or more, and its tiled
	// path, from 64 query rows): the results are those of the
	// per-sequence ops bit for bit.
	t := b.SeqTokens
	sk, _ := b.Cache.(StreamKV)
	for s := 0; s < b.Seqs; {
		var o ml.Tensor
		c := 1
		if sk != nil && t < 64 {
			if kc, vc, mask, count := sk.Streams(ctx, layer, s); count > 1 && (t > 1 || kc.Dim(2) < 512) {
				qs := q.View(ctx, s*t*q.Stride(2), hd, q.Stride(1), heads, q.Stride(2), t, t*q.Stride(2), count)
				o = sdpa(qs, kc, vc, mask)
				o = o.Reshape(ctx, o.Dim(0), o.Dim(1), t*count)
				c = count
			}
		}
		if o == nil {
			o = attend(q.View(ctx, s*t*q.Stride(2), hd, q.Stride(1), heads, q.Stride(2), t), s)
		}
		if out == nil {
			out = o
		} else {
			out = out.Concat(ctx, o, 2)
		}
		s += c
	}
	return out
}
