package nn

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// DeltaNet is the gated delta-net linear-attention layer of the hybrid
// architectures (Qwen3-Next, Qwen3.5; llama.cpp's build_layer_attn_linear
// over llm_build_delta_net_base):
//
//	qkv, z = the input projections of x          (QKV and Z, or the legacy QKVZ)
//	β = sigmoid(b);  g = softplus(a + DtBias)·A  (one per value head; A < 0)
//	qkv = silu(causal_conv(conv_state ++ qkv, Conv))
//	q, k = l2norm(q), l2norm(k)
//	o, S = delta_rule(q, k, v, g, β, S)          (fused kernel, or primitives)
//	out = Out·(rmsnorm(o)·Norm ⊙ silu(z))
//
// Shapes: KHeads query/key heads of HeadKDim, VHeads value heads of
// HeadVDim (VHeads a multiple of KHeads; Heads says how value heads share
// key heads), convolution over the 2·KHeads·HeadKDim + VHeads·HeadVDim
// channels of q, k, v.
type DeltaNet struct {
	// llama.cpp's layout: QKV [d, 2·kdim + vdim] (q, k, v in that order),
	// Z [d, vdim]. Legacy Qwen3-Next GGUFs have QKVZ [d, 2·kdim + 2·vdim]
	// instead, grouped per key head: (q, k, v, z) of each key head's
	// share.
	QKV, Z, QKVZ ml.Tensor
	// Beta and Alpha [d, VHeads] (Qwen3.5), or BetaAlpha [d, 2·VHeads]
	// grouped per key head: (β of its value heads, then α) (Qwen3-Next).
	Beta, Alpha, BetaAlpha ml.Tensor
	Conv                   ml.Tensor // [width, channels]
	DtBias, A              ml.Tensor // [VHeads]
	Norm                   ml.Tensor // [HeadVDim]
	Out                    ml.Tensor // [vdim, d]

	KHeads, VHeads, HeadKDim, HeadVDim int
	Heads                              ml.HeadLayout
	Eps                                float32

	// Primitive computes the delta rule from primitive ops (chunked for
	// a prefill, token-wise for one token) even when the backend has the
	// fused kernel (for tests and comparisons).
	Primitive bool
}

// Channels is the number of convolution channels.
func (l *DeltaNet) Channels() int { return 2*l.KHeads*l.HeadKDim + l.VHeads*l.HeadVDim }

