package backend

// Every op against a Go reference on random inputs. Tolerances: F32
// results within 1e-5 absolute + 1e-5 relative of a float64 reference
// unless stated; F16 results within the rounding of F16 (2^-10 relative)
// of a reference computed from F16-rounded inputs.

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

const (
	f32Tol = 1e-5
	f16Tol = 2e-3
)

// f16Tensor uploads r as F16 (through FromBytes) and returns the tensor
// and r rounded to F16.
func f16Tensor(ctx ml.Context, r ref) (ml.Tensor, ref) {
	t := ctx.Input().FromBytes(ml.DTypeF16, f16Bytes(r.data), r.shape()...)
	return t, mapRef(r, f16Round)
}

func TestBinaryOps(t *testing.T) {
	ops := []struct {
		name string
		op   func(ctx ml.Context, a, b ml.Tensor) ml.Tensor
		ref  func(x, y float32) float32
	}{
		{"Add", func(ctx ml.Context, a, b ml.Tensor) ml.Tensor { return a.Add(ctx, b) }, func(x, y float32) float32 { return x + y }},
		{"Sub", func(ctx ml.Context, a, b ml.Tensor) ml.Tensor { return a.Sub(ctx, b) }, func(x, y float32) float32 { return x - y }},
		{"Mul", func(ctx ml.Context, a, b ml.Tensor) ml.Tensor { return a.Mul(ctx, b) }, func(x, y float32) float32 { return x * y }},
		{"Div", func(ctx ml.Context, a, b ml.Tensor) ml.Tensor { return a.Div(ctx, b) }, func(x, y float32) float32 { return x / y }},
	}
	shapes := []struct{ a, b []int }{
		{[]int{6, 4, 2}, []int{6, 4, 2}},    // same shape
		{[]int{6, 4, 2}, []int{6, 1, 2}},    // broadcast dim 1
		{[]int{6, 4, 2}, []int{3, 4, 1}},    // b tiled along dim 0, broadcast dim 2
		{[]int{5, 3}, []int{1}},             // scalar
		{[]int{8, 2, 3, 2}, []int{8, 1, 3}}, // 4-D
	}
	rng := rand.New(rand.NewSource(1))
	ctx := setup(t)
	for _, op := range ops {
		for _, sh := range shapes {
			a, b := randRef(rng, sh.a...), randRef(rng, sh.b...)
			if op.name == "Div" {
				b = mapRef(b, func(v float32) float32 { return v + float32(math.Copysign(2, float64(v))) })
			}
			t.Run(fmt.Sprintf("%s/f32/%v_%v", op.name, sh.a, sh.b), func(t *testing.T) {
				got := op.op(ctx, a.tensor(ctx), b.tensor(ctx))
				want := broadcast2(a, b, op.ref)
				if got.DType() != ml.DTypeF32 || !slices.Equal(got.Shape(), a.shape()) {
					t.Fatalf("got %v %v", got.DType(), got.Shape())
				}
				closeTo(t, op.name, want.data, compute(ctx, got)[0], f32Tol, f32Tol)
			})
			t.Run(fmt.Sprintf("%s/f16/%v_%v", op.name, sh.a, sh.b), func(t *testing.T) {
				a16, ar := f16Tensor(ctx, a)
				got := op.op(ctx, a16, b.tensor(ctx))
				if got.DType() != ml.DTypeF16 {
					t.Fatalf("dtype %v, want f16", got.DType())
				}
				want := mapRef(broadcast2(ar, b, op.ref), f16Round)
				closeTo(t, op.name, want.data, compute(ctx, got)[0], 1e-3, f16Tol)
			})
		}
	}
}

