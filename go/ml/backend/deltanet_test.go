package backend

// The ml.GatedDeltaNet extension against a naive Go reference of the gated
// delta rule (float64, token by token): 1, 7, 64 and 200 tokens, equal and
// grouped heads (tiled and interleaved), per-head and per-key gates, one and
// two sequences; state carry-over between calls; bad inputs.

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

type dnCase struct {
	s, hk, hv, seqs int
	heads           ml.HeadLayout
	perKey          bool
}

type dnData struct {
	q, k, v, gate, beta, state ref
}

// unitRows fills [S, heads, T, n] with random rows of unit L2 norm (the
// models normalise q and k; the delta rule is a contraction only then).
func unitRows(rng *rand.Rand, shape ...int) ref {
	r := randRef(rng, shape...)
	s := r.ne[0]
	for i := 0; i < len(r.data); i += s {
		var n float64
		for _, v := range r.data[i : i+s] {
			n += float64(v) * float64(v)
		}
		n = math.Sqrt(n)
		for j := i; j < i+s; j++ {
			r.data[j] = float32(float64(r.data[j]) / n)
		}
	}
	return r
}

func dnInputs(rng *rand.Rand, c dnCase, tokens int) dnData {
	gs := 1
	if c.perKey {
		gs = c.s
	}
	uniform := func(lo, hi float32, shape ...int) ref {
		r := newRef(shape...)
		for i := range r.data {
			r.data[i] = lo + (hi-lo)*rng.Float32()
		}
		return r
	}
	return dnData{
		q:     unitRows(rng, c.s, c.hk, tokens, c.seqs),
		k:     unitRows(rng, c.s, c.hk, tokens, c.seqs),
		v:     uniform(-1, 1, c.s, c.hv, tokens, c.seqs),
		gate:  uniform(-0.5, 0, gs, c.hv, tokens, c.seqs),
		beta:  uniform(0.05, 0.95, 1, c.hv, tokens, c.seqs),
		state: uniform(-0.5, 0.5, c.s, c.s, c.hv, c.seqs),
	}
}

// dnRef is the gated delta rule token by token; S[i][j] = state[i, j, h, seq]
// with i the key dimension. Returns out [S, H_v, T, n] and the final state.
func dnRef(d dnData, heads ml.HeadLayout) (ref, ref) {
	s, hk, hv, tokens, seqs := d.v.ne[0], d.q.ne[1], d.v.ne[1], d.v.ne[2], d.v.ne[3]
	out := newRef(s, hv, tokens, seqs)
	final := newRef(s, s, hv, seqs)
	scale := 1 / math.Sqrt(float64(s))
	for seq := 0; seq < seqs; seq++ {
		for h := 0; h < hv; h++ {
			kh := h % hk
			if heads == ml.HeadsInterleaved {
				kh = h / (hv / hk)
			}
			st := make([]float64, s*s)
			for i := range st {
				st[i] = float64(d.state.at(i%s, i/s, h, seq))
			}
			for t := 0; t < tokens; t++ {
				for i := 0; i < s; i++ {
					g := d.gate.at(0, h, t, seq)
					if d.gate.ne[0] > 1 {
						g = d.gate.at(i, h, t, seq)
					}
					for j := 0; j < s; j++ {
						st[i+s*j] *= math.Exp(float64(g))
					}
				}
				b := float64(d.beta.at(0, h, t, seq))
				for j := 0; j < s; j++ {
					var kv float64
					for i := 0; i < s; i++ {
						kv += st[i+s*j] * float64(d.k.at(i, kh, t, seq))
					}
					u := b * (float64(d.v.at(j, h, t, seq)) - kv)
					for i := 0; i < s; i++ {
						st[i+s*j] += float64(d.k.at(i, kh, t, seq)) * u
					}
				}
				for j := 0; j < s; j++ {
					var o float64
					for i := 0; i < s; i++ {
						o += st[i+s*j] * float64(d.q.at(i, kh, t, seq))
					}
					out.set(float32(o*scale), j, h, t, seq)
				}
			}
			for i, v := range st {
				final.set(float32(v), i%s, i/s, h, seq)
			}
		}
	}
	return out, final
}

// gdn uploads d and applies the extension.
func gdn(t *testing.T, ctx ml.Context, d dnData, state ml.Tensor, heads ml.HeadLayout) (ml.Tensor, ml.Tensor) {
	t.Helper()
	q := d.q.tensor(ctx)
	op, ok := q.(ml.GatedDeltaNet)
	if !ok {
		t.Fatal("tensors do not implement ml.GatedDeltaNet")
	}
	if state == nil {
		state = d.state.tensor(ctx)
	}
	return op.GatedDeltaNet(ctx, d.k.tensor(ctx), d.v.tensor(ctx), d.gate.tensor(ctx), d.beta.tensor(ctx), state, heads)
}

// dnTol: the kernel rounds sums of S products into an O(1) state each
// token and the delta rule contracts old errors; the largest error the Rust
// tests see is ~1e-7. 1e-6 + 1e-6 relative.
const dnTol = 1e-6

