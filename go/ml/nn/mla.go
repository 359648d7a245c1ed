package nn

import (
	"fmt"
	"math"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// MLA is DeepSeek-V2's multi-head latent attention, as llama.cpp's
// deepseek2 graph builds it:
//
//	q = Q·x, or QB·rmsnorm(QA·x) (low-rank queries)   [nope+rope, heads, n]
//	c, kr = KVA·x                                      [KVRank], [rope]
//	c = rmsnorm(c);  q_r, kr = RoPE(q's last RopeDim), RoPE(kr)
//
// With KB and VB (the files llama.cpp's converter writes, split from
// kv_b_proj), the key up-projection is absorbed into the queries and one
// latent key/value head is cached, K = [c; kr] and V = c (a view of K:
// kvcache.LayerSpec.ValuesInKeys), as multi-query attention over KVRank +
// RopeDim values; each head's output is then up-projected by its VB:
//
//	q' = [KB_h·q_nope; q_r]   out_h = VB_h · softmax(scale·q'·K) · c
//
// With KVB (older files: kv_b_proj whole), keys and values are
// decompressed per head, [KVB·c]_h = [k_nope; v], and cached as ordinary
// multi-head attention: K_h = [k_nope; kr], Q_h = [q_nope; q_r].
type MLA struct {
	Q        Linear // [d, heads·(nope+rope)] (no QA)
	QA, QB   Linear // [d, QRank], [QRank, heads·(nope+rope)]
	QANorm   ml.Tensor
	KVA      Linear    // [d, KVRank+RopeDim]
	KVANorm  ml.Tensor // [KVRank]
	KB, VB   ml.Tensor // [nope, KVRank, heads], [KVRank, ValueDim, heads]
	KVB      Linear    // [KVRank, heads·(nope+ValueDim)] (instead of KB and VB)
	Output   Linear    // [heads·ValueDim, d]
	Heads    int
	NopeDim  int // per head, the query and key values without RoPE
	RopeDim  int // per head, the rotated ones (shared by the heads in the keys)
	KVRank   int
	ValueDim int
	NormEps  float32
	// Scale multiplies the query·key products; 0 means 1/√(NopeDim+RopeDim).
	Scale float64
	RoPE  RoPE
	// TempScaled: as Attention.TempScaled (Mistral Large 3's queries).
	TempScaled bool
}

// Absorbed reports whether the attention caches the latent (KB and VB).
func (a *MLA) Absorbed() bool { return a.KVB.Weight == nil }

// Forward maps the normed hidden states x [d, n] to the block's output
// [d, n], storing the batch's keys (and values) in the cache as layer.
func (a *MLA) Forward(ctx ml.Context, x ml.Tensor, b *Batch, layer int) ml.Tensor {
	n, nope, rd, heads := b.Tokens, a.NopeDim, a.RopeDim, a.Heads
	var q ml.Tensor
	if a.QA.Weight != nil {
		q = a.QB.Forward(ctx, a.QA.Forward(ctx, x).RMSNorm(ctx, a.QANorm, a.NormEps))
	} else {
		q = a.Q.Forward(ctx, x)
	}
	q = q.Reshape(ctx, nope+rd, heads, n)

	ckr := a.KVA.Forward(ctx, x) // [KVRank+rope, n]
	c := ckr.View(ctx, 0, a.KVRank, ckr.Stride(1), n)
	kr := ckr.View(ctx, a.KVRank*ckr.Stride(0), rd, ckr.Stride(1), 1, ckr.Stride(1), n)
	kr = a.RoPE.Apply(ctx, kr, b.Positions)
	c = c.RMSNorm(ctx, a.KVANorm, a.NormEps)

	qNope := q.View(ctx, 0, nope, q.Stride(1), heads, q.Stride(2), n)
	qr := q.View(ctx, nope*q.Stride(0), rd, q.Stride(1), heads, q.Stride(2), n)
	qr = a.RoPE.Apply(ctx, qr, b.Positions)

	scale := a.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(nope+rd))
	}
	attention := func(q, kc, vc, mask ml.Tensor, vmla ml.Tensor, applied bool) ml.Tensor {
		op, ok := q.(ml.ScaledDotProductAttention)
		if !ok {
			panic(fmt.Errorf("nn: the backend's tensors have no ScaledDotProductAttention"))
		}
		return op.ScaledDotProductAttention(ctx, kc, vc, mask, nil, vmla, scale, applied)
	}
	var out ml.Tensor
	if a.Absorbed() {
		// [KVRank, n, heads] → [KVRank, heads, n]
		qa := a.KB.Mulmat(ctx, qNope.Permute(ctx, 0, 2, 1, 3)).Permute(ctx, 0, 2, 1, 3)
		qc := a.tempScaled(ctx, qa.Concat(ctx, qr, 0), b)
		v := c.Reshape(ctx, a.KVRank, 1, n)
		k := v.Concat(ctx, kr, 0)
		ctx.Forward(qc, v, k)
		b.Cache.Put(ctx, layer, k, nil)
		// The cache's values view its keys, never permuted: the backend
		// lays them out as its attention wants (applied = false).
		out = attendCached(ctx, qc, b, layer, func(q, kc, vc, mask ml.Tensor) ml.Tensor {
			return attention(q, kc, vc, mask, a.VB, false)
		})
	} else {
		kv := a.KVB.Forward(ctx, c) // [heads·(nope+v), n]
		w := nope + a.ValueDim
		es := kv.Stride(0)
		kNope := kv.View(ctx, 0, nope, w*es, heads, w*heads*es, n)
		v := kv.View(ctx, nope*es, a.ValueDim, w*es, heads, w*heads*es, n).Contiguous(ctx)
		qc := a.tempScaled(ctx, qNope.Concat(ctx, qr, 0), b)
		k := kNope.Concat(ctx, kr.Repeat4D(ctx, rd, heads, n, 1), 0)
		ctx.Forward(qc, v, k)
		b.Cache.Put(ctx, layer, k, v)
		out = attendCached(ctx, qc, b, layer, func(q, kc, vc, mask ml.Tensor) ml.Tensor {
			return attention(q, kc, vc, mask, nil, true)
		})
	}
	out = out.Reshape(ctx, a.ValueDim*heads, n)
	ctx.Forward(out)
	return a.Output.Forward(ctx, out)
}

// tempScaled multiplies the queries by the batch's attention temperature
// when the block asks for it.
func (a *MLA) tempScaled(ctx ml.Context, q ml.Tensor, b *Batch) ml.Tensor {
	if !a.TempScaled {
		return q
	}
	if b.AttnScale == nil {
		panic(fmt.Errorf("nn: attention with temperature scaling in a batch without AttnScale"))
	}
	return q.Mul(ctx, b.AttnScale)
}
