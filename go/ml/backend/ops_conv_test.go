package backend

// Conv2D, Conv3D, Conv1DDW, IM2Col, AvgPool2D and Interpolate against Go
// references on random inputs. ggml convolves through F16 (the input is
// unrolled into F16, the kernel converted to F16), so the convolution
// references use F16-rounded inputs and kernels and accumulate in float64:
// tolerance 1e-4 absolute + 1e-4 relative. IM2Col is an exact copy;
// AvgPool2D within 1e-6; Interpolate within 1e-5.

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

const convRefTol = 1e-4

func convOut(n, k, s, p, d int) int { return (n+2*p-d*(k-1)-1)/s + 1 }

// padded reads r at (x, y, i2, i3), zero outside dims 0 and 1.
func (r ref) padded(x, y, i2, i3 int) float64 {
	if x < 0 || y < 0 || x >= r.ne[0] || y >= r.ne[1] {
		return 0
	}
	return float64(r.at(x, y, i2, i3))
}

// conv2dRef: kernel [KW,KH,IC,OC], input [W,H,IC,N] → [OW,OH,OC,N].
func conv2dRef(k, x ref, s0, s1, p0, p1, d0, d1 int) ref {
	kw, kh, ic, oc := k.ne[0], k.ne[1], k.ne[2], k.ne[3]
	out := newRef(convOut(x.ne[0], kw, s0, p0, d0), convOut(x.ne[1], kh, s1, p1, d1), oc, x.ne[3])
	out.each(func(ox, oy, o, n int) {
		var acc float64
		for c := 0; c < ic; c++ {
			for ky := 0; ky < kh; ky++ {
				for kx := 0; kx < kw; kx++ {
					acc += float64(k.at(kx, ky, c, o)) * x.padded(ox*s0+kx*d0-p0, oy*s1+ky*d1-p1, c, n)
				}
			}
		}
		out.set(float32(acc), ox, oy, o, n)
	})
	return out
}

// upload puts r on ctx as F32 or F16 and returns the tensor and the values
// ggml sees through F16.
func convTensor(ctx ml.Context, r ref, dtype ml.DType) ml.Tensor {
	if dtype == ml.DTypeF16 {
		t, _ := f16Tensor(ctx, r)
		return t
	}
	return r.tensor(ctx)
}

func shapeOf(t ml.Tensor) [4]int {
	return [4]int{t.Dim(0), t.Dim(1), t.Dim(2), t.Dim(3)}
}

func TestConv2D(t *testing.T) {
	cases := []struct {
		k, x                   []int
		kt, xt                 ml.DType
		s0, s1, p0, p1, d0, d1 int
	}{
		{[]int{3, 3, 2, 4}, []int{8, 7, 2, 2}, ml.DTypeF32, ml.DTypeF32, 1, 1, 1, 1, 1, 1},
		{[]int{2, 3, 3, 5}, []int{9, 10, 3, 1}, ml.DTypeF16, ml.DTypeF32, 2, 1, 0, 2, 1, 2},
		{[]int{3, 2, 1, 2}, []int{11, 6, 1, 1}, ml.DTypeF16, ml.DTypeF16, 3, 2, 2, 1, 2, 1},
		// gemma4's audio subsampling: stride 2, padding 1.
		{[]int{3, 3, 1, 4}, []int{10, 8, 1, 1}, ml.DTypeF32, ml.DTypeF32, 2, 2, 1, 1, 1, 1},
		// A vision patch embedding: stride = kernel size.
		{[]int{4, 4, 3, 8}, []int{16, 12, 3, 1}, ml.DTypeF16, ml.DTypeF32, 4, 4, 0, 0, 1, 1},
	}
	rng := rand.New(rand.NewSource(1))
	ctx := setup(t)
	for i, tc := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			k, x := randRef(rng, tc.k...), randRef(rng, tc.x...)
			kernel, input := convTensor(ctx, k, tc.kt), convTensor(ctx, x, tc.xt)
			got := kernel.Conv2D(ctx, input, tc.s0, tc.s1, tc.p0, tc.p1, tc.d0, tc.d1)
			want := conv2dRef(mapRef(k, f16Round), mapRef(x, f16Round), tc.s0, tc.s1, tc.p0, tc.p1, tc.d0, tc.d1)
			if got.DType() != ml.DTypeF32 || shapeOf(got) != want.ne {
				t.Fatalf("got %v %v, want f32 %v", got.DType(), shapeOf(got), want.ne)
			}
			closeTo(t, "Conv2D", want.data, compute(ctx, got)[0], convRefTol, convRefTol)
		})
	}
}

