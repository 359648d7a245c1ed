// Package ggml is this project's stand-in for Ollama's ml/backend/ggml
// package: code written against Ollama (ggml.New, ggml.Quantize,
// ggml.ConvertToF32, *ggml.Backend, ...) compiles after its imports are
// rewritten from github.com/ollama/ollama/ to github.com/ggml-rs/ggml-rs/go/. Everything here is
// a thin alias of github.com/ggml-rs/ggml-rs/go/ml/backend, which holds the implementation;
// importing this package also registers the "ggml" backend with
// ml.RegisterBackend, as Ollama's did.
package ggml

import (
	fsggml "github.com/ggml-rs/ggml-rs/go/fs/ggml"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// Backend, Context and Tensor are the backend's implementations of
// ml.Backend, ml.Context and ml.Tensor.
type (
	Backend = backend.Backend
	Context = backend.Context
	Tensor  = backend.Tensor
)

// New opens the GGUF model at modelPath and places its weights as params
// say (see backend.New).
func New(modelPath string, params ml.BackendParams) (ml.Backend, error) {
	return backend.New(modelPath, params)
}

// ConvertToF32 converts nelements elements of ggml type dtype in data to
// f32 (see backend.ConvertToF32).
func ConvertToF32(data []byte, dtype uint32, nelements uint64) []float32 {
	return backend.ConvertToF32(data, dtype, nelements)
}

// Quantize converts f32s of the given shape (ggml order) to newType, byte
// for byte as ggml's reference quantizers (see backend.Quantize). newType
// is any ggml type id: ours (github.com/ggml-rs/ggml-rs/go/fs/ggml.TensorType) or Ollama's own
// fs/ggml.TensorType, which its server/quantization.go passes.
func Quantize[T ~uint32](newType T, f32s []float32, shape []uint64) []byte {
	return backend.Quantize(fsggml.TensorType(newType), f32s, shape)
}

// QuantizationVersion is the bundled ggml's GGML_QNT_VERSION.
func QuantizationVersion() uint32 { return backend.QuantizationVersion() }

// Threads returns the thread count to use for n requested, as Ollama's
// did (see backend.Threads).
func Threads(n int) int { return backend.Threads(n) }
