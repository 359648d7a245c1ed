package backend

// SSMConv, SSMScan and the ml.CausalConv extension against Go references
// (float64), state carry-over, and bad inputs.

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// convRef: out[ch, t, s] = Σ_i sx[t+i, ch, s]·kernel[i, ch].
func convRef(sx, kernel ref) ref {
	width, channels := kernel.ne[0], kernel.ne[1]
	nTokens, nSeqs := sx.ne[0]-width+1, sx.ne[2]
	out := newRef(channels, nTokens, nSeqs)
	out.each(func(ch, t, s, _ int) {
		var sum float64
		for i := 0; i < width; i++ {
			sum += float64(sx.at(t+i, ch, s, 0)) * float64(kernel.at(i, ch, 0, 0))
		}
		out.set(float32(sum), ch, t, s, 0)
	})
	return out
}

// convTol: f32 sums of at most 4 products of magnitude < 4 (normal
// samples): rounding below 4·16·2^-24 ≈ 4e-6; 1e-5 allowed.
const convTol = 1e-5

func TestSSMConv(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	rng := rand.New(rand.NewSource(61))
	for _, c := range []struct{ width, channels, tokens, seqs int }{
		{4, 5, 1, 1}, {4, 16, 7, 2}, {2, 3, 64, 3},
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			ctx := b.NewContext()
			defer ctx.Close()
			sx := randRef(rng, c.width-1+c.tokens, c.channels, c.seqs)
			kernel := randRef(rng, c.width, c.channels)
			got := sx.tensor(ctx).SSMConv(ctx, kernel.tensor(ctx))
			want := convRef(sx, kernel)
			if !slices.Equal(got.Shape(), want.shape()) || got.DType() != ml.DTypeF32 {
				t.Fatalf("shape %v %v, want %v f32", got.Shape(), got.DType(), want.shape())
			}
			closeTo(t, "SSMConv", want.data, compute(ctx, got)[0], convTol, 0)
		})
	}
}

// scanRef is Mamba's selective scan with one kept state: y then the final
// states, flat.
func scanRef(s, x, dt, a, B, C ref, ids []int32) []float32 {
	dState, headDim, nHead := s.ne[0], s.ne[1], s.ne[2]
	nTokens, nSeqs, nGroup := x.ne[2], x.ne[3], B.ne[1]
	y := newRef(headDim, nHead, nTokens, nSeqs)
	final := newRef(dState, headDim, nHead, nSeqs)
	for seq := 0; seq < nSeqs; seq++ {
		st := make([]float64, dState*headDim*nHead)
		for i := range st {
			st[i] = float64(s.data[int(ids[seq])*len(st)+i])
		}
		for tok := 0; tok < nTokens; tok++ {
			for h := 0; h < nHead; h++ {
				g := h / (nHead / nGroup)
				d := float64(dt.at(h, tok, seq, 0))
				if d <= 20 {
					d = math.Log1p(math.Exp(d))
				}
				for p := 0; p < headDim; p++ {
					xv := float64(x.at(p, h, tok, seq))
					var acc float64
					for n := 0; n < dState; n++ {
						av := a.at(0, h, 0, 0)
						if a.ne[0] > 1 {
							av = a.at(n, h, 0, 0)
						}
						i := n + dState*(p+headDim*h)
						st[i] = st[i]*math.Exp(d*float64(av)) + float64(B.at(n, g, tok, seq))*xv*d
						acc += st[i] * float64(C.at(n, g, tok, seq))
					}
					y.set(float32(acc), p, h, tok, seq)
				}
			}
		}
		for i, v := range st {
			final.data[seq*len(st)+i] = float32(v)
		}
	}
	return append(y.data, final.data...)
}

// scanTol: f32 recurrences with expf that decay (A < 0): largest error in
// the Rust tests ~1.4e-6·(1+|y|) for d_state 128; 1e-5 allowed.
const scanTol = 1e-5