func TestScaleClamp(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	ctx := setup(t)
	a := randRef(rng, 7, 3, 2)
	a16, ar := f16Tensor(ctx, a)

	// ggml scales F32 only: F16 is a clear error, and the context goes on.
	mustPanic(t, func() { a16.Scale(ctx, 0.5) }, "scale", "f32", "f16[7,3,2]")

	got := compute(ctx, a.tensor(ctx).Scale(ctx, -2.5),
		a.tensor(ctx).Clamp(ctx, -0.5, 0.25), a16.Clamp(ctx, -1, 0))
	closeTo(t, "Scale f32", mapRef(a, func(v float32) float32 { return -2.5 * v }).data, got[0], f32Tol, f32Tol)
	clamp := func(lo, hi float32) func(float32) float32 {
		return func(v float32) float32 { return min(max(v, lo), hi) }
	}
	closeTo(t, "Clamp f32", mapRef(a, clamp(-0.5, 0.25)).data, got[1], 0, 0)
	closeTo(t, "Clamp f16", mapRef(ar, clamp(-1, 0)).data, got[2], 0, 0)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func TestUnaryOps(t *testing.T) {
	ops := []struct {
		name     string
		op       func(ctx ml.Context, a ml.Tensor) ml.Tensor
		ref      func(float64) float64
		positive bool
		tol      float64
	}{
		{"Sqr", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Sqr(ctx) }, func(x float64) float64 { return x * x }, false, f32Tol},
		{"Sqrt", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Sqrt(ctx) }, math.Sqrt, true, f32Tol},
		{"Exp", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Exp(ctx) }, math.Exp, false, f32Tol},
		{"Neg", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Neg(ctx) }, func(x float64) float64 { return -x }, false, 0},
		{"Sin", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Sin(ctx) }, math.Sin, false, f32Tol},
		{"Cos", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Cos(ctx) }, math.Cos, false, f32Tol},
		{"Tanh", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Tanh(ctx) }, math.Tanh, false, f32Tol},
		{"Sigmoid", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.Sigmoid(ctx) }, sigmoid, false, f32Tol},
		{"SigmoidOut", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.SigmoidOut(ctx) }, sigmoid, false, f32Tol},
		{"SILU", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.SILU(ctx) }, func(x float64) float64 { return x * sigmoid(x) }, false, f32Tol},
		// ggml's GELU variants use F16 lookup tables on the CPU.
		{"GELU", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.GELU(ctx) }, geluTanh, false, f16Tol},
		{"GELU_ERF", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.GELU_ERF(ctx) }, func(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }, false, f16Tol},
		{"QuickGELU", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.QuickGELU(ctx) }, func(x float64) float64 { return x * sigmoid(1.702*x) }, false, f16Tol},
		{"RELU", func(ctx ml.Context, a ml.Tensor) ml.Tensor { return a.RELU(ctx) }, func(x float64) float64 { return max(x, 0) }, false, 0},
	}
	rng := rand.New(rand.NewSource(3))
	ctx := setup(t)
	for _, op := range ops {
		for _, shape := range [][]int{{17}, {9, 4, 3}} {
			a := randRef(rng, shape...)
			if op.positive {
				a = mapRef(a, func(v float32) float32 { return float32(math.Abs(float64(v))) + 0.01 })
			}
			f := func(v float32) float32 { return float32(op.ref(float64(v))) }
			t.Run(fmt.Sprintf("%s/f32/%v", op.name, shape), func(t *testing.T) {
				x := a.tensor(ctx)
				got := op.op(ctx, x)
				if !slices.Equal(got.Shape(), a.shape()) || got.DType() != ml.DTypeF32 {
					t.Fatalf("got %v %v", got.DType(), got.Shape())
				}
				vals := compute(ctx, got, x)
				closeTo(t, op.name, mapRef(a, f).data, vals[0], op.tol, op.tol)
				// Out of place: the input is unchanged.
				closeTo(t, op.name+" input", a.data, vals[1], 0, 0)
			})
			t.Run(fmt.Sprintf("%s/f16/%v", op.name, shape), func(t *testing.T) {
				x, ar := f16Tensor(ctx, a)
				got := op.op(ctx, x)
				if got.DType() != ml.DTypeF16 {
					t.Fatalf("dtype %v", got.DType())
				}
				closeTo(t, op.name, mapRef(ar, func(v float32) float32 { return f16Round(f(v)) }).data, compute(ctx, got)[0], 2e-3, 2*f16Tol)
			})
		}
	}
}

