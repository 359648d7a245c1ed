// Package quantize rewrites a GGUF model with quantized weights, byte for
// byte as llama.cpp's llama_model_quantize (src/llama-quant.cpp of the
// pinned llama.cpp) writes it: the same choice of type per tensor (the
// file type's default, the _S/_M/_L mixes, the tensors never quantized,
// the output and token-embedding rules, the fallback when a row length is
// not a whole number of blocks), the same metadata changes and the same
// layout, with ggml's own quantizers through the C ABI.
package quantize

import (
	"fmt"
	"strings"

	"ggmlrs/gguf"
)

// FileType is a llama.cpp file type (enum llama_ftype), the value written
// to general.file_type.
type FileType uint32

// The file types this package writes (llama.cpp's ids).
const (
	AllF32      FileType = 0
	MostlyF16   FileType = 1
	MostlyQ4_0  FileType = 2
	MostlyQ4_1  FileType = 3
	MostlyQ8_0  FileType = 7
	MostlyQ5_0  FileType = 8
	MostlyQ5_1  FileType = 9
	MostlyQ2K   FileType = 10
	MostlyQ3KS  FileType = 11
	MostlyQ3KM  FileType = 12
	MostlyQ3KL  FileType = 13
	MostlyQ4KS  FileType = 14
	MostlyQ4KM  FileType = 15
	MostlyQ5KS  FileType = 16
	MostlyQ5KM  FileType = 17
	MostlyQ6K   FileType = 18
	MostlyIQ4NL FileType = 25
	MostlyIQ4XS FileType = 30
	MostlyBF16  FileType = 32
)

// fileTypes: name (as llama-quantize spells it) and default tensor type.
var fileTypes = []struct {
	ft   FileType
	name string
	def  gguf.TensorType
}{
	{MostlyQ4_0, "Q4_0", gguf.TensorQ4_0},
	{MostlyQ4_1, "Q4_1", gguf.TensorQ4_1},
	{MostlyQ5_0, "Q5_0", gguf.TensorQ5_0},
	{MostlyQ5_1, "Q5_1", gguf.TensorQ5_1},
	{MostlyQ8_0, "Q8_0", gguf.TensorQ8_0},
	{MostlyQ2K, "Q2_K", gguf.TensorQ2K},
	{MostlyQ3KS, "Q3_K_S", gguf.TensorQ3K},
	{MostlyQ3KM, "Q3_K_M", gguf.TensorQ3K},
	{MostlyQ3KL, "Q3_K_L", gguf.TensorQ3K},
	{MostlyQ4KS, "Q4_K_S", gguf.TensorQ4K},
	{MostlyQ4KM, "Q4_K_M", gguf.TensorQ4K},
	{MostlyQ5KS, "Q5_K_S", gguf.TensorQ5K},
	{MostlyQ5KM, "Q5_K_M", gguf.TensorQ5K},
	{MostlyQ6K, "Q6_K", gguf.TensorQ6K},
	{MostlyIQ4NL, "IQ4_NL", gguf.TensorIQ4NL},
	{MostlyIQ4XS, "IQ4_XS", gguf.TensorIQ4XS},
	{MostlyF16, "F16", gguf.TensorF16},
	{MostlyBF16, "BF16", gguf.TensorBF16},
	{AllF32, "F32", gguf.TensorF32},
}

// ParseFileType parses a file type name as llama-quantize spells it
// ("Q4_K_M", "q8_0", "F16"; case-insensitive). Q4_K and Q5_K, as in
// llama-quantize, mean Q4_K_M and Q5_K_M.
func ParseFileType(s string) (FileType, error) {
	u := strings.ToUpper(s)
	switch u {
	case "Q4_K":
		u = "Q4_K_M"
	case "Q5_K":
		u = "Q5_K_M"
	case "Q3_K":
		u = "Q3_K_M"
	}
	for _, f := range fileTypes {
		if f.name == u {
			return f.ft, nil
		}
	}
	return 0, fmt.Errorf("unknown file type %q (one of %s)", s, strings.Join(FileTypeNames(), ", "))
}

// FileTypeNames lists the names ParseFileType accepts.
func FileTypeNames() []string {
	names := make([]string, len(fileTypes))
	for i, f := range fileTypes {
		names[i] = f.name
	}
	return names
}

func (f FileType) String() string {
	for _, t := range fileTypes {
		if t.ft == f {
			return t.name
		}
	}
	return fmt.Sprintf("ftype%d", uint32(f))
}

// DefaultType is the tensor type most weights of the file type get
// (llama_ftype_get_default_type), ok false for a file type this package
// does not write.
func (f FileType) DefaultType() (gguf.TensorType, bool) {
	for _, t := range fileTypes {
		if t.ft == f {
			return t.def, true
		}
	}
	return 0, false
}

// ParseTensorType parses a ggml type name for -output-type and
// -token-embedding-type ("q8_0", "F16", "q6_k"; case-insensitive).
func ParseTensorType(s string) (gguf.TensorType, error) {
	for _, t := range quantizable {
		if strings.EqualFold(t.String(), s) {
			return t, nil
		}
	}
	names := make([]string, len(quantizable))
	for i, t := range quantizable {
		names[i] = t.String()
	}
	return 0, fmt.Errorf("unknown tensor type %q (one of %s)", s, strings.Join(names, ", "))
}

// quantizable: the tensor types this package writes.
var quantizable = []gguf.TensorType{
	gguf.TensorF32, gguf.TensorF16, gguf.TensorBF16, gguf.TensorQ4_0, gguf.TensorQ4_1, gguf.TensorQ5_0,
	gguf.TensorQ5_1, gguf.TensorQ8_0, gguf.TensorQ2K, gguf.TensorQ3K, gguf.TensorQ4K, gguf.TensorQ5K,
	gguf.TensorQ6K, gguf.TensorIQ4NL, gguf.TensorIQ4XS,
}

// isQuantized: ggml_is_quantized (a block type, not F32/F16/BF16 or an
// integer type).
func isQuantized(t gguf.TensorType) bool { return blockSize(t) > 1 }

// blockSize is ggml_blck_size of t (elements per block) for the types
// gguf knows; 1 for the plain types.
func blockSize(t gguf.TensorType) uint64 {
	switch t {
	case gguf.TensorQ2K, gguf.TensorQ3K, gguf.TensorQ4K, gguf.TensorQ5K, gguf.TensorQ6K, gguf.TensorQ8K, gguf.TensorIQ4XS:
		return 256
	case gguf.TensorQ4_0, gguf.TensorQ4_1, gguf.TensorQ5_0, gguf.TensorQ5_1, gguf.TensorQ8_0, gguf.TensorQ8_1,
		gguf.TensorIQ4NL, gguf.TensorMXF4:
		return 32
	}
	return 1
}
