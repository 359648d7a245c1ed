package backend

// Quantize, ConvertToF32 and QuantizationVersion through the C ABI:
//
//   - differential: Quantize's bytes for a fixed input (the generator of
//     tests/quant.rs) hash to the FNV-1a values that tests/quant.rs gets
//     from ggml_quantize_chunk called directly, for Q4_0, Q4_1, Q5_0, Q5_1,
//     Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, F16 and BF16;
//   - independent: Q8_0, Q4_0 and F16 re-implemented here from the block
//     formats give the same bytes (rows of 32, 256, 512, 4096); hand-built
//     Q8_0, Q4_0, F16 and BF16 data decode to the values the formats define;
//   - round trip error bounds per type; fs/ggml's TensorType sizes agree
//     with the library's;
//   - bad input panics with an *Error naming the problem.

import (
	"github.com/ggml-rs/ggml-rs/go/gguf"
	"math"
	"strings"
	"testing"

	fsggml "github.com/ggml-rs/ggml-rs/go/fs/ggml"
)

// quantValues is tests/quant.rs's `values`: xorshift64* in [-1, 1), every
// 97th value times 8.
func quantValues(seed uint64, n int) []float32 {
	s := seed*0x9E3779B97F4A7C15 | 1
	out := make([]float32, n)
	for i := range out {
		s ^= s >> 12
		s ^= s << 25
		s ^= s >> 27
		r := float32((s*0x2545F4914F6CDD1D)>>40) / float32(1<<24)
		v := 2*r - 1
		if i%97 == 0 {
			v *= 8
		}
		out[i] = v
	}
	return out
}

func fnv1a(b []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, x := range b {
		h = (h ^ uint64(x)) * 0x100000001b3
	}
	return h
}

var quantizeTypes = []fsggml.TensorType{
	fsggml.TensorTypeQ4_0, fsggml.TensorTypeQ4_1, fsggml.TensorTypeQ5_0, fsggml.TensorTypeQ5_1,
	fsggml.TensorTypeQ8_0, fsggml.TensorTypeQ2_K, fsggml.TensorTypeQ3_K, fsggml.TensorTypeQ4_K,
	fsggml.TensorTypeQ5_K, fsggml.TensorTypeQ6_K, fsggml.TensorTypeIQ4_NL, fsggml.TensorTypeIQ4_XS,
	fsggml.TensorTypeF16, fsggml.TensorTypeBF16,
}

// quantGolden: GOLDEN of tests/quant.rs (ggml_quantize_chunk's bytes for
// quantValues(42, 4*512) as 4 rows of 512).
var quantGolden = map[fsggml.TensorType]uint64{
	fsggml.TensorTypeQ4_0:   0x838440cf381ed520,
	fsggml.TensorTypeQ4_1:   0x7aee2740b99e014b,
	fsggml.TensorTypeQ5_0:   0xa8cfc9b381c970ca,
	fsggml.TensorTypeQ5_1:   0x2eccb6d3dd770b93,
	fsggml.TensorTypeQ8_0:   0x6a8e491b1aa33a08,
	fsggml.TensorTypeQ2_K:   0x19449d2803964696,
	fsggml.TensorTypeQ3_K:   0xbecce43b8f44f909,
	fsggml.TensorTypeQ4_K:   0xabc7808f2a905658,
	fsggml.TensorTypeQ5_K:   0x340e152f6fecdf84,
	fsggml.TensorTypeQ6_K:   0xb8e113df2e4bde61,
	fsggml.TensorTypeIQ4_NL: 0x3d1d042a70e59bcb,
	fsggml.TensorTypeIQ4_XS: 0x9563c37575691825,
	fsggml.TensorTypeF16:    0x438a5e7abe919b2c,
	fsggml.TensorTypeBF16:   0x1959b1a9344835ca,
}

func TestQuantizeMatchesGGMLReference(t *testing.T) {
	x := quantValues(42, 4*512)
	for _, typ := range quantizeTypes {
		// The same data as [512, 4], [512, 2, 2] and [512, 1, 2, 2]: rows
		// are rows whatever the outer dimensions.
		for _, shape := range [][]uint64{{512, 4}, {512, 2, 2}, {512, 1, 2, 2}} {
			q := Quantize(typ, x, shape)
			if got, want := fnv1a(q), quantGolden[typ]; got != want {
				t.Errorf("%v %v: hash %#x, ggml_quantize_chunk's is %#x", typ, shape, got, want)
			}
			if uint64(len(q)) != typ.RowSize(512)*4 {
				t.Errorf("%v: %d bytes, want %d", typ, len(q), typ.RowSize(512)*4)
			}
		}
	}
}