func TestGatedActivations(t *testing.T) {
	ops := []struct {
		name string
		op   func(ctx ml.Context, a, up ml.Tensor) ml.Tensor
		act  func(float64) float64
		tol  float64
	}{
		{"SILU", func(ctx ml.Context, a, up ml.Tensor) ml.Tensor { return a.SILU(ctx, up) }, func(x float64) float64 { return x * sigmoid(x) }, f32Tol},
		{"GELU", func(ctx ml.Context, a, up ml.Tensor) ml.Tensor { return a.GELU(ctx, up) }, geluTanh, f16Tol},
		{"QuickGELU", func(ctx ml.Context, a, up ml.Tensor) ml.Tensor { return a.QuickGELU(ctx, up) }, func(x float64) float64 { return x * sigmoid(1.702*x) }, f16Tol},
		{"RELU", func(ctx ml.Context, a, up ml.Tensor) ml.Tensor { return a.RELU(ctx, up) }, func(x float64) float64 { return max(x, 0) }, 0},
	}
	rng := rand.New(rand.NewSource(4))
	ctx := setup(t)
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			a, up := randRef(rng, 16, 5, 2), randRef(rng, 16, 5, 2)
			want := broadcast2(a, up, func(x, y float32) float32 { return float32(op.act(float64(x)) * float64(y)) })
			got := op.op(ctx, a.tensor(ctx), up.tensor(ctx))
			if !slices.Equal(got.Shape(), []int{16, 5, 2}) {
				t.Fatalf("shape %v", got.Shape())
			}
			closeTo(t, op.name, want.data, compute(ctx, got)[0], op.tol, op.tol)
		})
	}
}

func TestNormOps(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	ctx := setup(t)
	a := randRef(rng, 12, 5, 3)
	w, bias := randRef(rng, 12), randRef(rng, 12)
	const eps = 1e-5

	stats := func(row []float32) (mean, variance, sumsq float64) {
		for _, v := range row {
			mean += float64(v)
			sumsq += float64(v) * float64(v)
		}
		mean /= float64(len(row))
		for _, v := range row {
			variance += (float64(v) - mean) * (float64(v) - mean)
		}
		return mean, variance / float64(len(row)), sumsq
	}
	rowOp := func(f func(row []float32, i int) float64) ref {
		return rowsRef(a, 12, func(row []float32) []float32 {
			out := make([]float32, len(row))
			for i := range row {
				out[i] = float32(f(row, i))
			}
			return out
		})
	}
	softmax := rowOp(func(row []float32, i int) float64 {
		m := float64(slices.Max(row))
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		return math.Exp(float64(row[i])-m) / s
	})
	rms := func(weight bool) ref {
		return rowOp(func(row []float32, i int) float64 {
			_, _, ss := stats(row)
			v := float64(row[i]) / math.Sqrt(ss/float64(len(row))+eps)
			if weight {
				v *= float64(w.data[i])
			}
			return v
		})
	}
	layer := func(weight, withBias bool) ref {
		return rowOp(func(row []float32, i int) float64 {
			m, v, _ := stats(row)
			y := (float64(row[i]) - m) / math.Sqrt(v+eps)
			if weight {
				y *= float64(w.data[i])
				if withBias {
					y += float64(bias.data[i])
				}
			}
			return y
		})
	}
	l2 := rowOp(func(row []float32, i int) float64 {
		_, _, ss := stats(row)
		return float64(row[i]) / max(math.Sqrt(ss), eps)
	})
	reduce := func(f func(row []float32) float64) ref {
		return rowsRef(a, 1, func(row []float32) []float32 { return []float32{float32(f(row))} })
	}
	sum := reduce(func(row []float32) float64 { m, _, _ := stats(row); return m * float64(len(row)) })
	mean := reduce(func(row []float32) float64 { m, _, _ := stats(row); return m })
	variance := reduce(func(row []float32) float64 { _, v, _ := stats(row); return v })
	stddev := reduce(func(row []float32) float64 { _, v, _ := stats(row); return math.Sqrt(v) })

	x, wt, bt := a.tensor(ctx), w.tensor(ctx), bias.tensor(ctx)
	cases := []struct {
		name  string
		got   ml.Tensor
		want  ref
		shape []int
	}{
		{"Softmax", x.Softmax(ctx), softmax, []int{12, 5, 3}},
		{"RMSNorm", x.RMSNorm(ctx, nil, eps), rms(false), []int{12, 5, 3}},
		{"RMSNorm weight", x.RMSNorm(ctx, wt, eps), rms(true), []int{12, 5, 3}},
		{"LayerNorm", x.LayerNorm(ctx, nil, nil, eps), layer(false, false), []int{12, 5, 3}},
		{"LayerNorm weight", x.LayerNorm(ctx, wt, nil, eps), layer(true, false), []int{12, 5, 3}},
		{"LayerNorm weight bias", x.LayerNorm(ctx, wt, bt, eps), layer(true, true), []int{12, 5, 3}},
		// Ollama adds the bias only together with a weight.
		{"LayerNorm bias only", x.LayerNorm(ctx, nil, bt, eps), layer(false, false), []int{12, 5, 3}},
		{"L2Norm", x.L2Norm(ctx, eps), l2, []int{12, 5, 3}},
		{"SumRows", x.SumRows(ctx), sum, []int{1, 5, 3}},
		{"Mean", x.Mean(ctx), mean, []int{1, 5, 3}},
		{"Variance", x.Variance(ctx), variance, []int{1, 5, 3}},
		{"Stddev", x.Stddev(ctx), stddev, []int{1, 5, 3}},
	}
	outs := make([]ml.Tensor, len(cases))
	for i, c := range cases {
		outs[i] = c.got
	}
	vals := compute(ctx, outs...)
	for i, c := range cases {
		if !slices.Equal(c.got.Shape(), c.shape) {
			t.Errorf("%s: shape %v, want %v", c.name, c.got.Shape(), c.shape)
		}
		closeTo(t, c.name, c.want.data, vals[i], 1e-5, 1e-4)
	}
}