func TestConv3D(t *testing.T) {
	// Ollama's use: a patch embedding whose stride covers each input, so
	// the output is one position per image, reshaped to [OC, N].
	rng := rand.New(rand.NewSource(2))
	ctx := setup(t)
	const ic, oc, n = 3, 5, 4
	for _, kt := range []ml.DType{ml.DTypeF32, ml.DTypeF16} {
		k := randRef(rng, 2, 3, 2, oc*ic)
		x := randRef(rng, 2, 3, 2, n*ic)
		got := convTensor(ctx, k, kt).Conv3D(ctx, x.tensor(ctx), ic, 2, 3, 2, 0, 0, 0, 1, 1, 1)
		if !slices.Equal(got.Shape(), []int{oc, n}) {
			t.Fatalf("shape %v, want [%d %d]", got.Shape(), oc, n)
		}
		want := newRef(oc, n)
		kr, xr := mapRef(k, f16Round), mapRef(x, f16Round)
		want.each(func(o, b, _, _ int) {
			var acc float64
			for c := 0; c < ic; c++ {
				for z := 0; z < 2; z++ {
					for y := 0; y < 3; y++ {
						for xx := 0; xx < 2; xx++ {
							acc += float64(kr.at(xx, y, z, o*ic+c)) * float64(xr.at(xx, y, z, b*ic+c))
						}
					}
				}
			}
			want.set(float32(acc), o, b, 0, 0)
		})
		closeTo(t, fmt.Sprintf("Conv3D kernel %v", kt), want.data, compute(ctx, got)[0], convRefTol, convRefTol)
	}
	// More than one position per image cannot take Ollama's reshape.
	k := randRef(rng, 2, 2, 2, 2).tensor(ctx)
	x := randRef(rng, 3, 2, 2, 2).tensor(ctx)
	mustPanic(t, func() { k.Conv3D(ctx, x, 2, 1, 1, 1, 0, 0, 0, 1, 1, 1) }, "Conv3D", "[2 1 1 1]", "[OC, N] = [1, 1]")
}

func TestConv1DDW(t *testing.T) {
	cases := []struct {
		k, x    []int
		kt, xt  ml.DType
		s, p, d int
	}{
		{[]int{3, 1, 4}, []int{10, 4}, ml.DTypeF32, ml.DTypeF32, 1, 1, 1},
		{[]int{5, 1, 3}, []int{17, 3}, ml.DTypeF16, ml.DTypeF32, 2, 2, 2},
		{[]int{3, 1, 4}, []int{8, 2}, ml.DTypeF16, ml.DTypeF16, 1, 1, 1}, // depth multiplier 2
	}
	rng := rand.New(rand.NewSource(3))
	ctx := setup(t)
	for i, tc := range cases {
		k, x := randRef(rng, tc.k...), randRef(rng, tc.x...)
		got := convTensor(ctx, x, tc.xt).Conv1DDW(ctx, convTensor(ctx, k, tc.kt), tc.s, tc.p, tc.d)
		kr, xr := mapRef(k, f16Round), mapRef(x, f16Round)
		cm, m := k.ne[2], k.ne[2]/x.ne[1]
		want := newRef(convOut(x.ne[0], k.ne[0], tc.s, tc.p, tc.d), cm)
		want.each(func(o, j, _, _ int) {
			var acc float64
			for tt := 0; tt < k.ne[0]; tt++ {
				acc += float64(kr.at(tt, 0, j, 0)) * xr.padded(o*tc.s+tt*tc.d-tc.p, j/m, 0, 0)
			}
			want.set(float32(acc), o, j, 0, 0)
		})
		if !slices.Equal(got.Shape(), want.shape()) {
			t.Fatalf("case %d: shape %v, want %v", i, got.Shape(), want.shape())
		}
		closeTo(t, fmt.Sprintf("Conv1DDW case %d", i), want.data, compute(ctx, got)[0], convRefTol, convRefTol)
	}
}

