package backend

// Config: every GGUF type, Ollama's getter rules (exact types, defaults,
// the architecture prefix), Value, Keys, Len.

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/ml"
)

// configFixture has a value of every type, under the architecture
// "testarch", in a file without tensors.
func configFixture() *ggufFile {
	g := &ggufFile{}
	g.kv("general.architecture", "testarch").
		kv("general.name", "tiny \"quoted\" \\ \n\tünïcode 日本 \x01").
		kv("testarch.u8", uint8(200)).
		kv("testarch.i8", int8(-100)).
		kv("testarch.u16", uint16(60000)).
		kv("testarch.i16", int16(-30000)).
		kv("testarch.u32", uint32(4000000000)).
		kv("testarch.i32", int32(-2000000000)).
		kv("testarch.u64", uint64(1<<63+12345)).
		kv("testarch.i64", int64(math.MinInt64+7)).
		kv("testarch.f32", float32(0.1)).
		kv("testarch.f64", 0.1).
		kv("testarch.tiny", float32(math.SmallestNonzeroFloat32)).
		kv("testarch.nan", float32(math.NaN())).
		kv("testarch.inf", float32(math.Inf(1))).
		kv("testarch.ninf", math.Inf(-1)).
		kv("testarch.bool", true).
		kv("testarch.false", false).
		kv("testarch.str", "hello").
		kv("testarch.empty_str", "").
		kv("testarch.block_count", uint32(5)).
		kv("tokenizer.ggml.model", "gpt2").
		kv("tokenizer.ggml.tokens", []string{"a", "b\"c", "", "日本", "\\n"}).
		kv("tokenizer.ggml.scores", []float32{-1.5, 0, 2.25}).
		kv("testarch.arr_u8", []uint8{0, 7, 255}).
		kv("testarch.arr_i8", []int8{-128, 0, 127}).
		kv("testarch.arr_u16", []uint16{0, 65535}).
		kv("testarch.arr_i16", []int16{-32768, 32767}).
		kv("testarch.arr_u32", []uint32{1, 4294967295}).
		kv("testarch.arr_i32", []int32{-1, 2, math.MaxInt32, math.MinInt32}).
		kv("testarch.arr_u64", []uint64{math.MaxUint64, 1}).
		kv("testarch.arr_i64", []int64{math.MinInt64, math.MaxInt64}).
		kv("testarch.arr_f32", []float32{1.5, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-45, -0.1}).
		kv("testarch.arr_f64", []float64{0.1, math.MaxFloat64, math.Inf(-1)}).
		kv("testarch.arr_bool", []bool{true, false, true}).
		kv("testarch.arr_str", []string{"x", "y"}).
		kv("testarch.arr_empty", []int32{}).
		kv("other.key", uint32(9))
	return g
}