func TestSSMScan(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	rng := rand.New(rand.NewSource(62))
	for _, c := range []struct {
		dState, headDim, nHead, nGroup, tokens, seqs, slots int
		mamba1                                              bool
	}{
		{16, 4, 4, 2, 1, 1, 1, false},
		{64, 8, 6, 3, 7, 2, 3, false},
		{13, 3, 2, 1, 5, 2, 2, false},
		{16, 1, 12, 1, 7, 1, 2, true},
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			ctx := b.NewContext()
			defer ctx.Close()
			s := randRef(rng, c.dState, c.headDim, c.nHead, c.slots)
			x := randRef(rng, c.headDim, c.nHead, c.tokens, c.seqs)
			dt := randRef(rng, c.nHead, c.tokens, c.seqs)
			aDim := 1
			if c.mamba1 {
				aDim = c.dState
			}
			a := mapRef(randRef(rng, aDim, c.nHead), func(v float32) float32 { return -0.1 - float32(math.Abs(float64(v)))*0.5 })
			B := randRef(rng, c.dState, c.nGroup, c.tokens, c.seqs)
			C := randRef(rng, c.dState, c.nGroup, c.tokens, c.seqs)
			ids := make([]int32, c.seqs)
			for i := range ids {
				ids[i] = int32(c.slots - 1 - i)
			}
			idsT := ctx.Input().FromInts(ids, c.seqs)
			got := s.tensor(ctx).SSMScan(ctx, x.tensor(ctx), dt.tensor(ctx), a.tensor(ctx), B.tensor(ctx), C.tensor(ctx), idsT)
			want := scanRef(s, x, dt, a, B, C, ids)
			if !slices.Equal(got.Shape(), []int{len(want)}) {
				t.Fatalf("shape %v, want [%d]", got.Shape(), len(want))
			}
			closeTo(t, "SSMScan", want, compute(ctx, got)[0], scanTol, scanTol)
		})
	}
}

// causalRef: out [C, T, n] and the new state [K-1, C, n].
func causalRef(x, state, kernel ref) (ref, ref) {
	width, channels := kernel.ne[0], kernel.ne[1]
	nTokens, nSeqs := x.ne[1], x.ne[2]
	w := newRef(width-1+nTokens, channels, nSeqs)
	w.each(func(i, ch, s, _ int) {
		if i < width-1 {
			w.set(state.at(i, ch, s, 0), i, ch, s, 0)
		} else {
			w.set(x.at(ch, i-(width-1), s, 0), i, ch, s, 0)
		}
	})
	return convRef(w, kernel), sliceRef(w, 0, nTokens, nTokens+width-1, 1)
}

func TestCausalConv(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	rng := rand.New(rand.NewSource(63))
	const total = 200
	for _, c := range []struct{ width, channels, seqs int }{{4, 6, 1}, {4, 24, 2}, {2, 3, 3}} {
		x := randRef(rng, c.channels, total, c.seqs)
		state := randRef(rng, c.width-1, c.channels, c.seqs)
		kernel := randRef(rng, c.width, c.channels)
		wantAll, wantStateAll := causalRef(x, state, kernel)
		for _, n := range []int{1, 7, 64, 200} {
			t.Run(fmt.Sprintf("%+v/T=%d", c, n), func(t *testing.T) {
				ctx := b.NewContext()
				defer ctx.Close()
				first := sliceRef(x, 1, 0, n, 1)
				xt := first.tensor(ctx)
				cc, ok := xt.(ml.CausalConv)
				if !ok {
					t.Fatal("tensors do not implement ml.CausalConv")
				}
				kt := kernel.tensor(ctx)
				out, newState := cc.CausalConv(ctx, state.tensor(ctx), kt)
				want, wantState := causalRef(first, state, kernel)
				if !slices.Equal(out.Shape(), want.shape()) || !slices.Equal(newState.Shape(), wantState.shape()) {
					t.Fatalf("shapes %v %v, want %v %v", out.Shape(), newState.Shape(), want.shape(), wantState.shape())
				}
				if n == total {
					got := compute(ctx, out, newState)
					closeTo(t, "out", want.data, got[0], convTol, 0)
					closeTo(t, "state", wantState.data, got[1], 0, 0)
					return
				}
				// Carry-over: tokens [n, total) from the returned state.
				rest := sliceRef(x, 1, n, total, 1).tensor(ctx)
				out2, state2 := rest.(ml.CausalConv).CausalConv(ctx, newState, kt)
				got := compute(ctx, out, out2, state2)
				joined := newRef(c.channels, total, c.seqs)
				joined.each(func(ch, tok, s, _ int) {
					if tok < n {
						joined.set(got[0][ch+c.channels*(tok+n*s)], ch, tok, s, 0)
					} else {
						joined.set(got[1][ch+c.channels*(tok-n+(total-n)*s)], ch, tok, s, 0)
					}
				})
				closeTo(t, "split out", wantAll.data, joined.data, convTol, 0)
				// The state is a copy of inputs: exact.
				closeTo(t, "split state", wantStateAll.data, got[2], 0, 0)

				// The whole sequence in one call gives the same bits.
				ctx2 := b.NewContext()
				defer ctx2.Close()
				o, st := x.tensor(ctx2).(ml.CausalConv).CausalConv(ctx2, state.tensor(ctx2), kernel.tensor(ctx2))
				whole := compute(ctx2, o, st)
				if !slices.Equal(whole[0], joined.data) || !slices.Equal(whole[1], got[2]) {
					t.Fatal("split and whole calls differ")
				}
			})
		}
	}
}

