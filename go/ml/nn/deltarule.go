package nn

import (
	"math"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// The gated delta rule from primitive ops, for backends without the fused
// kernel (and to check it): per value head, with state S [key, value],
//
//	S ← exp(g)·S;  u = β(v − Sᵀk);  S ← S + k uᵀ;  o = Sᵀq/√S_k
//
// Inputs: q, k, v [S, H, T, nS] (the key heads already repeated to the H
// value heads), g and β [1, H, T, nS], state [S, S, H, nS]. Outputs: o [S,
// H, T, nS] and the new state [S, S, H, nS]. The graphs are llama.cpp's
// build_delta_net_autoregressive and build_delta_net_chunking (scalar gate
// per head).

const deltaChunk = 64 // tokens per chunk of the chunked form

func sqrt(x float64) float64 { return math.Sqrt(x) }

var inf = math.Inf(1)

// transpose swaps dims 0 and 1 (a view).
func transpose(ctx ml.Context, t ml.Tensor) ml.Tensor { return t.Permute(ctx, 1, 0, 2, 3) }

// deltaRuleToken is the rule for one token per sequence (T = 1).
func deltaRuleToken(ctx ml.Context, q, k, v, g, beta, s ml.Tensor) (ml.Tensor, ml.Tensor) {
	S, H, nS := v.Dim(0), v.Dim(1), v.Dim(3)
	q = q.Scale(ctx, 1/sqrt(float64(S))).Permute(ctx, 0, 2, 1, 3) // [S, 1, H, nS]
	k = k.Permute(ctx, 0, 2, 1, 3)
	v = v.Permute(ctx, 0, 2, 1, 3)
	g = g.Reshape(ctx, 1, 1, H, nS).Exp(ctx)
	beta = beta.Reshape(ctx, 1, 1, H, nS)

	// Vectors with a dim of 1 change orientation by a reshape (llama.cpp's
	// transpose of them, without a strided operand).
	s = s.Mul(ctx, g)
	sk := s.Mul(ctx, k).SumRows(ctx)                             // [1, S, H, nS]: Sᵀk
	d := v.Sub(ctx, sk.Reshape(ctx, S, 1, H, nS)).Mul(ctx, beta) // [S, 1, H, nS]: u
	s = s.Add(ctx, k.Repeat4D(ctx, S, S, H, nS).Mul(ctx, d.Reshape(ctx, 1, S, H, nS)))
	o := s.Mul(ctx, q).SumRows(ctx).Permute(ctx, 2, 0, 1, 3) // [S, H, 1, nS]
	return o, s
}

// deltaRuleChunked is the rule for T tokens per sequence in chunks of
// deltaChunk: within a chunk, the WY form (a triangular solve) turns the
// sequential updates into matrix products; the state passes from chunk to
// chunk.
func deltaRuleChunked(ctx ml.Context, q, k, v, g, beta, s ml.Tensor) (ml.Tensor, ml.Tensor) {
	S, H, T, nS := v.Dim(0), v.Dim(1), v.Dim(2), v.Dim(3)
	const CS = deltaChunk
	pad := (CS - T%CS) % CS
	nC := (T + pad) / CS
	B := H * nS

	q = q.Scale(ctx, 1/sqrt(float64(S)))
	// [X, T, H, nS], padded to whole chunks, then [X, CS, nC, H·nS].
	chunks := func(t ml.Tensor) ml.Tensor {
		return t.Contiguous(ctx).Permute(ctx, 0, 2, 1, 3).Pad(ctx, 0, pad, 0, 0)
	}
	q, k, v, g, beta = chunks(q), chunks(k), chunks(v), chunks(g), chunks(beta)
	vb := v.Mul(ctx, beta)
	kb := k.Mul(ctx, beta)
	q = q.Reshape(ctx, S, CS, nC, B)
	k = k.Reshape(ctx, S, CS, nC, B)
	kb = kb.Reshape(ctx, S, CS, nC, B)
	vb = vb.Reshape(ctx, S, CS, nC, B)
	g = g.Reshape(ctx, 1, CS, nC, B)

	// γ: the cumulative log-decay within each chunk, [CS, 1, nC, B], and
	// the decay between positions i ≤ j: exp(γ_j − γ_i).
	gcs := transpose(ctx, g).Contiguous(ctx).CumSum(ctx)
	gcsJ := gcs.Reshape(ctx, 1, CS, nC, B).Repeat4D(ctx, CS, CS, nC, B)
	decay := gcsJ.Sub(ctx, gcs).Tri(ctx, triLowerDiag).Exp(ctx)

	kk := k.Mulmat(ctx, kb).Mul(ctx, decay) // [CS, CS, nC, B]
	kq := k.Mulmat(ctx, q).Mul(ctx, decay).Tri(ctx, triLowerDiag)

	// (I + A)⁻¹ with A the strictly lower part of kk, by a triangular solve.
	attn := kk.Tri(ctx, triLower)
	ones := make([]float32, CS)
	for i := range ones {
		ones[i] = 1
	}
	identity := ctx.Input().FromFloats(ones, CS).Diag(ctx)
	lhs := attn.Add(ctx, identity)
	attn = lhs.SolveTri(ctx, attn.Neg(ctx), true, true, false).Add(ctx, identity)

	vNew := transpose(ctx, vb).Contiguous(ctx).Mulmat(ctx, attn) // [S, CS, nC, B]
	gExp := gcs.Exp(ctx)                                         // [CS, 1, nC, B]
	kcd := transpose(ctx, kb).Contiguous(ctx).Mul(ctx, gExp).Mulmat(ctx, attn)
	qg := q.Mul(ctx, transpose(ctx, gExp).Contiguous(ctx)) // [S, CS, nC, B]

	// γ at the chunk's end, and the decay from each position to it.
	gLast := gcs.View(ctx, (CS-1)*gcs.Stride(0), 1, gcs.Stride(1), 1, gcs.Stride(2), nC, gcs.Stride(3), B).Contiguous(ctx)
	gLastExp := gLast.Exp(ctx) // [1, 1, nC, B]
	gDiffExp := transpose(ctx, gcs.Sub(ctx, gLast).Neg(ctx).Exp(ctx)).Contiguous(ctx)
	kgT := transpose(ctx, k.Mul(ctx, gDiffExp)).Contiguous(ctx) // [CS, S, nC, B]

	state := s.Reshape(ctx, S, S, 1, B)
	vT := transpose(ctx, vNew).Contiguous(ctx) // [CS, S, nC, B]
	out := vNew
	chunk := func(t ml.Tensor, c int) ml.Tensor {
		return t.View(ctx, c*t.Stride(2), t.Dim(0), t.Stride(1), t.Dim(1), t.Stride(2), 1, t.Stride(3), t.Dim(3))
	}
	for c := 0; c < nC; c++ {
		vPrime := chunk(kcd, c).Mulmat(ctx, state) // [CS, S, 1, B]
		vtNew := chunk(vT, c).Sub(ctx, vPrime)
		vAttn := vtNew.Mulmat(ctx, chunk(kq, c)) // [S, CS, 1, B]
		inter := state.Mulmat(ctx, chunk(qg, c)) // [S, CS, 1, B]
		oc := inter.Add(ctx, vAttn)
		out = out.SetInplace(ctx, oc, out.Stride(1), out.Stride(2), out.Stride(3), c*out.Stride(2))
		kgv := chunk(kgT, c).Mulmat(ctx, vtNew) // [S, S, 1, B]
		state = state.Mul(ctx, chunk(gLastExp, c)).Add(ctx, kgv)
	}

	es := out.Stride(0)
	o := out.View(ctx, 0, S, es*S, T, es*S*CS*nC, H, es*S*CS*nC*H, nS).Permute(ctx, 0, 2, 1, 3)
	return o, state.Reshape(ctx, S, S, H, nS)
}

// ggml's GGML_TRI_TYPE_* values (see ml.Tensor.Tri).
const (
	triLowerDiag = 2
	triLower     = 3
)
