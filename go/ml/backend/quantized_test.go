package backend

// Quantized data through the ml API (the quantized DTypes it names: Q8_0,
// Q4_0, MXFP4): FromBytes with checked sizes, dequantization by Cast and
// Copy, BackendGet, and Mulmat with quantized weights. Blocks are encoded
// here from the formats' definitions and decoded by a Go reference, so the
// values ggml reads back must match exactly.
//
// Mulmat tolerances: ggml converts the F32 right operand to Q8_0 for the
// dot product, so against dequant(a)·b the error is Q8_0's rounding of b
// (σ ≈ 0.08 for K = 256 and normal data; outputs are ~16): atol 0.4
// (5σ). Against the exact F32 product a·b the relative RMS error is
// dominated by a's quantization: bound 0.03 for Q8_0 (observed 0.007 to
// 0.011), 0.35 for Q4_0 (0.09 to 0.2, the encoder here being simple), 0.3
// for MXFP4 (0.09 to 0.12).

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// quantQ40 encodes 32-value blocks as Q4_0 (an F16 scale d and 16 bytes;
// value j is d*(nibble-8), low nibbles holding j < 16, high nibbles
// j >= 16) and returns the bytes and the decoded values.
func quantQ40(v []float32) ([]byte, []float32) {
	var out []byte
	deq := make([]float32, len(v))
	for b := 0; b < len(v); b += 32 {
		block := v[b : b+32]
		amax := float32(0)
		for _, x := range block {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		h := float32ToFloat16(amax / 7)
		d := float16ToFloat32(h)
		out = append(out, byte(h), byte(h>>8))
		var q [32]int
		for i, x := range block {
			q[i] = 8
			if d != 0 {
				q[i] = min(max(int(math.Round(float64(x/d)))+8, 0), 15)
			}
			deq[b+i] = float32(q[i]-8) * d
		}
		for j := 0; j < 16; j++ {
			out = append(out, byte(q[j]|q[j+16]<<4))
		}
	}
	return out, deq
}

// e2m1 are the magnitudes of MXFP4's 4-bit values (bit 3 is the sign).
var e2m1 = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// quantMXFP4 encodes 32-value blocks as MXFP4 (OCP MX: an E8M0 scale byte
// e, 2^(e-127), and 16 bytes of E2M1 values, low nibbles holding j < 16,
// high nibbles j >= 16) and returns the bytes and the decoded values.
func quantMXFP4(v []float32) ([]byte, []float32) {
	var out []byte
	deq := make([]float32, len(v))
	for b := 0; b < len(v); b += 32 {
		block := v[b : b+32]
		amax := 0.0
		for _, x := range block {
			amax = max(amax, math.Abs(float64(x)))
		}
		e := 127
		if amax > 0 {
			e = min(max(127+int(math.Ceil(math.Log2(amax/6))), 1), 254)
		}
		scale := float32(math.Ldexp(1, e-127))
		out = append(out, byte(e))
		var q [32]int
		for i, x := range block {
			m, best := float32(math.Abs(float64(x)))/scale, 0
			for k, c := range e2m1 {
				if math.Abs(float64(m-c)) < math.Abs(float64(m-e2m1[best])) {
					best = k
				}
			}
			q[i] = best
			deq[b+i] = e2m1[best] * scale
			if x < 0 && best > 0 {
				q[i] |= 8
				deq[b+i] = -deq[b+i]
			}
		}
		for j := 0; j < 16; j++ {
			out = append(out, byte(q[j]|q[j+16]<<4))
		}
	}
	return out, deq
}

var quantTypes = []struct {
	name   string
	dtype  ml.DType
	encode func([]float32) ([]byte, []float32)
	block  int // bytes per 32 values
	bound  float64
}{
	{"q8_0", ml.DTypeQ80, quantizeQ80, 34, 0.03},
	{"q4_0", ml.DTypeQ40, quantQ40, 18, 0.35},
	{"mxfp4", ml.DTypeMXFP4, quantMXFP4, 17, 0.3},
}

func TestQuantizedData(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	ctx := setup(t)
	in := ctx.Input()
	for _, qt := range quantTypes {
		t.Run(qt.name, func(t *testing.T) {
			v := randRef(rng, 64, 3)
			b, deq := qt.encode(v.data)
			if len(b) != 6*qt.block {
				t.Fatalf("encoded %d bytes, want %d", len(b), 6*qt.block)
			}
			q := in.FromBytes(qt.dtype, b, 64, 3)
			if q.DType() != qt.dtype || !slices.Equal(q.Shape(), []int{64, 3}) {
				t.Fatalf("got %v %v", q.DType(), q.Shape())
			}
			closeTo(t, "BackendGet", deq, q.BackendGet(), 0, 0)
			cast := q.Cast(ctx, ml.DTypeF32)
			cp := q.Copy(ctx, in.Empty(ml.DTypeF32, 32, 6))
			got := compute(ctx, cast, cp)
			if cast.DType() != ml.DTypeF32 || !slices.Equal(cast.Shape(), []int{64, 3}) {
				t.Fatalf("Cast: %v %v", cast.DType(), cast.Shape())
			}
			closeTo(t, "Cast to F32", deq, got[0], 0, 0)
			closeTo(t, "Copy into F32 [32 6]", deq, got[1], 0, 0)

			// Sizes are checked; F16 is not a dequantization target of
			// ggml's CPU copy.
			mustPanic(t, func() { in.FromBytes(qt.dtype, b[1:], 64, 3) }, "from_bytes: data size does not match tensor size", fmt.Sprintf("%d bytes for %s[64, 3] which needs %d", len(b)-1, qt.name, len(b)))
			mustPanic(t, func() { in.FromBytes(qt.dtype, b[:qt.block], 16) }, fmt.Sprintf("dim 0 (16) must be a multiple of the %s block size 32", qt.name))
			mustPanic(t, func() { q.Cast(ctx, ml.DTypeF16) }, fmt.Sprintf("cast: cannot convert %s[64,3] to f16", qt.name), "cast to f32 first")
			mustPanic(t, func() { q.Copy(ctx, in.Empty(ml.DTypeF16, 64, 3)) }, fmt.Sprintf("cpy: cannot convert %s[64,3] to f16", qt.name))
			// Still usable.
			closeTo(t, "Cast after errors", deq, compute(ctx, q.Cast(ctx, ml.DTypeF32))[0], 0, 0)
		})
	}
}

func relRMS(want, got []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i] - want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

func TestQuantizedMulmat(t *testing.T) {
	rng := rand.New(rand.NewSource(22))
	ctx := setup(t)
	for _, qt := range quantTypes {
		for _, sh := range []struct{ a, b []int }{
			{[]int{256, 12}, []int{256, 7, 2}},
			{[]int{128, 9}, []int{128, 1}}, // matrix times vector
		} {
			t.Run(fmt.Sprintf("%s/%v", qt.name, sh.a), func(t *testing.T) {
				a, b := randRef(rng, sh.a...), randRef(rng, sh.b...)
				qa, deq := qt.encode(a.data)
				weight := ctx.Input().FromBytes(qt.dtype, qa, sh.a...)
				got := weight.Mulmat(ctx, b.tensor(ctx))
				want := mulmatRef(ref{ne: a.ne, data: deq}, b)
				if got.DType() != ml.DTypeF32 || !slices.Equal(got.Shape(), want.shape()) {
					t.Fatalf("got %v %v, want f32 %v", got.DType(), got.Shape(), want.shape())
				}
				vals := compute(ctx, got)[0]
				closeTo(t, "Mulmat vs dequant(a)·b", want.data, vals, 0.4, 0)
				e := relRMS(mulmatRef(a, b).data, vals)
				t.Logf("relative RMS error against the F32 product %.4f (bound %v)", e, qt.bound)
				if e > qt.bound {
					t.Fatalf("relative RMS error %.3f against the F32 product exceeds %v", e, qt.bound)
				}
			})
		}
	}
}
