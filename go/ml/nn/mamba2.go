package nn

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// Mamba2 is the Mamba-2 mixer of the hybrid Nemotron-H (llama.cpp's
// build_mamba2_layer):
//
//	z, xBC, dt = In·x               (Inner; Inner + 2·Groups·State; Heads)
//	xBC = silu(causal_conv(conv_state ++ xBC, Conv) (+ ConvBias))
//	x, B, C = xBC                   (Heads of Inner/Heads; Groups of State twice)
//	y, S = ssm_scan(S, x, dt + DtBias, A, B, C)
//	y = (y + x·D) ⊙ silu(z)
//	out = Out·(rmsnorm(y)·Norm)     (the norm per group of Inner/Groups)
//
// The state S of each sequence is [State, Inner/Heads, Heads] (kvcache's
// LayerSpec with StateRows the head size); A and D are [1, Heads] (one
// decay and skip per head), Norm [Inner/Groups, Groups].
type Mamba2 struct {
	In, Conv, ConvBias ml.Tensor
	DtBias, A, D       ml.Tensor
	Norm, Out          ml.Tensor

	Inner, State, Heads, Groups int
	Eps                         float32
}

// Channels is the number of convolution channels (x, B and C).
func (l *Mamba2) Channels() int { return l.Inner + 2*l.Groups*l.State }

// Forward maps the normed hidden states x [d, n] of an equal batch to the
// mixer's output [d, n], reading and writing the batch's sequences'
// recurrent states as layer.
func (l *Mamba2) Forward(ctx ml.Context, x ml.Tensor, b *Batch, layer int) ml.Tensor {
	if b.Seqs == 0 || b.Seqs*b.SeqTokens != b.Tokens {
		panic(fmt.Errorf("nn: Mamba-2 layer %d needs an equal batch (%d tokens, %d sequences of %d)", layer, b.Tokens, b.Seqs, b.SeqTokens))
	}
	T, nS := b.SeqTokens, b.Seqs
	H, P, N, G, di, ch := l.Heads, l.Inner/l.Heads, l.State, l.Groups, l.Inner, l.Channels()
	width := l.Conv.Dim(0) - 1

	// The convolution state first, as llama.cpp's build_rs reads it.
	conv := b.Cache.ConvState(ctx, layer) // [width, ch, nS]
	ctx.Forward(conv)
	p := l.In.Mulmat(ctx, x)
	p = p.Reshape(ctx, p.Dim(0), T, nS)
	e, s1, s2 := p.Stride(0), p.Stride(1), p.Stride(2)
	z := p.View(ctx, 0, P, P*e, H, s1, T, s2, nS)
	xBC := p.View(ctx, di*e, ch, s1, T, s2, nS)
	dt := p.View(ctx, (di+ch)*e, H, s1, T, s2, nS)

	// The window [width+T, ch, nS]; the state after token t is its width
	// columns from t. With m kept states (to rewind past rejected draft
	// tokens) the cache takes the states after each of the last m tokens.
	m := b.Cache.StatesKept()
	w := conv.Concat(ctx, xBC.Permute(ctx, 1, 0, 2, 3), 0)
	var convKept []ml.Tensor
	if m == 1 {
		b.Cache.SetConvState(ctx, layer, w.Slice(ctx, 0, T, T+width, 1).Contiguous(ctx))
	} else {
		for j := range m {
			convKept = append(convKept, w.View(ctx, (T-j)*w.Stride(0), width, w.Stride(1), ch, w.Stride(2), nS))
		}
	}
	xBC = w.SSMConv(ctx, l.Conv) // [ch, T, nS]
	if l.ConvBias != nil {
		xBC = xBC.Add(ctx, l.ConvBias)
	}
	xBC = xBC.SILU(ctx)

	e, s1, s2 = xBC.Stride(0), xBC.Stride(1), xBC.Stride(2)
	xs := xBC.View(ctx, 0, P, P*e, H, s1, T, s2, nS)
	bs := xBC.View(ctx, di*e, N, N*e, G, s1, T, s2, nS)
	cs := xBC.View(ctx, (di+G*N)*e, N, N*e, G, s1, T, s2, nS)
	dt = dt.Contiguous(ctx).Add(ctx, l.DtBias) // [H, T, nS]

	slots := make([]int32, nS)
	for i := range slots {
		slots[i] = int32(i)
	}
	ids := ctx.Input().FromInts(slots, nS)
	// scan runs tokens [from, from+n) from state s: y [P, H, n, nS] and
	// the state after them [N, P, H, nS].
	scan := func(s ml.Tensor, from, n int) (ml.Tensor, ml.Tensor) {
		at := func(t ml.Tensor, d0, d1 int) ml.Tensor {
			return t.View(ctx, from*t.Stride(2), d0, t.Stride(1), d1, t.Stride(2), n, t.Stride(3), nS)
		}
		dtp := dt
		if n != T {
			dtp = dt.View(ctx, from*dt.Stride(1), H, dt.Stride(1), n, dt.Stride(2), nS).Contiguous(ctx)
		}
		out := s.SSMScan(ctx, at(xs, P, H), dtp, l.A, at(bs, N, G), at(cs, N, G), ids)
		ny := P * H * n * nS
		y := out.View(ctx, 0, ny).Reshape(ctx, P, H, n, nS)
		next := out.View(ctx, ny*out.Stride(0), N*P*H*nS).Reshape(ctx, N, P, H, nS)
		return y, next
	}
	state := b.Cache.DeltaState(ctx, layer) // [N, P, H, nS]
	if m == 1 {
		y, next := scan(state, 0, T)
		// The scan is the old state's only reader: the new one is
		// written at once, as llama.cpp does.
		b.Cache.SetDeltaState(ctx, layer, next)
		return l.finish(ctx, y, xs, z, T, nS, b, layer, nil, nil)
	}
	// The first T-m+1 tokens in one scan, then the others one by one,
	// keeping the state after each; the cache wants the last first.
	y, st := scan(state, 0, T-m+1)
	kept := []ml.Tensor{st}
	for t := T - m + 1; t < T; t++ {
		var yt ml.Tensor
		yt, st = scan(st, t, 1)
		y = y.Concat(ctx, yt, 2)
		kept = append(kept, st)
	}
	next := kept[m-1]
	for j := m - 2; j >= 0; j-- {
		next = next.Concat(ctx, kept[j], 3)
	}
	return l.finish(ctx, y, xs, z, T, nS, b, layer, convKept, next)
}

// finish is the skip, the gate, the grouped norm and the output
// projection of the scan's output y [P, H, T, nS]; then the states kept
// of several tokens, if any, go to the cache.
func (l *Mamba2) finish(ctx ml.Context, y, xs, z ml.Tensor, T, nS int, b *Batch, layer int, convKept []ml.Tensor, next ml.Tensor) ml.Tensor {
	y = y.Add(ctx, xs.Mul(ctx, l.D))
	y = z.Contiguous(ctx).SILU(ctx, y)
	y = y.Reshape(ctx, l.Inner/l.Groups, l.Groups, T, nS).RMSNorm(ctx, l.Norm, l.Eps)
	out := l.Out.Mulmat(ctx, y.Reshape(ctx, l.Inner, T*nS))
	if next != nil {
		// Last: the cache may write them over the old states in place.
		ctx.Forward(out)
		b.Cache.SetConvStates(ctx, layer, convKept)
		b.Cache.SetDeltaState(ctx, layer, next)
	}
	return out
}
