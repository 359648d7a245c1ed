package gguf

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	b := NewBuilder()
	kvs := []KV{
		{"general.architecture", "test"},
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(4e9)}, {"i32", int32(-2e9)}, {"f32", float32(1.5)}, {"bool", true},
		{"u64", uint64(1 << 60)}, {"i64", int64(-1 << 60)}, {"f64", math.Pi}, {"empty", ""},
		{"arr.u8", []uint8{1, 2}}, {"arr.i8", []int8{-1}}, {"arr.u16", []uint16{7}}, {"arr.i16", []int16{-7}},
		{"arr.u32", []uint32{1, 2, 3}}, {"arr.i32", []int32{-1, 0, 1}}, {"arr.f32", []float32{0.5, -2}},
		{"arr.bool", []bool{true, false}}, {"arr.str", []string{"a", "", "▁ü"}}, {"arr.u64", []uint64{9}},
		{"arr.i64", []int64{-9}}, {"arr.f64", []float64{2.5}}, {"arr.empty", []string{}},
	}
	for _, kv := range kvs {
		if err := b.Add(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	f32 := make([]byte, 4*3*2)
	f32[0] = 1
	if err := b.AddTensor("a", TensorF32, []uint64{3, 2}, f32); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTensor("b", TensorF16, []uint64{5}, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTensor("c", TensorQ8_0, []uint64{64}, make([]byte, 68)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := b.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo says %d bytes, wrote %d", n, buf.Len())
	}
	g, err := Read(bytes.NewReader(buf.Bytes()), uint64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if g.Version != 3 || g.Alignment != 32 || g.DataOffset%32 != 0 {
		t.Fatalf("version %d alignment %d data offset %d", g.Version, g.Alignment, g.DataOffset)
	}
	if !reflect.DeepEqual(g.KVs, kvs) {
		t.Fatalf("key/values differ:\n got %v\nwant %v", g.KVs, kvs)
	}
	wantT := []TensorInfo{
		{Name: "a", Shape: []uint64{3, 2}, Type: TensorF32, Offset: 0},
		{Name: "b", Shape: []uint64{5}, Type: TensorF16, Offset: 32},
		{Name: "c", Shape: []uint64{64}, Type: TensorQ8_0, Offset: 64},
	}
	if !reflect.DeepEqual(g.Tensors, wantT) {
		t.Fatalf("tensors differ:\n got %+v\nwant %+v", g.Tensors, wantT)
	}
	if got := buf.Bytes()[g.DataOffset]; got != 1 {
		t.Fatalf("first data byte %d, want 1", got)
	}
	if uint64(buf.Len()) != g.DataOffset+64+96 { // c: 68 bytes padded to 96
		t.Fatalf("file is %d bytes, want %d", buf.Len(), g.DataOffset+64+96)
	}
	if v, ok := g.Get("arr.str"); !ok || TypeName(v) != "arr[str]" {
		t.Fatalf("Get(arr.str) = %v, %v", v, ok)
	}
}

func TestAlignment(t *testing.T) {
	b := NewBuilder()
	if err := b.Add("general.alignment", uint32(64)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"x", "y"} {
		if err := b.AddTensor(name, TensorF32, []uint64{3}, make([]byte, 12)); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g, err := Read(&buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Alignment != 64 || g.DataOffset%64 != 0 || g.Tensors[1].Offset != 64 {
		t.Fatalf("alignment %d, data offset %d, second tensor at %d", g.Alignment, g.DataOffset, g.Tensors[1].Offset)
	}
}

func TestBuilderErrors(t *testing.T) {
	b := NewBuilder()
	for _, c := range []struct {
		err  error
		want string
	}{
		{b.Add("", 1), "empty key"},
		{b.Add("k", struct{}{}), "no GGUF type"},
		{b.Add("general.alignment", uint32(3)), "power of two"},
		{b.Add("general.alignment", 32), "no GGUF type"},
		{b.AddTensor("t", TensorF32, []uint64{2}, make([]byte, 4)), "needs 8 bytes"},
		{b.AddTensor("t", TensorF32, []uint64{0}, nil), "zero dimension"},
		{b.AddTensor("t", TensorF32, nil, nil), "0 dimensions"},
		{b.AddTensor("t", TensorQ8_0, []uint64{31}, make([]byte, 34)), "blocks"},
		{b.AddTensor("t", TensorType(99), []uint64{1}, nil), "unknown tensor type"},
		{b.AddTensor(strings.Repeat("n", 64), TensorF32, []uint64{1}, make([]byte, 4)), "63 bytes"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", c.err, c.want)
		}
	}
	if err := b.Add("k", 1.5); err != nil {
		t.Fatal(err)
	}
	if err := b.Add("k", 2.5); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate key: %v", err)
	}
}

func TestReadErrors(t *testing.T) {
	b := NewBuilder()
	b.Add("a", "x")
	b.AddTensor("t", TensorF32, []uint64{4}, make([]byte, 16))
	var buf bytes.Buffer
	b.WriteTo(&buf)
	good := buf.Bytes()
	g, err := Read(bytes.NewReader(good), uint64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		data []byte
		size uint64
		want string
	}{
		{"magic", append([]byte("GGUX"), good[4:]...), 0, "not a GGUF file"},
		{"truncated", good[:30], 0, "truncated"},
		{"data past the end", good, g.DataOffset + 15, "past the end"},
	} {
		_, err := Read(bytes.NewReader(c.data), c.size)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestFloat16 checks the conversion against every half value: a
// round trip through float32 is exact, and float32 values between two
// halves round to the nearer (ties to even).
func TestFloat16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16To32(uint16(h))
		if math.IsNaN(float64(f)) {
			if g := Float16(f); g&0x7c00 != 0x7c00 || g&0x3ff == 0 {
				t.Fatalf("NaN %#04x -> %#04x", h, g)
			}
			continue
		}
		if g := Float16(f); g != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, g)
		}
		// Midpoint to the next half up in magnitude: ties to even.
		if h&0x7c00 == 0x7c00 || h&0x7fff == 0x7bff {
			continue
		}
		next := Float16To32(uint16(h + 1))
		mid := float32((float64(f) + float64(next)) / 2)
		want := uint16(h)
		if h&1 == 1 {
			want = uint16(h + 1)
		}
		if g := Float16(mid); g != want {
			t.Fatalf("midpoint of %#04x and %#04x (%g): got %#04x, want %#04x", h, h+1, mid, g, want)
		}
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {5.960464477539063e-08, 0x0001}, {2e-8, 0}, {1e-45, 0},
	} {
		if g := Float16(c.f); g != c.want {
			t.Errorf("Float16(%g) = %#04x, want %#04x", c.f, g, c.want)
		}
	}
	if BFloat16To32(0x3f80) != 1 {
		t.Error("bfloat16 1")
	}
}

func TestInt(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int64
		ok   bool
	}{
		{uint8(200), 200, true}, {int8(-3), -3, true}, {uint16(65535), 65535, true}, {int16(-300), -300, true},
		{uint32(1 << 31), 1 << 31, true}, {int32(-1), -1, true}, {uint64(1 << 40), 1 << 40, true},
		{uint64(1 << 63), math.MaxInt64, true}, {int64(-5), -5, true},
		{float32(1), 0, false}, {"7", 0, false}, {[]uint32{1}, 0, false},
	} {
		if got, ok := Int(c.v); got != c.want || ok != c.ok {
			t.Errorf("Int(%T %v) = %d, %v; want %d, %v", c.v, c.v, got, ok, c.want, c.ok)
		}
	}
}
