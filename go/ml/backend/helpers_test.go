package backend

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// newBackend makes a backend without a model, closed at cleanup.
func newBackend(tb testing.TB, params ml.BackendParams) ml.Backend {
	tb.Helper()
	b, err := ml.NewBackend("", params)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	return b
}

// setup mirrors Ollama's test setup: a backend with memory and the Input
// sibling of a fresh context, both closed at cleanup.
func setup(tb testing.TB) ml.Context {
	tb.Helper()
	b := newBackend(tb, ml.BackendParams{AllocMemory: true})
	ctx := b.NewContext().Input()
	tb.Cleanup(ctx.Close)
	return ctx
}

// mustPanic runs f and checks that it panics with a message containing
// every one of want.
func mustPanic(tb testing.TB, f func(), want ...string) any {
	tb.Helper()
	var r any
	func() {
		defer func() { r = recover() }()
		f()
	}()
	if r == nil {
		tb.Fatalf("no panic; want one containing %q", want)
	}
	msg := fmt.Sprint(r)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			tb.Fatalf("panic %q does not contain %q", msg, w)
		}
	}
	return r
}

// compute runs the graph of ts and returns their values as float32.
func compute(ctx ml.Context, ts ...ml.Tensor) [][]float32 {
	ctx.Forward(ts...).Compute(ts...)
	out := make([][]float32, len(ts))
	for i, t := range ts {
		out[i] = t.Floats()
	}
	return out
}

// equalTensors is Ollama's EquateTensors: both tensors computed on ctx
// have the same shape, dtype and bytes.
func equalTensors(tb testing.TB, ctx ml.Context, want, got ml.Tensor) {
	tb.Helper()
	ctx.Forward(want, got).Compute(want, got)
	if !slices.Equal(want.Shape(), got.Shape()) {
		tb.Fatalf("shape: want %v, got %v", want.Shape(), got.Shape())
	}
	if want.DType() != got.DType() {
		tb.Fatalf("dtype: want %v, got %v", want.DType(), got.DType())
	}
	wb, gb := want.Bytes(), got.Bytes()
	if wb == nil || gb == nil || !slices.Equal(wb, gb) {
		tb.Fatalf("values: want %v, got %v", want.Floats(), got.Floats())
	}
}

// ---- a small dense reference tensor ----------------------------------------

// ref is a dense f32 tensor in ggml order (ne[0] fastest), for reference
// implementations.
type ref struct {
	ne   [4]int
	data []float32
}

func newRef(shape ...int) ref {
	r := ref{ne: [4]int{1, 1, 1, 1}}
	copy(r.ne[:], shape)
	r.data = make([]float32, r.ne[0]*r.ne[1]*r.ne[2]*r.ne[3])
	return r
}

func arangeRef(shape ...int) ref {
	r := newRef(shape...)
	for i := range r.data {
		r.data[i] = float32(i)
	}
	return r
}

func randRef(rng *rand.Rand, shape ...int) ref {
	r := newRef(shape...)
	for i := range r.data {
		r.data[i] = float32(rng.NormFloat64())
	}
	return r
}

func (r ref) idx(i0, i1, i2, i3 int) int {
	return ((i3*r.ne[2]+i2)*r.ne[1]+i1)*r.ne[0] + i0
}

func (r ref) at(i0, i1, i2, i3 int) float32 { return r.data[r.idx(i0, i1, i2, i3)] }

func (r ref) set(v float32, i0, i1, i2, i3 int) { r.data[r.idx(i0, i1, i2, i3)] = v }

// shape is the shape with trailing 1s dropped, as Tensor.Shape reports it.
func (r ref) shape() []int {
	n := 4
	for n > 1 && r.ne[n-1] == 1 {
		n--
	}
	return slices.Clone(r.ne[:n])
}

// each calls f for every index in storage order.
func (r ref) each(f func(i0, i1, i2, i3 int)) {
	for i3 := 0; i3 < r.ne[3]; i3++ {
		for i2 := 0; i2 < r.ne[2]; i2++ {
			for i1 := 0; i1 < r.ne[1]; i1++ {
				for i0 := 0; i0 < r.ne[0]; i0++ {
					f(i0, i1, i2, i3)
				}
			}
		}
	}
}

// tensor uploads r as an F32 input tensor of its full 4-D shape, reshaped
// to r.shape().
func (r ref) tensor(ctx ml.Context) ml.Tensor {
	return ctx.Input().FromFloats(r.data, r.shape()...)
}

// mapRef applies f element-wise.
func mapRef(a ref, f func(float32) float32) ref {
	out := newRef(a.ne[:]...)
	for i, v := range a.data {
		out.data[i] = f(v)
	}
	return out
}

