package nn

// The delta rule from primitives (chunked and token-wise) and the fused
// kernel against a naive float64 reference, token by token: 1, 7, 64, 65
// and 150 tokens (chunk boundaries), one and two sequences, equal and
// grouped heads in both layouts, mild and steep decays (the models' gates
// reach -softplus(x)·16).

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
)

type drCase struct {
	s, hk, hv, tokens, seqs int
	heads                   ml.HeadLayout
	gmin                    float64 // gates uniform in [gmin, 0]
}

type drData struct {
	q, k, v, g, beta, state []float64
}

func (c drCase) inputs(rng *rand.Rand) drData {
	unit := func(n int) []float64 {
		x := make([]float64, n*c.s)
		for r := 0; r < n; r++ {
			var norm float64
			for i := 0; i < c.s; i++ {
				x[r*c.s+i] = rng.NormFloat64()
				norm += x[r*c.s+i] * x[r*c.s+i]
			}
			for i := 0; i < c.s; i++ {
				x[r*c.s+i] /= math.Sqrt(norm)
			}
		}
		return x
	}
	uni := func(n int, lo, hi float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = lo + (hi-lo)*rng.Float64()
		}
		return x
	}
	n := c.tokens * c.seqs
	return drData{
		q:     unit(c.hk * n),
		k:     unit(c.hk * n),
		v:     uni(c.s*c.hv*n, -1, 1),
		g:     uni(c.hv*n, c.gmin, 0),
		beta:  uni(c.hv*n, 0.05, 0.95),
		state: uni(c.s*c.s*c.hv*c.seqs, -0.5, 0.5),
	}
}

// naive is the rule token by token in float64: out [S, Hv, T, nS], state
// [S, S, Hv, nS] with S[i][j] at i + S·j (i the key dimension).
func (c drCase) naive(d drData) (out, state []float64) {
	S, T := c.s, c.tokens
	out = make([]float64, S*c.hv*T*c.seqs)
	state = append([]float64(nil), d.state...)
	for seq := 0; seq < c.seqs; seq++ {
		for h := 0; h < c.hv; h++ {
			kh := h % c.hk
			if c.heads == ml.HeadsInterleaved {
				kh = h / (c.hv / c.hk)
			}
			st := state[(seq*c.hv+h)*S*S:][:S*S]
			for t := 0; t < T; t++ {
				row := (seq*T + t)
				qk := func(x []float64, i int) float64 { return x[(row*c.hk+kh)*S+i] }
				decay := math.Exp(d.g[row*c.hv+h])
				for i := range st {
					st[i] *= decay
				}
				b := d.beta[row*c.hv+h]
				for j := 0; j < S; j++ {
					var kv float64
					for i := 0; i < S; i++ {
						kv += st[i+S*j] * qk(d.k, i)
					}
					u := b * (d.v[(row*c.hv+h)*S+j] - kv)
					for i := 0; i < S; i++ {
						st[i+S*j] += qk(d.k, i) * u
					}
				}
				for j := 0; j < S; j++ {
					var o float64
					for i := 0; i < S; i++ {
						o += st[i+S*j] * qk(d.q, i)
					}
					out[(row*c.hv+h)*S+j] = o / math.Sqrt(float64(S))
				}
			}
		}
	}
	return out, state
}

