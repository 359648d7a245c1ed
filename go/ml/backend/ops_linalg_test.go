package backend

// The linear-algebra and miscellaneous ops against Go references on random
// inputs. Tolerances: F32 within 1e-5 absolute + 1e-5 relative of a
// float64 reference unless stated; F16 within 1e-3 absolute + 2e-3
// relative of a reference computed from F16-rounded inputs; copies, masks
// and padding exactly.

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

func softplusRef(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

func swigluOAIRef(a, up, alpha, limit float64) float64 {
	x := math.Min(a, limit)
	y := math.Max(-limit, math.Min(up, limit))
	return x / (1 + math.Exp(-alpha*x)) * (y + 1)
}

func TestLinalgSoftplus(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	ctx := setup(t)
	for _, shape := range [][]int{{7}, {5, 3}, {4, 3, 2}, {2, 3, 2, 2}} {
		a := mapRef(randRef(rng, shape...), func(v float32) float32 { return 4 * v })
		a.data[0] = 25 // the linear branch
		want := mapRef(a, func(v float32) float32 { return float32(softplusRef(float64(v))) })
		got := a.tensor(ctx).Softplus(ctx)
		if got.DType() != ml.DTypeF32 || !slices.Equal(got.Shape(), a.shape()) {
			t.Fatalf("got %v %v", got.DType(), got.Shape())
		}
		closeTo(t, fmt.Sprintf("Softplus f32 %v", shape), want.data, compute(ctx, got)[0], f32Tol, f32Tol)
		a16, ar := f16Tensor(ctx, a)
		want16 := mapRef(ar, func(v float32) float32 { return f16Round(float32(softplusRef(float64(v)))) })
		closeTo(t, fmt.Sprintf("Softplus f16 %v", shape), want16.data, compute(ctx, a16.Softplus(ctx))[0], 1e-3, f16Tol)
	}
	// Permuted input (dimension 0 in place).
	a := randRef(rng, 4, 3, 2)
	want := permuteRef(mapRef(a, func(v float32) float32 { return float32(softplusRef(float64(v))) }), [4]int{0, 2, 1, 3})
	closeTo(t, "Softplus permuted", want.data, compute(ctx, a.tensor(ctx).Permute(ctx, 0, 2, 1, 3).Softplus(ctx).Contiguous(ctx))[0], f32Tol, f32Tol)
}

func TestLinalgSILUAlphaLimit(t *testing.T) {
	rng := rand.New(rand.NewSource(32))
	ctx := setup(t)
	for _, p := range []struct{ alpha, limit float32 }{{1.702, 7}, {1, float32(math.Inf(1))}, {2, 0.5}} {
		a := mapRef(randRef(rng, 16, 3, 2), func(v float32) float32 { return 5 * v })
		up := mapRef(randRef(rng, 16, 3, 2), func(v float32) float32 { return 5 * v })
		want := newRef(a.ne[:]...)
		for i := range want.data {
			want.data[i] = float32(swigluOAIRef(float64(a.data[i]), float64(up.data[i]), float64(p.alpha), float64(p.limit)))
		}
		got := a.tensor(ctx).SILUAlphaLimit(ctx, up.tensor(ctx), p.alpha, p.limit)
		// alpha*x rounds before expf: a few ulp of relative error.
		closeTo(t, fmt.Sprintf("SILUAlphaLimit %v", p), want.data, compute(ctx, got)[0], 1e-6, 1e-5)
	}
}

func TestLinalgFill(t *testing.T) {
	ctx := setup(t)
	x := ctx.Input().FromFloats([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	got := x.Fill(ctx, 0.5)
	if !slices.Equal(got.Shape(), []int{3, 2}) || got.DType() != ml.DTypeF32 {
		t.Fatalf("got %v %v", got.DType(), got.Shape())
	}
	if v := compute(ctx, got)[0]; !slices.Equal(v, []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}) {
		t.Errorf("Fill: %v", v)
	}
	// In place, as in Ollama: x itself now holds the value.
	if v := x.BackendGet(); !slices.Equal(v, []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}) {
		t.Errorf("Fill did not write x: %v", v)
	}
	// F16, rounded once.
	h := ctx.Input().FromBytes(ml.DTypeF16, f16Bytes([]float32{1, 2, 3}), 3)
	if v := compute(ctx, h.Fill(ctx, 0.1))[0]; !slices.Equal(v, []float32{f16Round(0.1), f16Round(0.1), f16Round(0.1)}) {
		t.Errorf("Fill f16: %v", v)
	}
	// qwen3next's masks: Zeros → Fill(1) → Tri(lower); Zeros → Fill(1) → Diag.
	n := 4
	causal := ctx.Input().Zeros(ml.DTypeF32, n, n).Fill(ctx, 1).Tri(ctx, 3)
	identity := ctx.Input().Zeros(ml.DTypeF32, n).Fill(ctx, 1).Diag(ctx)
	out := compute(ctx, causal, identity)
	for i := range n * n {
		c, r := i%n, i/n
		if want := float32(b2i(c < r)); out[0][i] != want {
			t.Fatalf("causal mask [%d,%d] = %v, want %v", c, r, out[0][i], want)
		}
		if want := float32(b2i(c == r)); out[1][i] != want {
			t.Fatalf("identity [%d,%d] = %v, want %v", c, r, out[1][i], want)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestLinalgCumSum(t *testing.T) {
	rng := rand.New(rand.NewSource(33))
	ctx := setup(t)
	for _, shape := range [][]int{{9}, {6, 4}, {5, 3, 2}, {100, 2}} {
		a := randRef(rng, shape...)
		want := rowsRef(a, a.ne[0], func(row []float32) []float32 {
			out := make([]float32, len(row))
			var s float64
			for i, v := range row {
				s += float64(v)
				out[i] = float32(s)
			}
			return out
		})
		// Sequential f32 sums of up to 100 normal values.
		closeTo(t, fmt.Sprintf("CumSum %v", shape), want.data, compute(ctx, a.tensor(ctx).CumSum(ctx))[0], 1e-4, 1e-5)
	}
}

func TestLinalgDiagTri(t *testing.T) {
	rng := rand.New(rand.NewSource(34))
	ctx := setup(t)
	v := randRef(rng, 5, 1, 2)
	want := newRef(5, 5, 2)
	want.each(func(c, r, m, _ int) {
		if c == r {
			want.set(v.at(c, 0, m, 0), c, r, m, 0)
		}
	})
	closeTo(t, "Diag", want.data, compute(ctx, v.tensor(ctx).Diag(ctx))[0], 0, 0)

	a := randRef(rng, 4, 4, 3)
	keep := map[int]func(c, r int) bool{
		0: func(c, r int) bool { return c >= r }, // upper with the diagonal
		1: func(c, r int) bool { return c > r },  // upper
		2: func(c, r int) bool { return c <= r }, // lower with the diagonal
		3: func(c, r int) bool { return c < r },  // lower
	}
	for ty, k := range keep {
		want := newRef(a.ne[:]...)
		a.each(func(c, r, m, _ int) {
			if k(c, r) {
				want.set(a.at(c, r, m, 0), c, r, m, 0)
			}
		})
		closeTo(t, fmt.Sprintf("Tri %d", ty), want.data, compute(ctx, a.tensor(ctx).Tri(ctx, ty))[0], 0, 0)
	}
}

// solveTriRef solves A X = B by forward substitution per batch: a=[n,n,…]
// (row r is a[:, r]), b=[k,n,…].
func solveTriRef(a, b ref) ref {
	x := newRef(b.ne[:]...)
	xs := make([]float64, len(x.data))
	x.each(func(c, r, i2, i3 int) {
		// each visits rows in order, so earlier rows are done.
		s := float64(b.at(c, r, i2, i3))
		for j := 0; j < r; j++ {
			s -= float64(a.at(j, r, i2, i3)) * xs[x.idx(c, j, i2, i3)]
		}
		xs[x.idx(c, r, i2, i3)] = s / float64(a.at(r, r, i2, i3))
	})
	for i, v := range xs {
		x.data[i] = float32(v)
	}
	return x
}

func TestLinalgSolveTri(t *testing.T) {
	rng := rand.New(rand.NewSource(35))
	ctx := setup(t)
	n, k := 8, 3
	a := randRef(rng, n, n, 2)
	a.each(func(c, r, m, _ int) {
		switch {
		case c == r:
			a.set(1.5+0.5*float32(rng.Float64()), c, r, m, 0)
		case c < r:
			a.set(a.at(c, r, m, 0)/float32(n), c, r, m, 0)
		default:
			a.set(1e6, c, r, m, 0) // not read
		}
	})
	b := randRef(rng, k, n, 2)
	want := solveTriRef(a, b)
	// Ollama's qwen3next call: (lower, left, unitDiag) = (true, true, false).
	got := a.tensor(ctx).SolveTri(ctx, b.tensor(ctx), true, true, false)
	if !slices.Equal(got.Shape(), b.shape()) {
		t.Fatalf("shape %v", got.Shape())
	}
	closeTo(t, "SolveTri", want.data, compute(ctx, got)[0], 1e-5, 1e-4)

	// Ollama passes lower as ggml's left and left as lower; only
	// left && lower && !unitDiag exists in ggml, so the swap shows in the
	// refusal of (lower=false, left=true).
	r := mustPanic(t, func() { a.tensor(ctx).SolveTri(ctx, b.tensor(ctx), false, true, false) }, "solve_tri", "left=false, lower=true, unit_diag=false")
	if e, ok := r.(*Error); !ok || e.Status != StatusUnsupported {
		t.Errorf("panic %#v, want StatusUnsupported", r)
	}
	mustPanic(t, func() { a.tensor(ctx).SolveTri(ctx, b.tensor(ctx), true, false, false) }, "left=true, lower=false")
	mustPanic(t, func() { a.tensor(ctx).SolveTri(ctx, b.tensor(ctx), true, true, true) }, "unit_diag=true")
}

func TestLinalgPadExt(t *testing.T) {
	rng := rand.New(rand.NewSource(36))
	ctx := setup(t)
	a := randRef(rng, 3, 4, 2)
	for _, p := range [][8]int{{1, 2, 0, 0, 0, 0, 0, 0}, {0, 0, 3, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0}} {
		want := newRef(a.ne[0]+p[0]+p[1], a.ne[1]+p[2]+p[3], a.ne[2]+p[4]+p[5], a.ne[3]+p[6]+p[7])
		a.each(func(i0, i1, i2, i3 int) {
			want.set(a.at(i0, i1, i2, i3), i0+p[0], i1+p[2], i2+p[4], i3+p[6])
		})
		got := a.tensor(ctx).PadExt(ctx, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])
		if !slices.Equal(got.Shape(), want.shape()) {
			t.Fatalf("PadExt %v: shape %v, want %v", p, got.Shape(), want.shape())
		}
		closeTo(t, fmt.Sprintf("PadExt %v", p), want.data, compute(ctx, got)[0], 0, 0)
	}
}

func TestLinalgSetInplace(t *testing.T) {
	rng := rand.New(rand.NewSource(37))
	ctx := setup(t)
	a, b := randRef(rng, 6, 5, 2), randRef(rng, 3, 2, 2)
	x := a.tensor(ctx)
	// b into a at element (2,1,0), rows and matrices of a.
	nb1, nb2, off := x.Stride(1), x.Stride(2), 4*(2+6)
	want := newRef(a.ne[:]...)
	copy(want.data, a.data)
	b.each(func(i0, i1, i2, _ int) { want.set(b.at(i0, i1, i2, 0), 2+i0, 1+i1, i2, 0) })
	got := x.SetInplace(ctx, b.tensor(ctx), nb1, nb2, nb2*2, off)
	if !slices.Equal(got.Shape(), a.shape()) {
		t.Fatalf("shape %v", got.Shape())
	}
	closeTo(t, "SetInplace", want.data, compute(ctx, got)[0], 0, 0)
	closeTo(t, "SetInplace wrote a", want.data, x.BackendGet(), 0, 0)
}

func TestLinalgRepeat4D(t *testing.T) {
	rng := rand.New(rand.NewSource(38))
	ctx := setup(t)
	a := randRef(rng, 1, 4, 2)
	to := [4]int{3, 4, 4, 2}
	want := newRef(to[:]...)
	want.each(func(i0, i1, i2, i3 int) {
		want.set(a.at(i0%a.ne[0], i1%a.ne[1], i2%a.ne[2], i3%a.ne[3]), i0, i1, i2, i3)
	})
	got := a.tensor(ctx).Repeat4D(ctx, to[0], to[1], to[2], to[3])
	if !slices.Equal(got.Shape(), want.shape()) {
		t.Fatalf("shape %v", got.Shape())
	}
	closeTo(t, "Repeat4D", want.data, compute(ctx, got)[0], 0, 0)
	a16, ar := f16Tensor(ctx, a)
	want16 := newRef(to[:]...)
	want16.each(func(i0, i1, i2, i3 int) {
		want16.set(ar.at(i0%a.ne[0], i1%a.ne[1], i2%a.ne[2], i3%a.ne[3]), i0, i1, i2, i3)
	})
	closeTo(t, "Repeat4D f16", want16.data, compute(ctx, a16.Repeat4D(ctx, to[0], to[1], to[2], to[3]))[0], 0, 0)
}

func TestLinalgVarianceStddevSigmoidOut(t *testing.T) {
	rng := rand.New(rand.NewSource(39))
	ctx := setup(t)
	a := randRef(rng, 9, 4, 2)
	v := rowsRef(a, 1, func(row []float32) []float32 {
		var m, s float64
		for _, x := range row {
			m += float64(x)
		}
		m /= float64(len(row))
		for _, x := range row {
			s += (float64(x) - m) * (float64(x) - m)
		}
		return []float32{float32(s / float64(len(row)))}
	})
	x := a.tensor(ctx)
	out := compute(ctx, x.Variance(ctx), x.Stddev(ctx), x.SigmoidOut(ctx))
	closeTo(t, "Variance", v.data, out[0], f32Tol, f32Tol)
	closeTo(t, "Stddev", mapRef(v, func(s float32) float32 { return float32(math.Sqrt(float64(s))) }).data, out[1], f32Tol, f32Tol)
	closeTo(t, "SigmoidOut", mapRef(a, func(s float32) float32 { return float32(sigmoid(float64(s))) }).data, out[2], f32Tol, f32Tol)
}

func TestLinalgBadInputs(t *testing.T) {
	ctx := setup(t)
	in := ctx.Input()
	x := in.FromFloats(make([]float32, 6), 3, 2)
	sq := in.FromFloats(make([]float32, 9), 3, 3)
	h := in.FromBytes(ml.DTypeF16, make([]byte, 12), 3, 2)
	ids := in.FromInts(make([]int32, 6), 3, 2)
	perm := in.FromFloats(make([]float32, 24), 3, 4, 2).Permute(ctx, 0, 2, 1, 3)
	bad := []struct {
		name string
		f    func()
		want []string
	}{
		{"SILUAlphaLimit f16", func() { h.SILUAlphaLimit(ctx, h, 1.702, 7) }, []string{"silu_alpha_limit: a must be f32"}},
		{"SILUAlphaLimit shapes", func() { x.SILUAlphaLimit(ctx, sq, 1.702, 7) }, []string{"silu_alpha_limit: shapes differ"}},
		{"SILUAlphaLimit limit", func() { x.SILUAlphaLimit(ctx, x, 1.702, -1) }, []string{"silu_alpha_limit: limit must be >= 0"}},
		{"Softplus i32", func() { ids.Softplus(ctx) }, []string{"softplus: a must be f32 or f16, got i32[3,2]"}},
		{"Fill i32", func() { ids.Fill(ctx, 1) }, []string{"fill_inplace: a must be f32 or f16"}},
		{"Fill permuted", func() { perm.Fill(ctx, 1) }, []string{"fill_inplace: a must be contiguous"}},
		{"CumSum f16", func() { h.CumSum(ctx) }, []string{"cumsum: a must be f32, got f16[3,2]"}},
		{"Diag matrix", func() { x.Diag(ctx) }, []string{"diag: a must be a vector per matrix"}},
		{"Tri type", func() { sq.Tri(ctx, 4) }, []string{"tri: invalid type 4"}},
		{"Tri type range", func() { sq.Tri(ctx, 1<<40) }, []string{"tri: type 1099511627776 does not fit in 32 bits"}},
		{"Tri not square", func() { x.Tri(ctx, 0) }, []string{"tri: a must be square"}},
		{"SolveTri shapes", func() { sq.SolveTri(ctx, in.FromFloats(make([]float32, 8), 2, 4), true, true, false) }, []string{"solve_tri", "does not fit"}},
		{"SolveTri f16", func() { sq.SolveTri(ctx, h, true, true, false) }, []string{"solve_tri: b must be f32"}},
		{"PadExt negative", func() { x.PadExt(ctx, 0, -1, 0, 0, 0, 0, 0, 0) }, []string{"pad_ext: padding must be non-negative"}},
		{"PadExt range", func() { x.PadExt(ctx, 1<<33, 0, 0, 0, 0, 0, 0, 0) }, []string{"pad_ext: padding 8589934592 does not fit in 32 bits"}},
		{"PadExt f16", func() { h.PadExt(ctx, 1, 0, 0, 0, 0, 0, 0, 0) }, []string{"pad_ext: a must be f32"}},
		{"SetInplace bounds", func() { x.SetInplace(ctx, in.FromFloats(make([]float32, 2), 2), 0, 0, 0, 20) }, []string{"set_inplace", "reaches byte 28, past the 24 bytes"}},
		{"SetInplace negative", func() { x.SetInplace(ctx, x, -4, 0, 0, 0) }, []string{"set_inplace: negative stride or offset"}},
		{"SetInplace dtype", func() { x.SetInplace(ctx, ids, 12, 0, 0, 0) }, []string{"set_inplace: types differ"}},
		{"Repeat4D multiple", func() { x.Repeat4D(ctx, 4, 2, 1, 1) }, []string{"repeat_4d: cannot repeat f32[3,2] to [4, 2, 1, 1]"}},
		{"Repeat4D zero", func() { x.Repeat4D(ctx, 3, 0, 1, 1) }, []string{"repeat_4d: cannot repeat"}},
	}
	for _, c := range bad {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			mustPanic(t, c.f, c.want...)
		})
	}
	// The context still computes.
	if got := compute(ctx, sq.Tri(ctx, 0))[0]; len(got) != 9 {
		t.Errorf("after bad inputs: %v", got)
	}
}