// Forward maps the normed hidden states x [d, n] of an equal batch to the
// layer's output [d, n], reading and writing the batch's sequences'
// recurrent states as layer.
func (l *DeltaNet) Forward(ctx ml.Context, x ml.Tensor, b *Batch, layer int) ml.Tensor {
	if b.Seqs == 0 || b.Seqs*b.SeqTokens != b.Tokens {
		panic(fmt.Errorf("nn: delta-net layer %d needs an equal batch (%d tokens, %d sequences of %d)", layer, b.Tokens, b.Seqs, b.SeqTokens))
	}
	T, nS := b.SeqTokens, b.Seqs
	kH, vH, dk, dv := l.KHeads, l.VHeads, l.HeadKDim, l.HeadVDim
	kdim, vdim := kH*dk, vH*dv

	qkv, z := l.project(ctx, x, T, nS)

	var beta, alpha ml.Tensor
	if l.BetaAlpha != nil {
		r := vH / kH
		ba := l.BetaAlpha.Mulmat(ctx, x).Reshape(ctx, 2*r, kH, T, nS)
		beta = ba.View(ctx, 0, r, ba.Stride(1), kH, ba.Stride(2), T, ba.Stride(3), nS).Contiguous(ctx)
		alpha = ba.View(ctx, r*ba.Stride(0), r, ba.Stride(1), kH, ba.Stride(2), T, ba.Stride(3), nS).Contiguous(ctx, vH, T, nS)
	} else {
		beta = l.Beta.Mulmat(ctx, x)
		alpha = l.Alpha.Mulmat(ctx, x).Reshape(ctx, vH, T, nS)
	}
	beta = beta.Sigmoid(ctx).Reshape(ctx, 1, vH, T, nS)
	gate := alpha.Add(ctx, l.DtBias).Softplus(ctx).Mul(ctx, l.A).Reshape(ctx, 1, vH, T, nS)

	// The causal convolution over the carried state.
	// With m > 1 the cache keeps the states after each of the last m
	// tokens (to rewind past rejected draft tokens).
	m := b.Cache.StatesKept()
	conv := b.Cache.ConvState(ctx, layer)
	var convOut, convNext ml.Tensor
	var convKept []ml.Tensor // with m > 1: the states after each of the last m tokens
	if cc, ok := qkv.(ml.CausalConv); ok && m == 1 {
		convOut, convNext = cc.CausalConv(ctx, conv, l.Conv)
	} else {
		// The window [width-1+T, ch, nS]; the state after token t is its
		// width-1 columns from t.
		w := conv.Concat(ctx, qkv.Permute(ctx, 1, 0, 2, 3), 0)
		convOut = w.SSMConv(ctx, l.Conv)
		if m == 1 {
			convNext = w.Slice(ctx, 0, T, T+l.Conv.Dim(0)-1, 1).Contiguous(ctx)
		}
		for j := 0; j < m && m > 1; j++ {
			convKept = append(convKept, w.View(ctx, (T-j)*w.Stride(0), l.Conv.Dim(0)-1, w.Stride(1), w.Dim(1), w.Stride(2), nS))
		}
	}
	// With one state kept, the new conv state goes to the cache at once, as
	// in llama.cpp's graph (its write follows the window's concatenation):
	// the window is the only reader of the old state. The node order decides
	// which device runs the ops without weights when layers span devices.
	early := m == 1
	if early {
		b.Cache.SetConvState(ctx, layer, convNext)
	}
	mix := convOut.SILU(ctx) // [ch, T, nS]

	rs := mix.Stride(1)
	q := mix.View(ctx, 0, dk, mix.Stride(0)*dk, kH, rs, T, rs*T, nS)
	k := mix.View(ctx, kdim*mix.Stride(0), dk, mix.Stride(0)*dk, kH, rs, T, rs*T, nS)
	v := mix.View(ctx, 2*kdim*mix.Stride(0), dv, mix.Stride(0)*dv, vH, rs, T, rs*T, nS)
	q = l2Norm(ctx, q, l.Eps)
	k = l2Norm(ctx, k, l.Eps)

	state, writable := b.Cache.DeltaStateInPlace(ctx, layer) // [dv, dv, vH, nS]
	var o, next ml.Tensor
	updated := false
	if here, ok := q.(ml.GatedDeltaNetInPlace); ok && writable && m == 1 && !l.Primitive {
		// The cache's rows updated where they are (the op is their only
		// reader); where the backend cannot, the copy below.
		o, updated = here.GatedDeltaNetInPlace(ctx, k, v, gate, beta, state, l.Heads)
	}
	gdn, fused := q.(ml.GatedDeltaNet)
	gdnKeep, fusedKeep := q.(ml.GatedDeltaNetSnapshots)
	switch {
	case updated:
	case fused && m == 1 && !l.Primitive:
		o, next = gdn.GatedDeltaNet(ctx, k, v, gate, beta, state, l.Heads)
		// The fused rule is the old state's only reader: the new one is
		// written at once, as llama.cpp does.
		b.Cache.SetDeltaState(ctx, layer, next)
		next = nil
	case fusedKeep && !l.Primitive:
		o, next = gdnKeep.GatedDeltaNetSnapshots(ctx, k, v, gate, beta, state, l.Heads, m)
	default:
		if kH != vH {
			q, k = repeatHeads(ctx, q, vH, l.Heads), repeatHeads(ctx, k, vH, l.Heads)
		}
		o, next = deltaRuleKeeping(ctx, q, k, v, gate, beta, state, m)
	}

	// The gated RMS norm: rmsnorm(o)·Norm ⊙ silu(z), per value head.
	o = o.RMSNorm(ctx, l.Norm, l.Eps).Mul(ctx, z.Reshape(ctx, dv, vH, T, nS).SILU(ctx))
	out := l.Out.Mulmat(ctx, o.Reshape(ctx, vdim, T*nS))

	// Otherwise the new states last: the cache may write them over the old
	// ones in place, so everything that reads those (the primitive rule's
	// chunk outputs read the initial state) must be in the graph first.
	ctx.Forward(out)
	switch {
	case convKept != nil:
		b.Cache.SetConvStates(ctx, layer, convKept)
	case !early:
		b.Cache.SetConvState(ctx, layer, convNext)
	}
	if next != nil {
		b.Cache.SetDeltaState(ctx, layer, next)
	}
	return out
}