var dnCases = []dnCase{
	{16, 2, 2, 1, ml.HeadsTiled, false},
	{32, 1, 3, 2, ml.HeadsTiled, false},
	{16, 2, 4, 1, ml.HeadsTiled, false},
	{32, 2, 4, 1, ml.HeadsInterleaved, false},
	{16, 2, 6, 2, ml.HeadsInterleaved, true},
}

func TestGatedDeltaNet(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	rng := rand.New(rand.NewSource(71))
	for _, c := range dnCases {
		for _, tokens := range []int{1, 7, 64, 200} {
			t.Run(fmt.Sprintf("%+v/T=%d", c, tokens), func(t *testing.T) {
				ctx := b.NewContext()
				defer ctx.Close()
				d := dnInputs(rng, c, tokens)
				out, state := gdn(t, ctx, d, nil, c.heads)
				wantOut, wantState := dnRef(d, c.heads)
				if !slices.Equal(out.Shape(), wantOut.shape()) || !slices.Equal(state.Shape(), wantState.shape()) {
					t.Fatalf("shapes %v %v, want %v %v", out.Shape(), state.Shape(), wantOut.shape(), wantState.shape())
				}
				got := compute(ctx, out, state)
				closeTo(t, "out", wantOut.data, got[0], dnTol, dnTol)
				closeTo(t, "state", wantState.data, got[1], dnTol, dnTol)
			})
		}
	}
}

// sliceTokens keeps tokens [lo, hi) of a [X, H, T, n] input.
func (d dnData) sliceTokens(lo, hi int) dnData {
	return dnData{
		q: sliceRef(d.q, 2, lo, hi, 1), k: sliceRef(d.k, 2, lo, hi, 1), v: sliceRef(d.v, 2, lo, hi, 1),
		gate: sliceRef(d.gate, 2, lo, hi, 1), beta: sliceRef(d.beta, 2, lo, hi, 1), state: d.state,
	}
}

func TestGatedDeltaNetCarriesState(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	rng := rand.New(rand.NewSource(72))
	const total = 200
	for _, c := range dnCases[2:] {
		d := dnInputs(rng, c, total)
		ctx := b.NewContext()
		out, state := gdn(t, ctx, d, nil, c.heads)
		whole := compute(ctx, out, state)
		ctx.Close()
		wantOut, wantState := dnRef(d, c.heads)
		closeTo(t, "whole out", wantOut.data, whole[0], dnTol, dnTol)
		closeTo(t, "whole state", wantState.data, whole[1], dnTol, dnTol)
		for _, n := range []int{1, 7, 64, 199} {
			t.Run(fmt.Sprintf("%+v/split=%d", c, n), func(t *testing.T) {
				ctx := b.NewContext()
				defer ctx.Close()
				first, rest := d.sliceTokens(0, n), d.sliceTokens(n, total)
				out1, state1 := gdn(t, ctx, first, nil, c.heads)
				out2, state2 := gdn(t, ctx, rest, state1, c.heads)
				got := compute(ctx, out1, out2, state2, state1)
				// Same f32 operations token by token: exactly the one-call result.
				joined := newRef(wantOut.ne[:]...)
				s, hv := c.s, c.hv
				joined.each(func(j, h, tok, seq int) {
					if tok < n {
						joined.set(got[0][j+s*(h+hv*(tok+n*seq))], j, h, tok, seq)
					} else {
						joined.set(got[1][j+s*(h+hv*(tok-n+(total-n)*seq))], j, h, tok, seq)
					}
				})
				if !slices.Equal(joined.data, whole[0]) {
					t.Fatal("split outputs differ from one call")
				}
				if !slices.Equal(got[2], whole[1]) {
					t.Fatal("split final state differs from one call")
				}
				// Across computes: the state read back and uploaded again.
				rest.state = newRef(state1.Shape()...)
				rest.state.data = got[3]
				out3, state3 := gdn(t, ctx, rest, nil, c.heads)
				again := compute(ctx, out3, state3)
				if !slices.Equal(again[0], got[1]) || !slices.Equal(again[1], whole[1]) {
					t.Fatal("a state read back and uploaded gives other results")
				}
			})
		}
	}
}