// f16Bits is IEEE binary16 of x, round to nearest even.
func f16Bits(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		rem := m & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

func naiveQ8_0(x []float32) []byte {
	var out []byte
	for b := 0; b < len(x); b += 32 {
		blk := x[b : b+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		h := f16Bits(d)
		out = append(out, byte(h), byte(h>>8))
		for _, v := range blk {
			out = append(out, byte(int8(math.Round(float64(float32(v*id))))))
		}
	}
	return out
}

func naiveQ4_0(x []float32) []byte {
	var out []byte
	for b := 0; b < len(x); b += 32 {
		blk := x[b : b+32]
		var m float32
		for _, v := range blk {
			if math.Abs(float64(v)) > math.Abs(float64(m)) {
				m = v
			}
		}
		d := m / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		h := f16Bits(d)
		out = append(out, byte(h), byte(h>>8))
		q := func(v float32) byte { return byte(min(15, int8(float32(v*id)+8.5))) }
		for j := 0; j < 16; j++ {
			out = append(out, q(blk[j])|q(blk[j+16])<<4)
		}
	}
	return out
}

func TestQuantizeIndependentQ8_0Q4_0F16(t *testing.T) {
	for _, n := range []uint64{32, 256, 512, 4096} {
		x := quantValues(7+n, int(n)*3)
		if got, want := Quantize(fsggml.TensorTypeQ8_0, x, []uint64{n, 3}), naiveQ8_0(x); string(got) != string(want) {
			t.Errorf("Q8_0 rows of %d differ from the block format", n)
		}
		if got, want := Quantize(fsggml.TensorTypeQ4_0, x, []uint64{n, 3}), naiveQ4_0(x); string(got) != string(want) {
			t.Errorf("Q4_0 rows of %d differ from the block format", n)
		}
		var h []byte
		for _, v := range x {
			b := f16Bits(v)
			h = append(h, byte(b), byte(b>>8))
		}
		if got := Quantize(fsggml.TensorTypeF16, x, []uint64{n, 3}); string(got) != string(h) {
			t.Errorf("F16 rows of %d differ", n)
		}
	}
}

func TestConvertToF32HandBuilt(t *testing.T) {
	// Q8_0: d = 0.5 (f16 0x3800), q_i = i - 16.
	q8 := []byte{0x00, 0x38}
	for i := 0; i < 32; i++ {
		q8 = append(q8, byte(int8(i-16)))
	}
	for i, v := range ConvertToF32(q8, uint32(fsggml.TensorTypeQ8_0), 32) {
		if want := float32(i-16) * 0.5; v != want {
			t.Fatalf("Q8_0 element %d = %v, want %v", i, v, want)
		}
	}
	// Q4_0: d = 2 (0x4000); byte j holds q_j = j and q_{j+16} = 15 - j.
	q4 := []byte{0x00, 0x40}
	for j := byte(0); j < 16; j++ {
		q4 = append(q4, j|(15-j)<<4)
	}
	for i, v := range ConvertToF32(q4, uint32(fsggml.TensorTypeQ4_0), 32) {
		q := i
		if i >= 16 {
			q = 15 - (i - 16)
		}
		if want := float32(q-8) * 2; v != want {
			t.Fatalf("Q4_0 element %d = %v, want %v", i, v, want)
		}
	}
	// F16 and BF16 bits.
	f16 := []byte{0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00}
	want16 := []float32{1, -2, 65504, float32(math.Ldexp(1, -24))}
	bf16 := []byte{0x80, 0x3f, 0x60, 0xc0}
	want := map[fsggml.TensorType][]float32{fsggml.TensorTypeF16: want16, fsggml.TensorTypeBF16: {1, -3.5}}
	for typ, data := range map[fsggml.TensorType][]byte{fsggml.TensorTypeF16: f16, fsggml.TensorTypeBF16: bf16} {
		got := ConvertToF32(data, uint32(typ), uint64(len(want[typ])))
		for i := range got {
			if got[i] != want[typ][i] {
				t.Errorf("%v element %d = %v, want %v", typ, i, got[i], want[typ][i])
			}
		}
	}
	// An unaligned slice of F32 passes through.
	raw := make([]byte, 9)
	bits := math.Float32bits(-1.25)
	raw[1], raw[2], raw[3], raw[4] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	if got := ConvertToF32(raw[1:], uint32(fsggml.TensorTypeF32), 2); got[0] != -1.25 || got[1] != 0 {
		t.Errorf("F32 pass-through = %v", got)
	}
	if got := ConvertToF32(nil, uint32(fsggml.TensorTypeQ8_0), 0); len(got) != 0 {
		t.Errorf("zero elements gave %v", got)
	}
}

func TestQuantizeRoundTrip(t *testing.T) {
	// Relative RMS error bounds as in tests/quant.rs.
	bounds := map[fsggml.TensorType]float64{
		fsggml.TensorTypeQ4_0: 0.17, fsggml.TensorTypeQ4_1: 0.11, fsggml.TensorTypeQ5_0: 0.09,
		fsggml.TensorTypeQ5_1: 0.055, fsggml.TensorTypeQ8_0: 0.011, fsggml.TensorTypeQ2_K: 0.41,
		fsggml.TensorTypeQ3_K: 0.27, fsggml.TensorTypeQ4_K: 0.105, fsggml.TensorTypeQ5_K: 0.055,
		fsggml.TensorTypeQ6_K: 0.032, fsggml.TensorTypeIQ4_NL: 0.135, fsggml.TensorTypeIQ4_XS: 0.14,
		fsggml.TensorTypeF16: 0.0005, fsggml.TensorTypeBF16: 0.004,
	}
	for typ, bound := range bounds {
		for _, n := range []uint64{256, 4096} {
			x := quantValues(3, int(n)*4)
			y := ConvertToF32(Quantize(typ, x, []uint64{n, 4}), uint32(typ), uint64(len(x)))
			var e, norm float64
			for i := range x {
				d := float64(x[i] - y[i])
				e += d * d
				norm += float64(x[i]) * float64(x[i])
			}
			if rel := math.Sqrt(e / norm); rel >= bound {
				t.Errorf("%v rows of %d: relative RMS error %.4f >= %v", typ, n, rel, bound)
			}
		}
	}
}

func TestTensorTypeSizesMatchLibrary(t *testing.T) {
	for typ := fsggml.TensorType(0); typ < 64; typ++ {
		if typ.TypeSize() == 0 {
			continue
		}
		n := typ.BlockSize() * 16
		size, err := quantizedSize(uint32(typ), n, 3)
		if err != nil {
			t.Errorf("%v: %v", typ, err)
			continue
		}
		if size != typ.RowSize(n)*3 {
			t.Errorf("%v: fs/ggml says %d bytes, the library %d", typ, typ.RowSize(n)*3, size)
		}
	}
}

func TestQuantizeBadInput(t *testing.T) {
	x := quantValues(1, 512)
	nan := append([]float32(nil), x...)
	nan[300] = float32(math.NaN())
	cases := []struct {
		name string
		f    func()
		want string
	}{
		{"unknown type", func() { Quantize(999, x, []uint64{256, 2}) }, "unknown ggml type 999"},
		{"removed type", func() { Quantize(4, x, []uint64{256, 2}) }, "unknown ggml type 4"},
		{"no quantizer", func() { Quantize(fsggml.TensorTypeI32, x, []uint64{256, 2}) }, "no quantizer"},
		{"row not whole blocks", func() { Quantize(fsggml.TensorTypeQ4_K, x, []uint64{128, 4}) }, "not a multiple of the block size 256"},
		{"values do not fill shape", func() { Quantize(fsggml.TensorTypeQ8_0, x, []uint64{256, 3}) }, "do not fill shape"},
		{"empty shape", func() { Quantize(fsggml.TensorTypeQ8_0, x, nil) }, "empty shape"},
		{"shape overflows", func() { Quantize(fsggml.TensorTypeQ8_0, x, []uint64{256, 1 << 40, 1 << 40}) }, "overflows"},
		{"needs imatrix", func() { Quantize(fsggml.TensorTypeIQ2_XXS, x, []uint64{256, 2}) }, "importance matrix"},
		{"NaN", func() { Quantize(fsggml.TensorTypeQ4_K, nan, []uint64{256, 2}) }, "row 1, column 44"},
		{"convert unsupported", func() { ConvertToF32(make([]byte, 64), uint32(fsggml.TensorTypeI32), 16) }, "unsupported quantization format"},
		{"convert unknown", func() { ConvertToF32(make([]byte, 64), 999, 16) }, "unsupported quantization format"},
		{"convert partial block", func() { ConvertToF32(make([]byte, 68), uint32(fsggml.TensorTypeQ8_0), 33) }, "not a multiple of the block size 32"},
		{"convert short data", func() { ConvertToF32(make([]byte, 67), uint32(fsggml.TensorTypeQ8_0), 64) }, "fewer than the 68 bytes"},
		{"convert nil data", func() { ConvertToF32(nil, uint32(fsggml.TensorTypeQ8_0), 32) }, "fewer than the 34 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustPanic(t, c.f, c.want)
			if _, ok := r.(*Error); !ok {
				t.Errorf("panic value %T, want *Error", r)
			}
		})
	}
	// NaN is fine for F16, which keeps it.
	if y := ConvertToF32(Quantize(fsggml.TensorTypeF16, nan, []uint64{256, 2}), uint32(fsggml.TensorTypeF16), 512); !math.IsNaN(float64(y[300])) {
		t.Errorf("F16 lost the NaN: %v", y[300])
	}
}

func TestQuantizationVersion(t *testing.T) {
	if v := QuantizationVersion(); v != 2 {
		t.Errorf("QuantizationVersion() = %d, want 2 (GGML_QNT_VERSION)", v)
	}
}

// TestIntoVariants: the buffer-reusing forms give Quantize's and
// ConvertToF32's bytes and values, and return errors where those panic.
func TestIntoVariants(t *testing.T) {
	x := make([]float32, 256*3)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	want := Quantize(fsggml.TensorTypeQ4_K, x, []uint64{256, 3})
	dst := make([]byte, len(want)+7) // larger than needed: the count is returned
	n, err := QuantizeInto(dst, uint32(fsggml.TensorTypeQ4_K), x, nil, 256, 3)
	if err != nil || n != len(want) || string(dst[:n]) != string(want) {
		t.Fatalf("QuantizeInto: n=%d err=%v, bytes equal: %v", n, err, string(dst[:n]) == string(want))
	}
	back := make([]float32, len(x))
	if err := ConvertInto(back, dst[:n], uint32(fsggml.TensorTypeQ4_K)); err != nil {
		t.Fatal(err)
	}
	ref := ConvertToF32(want, uint32(fsggml.TensorTypeQ4_K), uint64(len(x)))
	for i := range back {
		if back[i] != ref[i] {
			t.Fatalf("ConvertInto [%d] = %v, ConvertToF32 %v", i, back[i], ref[i])
		}
	}
	if _, err := QuantizeInto(dst, uint32(fsggml.TensorTypeQ4_K), x, nil, 256, 4); err == nil {
		t.Error("QuantizeInto accepted 3 rows of values as 4")
	}
	if _, err := QuantizeInto(dst[:10], uint32(fsggml.TensorTypeQ4_K), x, nil, 256, 3); err == nil {
		t.Error("QuantizeInto accepted a short destination")
	}
	err = ConvertInto(back, []byte{1, 2, 3}, 9999)
	if e, ok := err.(*Error); !ok || !strings.Contains(e.Message, "unsupported quantization format") {
		t.Errorf("ConvertInto of an unknown type: %v", err)
	}
}

// TestGGUFLayoutsMatchGGML: every block layout the gguf package knows
// (block length, bytes per block) gives ggml's own row size.
func TestGGUFLayoutsMatchGGML(t *testing.T) {
	known := 0
	for typ := uint32(0); typ < 64; typ++ {
		want, err := gguf.TensorType(typ).RowSize(1024)
		if err != nil {
			continue
		}
		known++
		got, cerr := quantizedSize(typ, 1024, 1)
		if cerr != nil {
			t.Errorf("%s: gguf knows it, the library does not: %v", gguf.TensorType(typ), cerr)
			continue
		}
		if got != want {
			t.Errorf("%s: 1024 elements are %d bytes in ggml, %d in package gguf", gguf.TensorType(typ), got, want)
		}
	}
	if known < 30 {
		t.Errorf("only %d types known to package gguf", known)
	}
}