func TestIM2Col(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	ctx := setup(t)
	cases := []struct {
		k, x                   []int
		s0, s1, p0, p1, d0, d1 int
	}{
		{[]int{3, 3, 2}, []int{7, 6, 2, 2}, 1, 1, 1, 1, 1, 1},
		{[]int{2, 3, 3}, []int{9, 8, 3}, 2, 1, 0, 2, 2, 1},
		// mistral3's patch merger and llama4's patch embedding: stride =
		// window, the kernel an uninitialised F32 tensor of the right shape.
		{[]int{2, 2, 5}, []int{6, 4, 5}, 2, 2, 0, 0, 1, 1},
	}
	for i, tc := range cases {
		x := randRef(rng, tc.x...)
		kernel := ctx.Input().Empty(ml.DTypeF32, tc.k...)
		got := kernel.IM2Col(ctx, x.tensor(ctx), tc.s0, tc.s1, tc.p0, tc.p1, tc.d0, tc.d1)
		kw, kh, ic := tc.k[0], tc.k[1], tc.k[2]
		want := newRef(ic*kh*kw, convOut(x.ne[0], kw, tc.s0, tc.p0, tc.d0), convOut(x.ne[1], kh, tc.s1, tc.p1, tc.d1), x.ne[3])
		want.each(func(e, ox, oy, n int) {
			c, ky, kx := e/(kh*kw), e/kw%kh, e%kw
			want.set(float32(x.padded(ox*tc.s0+kx*tc.d0-tc.p0, oy*tc.s1+ky*tc.d1-tc.p1, c, n)), e, ox, oy, n)
		})
		if shapeOf(got) != want.ne || got.DType() != ml.DTypeF32 {
			t.Fatalf("case %d: %v %v, want f32 %v", i, got.DType(), shapeOf(got), want.ne)
		}
		closeTo(t, fmt.Sprintf("IM2Col case %d", i), want.data, compute(ctx, got)[0], 0, 0)
	}
}

func TestAvgPool2D(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	ctx := setup(t)
	cases := []struct {
		x       []int
		dtype   ml.DType
		k, s, p int
	}{
		{[]int{8, 6, 3, 2}, ml.DTypeF32, 2, 2, 0},
		{[]int{7, 7, 2}, ml.DTypeF32, 3, 2, 1},
		{[]int{5, 4, 2}, ml.DTypeF16, 2, 1, 1},
		{[]int{16, 16, 4}, ml.DTypeF32, 4, 4, 0}, // gemma3's vision pooling
	}
	for i, tc := range cases {
		x := randRef(rng, tc.x...)
		got := convTensor(ctx, x, tc.dtype).AvgPool2D(ctx, tc.k, tc.s, float32(tc.p))
		xr := x
		if tc.dtype == ml.DTypeF16 {
			xr = mapRef(x, f16Round)
		}
		ow, oh := (x.ne[0]+2*tc.p-tc.k)/tc.s+1, (x.ne[1]+2*tc.p-tc.k)/tc.s+1
		want := newRef(ow, oh, x.ne[2], x.ne[3])
		want.each(func(ox, oy, c, n int) {
			var acc float64
			for ky := 0; ky < tc.k; ky++ {
				for kx := 0; kx < tc.k; kx++ {
					acc += xr.padded(ox*tc.s+kx-tc.p, oy*tc.s+ky-tc.p, c, n)
				}
			}
			// Padding counts: the divisor is always k*k.
			want.set(float32(acc/float64(tc.k*tc.k)), ox, oy, c, n)
		})
		if shapeOf(got) != want.ne || got.DType() != ml.DTypeF32 {
			t.Fatalf("case %d: %v %v, want f32 %v", i, got.DType(), shapeOf(got), want.ne)
		}
		closeTo(t, fmt.Sprintf("AvgPool2D case %d", i), want.data, compute(ctx, got)[0], 1e-6, 1e-6)
	}
}