// TestGatedDeltaNetInPlace: GatedDeltaNetInPlace on the CPU gives
// GatedDeltaNet's outputs and leaves its new state in the state tensor,
// bit for bit, token by token over one state tensor as a cache is used
// (a context per token) and over several tokens at once.
func TestGatedDeltaNetInPlace(t *testing.T) {
	b := newBackend(t, ml.BackendParams{AllocMemory: true})
	rng := rand.New(rand.NewSource(73))
	for _, c := range dnCases {
		for _, tokens := range []int{1, 7} {
			t.Run(fmt.Sprintf("%+v/T=%d", c, tokens), func(t *testing.T) {
				const steps = 3
				d := dnInputs(rng, c, steps*tokens)
				ctx := b.NewContext()
				defer ctx.Close()
				out, state := gdn(t, ctx, d, nil, c.heads)
				whole := compute(ctx, out, state)

				cache := b.NewContext()
				defer cache.Close()
				st := d.state.tensor(cache)
				var outs []float32
				for i := range steps {
					step := d.sliceTokens(i*tokens, (i+1)*tokens)
					sctx := b.NewContext()
					q := step.q.tensor(sctx)
					op := q.(ml.GatedDeltaNetInPlace)
					o, ok := op.GatedDeltaNetInPlace(sctx, step.k.tensor(sctx), step.v.tensor(sctx), step.gate.tensor(sctx), step.beta.tensor(sctx), st, c.heads)
					if !ok {
						t.Fatal("the CPU backend declined the update in place")
					}
					if o.Dim(0) != c.s || o.Dim(1) != c.hv || o.Dim(2) != tokens || o.Dim(3) != c.seqs {
						t.Fatalf("out shape %v", o.Shape())
					}
					outs = append(outs, compute(sctx, o)[0]...)
					sctx.Close()
				}
				// Outputs are [S, H, T, n]: with one sequence the steps' outputs follow one another.
				if c.seqs == 1 && !slices.Equal(outs, whole[0]) {
					t.Fatal("outputs differ from GatedDeltaNet's")
				}
				if got := compute(cache, st)[0]; !slices.Equal(got, whole[1]) {
					n := 0
					for i := range got {
						if got[i] != whole[1][i] {
							if n < 5 {
								t.Logf("%d: %g vs %g", i, got[i], whole[1][i])
							}
							n++
						}
					}
					t.Fatalf("the state written in place differs from GatedDeltaNet's new state (%d of %d)", n, len(got))
				}
			})
		}
	}
}

func TestGatedDeltaNetRejectsBadInputs(t *testing.T) {
	ctx := setup(t)
	rng := rand.New(rand.NewSource(73))
	d := dnInputs(rng, dnCase{8, 2, 4, 1, ml.HeadsTiled, false}, 3)
	q, k, v := d.q.tensor(ctx), d.k.tensor(ctx), d.v.tensor(ctx)
	gate, beta, state := d.gate.tensor(ctx), d.beta.tensor(ctx), d.state.tensor(ctx)
	op := q.(ml.GatedDeltaNet)
	z := func(shape ...int) ml.Tensor { return ctx.Input().Zeros(ml.DTypeF32, shape...) }
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"k shape", func() { op.GatedDeltaNet(ctx, z(8, 1, 3), v, gate, beta, state, ml.HeadsTiled) }, "gated_delta_net: q and k must have the same shape"},
		{"heads", func() {
			z(8, 3, 3).(ml.GatedDeltaNet).GatedDeltaNet(ctx, z(8, 3, 3), v, gate, beta, state, ml.HeadsTiled)
		}, "gated_delta_net: v's heads (4) must be a multiple of q's and k's heads (3)"},
		{"gate", func() { op.GatedDeltaNet(ctx, k, v, z(4, 3), beta, state, ml.HeadsTiled) }, "gated_delta_net: g must be [1, 4, 3, 1] or [8, 4, 3, 1]"},
		{"beta", func() { op.GatedDeltaNet(ctx, k, v, gate, z(4, 3), state, ml.HeadsInterleaved) }, "gated_delta_net: beta must have shape [1,4,3]"},
		{"Ollama's state layout", func() { op.GatedDeltaNet(ctx, k, v, gate, beta, z(8, 32), ml.HeadsTiled) }, "gated_delta_net: state must have shape [8,8,4]"},
		{"f16", func() {
			op.GatedDeltaNet(ctx, ctx.Input().Zeros(ml.DTypeF16, 8, 2, 3), v, gate, beta, state, ml.HeadsTiled)
		}, "gated_delta_net: k must be f32"},
		{"permuted state", func() { op.GatedDeltaNet(ctx, k, v, gate, beta, state.Permute(ctx, 1, 0, 2, 3), ml.HeadsTiled) }, "gated_delta_net: state must be contiguous"},
		{"nil", func() { op.GatedDeltaNet(ctx, k, nil, gate, beta, state, ml.HeadsTiled) }, "gated_delta_net: v is NULL"},
		{"layout", func() { op.GatedDeltaNet(ctx, k, v, gate, beta, state, ml.HeadLayout(7)) }, "GatedDeltaNet: invalid head layout 7"},
	} {
		mustPanic(t, c.f, c.want)
	}
	// The context stays usable.
	out, st := op.GatedDeltaNet(ctx, k, v, gate, beta, state, ml.HeadsTiled)
	got := compute(ctx, out, st)
	wantOut, wantState := dnRef(d, ml.HeadsTiled)
	closeTo(t, "out", wantOut.data, got[0], dnTol, dnTol)
	closeTo(t, "state", wantState.data, got[1], dnTol, dnTol)
}