func openConfig(t *testing.T, g *ggufFile, params ml.BackendParams) fs.Config {
	t.Helper()
	b, err := ml.NewBackend(g.write(t), params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Config()
}

func TestConfig(t *testing.T) {
	fixture := configFixture()
	for _, alloc := range []bool{true, false} {
		cfg := openConfig(t, fixture, ml.BackendParams{AllocMemory: alloc})
		checkConfig(t, fixture, cfg)
	}
}

func checkConfig(t *testing.T, fixture *ggufFile, cfg fs.Config) {
	t.Helper()
	if got := cfg.Architecture(); got != "testarch" {
		t.Errorf("Architecture = %q", got)
	}

	// Scalars of the getter's own type, under the architecture prefix.
	if got := cfg.Uint("u32"); got != 4000000000 {
		t.Errorf("Uint(u32) = %d", got)
	}
	if got := cfg.Uint("block_count", 9); got != 5 {
		t.Errorf("Uint(block_count) = %d", got)
	}
	if got := cfg.Float("f32"); got != float32(0.1) {
		t.Errorf("Float(f32) = %v", got)
	}
	if got := cfg.Float("tiny"); got != math.SmallestNonzeroFloat32 {
		t.Errorf("Float(tiny) = %v", got)
	}
	if got := cfg.Float("nan"); !math.IsNaN(float64(got)) {
		t.Errorf("Float(nan) = %v", got)
	}
	if got := cfg.Float("inf"); !math.IsInf(float64(got), 1) {
		t.Errorf("Float(inf) = %v", got)
	}
	if !cfg.Bool("bool") || cfg.Bool("false", true) {
		t.Error("Bool")
	}
	if got := cfg.String("str"); got != "hello" {
		t.Errorf("String(str) = %q", got)
	}
	if got := cfg.String("empty_str", "default"); got != "" {
		t.Errorf("String(empty_str) = %q, want the stored empty string", got)
	}

	// general. and tokenizer. keys are not prefixed.
	if got, want := cfg.String("general.name"), "tiny \"quoted\" \\ \n\tünïcode 日本 \x01"; got != want {
		t.Errorf("String(general.name) = %q, want %q", got, want)
	}
	if got := cfg.String("tokenizer.ggml.model"); got != "gpt2" {
		t.Errorf("String(tokenizer.ggml.model) = %q", got)
	}
	// Any other key is: a full key gets the prefix a second time.
	if got := cfg.Uint("testarch.block_count", 42); got != 42 {
		t.Errorf("Uint(testarch.block_count) = %d, want the default (key is prefixed again)", got)
	}
	if got := cfg.Uint("other.key"); got != 0 {
		t.Errorf("Uint(other.key) = %d, want 0 (looked up as testarch.other.key)", got)
	}

	// Another type than the getter's counts as absent: the default, else zero.
	for key, got := range map[string]uint32{
		"u8": cfg.Uint("u8", 11), "u16": cfg.Uint("u16", 11), "i32": cfg.Uint("i32", 11),
		"u64": cfg.Uint("u64", 11), "i64": cfg.Uint("i64", 11), "f32": cfg.Uint("f32", 11),
		"missing": cfg.Uint("missing", 11),
	} {
		if got != 11 {
			t.Errorf("Uint(%s, 11) = %d, want the default", key, got)
		}
	}
	if cfg.Uint("i32") != 0 || cfg.Uint("missing") != 0 {
		t.Error("Uint without a default is not 0")
	}
	if got := cfg.Float("f64", 2.5); got != 2.5 {
		t.Errorf("Float(f64, 2.5) = %v, want the default (f64 is not f32)", got)
	}
	if got := cfg.Float("missing"); got != 0 {
		t.Errorf("Float(missing) = %v", got)
	}
	if !cfg.Bool("u8", true) || cfg.Bool("missing") {
		t.Error("Bool of a non-bool or a missing key")
	}
	if got := cfg.String("u32", "d"); got != "d" {
		t.Errorf("String(u32, d) = %q", got)
	}
	if got := cfg.String("missing"); got != "" {
		t.Errorf("String(missing) = %q", got)
	}

	// Arrays.
	if got, want := cfg.Strings("tokenizer.ggml.tokens"), []string{"a", "b\"c", "", "日本", "\\n"}; !slices.Equal(got, want) {
		t.Errorf("Strings(tokens) = %q, want %q", got, want)
	}
	if got := cfg.Strings("arr_str"); !slices.Equal(got, []string{"x", "y"}) {
		t.Errorf("Strings(arr_str) = %q", got)
	}
	if got := cfg.Ints("arr_i32"); !slices.Equal(got, []int32{-1, 2, math.MaxInt32, math.MinInt32}) {
		t.Errorf("Ints(arr_i32) = %v", got)
	}
	if got := cfg.Ints("arr_empty"); got == nil || len(got) != 0 {
		t.Errorf("Ints(arr_empty) = %#v, want an empty, non-nil slice", got)
	}
	wantF := []float32{1.5, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e-45, -0.1}
	gotF := cfg.Floats("arr_f32")
	if len(gotF) != len(wantF) {
		t.Errorf("Floats(arr_f32) = %v", gotF)
	} else {
		for i := range wantF {
			if math.Float32bits(gotF[i]) != math.Float32bits(wantF[i]) {
				t.Errorf("Floats(arr_f32)[%d] = %v, want %v", i, gotF[i], wantF[i])
			}
		}
	}
	if got := cfg.Floats("tokenizer.ggml.scores"); !slices.Equal(got, []float32{-1.5, 0, 2.25}) {
		t.Errorf("Floats(scores) = %v", got)
	}
	if got := cfg.Bools("arr_bool"); !slices.Equal(got, []bool{true, false, true}) {
		t.Errorf("Bools(arr_bool) = %v", got)
	}
	// Arrays of other element types are absent for these getters.
	if cfg.Ints("arr_u32") != nil || cfg.Ints("arr_i16") != nil || cfg.Ints("arr_i64") != nil {
		t.Error("Ints of a non-i32 array is not nil")
	}
	if got := cfg.Ints("arr_u32", []int32{4}); !slices.Equal(got, []int32{4}) {
		t.Errorf("Ints(arr_u32, [4]) = %v", got)
	}
	if cfg.Floats("arr_f64") != nil || cfg.Strings("str") != nil || cfg.Bools("bool") != nil {
		t.Error("array getter on a wrong type is not nil")
	}
	if got := cfg.Strings("missing", []string{"d"}); !slices.Equal(got, []string{"d"}) {
		t.Errorf("Strings(missing, [d]) = %v", got)
	}
	if got := cfg.Bools("missing", []bool{true}); !slices.Equal(got, []bool{true}) {
		t.Errorf("Bools(missing, [true]) = %v", got)
	}
	if got := cfg.Floats("missing", []float32{3}); !slices.Equal(got, []float32{3}) {
		t.Errorf("Floats(missing, [3]) = %v", got)
	}

	// Value: the full key, the exact type.
	wantValues := map[string]any{
		"general.architecture": "testarch",
		"testarch.u8":          uint8(200),
		"testarch.i8":          int8(-100),
		"testarch.u16":         uint16(60000),
		"testarch.i16":         int16(-30000),
		"testarch.u32":         uint32(4000000000),
		"testarch.i32":         int32(-2000000000),
		"testarch.u64":         uint64(1<<63 + 12345),
		"testarch.i64":         int64(math.MinInt64 + 7),
		"testarch.f32":         float32(0.1),
		"testarch.f64":         0.1,
		"testarch.ninf":        math.Inf(-1),
		"testarch.bool":        true,
		"testarch.arr_u8":      []uint8{0, 7, 255},
		"testarch.arr_i8":      []int8{-128, 0, 127},
		"testarch.arr_u16":     []uint16{0, 65535},
		"testarch.arr_i16":     []int16{-32768, 32767},
		"testarch.arr_u32":     []uint32{1, 4294967295},
		"testarch.arr_u64":     []uint64{math.MaxUint64, 1},
		"testarch.arr_i64":     []int64{math.MinInt64, math.MaxInt64},
		"testarch.arr_f64":     []float64{0.1, math.MaxFloat64, math.Inf(-1)},
		"testarch.arr_empty":   []int32{},
		"other.key":            uint32(9),
	}
	for key, want := range wantValues {
		if got := cfg.Value(key); !reflect.DeepEqual(got, want) {
			t.Errorf("Value(%s) = %#v (%T), want %#v (%T)", key, got, got, want, want)
		}
	}
	if cfg.Value("u8") != nil || cfg.Value("missing") != nil {
		t.Error("Value adds the architecture prefix or invents keys")
	}

	// Keys in file order; Len counts them.
	var keys []string
	for k := range cfg.Keys() {
		keys = append(keys, k)
	}
	var want []string
	for _, kv := range fixture.kvs {
		want = append(want, kv.key)
	}
	if !slices.Equal(keys, want) || cfg.Len() != len(want) {
		t.Errorf("Keys = %q (Len %d), want %q", keys, cfg.Len(), want)
	}
	for range cfg.Keys() {
		break // stopping early must not panic
	}
}

func TestConfigWithoutArchitecture(t *testing.T) {
	g := &ggufFile{}
	g.kv("unknown.block_count", uint32(3)).kv("general.name", "no arch")
	cfg := openConfig(t, g, ml.BackendParams{})
	if cfg.Architecture() != "unknown" {
		t.Errorf("Architecture = %q, want Ollama's \"unknown\"", cfg.Architecture())
	}
	// Ollama looks such keys up under "unknown.".
	if got := cfg.Uint("block_count"); got != 3 {
		t.Errorf("Uint(block_count) = %d, want 3 (unknown.block_count)", got)
	}
	if cfg.String("general.name") != "no arch" || cfg.Len() != 2 {
		t.Error("general.name / Len")
	}

	// A non-string architecture does not count either.
	g = &ggufFile{}
	g.kv("general.architecture", uint32(1))
	if cfg := openConfig(t, g, ml.BackendParams{}); cfg.Architecture() != "unknown" {
		t.Errorf("Architecture of a u32 = %q", cfg.Architecture())
	}
}

func TestDecodeKV(t *testing.T) {
	kv, err := decodeKV([]byte(`{"a":{"type":"u8","value":255},"b":{"type":"arr[f64]","value":[1.5,"nan","-inf"]},"c":{"type":"arr[arr[u8]]","value":[]}}`))
	if err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("nested array: %v, %v", kv, err)
	}
	for doc, want := range map[string]string{
		`[]`:                                       "not a JSON object",
		`{"a":{"type":"u8","value":256}}`:          `"a"`,
		`{"a":{"type":"i8","value":-129}}`:         `"a"`,
		`{"a":{"type":"u64","value":-1}}`:          `"a"`,
		`{"a":{"type":"f32","value":"big"}}`:       "bad float",
		`{"a":{"type":"arr[u8]","value":[1,256]}}`: `"a"`,
		`{"a":{"type":"q8","value":1}}`:            "unknown type",
		`{"a":{"type":"str","value":1}}`:           `"a"`,
		`{"a":{"type":"u8","value":1}`:             "metadata",
	} {
		if _, err := decodeKV([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeKV(%s): err = %v, want one containing %q", doc, err, want)
		}
	}
	kv, err = decodeKV([]byte(`{"x":{"type":"u64","value":18446744073709551615},"y":{"type":"arr[f64]","value":[1.5,"nan","-inf","inf"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if kv.Value("x") != uint64(math.MaxUint64) {
		t.Errorf("u64 max = %v", kv.Value("x"))
	}
	y := kv.Value("y").([]float64)
	if y[0] != 1.5 || !math.IsNaN(y[1]) || !math.IsInf(y[2], -1) || !math.IsInf(y[3], 1) {
		t.Errorf("f64 array = %v", y)
	}
}