// deltaRuleKeeping is the primitive delta rule over T tokens (chunked, or
// token-wise for one) returning the states after each of the last m
// tokens, the last first ([S, S, H, nS·m]): the first T-m+1 tokens in one
// go, then the others one by one.
func deltaRuleKeeping(ctx ml.Context, q, k, v, g, beta, s ml.Tensor, m int) (ml.Tensor, ml.Tensor) {
	T := v.Dim(2)
	rule := func(a, b int, s ml.Tensor) (ml.Tensor, ml.Tensor) {
		part := func(t ml.Tensor) ml.Tensor {
			if a == 0 && b == T {
				return t
			}
			return t.Slice(ctx, 2, a, b, 1).Contiguous(ctx)
		}
		if b-a == 1 {
			return deltaRuleToken(ctx, part(q), part(k), part(v), part(g), part(beta), s)
		}
		return deltaRuleChunked(ctx, part(q), part(k), part(v), part(g), part(beta), s)
	}
	o, s := rule(0, T-m+1, s)
	states := []ml.Tensor{s}
	for t := T - m + 1; t < T; t++ {
		var ot ml.Tensor
		ot, s = rule(t, t+1, s)
		o = o.Concat(ctx, ot, 2)
		states = append(states, s)
	}
	next := states[len(states)-1]
	for j := len(states) - 2; j >= 0; j-- {
		next = next.Concat(ctx, states[j], 3)
	}
	return o, next
}

// project returns qkv [ch, T, nS] and z [vdim, T·nS].
func (l *DeltaNet) project(ctx ml.Context, x ml.Tensor, T, nS int) (qkv, z ml.Tensor) {
	kH, vH, dk, dv := l.KHeads, l.VHeads, l.HeadKDim, l.HeadVDim
	if l.QKV != nil {
		return l.QKV.Mulmat(ctx, x).Reshape(ctx, l.Channels(), T, nS), l.Z.Mulmat(ctx, x)
	}
	// Legacy: per key head, q (dk), k (dk), its value heads (r·dv), its
	// z heads (r·dv).
	r := vH / kH
	g := l.QKVZ.Mulmat(ctx, x).Reshape(ctx, 2*dk+2*r*dv, kH, T, nS)
	part := func(off, n int) ml.Tensor {
		return g.View(ctx, off*g.Stride(0), n, g.Stride(1), kH, g.Stride(2), T, g.Stride(3), nS)
	}
	q := part(0, dk).Contiguous(ctx, dk*kH, T, nS)
	k := part(dk, dk).Contiguous(ctx, dk*kH, T, nS)
	v := part(2*dk, r*dv).Contiguous(ctx, dv*vH, T, nS)
	z = part(2*dk+r*dv, r*dv).Contiguous(ctx)
	return q.Concat(ctx, k, 0).Concat(ctx, v, 0), z
}

// l2Norm divides each head vector by its L2 norm, as llama.cpp's
// build_gdn_l2_norm: rmsnorm with eps/n, times 1/√n, i.e. x/√(Σx² + eps).
func l2Norm(ctx ml.Context, x ml.Tensor, eps float32) ml.Tensor {
	n := float32(x.Dim(0))
	return x.RMSNorm(ctx, nil, eps/n).Scale(ctx, 1/sqrt(float64(n)))
}

// repeatHeads repeats the heads of x [S, H, T, nS] to h heads.
func repeatHeads(ctx ml.Context, x ml.Tensor, h int, layout ml.HeadLayout) ml.Tensor {
	s, hk, t, ns := x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
	if layout == ml.HeadsInterleaved {
		// Each head repeated in place: [S, 1, H, T·nS] tiled to [S, r, H, T·nS].
		return x.Reshape(ctx, s, 1, hk, t*ns).Repeat4D(ctx, s, h/hk, hk, t*ns).Reshape(ctx, s, h, t, ns)
	}
	return x.Repeat4D(ctx, s, h, t, ns)
}