// interpolateRef maps output pixel centres to (i+0.5)/sf - 0.5 in float32
// (sf = out/in, align_corners=False); nearest takes floor(i/sf), which is
// also how dims 2 and 3 are sampled; bilinear clamps to the edges.
func interpolateRef(x ref, ne [4]int, bilinear bool) ref {
	var sf [4]float32
	for i := range sf {
		sf[i] = float32(ne[i]) / float32(x.ne[i])
	}
	out := newRef(ne[:]...)
	out.each(func(i0, i1, i2, i3 int) {
		j2, j3 := int(float32(i2)/sf[2]), int(float32(i3)/sf[3])
		if !bilinear {
			out.set(x.at(int(float32(i0)/sf[0]), int(float32(i1)/sf[1]), j2, j3), i0, i1, i2, i3)
			return
		}
		pos := func(i, d int) (int, int, float64) {
			c := (float32(i)+0.5)/sf[d] - 0.5
			f := int(math.Floor(float64(c)))
			lo, hi := min(max(f, 0), x.ne[d]-1), min(max(f+1, 0), x.ne[d]-1)
			w := min(max(c-float32(lo), 0), 1)
			return lo, hi, float64(w)
		}
		x0, x1, dx := pos(i0, 0)
		y0, y1, dy := pos(i1, 1)
		g := func(a, b int) float64 { return float64(x.at(a, b, j2, j3)) }
		v := g(x0, y0)*(1-dx)*(1-dy) + g(x1, y0)*dx*(1-dy) + g(x0, y1)*(1-dx)*dy + g(x1, y1)*dx*dy
		out.set(float32(v), i0, i1, i2, i3)
	})
	return out
}

func TestInterpolate(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	ctx := setup(t)
	cases := []struct{ x, ne [4]int }{
		{[4]int{4, 3, 2, 1}, [4]int{8, 6, 2, 1}},
		{[4]int{6, 9, 3, 1}, [4]int{4, 5, 3, 1}},
		{[4]int{5, 5, 1, 2}, [4]int{7, 3, 1, 2}},
		{[4]int{3, 4, 2, 1}, [4]int{3, 4, 4, 1}},
	}
	for i, tc := range cases {
		x := randRef(rng, tc.x[:]...)
		for _, mode := range []ml.SamplingMode{ml.SamplingModeNearest, ml.SamplingModeBilinear} {
			got := x.tensor(ctx).Interpolate(ctx, tc.ne, mode)
			want := interpolateRef(x, tc.ne, mode == ml.SamplingModeBilinear)
			if shapeOf(got) != tc.ne {
				t.Fatalf("case %d: shape %v, want %v", i, shapeOf(got), tc.ne)
			}
			closeTo(t, fmt.Sprintf("Interpolate case %d mode %d", i, mode), want.data, compute(ctx, got)[0], 1e-5, 0)
		}
	}
	// PyTorch's F.interpolate([1, 2], 4, bilinear, align_corners=False).
	got := ctx.Input().FromFloats([]float32{1, 2}, 2).Interpolate(ctx, [4]int{4, 1, 1, 1}, ml.SamplingModeBilinear)
	closeTo(t, "bilinear [1 2]", []float32{1, 1.25, 1.75, 2}, compute(ctx, got)[0], 1e-6, 0)
}