// quantizeQ80 encodes rows of 32-value blocks as ggml's Q8_0 (an F16
// scale and 32 int8) and returns the bytes and the dequantized values.
func quantizeQ80(v []float32) ([]byte, []float32) {
	var out []byte
	deq := make([]float32, len(v))
	for b := 0; b < len(v); b += 32 {
		block := v[b : b+32]
		amax := 0.0
		for _, x := range block {
			amax = max(amax, math.Abs(float64(x)))
		}
		d := amax / 127
		h := float32ToFloat16(float32(d))
		out = append(out, byte(h), byte(h>>8))
		dd := float64(float16ToFloat32(h))
		for i, x := range block {
			q := 0.0
			if d != 0 {
				q = math.Round(float64(x) / d)
			}
			out = append(out, byte(int8(q)))
			deq[b+i] = float32(q * dd)
		}
	}
	return out, deq
}

func TestMulmatRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	ctx := setup(t)
	shapes := []struct{ a, b []int }{
		{[]int{32, 7}, []int{32, 5}},
		{[]int{64, 3, 2}, []int{64, 4, 6}},       // broadcast dim 2
		{[]int{32, 4, 1, 2}, []int{32, 3, 2, 4}}, // broadcast dims 2 and 3
		{[]int{96, 1}, []int{96, 9}},             // vector weight
	}
	for _, sh := range shapes {
		a, b := randRef(rng, sh.a...), randRef(rng, sh.b...)
		want := mulmatRef(a, b)
		for _, full := range []bool{false, true} {
			name := "Mulmat"
			mm := func(x, y ml.Tensor) ml.Tensor { return x.Mulmat(ctx, y) }
			if full {
				name = "MulmatFullPrec"
				mm = func(x, y ml.Tensor) ml.Tensor { return x.MulmatFullPrec(ctx, y) }
			}
			t.Run(fmt.Sprintf("%s/f32/%v_%v", name, sh.a, sh.b), func(t *testing.T) {
				got := mm(a.tensor(ctx), b.tensor(ctx))
				if !slices.Equal(got.Shape(), want.shape()) || got.DType() != ml.DTypeF32 {
					t.Fatalf("got %v %v, want %v", got.DType(), got.Shape(), want.shape())
				}
				closeTo(t, name, want.data, compute(ctx, got)[0], 1e-4, 1e-4)
			})
			t.Run(fmt.Sprintf("%s/f16/%v_%v", name, sh.a, sh.b), func(t *testing.T) {
				// F16 weights: ggml rounds the activations to F16 as well.
				a16, ar := f16Tensor(ctx, a)
				want := mulmatRef(ar, mapRef(b, f16Round))
				got := mm(a16, b.tensor(ctx))
				if got.DType() != ml.DTypeF32 {
					t.Fatalf("dtype %v", got.DType())
				}
				closeTo(t, name, want.data, compute(ctx, got)[0], 1e-3, 1e-3)
			})
		}
	}

	t.Run("q8_0", func(t *testing.T) {
		a, b := randRef(rng, 64, 6), randRef(rng, 64, 3)
		qa, deq := quantizeQ80(a.data)
		w := ctx.Input().FromBytes(ml.DTypeQ80, qa, 64, 6)
		if w.DType() != ml.DTypeQ80 {
			t.Fatalf("dtype %v", w.DType())
		}
		closeTo(t, "BackendGet q8_0", deq, w.BackendGet(), 0, 0)
		ar := newRef(64, 6)
		copy(ar.data, deq)
		want := mulmatRef(ar, b)
		// ggml quantizes the activations to Q8_0 too: ~1% of the row norm.
		closeTo(t, "Mulmat q8_0", want.data, compute(ctx, w.Mulmat(ctx, b.tensor(ctx)))[0], 0.1, 0.02)
	})
}