// broadcast2 applies f(a, b) with b repeated to a's shape.
func broadcast2(a, b ref, f func(x, y float32) float32) ref {
	out := newRef(a.ne[:]...)
	a.each(func(i0, i1, i2, i3 int) {
		y := b.at(i0%b.ne[0], i1%b.ne[1], i2%b.ne[2], i3%b.ne[3])
		out.set(f(a.at(i0, i1, i2, i3), y), i0, i1, i2, i3)
	})
	return out
}

// mulmatRef: a=[K,M,b2,b3], b=[K,N,B2,B3] → [M,N,B2,B3], a broadcast over
// the batch dims.
func mulmatRef(a, b ref) ref {
	K, M, N := a.ne[0], a.ne[1], b.ne[1]
	out := newRef(M, N, b.ne[2], b.ne[3])
	r2, r3 := b.ne[2]/a.ne[2], b.ne[3]/a.ne[3]
	out.each(func(m, n, i2, i3 int) {
		var s float64
		for k := 0; k < K; k++ {
			s += float64(a.at(k, m, i2/r2, i3/r3)) * float64(b.at(k, n, i2, i3))
		}
		out.set(float32(s), m, n, i2, i3)
	})
	return out
}

// permuteRef moves axis i to position order[i].
func permuteRef(a ref, order [4]int) ref {
	var ne [4]int
	for i, o := range order {
		ne[o] = a.ne[i]
	}
	out := newRef(ne[:]...)
	a.each(func(i0, i1, i2, i3 int) {
		src := [4]int{i0, i1, i2, i3}
		var dst [4]int
		for i, o := range order {
			dst[o] = src[i]
		}
		out.set(a.at(i0, i1, i2, i3), dst[0], dst[1], dst[2], dst[3])
	})
	return out
}

// sliceRef keeps indices low, low+step, … < high of dim (the count is
// Ollama's (high-low+1)/step for step > 1).
func sliceRef(a ref, dim, low, high, step int) ref {
	ne := a.ne
	if step == 1 {
		ne[dim] = high - low
	} else {
		ne[dim] = (high - low + 1) / step
	}
	out := newRef(ne[:]...)
	out.each(func(i0, i1, i2, i3 int) {
		src := [4]int{i0, i1, i2, i3}
		src[dim] = low + src[dim]*step
		out.set(a.at(src[0], src[1], src[2], src[3]), i0, i1, i2, i3)
	})
	return out
}

// rowsRef applies f to each row (dim 0) and stores what it returns.
func rowsRef(a ref, outLen int, f func(row []float32) []float32) ref {
	out := newRef(outLen, a.ne[1], a.ne[2], a.ne[3])
	rows := a.ne[1] * a.ne[2] * a.ne[3]
	for r := 0; r < rows; r++ {
		copy(out.data[r*outLen:(r+1)*outLen], f(a.data[r*a.ne[0]:(r+1)*a.ne[0]]))
	}
	return out
}

// ---- comparisons ----------------------------------------------------------

// closeTo checks got against want within atol + rtol*|want|.
func closeTo(tb testing.TB, what string, want, got []float32, atol, rtol float64) {
	tb.Helper()
	if len(want) != len(got) {
		tb.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		if math.IsNaN(g) || math.IsInf(g, 0) != math.IsInf(w, 0) {
			tb.Fatalf("%s[%d] = %v, want %v", what, i, g, w)
		}
		if math.IsInf(w, 0) {
			continue
		}
		if d := math.Abs(w-g) - (atol + rtol*math.Abs(w)); d > worst {
			worst, at = d, i
		}
	}
	if at >= 0 {
		tb.Fatalf("%s[%d] = %v, want %v (atol %g, rtol %g)", what, at, got[at], want[at], atol, rtol)
	}
}

func f16Round(v float32) float32 {
	return float16ToFloat32(float32ToFloat16(v))
}

// float32ToFloat16 converts with round-to-nearest-even (normal range and
// subnormals; enough for test data).
func float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		half := uint32(1) << (shift - 1)
		v := mant >> shift
		rem := mant & ((1 << shift) - 1)
		if rem > half || (rem == half && v&1 == 1) {
			v++
		}
		return sign | uint16(v)
	}
	v := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && v&1 == 1) {
		v++
	}
	return sign | uint16(v)
}

func float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		return float32(math.Ldexp(float64(mant), -24)) * sign1(sign)
	case 31:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp-15+127)<<23 | mant<<13)
}

func sign1(sign uint32) float32 {
	if sign != 0 {
		return -1
	}
	return 1
}

// f16Bytes encodes values as little-endian F16.
func f16Bytes(v []float32) []byte {
	out := make([]byte, 2*len(v))
	for i, x := range v {
		h := float32ToFloat16(x)
		out[2*i], out[2*i+1] = byte(h), byte(h>>8)
	}
	return out
}
