// Package ggml holds the tensor type ids of Ollama's fs/ggml package
// (github.com/ollama/ollama/fs/ggml), so that code written against Ollama,
// such as calls of ggml.Quantize in github.com/ggml-rs/ggml-rs/go/ml/backend/ggml, compiles after
// a prefix rewrite of its imports. Only TensorType is here: this project
// reads and writes GGUF files with github.com/ggml-rs/ggml-rs/go/gguf, not with a copy of
// Ollama's decoder.
package ggml

import (
	"fmt"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

// TensorType is a ggml tensor type id (the value of ggml's enum
// ggml_type), as stored in a GGUF tensor table. It is not a FileType.
type TensorType uint32

// The ggml types, with Ollama's names. Ollama left the IQ and TQ types
// unexported (it could not make them); they are exported here because
// ggml-rs quantizes to them.
const (
	TensorTypeF32     TensorType = 0
	TensorTypeF16     TensorType = 1
	TensorTypeQ4_0    TensorType = 2
	TensorTypeQ4_1    TensorType = 3
	TensorTypeQ5_0    TensorType = 6
	TensorTypeQ5_1    TensorType = 7
	TensorTypeQ8_0    TensorType = 8
	TensorTypeQ8_1    TensorType = 9
	TensorTypeQ2_K    TensorType = 10
	TensorTypeQ3_K    TensorType = 11
	TensorTypeQ4_K    TensorType = 12
	TensorTypeQ5_K    TensorType = 13
	TensorTypeQ6_K    TensorType = 14
	TensorTypeQ8_K    TensorType = 15
	TensorTypeIQ2_XXS TensorType = 16
	TensorTypeIQ2_XS  TensorType = 17
	TensorTypeIQ3_XXS TensorType = 18
	TensorTypeIQ1_S   TensorType = 19
	TensorTypeIQ4_NL  TensorType = 20
	TensorTypeIQ3_S   TensorType = 21
	TensorTypeIQ2_S   TensorType = 22
	TensorTypeIQ4_XS  TensorType = 23
	TensorTypeI8      TensorType = 24
	TensorTypeI16     TensorType = 25
	TensorTypeI32     TensorType = 26
	TensorTypeI64     TensorType = 27
	TensorTypeF64     TensorType = 28
	TensorTypeIQ1_M   TensorType = 29
	TensorTypeBF16    TensorType = 30
	TensorTypeTQ1_0   TensorType = 34
	TensorTypeTQ2_0   TensorType = 35
	TensorTypeMXFP4   TensorType = 39
)

type layout struct {
	name             string
	block, typeBytes uint64
}

// layouts: ggml's block size (elements) and block byte size of the types
// Ollama's fs/ggml knows (the constants above), from package gguf's table,
// with Ollama's upper-case names.
var layouts = func() map[TensorType]layout {
	m := map[TensorType]layout{}
	for t := TensorTypeF32; t <= TensorTypeMXFP4; t++ {
		if name, block, size, ok := gguf.TensorType(t).Layout(); ok {
			m[t] = layout{strings.ToUpper(name), block, size}
		}
	}
	return m
}()

// ParseTensorType parses a type name as String writes it ("Q4_K", "F16";
// case-sensitive, as in Ollama).
func ParseTensorType(s string) (TensorType, error) {
	for t, l := range layouts {
		if l.name == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unsupported quantization type %s", s)
}

// IsQuantized reports whether t is anything but F32, F16 or BF16 (as in
// Ollama, the integer types count as quantized).
func (t TensorType) IsQuantized() bool {
	switch t {
	case TensorTypeF32, TensorTypeF16, TensorTypeBF16:
		return false
	default:
		return true
	}
}

// BlockSize is the number of elements in one block of t (1 for the plain
// types, 32 or 256 for quantized ones); 256 for an unknown type, as in
// Ollama.
func (t TensorType) BlockSize() uint64 {
	if l, ok := layouts[t]; ok {
		return l.block
	}
	return 256
}

// TypeSize is the byte size of one block of t; 0 for an unknown type.
func (t TensorType) TypeSize() uint64 { return layouts[t].typeBytes }

// RowSize is the byte size of ne elements of t (ne a multiple of
// BlockSize).
func (t TensorType) RowSize(ne uint64) uint64 {
	return t.TypeSize() * ne / t.BlockSize()
}

// String is the type's name in upper case ("Q4_K"), or "unknown".
func (t TensorType) String() string {
	if l, ok := layouts[t]; ok {
		return l.name
	}
	return "unknown"
}