// Every op panics with the library's message on bad input, and the
// context stays usable.
func TestConvOpsPanic(t *testing.T) {
	ctx := setup(t)
	in := ctx.Input()
	k := in.Zeros(ml.DTypeF32, 3, 3, 2, 4)
	x := in.Zeros(ml.DTypeF32, 8, 8, 2)
	x3 := in.Zeros(ml.DTypeF32, 8, 8, 3)
	xi := in.Zeros(ml.DTypeI32, 8, 8, 2)
	q := in.Zeros(ml.DTypeQ80, 32, 3, 2)

	mustPanic(t, func() { k.Conv2D(ctx, x3, 1, 1, 0, 0, 1, 1) }, "conv_2d: kernel f32[3,3,2,4] and input f32[8,8,3] differ in input channels")
	mustPanic(t, func() { q.Conv2D(ctx, x, 1, 1, 0, 0, 1, 1) }, "conv_2d: kernel must be f32 or f16, got q8_0[32,3,2]")
	mustPanic(t, func() { k.Conv2D(ctx, x, 0, 1, 0, 0, 1, 1) }, "conv_2d: stride 0 along dim 0")
	mustPanic(t, func() { k.Conv2D(ctx, x, 1, 1, 0, 0, 1, 1<<40) }, "Conv2D: d1 1099511627776 does not fit in 32 bits")
	mustPanic(t, func() { k.Conv2D(ctx, x, 1, 1, 0, 0, 5, 1) }, "conv_2d: kernel f32[3,3,2,4] does not fit input f32[8,8,2] along dim 0")
	k3 := in.Zeros(ml.DTypeF32, 2, 2, 2, 6)
	x3d := in.Zeros(ml.DTypeF32, 4, 4, 4, 4)
	mustPanic(t, func() { k3.Conv3D(ctx, x3d, 3, 1, 1, 1, 0, 0, 0, 1, 1, 1) }, "conv_3d: dim 3 of kernel f32[2,2,2,6] and of input f32[4,4,4,4] must be multiples of the 3 input channels")
	mustPanic(t, func() { k3.Conv3D(ctx, x3d, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1) }, "conv_3d: the input channel count must be 1 or more, got 0")
	kd := in.Zeros(ml.DTypeF32, 3, 1, 4)
	mustPanic(t, func() { in.Zeros(ml.DTypeF32, 10, 3).Conv1DDW(ctx, kd, 1, 0, 1) }, "conv_1d_dw: kernel must be [K, 1, C·m] for input f32[10,3]")
	mustPanic(t, func() { x.Conv1DDW(ctx, kd, 1, 0, 1) }, "conv_1d_dw: input must be [L, C], got f32[8,8,2]")
	mustPanic(t, func() { k.IM2Col(ctx, xi, 1, 1, 0, 0, 1, 1) }, "im2col: input must be f32, got i32[8,8,2]")
	mustPanic(t, func() { k.IM2Col(ctx, x, 1, 1, -1, 0, 1, 1) }, "im2col: padding -1 along dim 0")
	mustPanic(t, func() { xi.AvgPool2D(ctx, 2, 2, 0) }, "avg_pool_2d: a must be f32 or f16, got i32[8,8,2]")
	mustPanic(t, func() { x.AvgPool2D(ctx, 2, 2, 0.5) }, "avg_pool_2d: padding must be a whole number")
	mustPanic(t, func() { x.AvgPool2D(ctx, 9, 1, 0) }, "avg_pool_2d: window 9 does not fit f32[8,8,2] along dim 0")
	mustPanic(t, func() { q.Interpolate(ctx, [4]int{4, 4, 1, 1}, ml.SamplingModeNearest) }, "interpolate: a must be f32, got q8_0[32,3,2]")
	mustPanic(t, func() { x.Interpolate(ctx, [4]int{4, 0, 2, 1}, ml.SamplingModeBilinear) }, "interpolate: target sizes must be 1 or more")
	mustPanic(t, func() { x.Interpolate(ctx, [4]int{4, 4, 2, 1}, ml.SamplingMode(7)) }, "unsupported interpolate mode")

	// Still usable.
	ones := in.FromFloats(slices.Repeat([]float32{1}, 32), 4, 4, 2)
	half := in.FromFloats(slices.Repeat([]float32{0.5}, 8), 2, 2, 2, 1)
	closeTo(t, "Conv2D after errors", []float32{4, 4, 4, 4}, compute(ctx, half.Conv2D(ctx, ones, 2, 2, 0, 0, 1, 1))[0], 0, 0)
}