func f32s(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func TestDeltaRulePrimitivesMatchFusedAndNaive(t *testing.T) {
	b, err := ml.NewBackend("", ml.BackendParams{AllocMemory: true, NumThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cases := []drCase{
		{16, 2, 2, 1, 1, ml.HeadsTiled, -0.5},
		{16, 2, 4, 1, 2, ml.HeadsInterleaved, -3},
		{32, 2, 6, 7, 1, ml.HeadsTiled, -0.5},
		{16, 1, 2, 64, 2, ml.HeadsInterleaved, -0.5},
		{16, 2, 4, 65, 1, ml.HeadsTiled, -3},
		{32, 2, 4, 150, 1, ml.HeadsInterleaved, -8},
		{16, 3, 6, 100, 2, ml.HeadsTiled, -0.05},
		{32, 2, 6, 100, 1, ml.HeadsTiled, -60},
		{32, 2, 6, 1, 1, ml.HeadsTiled, -60},
	}
	for _, c := range cases {
		name := fmt.Sprintf("S%d_hk%d_hv%d_T%d_n%d_%v_g%v", c.s, c.hk, c.hv, c.tokens, c.seqs, c.heads, c.gmin)
		t.Run(name, func(t *testing.T) {
			d := c.inputs(rand.New(rand.NewSource(int64(c.tokens*31 + c.hv))))
			wantOut, wantState := c.naive(d)
			for _, fused := range []bool{true, false} {
				ctx := b.NewContext()
				in := ctx.Input()
				q := in.FromFloats(f32s(d.q), c.s, c.hk, c.tokens, c.seqs)
				k := in.FromFloats(f32s(d.k), c.s, c.hk, c.tokens, c.seqs)
				// v as the models have it: a strided view into a wider
				// tensor (the convolution's output).
				wide := make([]float32, 0, (c.s*c.hv+3)*c.tokens*c.seqs)
				for r := 0; r < c.tokens*c.seqs; r++ {
					wide = append(wide, 9, 9, 9)
					wide = append(wide, f32s(d.v[r*c.s*c.hv:(r+1)*c.s*c.hv])...)
				}
				vw := in.FromFloats(wide, c.s*c.hv+3, c.tokens, c.seqs)
				rs := vw.Stride(1)
				v := vw.View(ctx, 3*vw.Stride(0), c.s, c.s*vw.Stride(0), c.hv, rs, c.tokens, rs*c.tokens, c.seqs)
				g := in.FromFloats(f32s(d.g), 1, c.hv, c.tokens, c.seqs)
				beta := in.FromFloats(f32s(d.beta), 1, c.hv, c.tokens, c.seqs)
				st := in.FromFloats(f32s(d.state), c.s, c.s, c.hv, c.seqs)
				var out, next ml.Tensor
				if fused {
					out, next = q.(ml.GatedDeltaNet).GatedDeltaNet(ctx, k, v, g, beta, st, c.heads)
				} else {
					if c.hk != c.hv {
						q, k = repeatHeads(ctx, q, c.hv, c.heads), repeatHeads(ctx, k, c.hv, c.heads)
					}
					if c.tokens == 1 {
						out, next = deltaRuleToken(ctx, q, k, v, g, beta, st)
					} else {
						out, next = deltaRuleChunked(ctx, q, k, v, g, beta, st)
					}
				}
				out, next = out.Contiguous(ctx), next.Contiguous(ctx)
				ctx.Forward(out, next).Compute(out, next)
				check := func(what string, got []float32, want []float64) {
					t.Helper()
					if len(got) != len(want) {
						t.Fatalf("fused=%v %s: %d values, want %d", fused, what, len(got), len(want))
					}
					var worst float64
					for i := range want {
						worst = math.Max(worst, math.Abs(float64(got[i])-want[i])/(1+math.Abs(want[i])))
					}
					// F32 against float64: the fused kernel is exact to
					// ~1e-7; the chunked form solves triangular systems per
					// chunk and loses a little more.
					t.Logf("fused=%v %s worst %.3g", fused, what, worst)
					if worst > 2e-5 {
						t.Errorf("fused=%v %s: worst error %.3g", fused, what, worst)
					}
				}
				check("out", out.Floats(), wantOut)
				check("state", next.Floats(), wantState)
				ctx.Close()
			}
		})
	}
}

// The primitive rule keeping the states of the last m tokens against the
// fused kernel's snapshots (the same states, the last first), and its
// outputs against the fused kernel's.
func TestDeltaRuleKeepingMatchesFusedSnapshots(t *testing.T) {
	b, err := ml.NewBackend("", ml.BackendParams{AllocMemory: true, NumThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range []struct {
		drCase
		m int
	}{
		{drCase{16, 2, 4, 4, 1, ml.HeadsTiled, -0.5}, 4},
		{drCase{16, 2, 2, 5, 2, ml.HeadsTiled, -3}, 3},
		{drCase{32, 1, 2, 2, 1, ml.HeadsTiled, -0.5}, 2},
		{drCase{16, 2, 4, 70, 1, ml.HeadsTiled, -0.5}, 4},
	} {
		t.Run(fmt.Sprintf("T%d_m%d_n%d", c.tokens, c.m, c.seqs), func(t *testing.T) {
			d := c.inputs(rand.New(rand.NewSource(int64(c.tokens*7 + c.m))))
			ctx := b.NewContext()
			defer ctx.Close()
			in := ctx.Input()
			q := in.FromFloats(f32s(d.q), c.s, c.hk, c.tokens, c.seqs)
			k := in.FromFloats(f32s(d.k), c.s, c.hk, c.tokens, c.seqs)
			v := in.FromFloats(f32s(d.v), c.s, c.hv, c.tokens, c.seqs)
			g := in.FromFloats(f32s(d.g), 1, c.hv, c.tokens, c.seqs)
			beta := in.FromFloats(f32s(d.beta), 1, c.hv, c.tokens, c.seqs)
			st := in.FromFloats(f32s(d.state), c.s, c.s, c.hv, c.seqs)
			fo, fs := q.(ml.GatedDeltaNetSnapshots).GatedDeltaNetSnapshots(ctx, k, v, g, beta, st, c.heads, c.m)
			qr, kr := repeatHeads(ctx, q, c.hv, c.heads), repeatHeads(ctx, k, c.hv, c.heads)
			po, ps := deltaRuleKeeping(ctx, qr, kr, v, g, beta, st, c.m)
			fo, fs, po, ps = fo.Contiguous(ctx), fs.Contiguous(ctx), po.Contiguous(ctx), ps.Contiguous(ctx)
			ctx.Forward(fo, fs, po, ps).Compute(fo, fs, po, ps)
			if !slices.Equal(ps.Shape(), fs.Shape()) {
				t.Fatalf("states %v, fused %v", ps.Shape(), fs.Shape())
			}
			for _, p := range [][2]ml.Tensor{{po, fo}, {ps, fs}} {
				got, want := p[0].Floats(), p[1].Floats()
				var worst float64
				for i := range want {
					worst = math.Max(worst, math.Abs(float64(got[i]-want[i]))/(1+math.Abs(float64(want[i]))))
				}
				if worst > 2e-5 {
					t.Errorf("%v: worst difference %.3g from the fused kernel", p[0].Shape(), worst)
				}
			}
		})
	}
}
