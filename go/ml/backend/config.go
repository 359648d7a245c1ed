//go:build cgo

package backend

// The model's key/value metadata as fs.Config, decoded once from
// ggml_rs_backend_kv_json into Go values of the exact GGUF types.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/fs"
)

// kvConfig is fs.Config over a model's metadata, with the semantics of
// Ollama's fs/ggml KV:
//
//   - Keys without a "general." or "tokenizer." prefix are looked up under
//     "<architecture>.", where the architecture is general.architecture
//     ("unknown" when absent).
//   - A getter matches only the exact GGUF type it is named for: Uint reads
//     u32 values, Float f32, Bool bool, String str, Ints arr[i32], Floats
//     arr[f32], Strings arr[str], Bools arr[bool]. A value of any other type
//     (Uint on an i32 or u64, Float on an f64 …) counts as absent.
//   - An absent key gives the first default argument, or the zero value
//     (nil for the slice getters).
//   - Value takes the full key (no prefix is added) and returns the value in
//     its exact Go type: uint8 … int64, float32, float64, bool, string, and
//     for arrays a slice of the element type ([]uint8 … []string). Ollama's
//     decoder returned its own unexported array type there; slices are what
//     a caller outside that package can use.
//   - Keys iterates in file order (Ollama's map order was random).
type kvConfig struct {
	keys   []string
	values map[string]any
}

var _ fs.Config = (*kvConfig)(nil)

// lookup is Ollama's keyValue: the prefixed key's value if it has type T.
func lookup[T any](kv *kvConfig, key string) (T, bool) {
	if !strings.HasPrefix(key, "tokenizer.") && !strings.HasPrefix(key, "general.") {
		key = kv.Architecture() + "." + key
	}
	v, ok := kv.values[key].(T)
	return v, ok
}

func get[T any](kv *kvConfig, key string, defaults []T) T {
	if v, ok := lookup[T](kv, key); ok {
		return v
	}
	return first(defaults)
}

// Architecture is general.architecture, or "unknown".
func (kv *kvConfig) Architecture() string {
	if s, ok := kv.values["general.architecture"].(string); ok {
		return s
	}
	return "unknown"
}

func (kv *kvConfig) String(key string, d ...string) string      { return get(kv, key, d) }
func (kv *kvConfig) Uint(key string, d ...uint32) uint32        { return get(kv, key, d) }
func (kv *kvConfig) Float(key string, d ...float32) float32     { return get(kv, key, d) }
func (kv *kvConfig) Bool(key string, d ...bool) bool            { return get(kv, key, d) }
func (kv *kvConfig) Strings(key string, d ...[]string) []string { return get(kv, key, d) }
func (kv *kvConfig) Ints(key string, d ...[]int32) []int32      { return get(kv, key, d) }
func (kv *kvConfig) Floats(key string, d ...[]float32) []float32 {
	return get(kv, key, d)
}
func (kv *kvConfig) Bools(key string, d ...[]bool) []bool { return get(kv, key, d) }

// Len is the number of keys.
func (kv *kvConfig) Len() int { return len(kv.keys) }

// Keys yields every key in file order.
func (kv *kvConfig) Keys() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, k := range kv.keys {
			if !yield(k) {
				return
			}
		}
	}
}

// Value is the value of the full key (no architecture prefix), nil if
// absent.
func (kv *kvConfig) Value(key string) any { return kv.values[key] }

// decodeKV reads ggml_rs_backend_kv_json's document:
// {"key": {"type": "u32", "value": 3}, ...} in file order.
func decodeKV(doc []byte) (*kvConfig, error) {
	kv := &kvConfig{values: map[string]any{}}
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("model metadata: not a JSON object (%v)", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("model metadata: %w", err)
		}
		key, _ := tok.(string)
		var entry struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		}
		if err := dec.Decode(&entry); err != nil {
			return nil, fmt.Errorf("model metadata: key %q: %w", key, err)
		}
		v, err := decodeValue(entry.Type, entry.Value)
		if err != nil {
			return nil, fmt.Errorf("model metadata: key %q: %w", key, err)
		}
		if _, dup := kv.values[key]; !dup {
			kv.keys = append(kv.keys, key)
		}
		kv.values[key] = v
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("model metadata: unterminated JSON object (%v)", err)
	}
	return kv, nil
}

// decodeValue converts one value of GGUF type name ty.
func decodeValue(ty string, raw json.RawMessage) (any, error) {
	if elem, ok := strings.CutPrefix(ty, "arr["); ok && strings.HasSuffix(elem, "]") {
		return decodeArray(strings.TrimSuffix(elem, "]"), raw)
	}
	switch ty {
	case "u8":
		return decodeAs[uint8](raw)
	case "i8":
		return decodeAs[int8](raw)
	case "u16":
		return decodeAs[uint16](raw)
	case "i16":
		return decodeAs[int16](raw)
	case "u32":
		return decodeAs[uint32](raw)
	case "i32":
		return decodeAs[int32](raw)
	case "u64":
		return decodeAs[uint64](raw)
	case "i64":
		return decodeAs[int64](raw)
	case "bool":
		return decodeAs[bool](raw)
	case "str":
		return decodeAs[string](raw)
	case "f32":
		f, err := decodeFloat(raw, 32)
		return float32(f), err
	case "f64":
		return decodeFloat(raw, 64)
	}
	return nil, fmt.Errorf("unknown type %q", ty)
}

func decodeArray(elem string, raw json.RawMessage) (any, error) {
	switch elem {
	case "u8":
		return decodeAs[[]uint8](raw)
	case "i8":
		return decodeAs[[]int8](raw)
	case "u16":
		return decodeAs[[]uint16](raw)
	case "i16":
		return decodeAs[[]int16](raw)
	case "u32":
		return decodeAs[[]uint32](raw)
	case "i32":
		return decodeAs[[]int32](raw)
	case "u64":
		return decodeAs[[]uint64](raw)
	case "i64":
		return decodeAs[[]int64](raw)
	case "bool":
		return decodeAs[[]bool](raw)
	case "str":
		return decodeAs[[]string](raw)
	case "f32", "f64":
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, err
		}
		bits := 32
		if elem == "f64" {
			bits = 64
		}
		f64s := make([]float64, len(items))
		for i, it := range items {
			f, err := decodeFloat(it, bits)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			f64s[i] = f
		}
		if bits == 64 {
			return f64s, nil
		}
		f32s := make([]float32, len(f64s))
		for i, f := range f64s {
			f32s[i] = float32(f)
		}
		return f32s, nil
	}
	return nil, fmt.Errorf("unknown array element type %q", elem)
}

// decodeAs unmarshals raw into a T; integers must fit T exactly (an
// out-of-range value is an error, never a wrapped one).
func decodeAs[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// decodeFloat reads a JSON number, or one of the strings "nan", "inf",
// "-inf", at the given precision.
func decodeFloat(raw json.RawMessage, bits int) (float64, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "nan":
			return math.NaN(), nil
		case "inf":
			return math.Inf(1), nil
		case "-inf":
			return math.Inf(-1), nil
		}
		return 0, fmt.Errorf("bad float %q", s)
	}
	return strconv.ParseFloat(string(raw), bits)
}
