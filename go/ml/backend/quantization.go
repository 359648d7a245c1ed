package backend

// Quantization on host memory, with the signatures of Ollama's
// ml/backend/ggml package: ConvertToF32 (any ggml type to f32),
// Quantize (f32 rows to a ggml type, byte for byte as ggml's reference
// quantizers) and QuantizationVersion. They go through the C ABI
// (ggml_rs_convert_to_f32, ggml_rs_quantize); bad arguments panic with an
// *Error carrying the library's message, as the rest of this package does
// where Ollama's signature has no error, and never abort the process.

/*
#include "ggml_rs.h"
*/
import "C"

import (
	"fmt"
	"math/bits"
	"unsafe"

	fsggml "github.com/ggml-rs/ggml-rs/go/fs/ggml"
)

// ConvertToF32 converts nelements elements of ggml type dtype (a
// TensorType value) stored in data to f32: dequantization for quantized
// types. Every type ggml can convert is accepted (Ollama's took F16, BF16,
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K and MXFP4; this one also F32,
// the IQ and TQ types). Panics with an *Error for a type with no
// conversion (message "unsupported quantization format: ..."), nelements
// not a whole number of the type's blocks, or data shorter than the
// elements' bytes.
func ConvertToF32(data []byte, dtype uint32, nelements uint64) []float32 {
	if nelements > uint64(maxInt) {
		panic(&Error{Status: StatusInvalidArgument, Message: "ConvertToF32: element count does not fit in memory"})
	}
	f32s := make([]float32, nelements)
	if err := ConvertInto(f32s, data, dtype); err != nil {
		panic(err)
	}
	return f32s
}

// ConvertInto is ConvertToF32 into dst (len(dst) elements), returning the
// *Error instead of panicking: for callers that reuse their buffers.
func ConvertInto(dst []float32, data []byte, dtype uint32) error {
	if len(dst) == 0 {
		return nil
	}
	var src unsafe.Pointer
	if len(data) > 0 {
		src = unsafe.Pointer(&data[0])
	}
	var cerr C.ggml_rs_error
	if C.ggml_rs_convert_to_f32(C.uint32_t(dtype), src, C.size_t(len(data)), C.uint64_t(len(dst)), (*C.float)(&dst[0]), &cerr) != C.GGML_RS_OK {
		e := errorFrom(&cerr)
		if e.Status == StatusDType || e.Status == StatusUnsupported {
			e.Message = "unsupported quantization format: " + e.Message
		}
		return e
	}
	return nil
}

// Quantize converts f32s, a tensor of the given shape in ggml order
// (shape[0] is the row length; the remaining dimensions count the rows),
// to newType and returns its bytes, exactly as ggml_quantize_chunk writes
// them. As in Ollama there is no importance matrix, so the types that need
// one (IQ2_XXS, IQ2_XS, IQ1_S) are refused. Panics with an *Error for an
// empty shape, len(f32s) other than the product of shape, a type ggml
// cannot quantize to, a row length the type's block size does not divide,
// or a non-finite value when newType is quantized. (Ollama's read past
// the slice or aborted the process in these cases; it also ignored
// shape[3].)
func Quantize(newType fsggml.TensorType, f32s []float32, shape []uint64) []byte {
	if len(shape) == 0 {
		panic(&Error{Status: StatusShape, Message: "Quantize: empty shape"})
	}
	nPerRow, nrows := shape[0], uint64(1)
	for _, d := range shape[1:] {
		hi, lo := bits.Mul64(nrows, d)
		if hi != 0 {
			panic(&Error{Status: StatusShape, Message: "Quantize: shape overflows"})
		}
		nrows = lo
	}
	hi, n := bits.Mul64(nPerRow, nrows)
	if hi != 0 || n != uint64(len(f32s)) {
		panic(&Error{Status: StatusShape, Message: fmt.Sprintf("Quantize: %d values do not fill shape %v", len(f32s), shape)})
	}
	size, err := quantizedSize(uint32(newType), nPerRow, nrows)
	if err != nil {
		panic(err)
	}
	if size > uint64(maxInt) {
		panic(&Error{Status: StatusShape, Message: "Quantize: result does not fit in memory"})
	}
	buf := make([]byte, size)
	written, qerr := QuantizeInto(buf, uint32(newType), f32s, nil, nPerRow, nrows)
	if qerr != nil {
		panic(qerr)
	}
	return buf[:written]
}

// QuantizeInto is Quantize of nrows rows of nPerRow values into dst,
// returning the bytes written or the *Error instead of panicking: for
// callers that reuse their buffers. dst must hold the quantized size.
// imatrix, when not nil, holds nPerRow importance weights for every row
// (llama.cpp's importance matrix: finite, not negative); the types of
// ggml_quantize_requires_imatrix (IQ2_XXS, IQ2_XS, IQ1_S) fail without
// one.
func QuantizeInto(dst []byte, newType uint32, f32s, imatrix []float32, nPerRow, nrows uint64) (int, error) {
	// The library sees only pointers: the counts are checked here.
	if hi, n := bits.Mul64(nPerRow, nrows); hi != 0 || n != uint64(len(f32s)) {
		return 0, &Error{Status: StatusShape, Message: fmt.Sprintf("Quantize: %d values are not %d rows of %d", len(f32s), nrows, nPerRow)}
	}
	var weights *C.float
	if imatrix != nil {
		if uint64(len(imatrix)) != nPerRow {
			return 0, &Error{Status: StatusShape, Message: fmt.Sprintf("Quantize: %d importance weights for rows of %d", len(imatrix), nPerRow)}
		}
		if nPerRow > 0 {
			weights = (*C.float)(&imatrix[0])
		}
	}
	var src *C.float
	if len(f32s) > 0 {
		src = (*C.float)(&f32s[0])
	}
	var out unsafe.Pointer
	if len(dst) > 0 {
		out = unsafe.Pointer(&dst[0])
	}
	var cerr C.ggml_rs_error
	var written C.size_t
	if C.ggml_rs_quantize(C.uint32_t(newType), src, C.uint64_t(nPerRow), C.uint64_t(nrows), weights, out, C.size_t(len(dst)), &written, &cerr) != C.GGML_RS_OK {
		return 0, errorFrom(&cerr)
	}
	return int(written), nil
}

// quantizedSize is the library's byte size of nrows rows of nPerRow
// elements of ggml type typ.
func quantizedSize(typ uint32, nPerRow, nrows uint64) (uint64, *Error) {
	var cerr C.ggml_rs_error
	var size C.uint64_t
	if C.ggml_rs_quantized_size(C.uint32_t(typ), C.uint64_t(nPerRow), C.uint64_t(nrows), &size, &cerr) != C.GGML_RS_OK {
		return 0, errorFrom(&cerr)
	}
	return uint64(size), nil
}

// QuantizationVersion is GGML_QNT_VERSION of the bundled ggml: the
// version of the quantized block formats, written to GGUF files as
// general.quantization_version.
func QuantizationVersion() uint32 {
	return uint32(C.ggml_rs_quantization_version())
}

const maxInt = int(^uint(0) >> 1)
