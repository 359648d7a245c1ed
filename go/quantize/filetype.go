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
	"strconv"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

// FileType is a llama.cpp file type (enum llama_ftype), the value written
// to general.file_type.
type FileType uint32

// The file types this package writes (llama.cpp's ids).
const (
	AllF32         FileType = 0
	MostlyF16      FileType = 1
	MostlyQ4_0     FileType = 2
	MostlyQ4_1     FileType = 3
	MostlyQ8_0     FileType = 7
	MostlyQ5_0     FileType = 8
	MostlyQ5_1     FileType = 9
	MostlyQ2K      FileType = 10
	MostlyQ3KS     FileType = 11
	MostlyQ3KM     FileType = 12
	MostlyQ3KL     FileType = 13
	MostlyQ4KS     FileType = 14
	MostlyQ4KM     FileType = 15
	MostlyQ5KS     FileType = 16
	MostlyQ5KM     FileType = 17
	MostlyQ6K      FileType = 18
	MostlyIQ2XXS   FileType = 19
	MostlyIQ2XS    FileType = 20
	MostlyQ2KS     FileType = 21
	MostlyIQ3XS    FileType = 22
	MostlyIQ3XXS   FileType = 23
	MostlyIQ1S     FileType = 24
	MostlyIQ4NL    FileType = 25
	MostlyIQ3S     FileType = 26
	MostlyIQ3M     FileType = 27
	MostlyIQ2S     FileType = 28
	MostlyIQ2M     FileType = 29
	MostlyIQ4XS    FileType = 30
	MostlyIQ1M     FileType = 31
	MostlyBF16     FileType = 32
	MostlyTQ1_0    FileType = 36
	MostlyTQ2_0    FileType = 37
	MostlyMXFP4MoE FileType = 38
	MostlyQ1_0     FileType = 40
	MostlyQ2_0     FileType = 41
)

// fileTypes: name (as llama-quantize spells it), default tensor type
// (llama_ftype_get_default_type) and what it is, in llama-quantize's
// order.
var fileTypes = []struct {
	ft   FileType
	name string
	def  gguf.TensorType
	desc string
}{
	{MostlyQ1_0, "Q1_0", gguf.TensorQ1_0, "1.125 bpw"},
	{MostlyQ2_0, "Q2_0", gguf.TensorQ2_0, "2.25 bpw (group 64)"},
	{MostlyQ4_0, "Q4_0", gguf.TensorQ4_0, "4.5 bpw"},
	{MostlyQ4_1, "Q4_1", gguf.TensorQ4_1, "5 bpw"},
	{MostlyMXFP4MoE, "MXFP4_MOE", gguf.TensorMXF4, "MXFP4 experts, Q8_0 elsewhere"},
	{MostlyQ5_0, "Q5_0", gguf.TensorQ5_0, "5.5 bpw"},
	{MostlyQ5_1, "Q5_1", gguf.TensorQ5_1, "6 bpw"},
	{MostlyIQ2XXS, "IQ2_XXS", gguf.TensorIQ2XXS, "2.06 bpw, needs -imatrix"},
	{MostlyIQ2XS, "IQ2_XS", gguf.TensorIQ2XS, "2.31 bpw, needs -imatrix"},
	{MostlyIQ2S, "IQ2_S", gguf.TensorIQ2XS, "2.5 bpw mix, needs -imatrix"},
	{MostlyIQ2M, "IQ2_M", gguf.TensorIQ2S, "2.7 bpw mix, needs -imatrix"},
	{MostlyIQ1S, "IQ1_S", gguf.TensorIQ1S, "1.56 bpw, needs -imatrix"},
	{MostlyIQ1M, "IQ1_M", gguf.TensorIQ1M, "1.75 bpw, needs -imatrix"},
	{MostlyTQ1_0, "TQ1_0", gguf.TensorTQ1_0, "1.69 bpw ternary"},
	{MostlyTQ2_0, "TQ2_0", gguf.TensorTQ2_0, "2.06 bpw ternary"},
	{MostlyQ2K, "Q2_K", gguf.TensorQ2K, "Q2_K mix"},
	{MostlyQ2KS, "Q2_K_S", gguf.TensorQ2K, "Q2_K, needs -imatrix"},
	{MostlyIQ3XXS, "IQ3_XXS", gguf.TensorIQ3XXS, "3.06 bpw, needs -imatrix"},
	{MostlyIQ3S, "IQ3_S", gguf.TensorIQ3S, "3.44 bpw"},
	{MostlyIQ3M, "IQ3_M", gguf.TensorIQ3S, "3.66 bpw mix"},
	{MostlyIQ3XS, "IQ3_XS", gguf.TensorIQ3S, "3.3 bpw mix, needs -imatrix"},
	{MostlyQ3KS, "Q3_K_S", gguf.TensorQ3K, "Q3_K"},
	{MostlyQ3KM, "Q3_K_M", gguf.TensorQ3K, "Q3_K mix"},
	{MostlyQ3KL, "Q3_K_L", gguf.TensorQ3K, "Q3_K mix, larger"},
	{MostlyIQ4NL, "IQ4_NL", gguf.TensorIQ4NL, "4.5 bpw non-linear"},
	{MostlyIQ4XS, "IQ4_XS", gguf.TensorIQ4XS, "4.25 bpw non-linear"},
	{MostlyQ4KS, "Q4_K_S", gguf.TensorQ4K, "Q4_K"},
	{MostlyQ4KM, "Q4_K_M", gguf.TensorQ4K, "Q4_K mix"},
	{MostlyQ5KS, "Q5_K_S", gguf.TensorQ5K, "Q5_K"},
	{MostlyQ5KM, "Q5_K_M", gguf.TensorQ5K, "Q5_K mix"},
	{MostlyQ6K, "Q6_K", gguf.TensorQ6K, "6.56 bpw"},
	{MostlyQ8_0, "Q8_0", gguf.TensorQ8_0, "8.5 bpw"},
	{MostlyF16, "F16", gguf.TensorF16, "16 bpw"},
	{MostlyBF16, "BF16", gguf.TensorBF16, "16 bpw"},
	{AllF32, "F32", gguf.TensorF32, "32 bpw"},
}