func TestShapeOps(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	ctx := setup(t)
	a := randRef(rng, 6, 4, 3, 2)
	x := a.tensor(ctx)

	t.Run("Reshape", func(t *testing.T) {
		r := x.Reshape(ctx, 12, -1)
		if !slices.Equal(r.Shape(), []int{12, 12}) {
			t.Fatalf("shape %v", r.Shape())
		}
		closeTo(t, "Reshape", a.data, compute(ctx, r)[0], 0, 0)
		// A non-contiguous tensor is copied first.
		p := x.Permute(ctx, 1, 0, 2, 3).Reshape(ctx, 4, 36)
		closeTo(t, "Reshape permuted", permuteRef(a, [4]int{1, 0, 2, 3}).data, compute(ctx, p)[0], 0, 0)
		mustPanic(t, func() { x.Reshape(ctx, 5, 5) }, "reshape")
		mustPanic(t, func() { x.Reshape(ctx, 1, 2, 3, 4, 6) }, "unsupported number of dimensions")
		mustPanic(t, func() { x.Reshape(ctx) }, "unsupported number of dimensions")
	})

	t.Run("Contiguous", func(t *testing.T) {
		p := x.Permute(ctx, 2, 0, 3, 1)
		want := permuteRef(a, [4]int{2, 0, 3, 1})
		c0 := p.Contiguous(ctx)
		c2 := p.Contiguous(ctx, -1, 6)
		if !slices.Equal(c0.Shape(), want.shape()) || !slices.Equal(c2.Shape(), []int{24, 6}) {
			t.Fatalf("shapes %v %v", c0.Shape(), c2.Shape())
		}
		vals := compute(ctx, c0, c2)
		closeTo(t, "Contiguous", want.data, vals[0], 0, 0)
		closeTo(t, "Contiguous reshaped", want.data, vals[1], 0, 0)
	})

	t.Run("Permute", func(t *testing.T) {
		for _, order := range [][4]int{{0, 1, 2, 3}, {1, 0, 2, 3}, {3, 2, 1, 0}, {2, 3, 0, 1}, {1, 2, 0, 3}} {
			p := x.Permute(ctx, order[:]...)
			want := permuteRef(a, order)
			if !slices.Equal(p.Shape(), want.shape()) {
				t.Fatalf("%v: shape %v, want %v", order, p.Shape(), want.shape())
			}
			closeTo(t, fmt.Sprint("Permute", order), want.data, compute(ctx, p.Contiguous(ctx))[0], 0, 0)
		}
		mustPanic(t, func() { x.Permute(ctx, 1, 0) }, "invalid number of dimensions for permute")
		mustPanic(t, func() { x.Permute(ctx, 0, 0, 1, 2) }, "permute")
	})

	t.Run("View", func(t *testing.T) {
		// Views with byte strides of the [6,4,3,2] F32 tensor.
		v1 := x.View(ctx, 4*5, 10)
		v2 := x.View(ctx, 4*2, 3, 4*6, 4)          // cols 2..4 of each row of the first matrix
		v3 := x.View(ctx, 0, 2, 4*6*2, 2, 4*24, 3) // every other row
		v4 := x.View(ctx, 4, 2, 4*6, 2, 4*24, 2, 4*72, 2)
		vals := compute(ctx, v1.Contiguous(ctx), v2.Contiguous(ctx), v3.Contiguous(ctx), v4.Contiguous(ctx))
		closeTo(t, "View 1", a.data[5:15], vals[0], 0, 0)
		var w2, w3, w4 []float32
		for i1 := 0; i1 < 4; i1++ {
			for i0 := 2; i0 < 5; i0++ {
				w2 = append(w2, a.at(i0, i1, 0, 0))
			}
		}
		for i2 := 0; i2 < 3; i2++ {
			for i1 := 0; i1 < 4; i1 += 2 {
				for i0 := 0; i0 < 2; i0++ {
					w3 = append(w3, a.at(i0, i1, i2, 0))
				}
			}
		}
		for i3 := 0; i3 < 2; i3++ {
			for i2 := 0; i2 < 2; i2++ {
				for i1 := 0; i1 < 2; i1++ {
					for i0 := 1; i0 < 3; i0++ {
						w4 = append(w4, a.at(i0, i1, i2, i3))
					}
				}
			}
		}
		closeTo(t, "View 2", w2, vals[1], 0, 0)
		closeTo(t, "View 3", w3, vals[2], 0, 0)
		closeTo(t, "View 4", w4, vals[3], 0, 0)
		if got := v2.Stride(1); got != 24 {
			t.Errorf("View stride(1) = %d", got)
		}
		mustPanic(t, func() { x.View(ctx, 0, 1, 2) }, "unsupported number of dimensions")
		mustPanic(t, func() { x.View(ctx, 4*140, 10) }, "view")
	})

	t.Run("Concat", func(t *testing.T) {
		for dim := 0; dim < 4; dim++ {
			bshape := a.ne
			bshape[dim] = 2
			b := randRef(rng, bshape[:]...)
			ne := a.ne
			ne[dim] += 2
			want := newRef(ne[:]...)
			want.each(func(i0, i1, i2, i3 int) {
				idx := [4]int{i0, i1, i2, i3}
				if idx[dim] < a.ne[dim] {
					want.set(a.at(i0, i1, i2, i3), i0, i1, i2, i3)
				} else {
					idx[dim] -= a.ne[dim]
					want.set(b.at(idx[0], idx[1], idx[2], idx[3]), i0, i1, i2, i3)
				}
			})
			got := x.Concat(ctx, b.tensor(ctx), dim)
			if !slices.Equal(got.Shape(), want.shape()) {
				t.Fatalf("dim %d: shape %v", dim, got.Shape())
			}
			closeTo(t, fmt.Sprint("Concat ", dim), want.data, compute(ctx, got)[0], 0, 0)
		}
		mustPanic(t, func() { x.Concat(ctx, ctx.Input().Zeros(ml.DTypeF32, 5, 4, 3, 2), 1) }, "concat")
	})

	t.Run("Stack", func(t *testing.T) {
		p, q := randRef(rng, 3, 2), randRef(rng, 3, 2)
		r := randRef(rng, 3, 2)
		got := p.tensor(ctx).Stack(ctx, 1, q.tensor(ctx), r.tensor(ctx))
		if !slices.Equal(got.Shape(), []int{3, 6}) {
			t.Fatalf("shape %v", got.Shape())
		}
		want := slices.Concat(p.data, q.data, r.data)
		closeTo(t, "Stack", want, compute(ctx, got)[0], 0, 0)
		single := p.tensor(ctx)
		if single.Stack(ctx, 0) != single {
			t.Error("Stack with nothing to add should return the tensor")
		}
	})

	t.Run("Repeat", func(t *testing.T) {
		small := randRef(rng, 3, 2)
		for dim := 0; dim < 3; dim++ {
			ne := small.ne
			ne[dim] *= 3
			want := newRef(ne[:]...)
			want.each(func(i0, i1, i2, i3 int) {
				want.set(small.at(i0%3, i1%2, 0, 0), i0, i1, i2, i3)
			})
			got := small.tensor(ctx).Repeat(ctx, dim, 3)
			if !slices.Equal(got.Shape(), want.shape()) {
				t.Fatalf("dim %d: shape %v", dim, got.Shape())
			}
			closeTo(t, fmt.Sprint("Repeat ", dim), want.data, compute(ctx, got)[0], 0, 0)
		}
		mustPanic(t, func() { x.Repeat(ctx, 4, 2) }, "invalid dimension")
	})

	t.Run("Pad", func(t *testing.T) {
		small := randRef(rng, 3, 2, 2)
		got := small.tensor(ctx).Pad(ctx, 2, 1, 1, 0)
		want := newRef(5, 3, 3)
		small.each(func(i0, i1, i2, i3 int) { want.set(small.at(i0, i1, i2, i3), i0, i1, i2, i3) })
		if !slices.Equal(got.Shape(), []int{5, 3, 3}) {
			t.Fatalf("shape %v", got.Shape())
		}
		closeTo(t, "Pad", want.data, compute(ctx, got)[0], 0, 0)
		mustPanic(t, func() { x.Pad(ctx, 1, 1) }, "expected 4 dimensions")
		mustPanic(t, func() { x.Pad(ctx, 0, 0, 0, 1) }, "cuda does not support 4d tensors")
	})

	t.Run("Slice", func(t *testing.T) {
		cases := [][4]int{{0, 1, 5, 1}, {1, 1, 4, 2}, {2, 0, 3, 2}, {3, 1, 2, 1}, {0, 0, 6, 2}, {0, 1, 6, 3}}
		for _, c := range cases {
			dim, low, high, step := c[0], c[1], c[2], c[3]
			want := sliceRef(a, dim, low, high, step)
			got := x.Slice(ctx, dim, low, high, step)
			closeTo(t, fmt.Sprint("Slice ", c), want.data, compute(ctx, got.Contiguous(ctx))[0], 0, 0)
		}
		mustPanic(t, func() { x.Slice(ctx, 4, 0, 1, 1) }, "invalid dimension")
		mustPanic(t, func() { x.Slice(ctx, 0, 2, 2, 1) }, "invalid slice parameters")
		mustPanic(t, func() { x.Slice(ctx, 0, 0, 7, 1) }, "invalid slice parameters")
		mustPanic(t, func() { x.Slice(ctx, 0, 0, 2, 0) }, "invalid slice parameters")
	})

	t.Run("Duplicate", func(t *testing.T) {
		d := x.Duplicate(ctx)
		closeTo(t, "Duplicate", a.data, compute(ctx, d)[0], 0, 0)
	})
}