func TestSSMOpsRejectBadInputs(t *testing.T) {
	ctx := setup(t)
	z := func(shape ...int) ml.Tensor { return ctx.Input().Zeros(ml.DTypeF32, shape...) }
	sx, kernel := z(7, 4, 2), z(4, 4)
	mustPanic(t, func() { z(7, 5, 2).SSMConv(ctx, kernel) }, "ssm_conv: sx f32[7,5,2] and c f32[4,4] differ in channels")
	mustPanic(t, func() { z(3, 4, 2).SSMConv(ctx, kernel) }, "ssm_conv: sx f32[3,4,2] has 3 columns, fewer than the kernel width 4")
	mustPanic(t, func() { ctx.Input().Zeros(ml.DTypeF16, 7, 4, 2).SSMConv(ctx, kernel) }, "ssm_conv: sx must be f32")
	mustPanic(t, func() { sx.SSMConv(ctx, nil) }, "ssm_conv: c is NULL")

	s, x, dt, a := z(8, 4, 4, 2), z(4, 4, 3, 2), z(4, 3, 2), z(1, 4)
	B, C := z(8, 2, 3, 2), z(8, 2, 3, 2)
	ids := ctx.Input().FromInts([]int32{0, 1}, 2)
	mustPanic(t, func() { s.SSMScan(ctx, x, dt, a, B, C, z(2)) }, "ssm_scan: ids must be i32, got f32[2]")
	mustPanic(t, func() { s.SSMScan(ctx, x, z(4, 3), a, B, C, ids) }, "ssm_scan: dt must have shape [4,3,2]")
	mustPanic(t, func() { s.SSMScan(ctx, x, dt, a, z(8, 3, 3, 2), z(8, 3, 3, 2), ids) }, "ssm_scan: n_head (4) must be a multiple of B's n_group (3)")
	mustPanic(t, func() { s.SSMScan(ctx, x, dt, a, B, z(8, 1, 3, 2), ids) }, "ssm_scan: B and C must have the same shape")

	xc := z(6, 5, 2)
	cc := xc.(ml.CausalConv)
	mustPanic(t, func() { cc.CausalConv(ctx, z(3, 6, 2), z(1, 6)) }, "causal_conv: kernel width must be at least 2")
	mustPanic(t, func() { cc.CausalConv(ctx, z(4, 6, 2), z(4, 6)) }, "causal_conv: state must have shape [3,6,2]")
	mustPanic(t, func() { cc.CausalConv(ctx, z(3, 6, 2), z(4, 7)) }, "causal_conv: kernel must be [width, channels] with channels 6")

	// The context stays usable.
	out := sx.SSMConv(ctx, kernel)
	scan := s.SSMScan(ctx, x, dt, a, B, C, ids)
	o, st := cc.CausalConv(ctx, z(3, 6, 2), z(4, 6))
	got := compute(ctx, out, scan, o, st)
	for i, g := range got {
		if len(g) == 0 || slices.ContainsFunc(g, func(v float32) bool { return v != 0 }) {
			t.Fatalf("output %d: %v, want zeros", i, g)
		}
	}
}
