// Package fs holds the model-file abstractions shared by the ml packages.
package fs

import "iter"

// Config is read-only access to a model's key/value metadata (a GGUF
// header). Keys without a "general." or "tokenizer." prefix are looked up
// under the model's architecture. The variadic argument of each getter is
// the default returned when the key is absent.
type Config interface {
	Architecture() string
	String(string, ...string) string
	Uint(string, ...uint32) uint32
	Float(string, ...float32) float32
	Bool(string, ...bool) bool

	Strings(string, ...[]string) []string
	Ints(string, ...[]int32) []int32
	Floats(string, ...[]float32) []float32
	Bools(string, ...[]bool) []bool

	Len() int
	Keys() iter.Seq[string]
	Value(key string) any
}