func TestIndexOps(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	ctx := setup(t)

	t.Run("Rows", func(t *testing.T) {
		table := randRef(rng, 5, 7)
		ids := []int32{3, 0, 6, 3}
		var want []float32
		for _, id := range ids {
			want = append(want, table.data[int(id)*5:int(id)*5+5]...)
		}
		idt := ctx.Input().FromInts(ids, len(ids))
		got := table.tensor(ctx).Rows(ctx, idt)
		if !slices.Equal(got.Shape(), []int{5, 4}) || got.DType() != ml.DTypeF32 {
			t.Fatalf("got %v %v", got.DType(), got.Shape())
		}
		closeTo(t, "Rows", want, compute(ctx, got)[0], 0, 0)

		t16, tr := f16Tensor(ctx, table)
		got16 := t16.Rows(ctx, idt)
		var want16 []float32
		for _, id := range ids {
			want16 = append(want16, tr.data[int(id)*5:int(id)*5+5]...)
		}
		closeTo(t, "Rows f16", want16, compute(ctx, got16)[0], 0, 0)
		mustPanic(t, func() { table.tensor(ctx).Rows(ctx, table.tensor(ctx)) }, "i32")
	})

	t.Run("SetRows", func(t *testing.T) {
		for _, dt := range []ml.DType{ml.DTypeF32, ml.DTypeF16} {
			dst := ctx.Input().Zeros(dt, 4, 6)
			src := randRef(rng, 4, 2)
			got := dst.SetRows(ctx, src.tensor(ctx), ctx.Input().FromInts([]int32{5, 1}, 2))
			want := make([]float32, 24)
			copy(want[20:24], src.data[0:4])
			copy(want[4:8], src.data[4:8])
			if dt == ml.DTypeF16 {
				want = mapRef(ref{ne: [4]int{24, 1, 1, 1}, data: want}, f16Round).data
			}
			ctx.Forward(got).Compute(got)
			// The result is a view of dst: dst itself now holds the rows.
			closeTo(t, fmt.Sprint("SetRows ", dt), want, dst.BackendGet(), 0, 0)
		}
	})

	t.Run("Copy", func(t *testing.T) {
		src := randRef(rng, 6, 3)
		dst := ctx.Input().Empty(ml.DTypeF16, 6, 3)
		got := src.tensor(ctx).Copy(ctx, dst)
		if got.DType() != ml.DTypeF16 {
			t.Fatalf("dtype %v", got.DType())
		}
		ctx.Forward(got).Compute(got)
		closeTo(t, "Copy to f16", mapRef(src, f16Round).data, dst.BackendGet(), 0, 0)

		// Into a view: the second row of a zeroed [6,3].
		dst2 := ctx.Input().Zeros(ml.DTypeF32, 6, 3)
		row := randRef(rng, 6)
		c := row.tensor(ctx).Copy(ctx, dst2.View(ctx, 4*6, 6))
		ctx.Forward(c).Compute()
		want := make([]float32, 18)
		copy(want[6:12], row.data)
		closeTo(t, "Copy into view", want, dst2.BackendGet(), 0, 0)
		mustPanic(t, func() { src.tensor(ctx).Copy(ctx, ctx.Input().Empty(ml.DTypeF32, 5, 3)) }, "cpy")
	})

	t.Run("Cast", func(t *testing.T) {
		src := randRef(rng, 8, 2)
		h := src.tensor(ctx).Cast(ctx, ml.DTypeF16)
		back := h.Cast(ctx, ml.DTypeF32)
		if h.DType() != ml.DTypeF16 || back.DType() != ml.DTypeF32 {
			t.Fatalf("dtypes %v %v", h.DType(), back.DType())
		}
		vals := compute(ctx, h, back)
		closeTo(t, "Cast f16", mapRef(src, f16Round).data, vals[0], 0, 0)
		closeTo(t, "Cast back", mapRef(src, f16Round).data, vals[1], 0, 0)
		mustPanic(t, func() { src.tensor(ctx).Cast(ctx, ml.DTypeOther) }, "unsupported dtype")
	})

	t.Run("Argsort", func(t *testing.T) {
		src := randRef(rng, 9, 3)
		got := src.tensor(ctx).Argsort(ctx)
		if got.DType() != ml.DTypeI32 || !slices.Equal(got.Shape(), []int{9, 3}) {
			t.Fatalf("got %v %v", got.DType(), got.Shape())
		}
		vals := compute(ctx, got)[0]
		for r := 0; r < 3; r++ {
			row := src.data[r*9 : r*9+9]
			want := make([]int, 9)
			for i := range want {
				want[i] = i
			}
			sort.SliceStable(want, func(i, j int) bool { return row[want[i]] < row[want[j]] })
			for i := range want {
				if int(vals[r*9+i]) != want[i] {
					t.Fatalf("row %d: order %v, want %v", r, vals[r*9:r*9+9], want)
				}
			}
		}
		// I32 input (Ollama sorts qwen2.5-VL window indices this way).
		ints := ctx.Input().FromInts([]int32{4, -2, 9, 0}, 4)
		closeTo(t, "Argsort i32", []float32{1, 3, 0, 2}, compute(ctx, ints.Argsort(ctx))[0], 0, 0)
	})

	t.Run("TopK", func(t *testing.T) {
		src := randRef(rng, 10, 2)
		got := src.tensor(ctx).TopK(ctx, 3)
		if got.DType() != ml.DTypeI32 || !slices.Equal(got.Shape(), []int{3, 2}) {
			t.Fatalf("got %v %v", got.DType(), got.Shape())
		}
		vals := compute(ctx, got)[0]
		for r := 0; r < 2; r++ {
			row := slices.Clone(src.data[r*10 : r*10+10])
			sorted := slices.Clone(row)
			slices.Sort(sorted)
			slices.Reverse(sorted)
			var picked []float32
			for i := 0; i < 3; i++ {
				picked = append(picked, row[int(vals[r*3+i])])
			}
			slices.Sort(picked)
			slices.Reverse(picked)
			closeTo(t, fmt.Sprint("TopK row ", r), sorted[:3], picked, 0, 0)
		}
	})
}

func TestMulmatIntoSoftmaxChain(t *testing.T) {
	// A small two-layer chain, to check ops compose in one graph.
	rng := rand.New(rand.NewSource(9))
	ctx := setup(t)
	x, w1, w2 := randRef(rng, 16, 3), randRef(rng, 16, 8), randRef(rng, 8, 4)
	h := mulmatRef(w1, x)
	h = mapRef(h, func(v float32) float32 { return float32(float64(v) * sigmoid(float64(v))) })
	o := mulmatRef(w2, h)
	want := rowsRef(o, 4, func(row []float32) []float32 {
		m := float64(slices.Max(row))
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		out := make([]float32, len(row))
		for i, v := range row {
			out[i] = float32(math.Exp(float64(v)-m) / s)
		}
		return out
	})
	got := w2.tensor(ctx).Mulmat(ctx, w1.tensor(ctx).Mulmat(ctx, x.tensor(ctx)).SILU(ctx)).Softmax(ctx)
	closeTo(t, "chain", want.data, compute(ctx, got)[0], 1e-5, 1e-4)
}
