package ggml_test

import (
	"path/filepath"
	"slices"
	"testing"

	fsggml "github.com/ggml-rs/ggml-rs/go/fs/ggml"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/ml/backend/ggml"
)

// Ollama-style code: ggml.New, *ggml.Backend, ggml.Quantize with fs/ggml
// types, the result loaded as a tensor and dequantized by a graph.
func TestOllamaStyleUse(t *testing.T) {
	var _ ml.Backend = (*ggml.Backend)(nil)
	var _ ml.Context = (*ggml.Context)(nil)
	var _ ml.Tensor = (*ggml.Tensor)(nil)

	b, err := ggml.New("", ml.BackendParams{AllocMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok := b.(*ggml.Backend); !ok {
		t.Fatalf("ggml.New returned %T", b)
	}

	x := make([]float32, 256*4)
	for i := range x {
		x[i] = float32(i%37)/9 - 2
	}
	for _, c := range []struct {
		typ   fsggml.TensorType
		dtype ml.DType
	}{{fsggml.TensorTypeQ4_0, ml.DTypeQ40}, {fsggml.TensorTypeQ8_0, ml.DTypeQ80}, {fsggml.TensorTypeF16, ml.DTypeF16}} {
		q := ggml.Quantize(c.typ, x, []uint64{256, 4})
		if !slices.Equal(q, backend.Quantize(c.typ, x, []uint64{256, 4})) {
			t.Fatalf("%v: ggml.Quantize differs from backend.Quantize", c.typ)
		}
		want := ggml.ConvertToF32(q, uint32(c.typ), uint64(len(x)))

		ctx := b.NewContext()
		in := ctx.Input().FromBytes(c.dtype, q, 256, 4)
		out := in.Cast(ctx, ml.DTypeF32)
		ctx.Forward(out).Compute(out)
		got := out.Floats()
		ctx.Close()
		if !slices.Equal(got, want) {
			t.Errorf("%v: the backend's dequantization differs from ConvertToF32", c.typ)
		}
	}
	// Ollama's server passes its own fs/ggml.TensorType, another named
	// uint32 type.
	type ollamaTensorType uint32
	if q := ggml.Quantize(ollamaTensorType(fsggml.TensorTypeQ8_0), x, []uint64{256, 4}); !slices.Equal(q, backend.Quantize(fsggml.TensorTypeQ8_0, x, []uint64{256, 4})) {
		t.Error("Quantize with another uint32 type id differs")
	}
	if ggml.QuantizationVersion() != backend.QuantizationVersion() {
		t.Error("QuantizationVersion differs")
	}
	if ggml.Threads(3) != backend.Threads(3) {
		t.Error("Threads differs")
	}
}

func TestNewMissingModel(t *testing.T) {
	if _, err := ggml.New(filepath.Join(t.TempDir(), "missing.gguf"), ml.BackendParams{}); err == nil {
		t.Fatal("no error for a missing model file")
	}
}