// ParseFileType parses a file type as llama-quantize does: its name
// ("Q4_K_M", "q8_0", "F16"; case-insensitive) or its llama_ftype number
// ("15"). Q3_K, Q4_K and Q5_K, as in llama-quantize, mean the _M mixes.
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
	n, numErr := strconv.ParseUint(u, 10, 32)
	for _, f := range fileTypes {
		if f.name == u || (numErr == nil && uint64(f.ft) == n) {
			return f.ft, nil
		}
	}
	return 0, fmt.Errorf("unknown file type %q (one of %s)", s, strings.Join(FileTypeNames(), ", "))
}

// FileTypeHelp: one line per file type, its name and what it is.
func FileTypeHelp() string {
	var b strings.Builder
	for _, f := range fileTypes {
		fmt.Fprintf(&b, "  %-10s %2d  %s\n", f.name, uint32(f.ft), f.desc)
	}
	return b.String()
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

// quantizable: the tensor types this package writes (those ggml can
// quantize to: not Q8_1/Q8_K, which are activations' types).
var quantizable = []gguf.TensorType{
	gguf.TensorF32, gguf.TensorF16, gguf.TensorBF16, gguf.TensorQ1_0, gguf.TensorQ2_0, gguf.TensorQ4_0,
	gguf.TensorQ4_1, gguf.TensorQ5_0, gguf.TensorQ5_1, gguf.TensorQ8_0, gguf.TensorMXF4, gguf.TensorNVFP4,
	gguf.TensorQ2K, gguf.TensorQ3K, gguf.TensorQ4K, gguf.TensorQ5K, gguf.TensorQ6K, gguf.TensorIQ2XXS,
	gguf.TensorIQ2XS, gguf.TensorIQ2S, gguf.TensorIQ3XXS, gguf.TensorIQ3S, gguf.TensorIQ1S, gguf.TensorIQ1M,
	gguf.TensorIQ4NL, gguf.TensorIQ4XS, gguf.TensorTQ1_0, gguf.TensorTQ2_0,
}

// isQuantized: ggml_is_quantized (a block type, not F32/F16/BF16 or an
// integer type).
func isQuantized(t gguf.TensorType) bool { return blockSize(t) > 1 }

// blockSize is ggml_blck_size of t (elements per block) for the types
// gguf knows; 1 for the plain types and unknown ones.
func blockSize(t gguf.TensorType) uint64 { return t.BlockSize() }
