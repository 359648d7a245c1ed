// Package gguf reads and writes GGUF files (version 3, little endian): the
// key/value metadata and tensor table of a model plus its aligned tensor
// data. The reader parses the header only (tensor data stays in the file);
// the writer builds a whole file from metadata and tensor bytes.
//
// Values are plain Go types: uint8 … uint64, int8 … int64, float32,
// float64, bool and string, and slices of them for arrays (GGUF arrays of
// arrays are not supported).
package gguf

import (
	"fmt"
	"math"
)

// Magic is "GGUF" read as a little-endian uint32.
const Magic = 0x46554747

// Version is the GGUF version the writer produces.
const Version = 3

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// ValueType is the type tag of a metadata value.
type ValueType uint32

const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value any
}

// TypeOf is the GGUF type of a Go value (for a slice: TypeArray and the
// element type), or an error for a type GGUF cannot hold.
func TypeOf(v any) (t, elem ValueType, err error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, nil
	case int8:
		return TypeInt8, 0, nil
	case uint16:
		return TypeUint16, 0, nil
	case int16:
		return TypeInt16, 0, nil
	case uint32:
		return TypeUint32, 0, nil
	case int32:
		return TypeInt32, 0, nil
	case float32:
		return TypeFloat32, 0, nil
	case bool:
		return TypeBool, 0, nil
	case string:
		return TypeString, 0, nil
	case uint64:
		return TypeUint64, 0, nil
	case int64:
		return TypeInt64, 0, nil
	case float64:
		return TypeFloat64, 0, nil
	case []uint8:
		return TypeArray, TypeUint8, nil
	case []int8:
		return TypeArray, TypeInt8, nil
	case []uint16:
		return TypeArray, TypeUint16, nil
	case []int16:
		return TypeArray, TypeInt16, nil
	case []uint32:
		return TypeArray, TypeUint32, nil
	case []int32:
		return TypeArray, TypeInt32, nil
	case []float32:
		return TypeArray, TypeFloat32, nil
	case []bool:
		return TypeArray, TypeBool, nil
	case []string:
		return TypeArray, TypeString, nil
	case []uint64:
		return TypeArray, TypeUint64, nil
	case []int64:
		return TypeArray, TypeInt64, nil
	case []float64:
		return TypeArray, TypeFloat64, nil
	}
	return 0, 0, fmt.Errorf("gguf: no GGUF type for a Go %T", v)
}

// TypeName is the value's GGUF type as ggml-rs prints it: "u32", "str",
// "arr[str]" ….
func TypeName(v any) string {
	t, elem, err := TypeOf(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if t == TypeArray {
		return "arr[" + elem.String() + "]"
	}
	return t.String()
}

// TensorType is a ggml tensor type id.
type TensorType uint32

// The ggml types this package knows the block layout of.
const (
	TensorF32    TensorType = 0
	TensorF16    TensorType = 1
	TensorQ4_0   TensorType = 2
	TensorQ4_1   TensorType = 3
	TensorQ5_0   TensorType = 6
	TensorQ5_1   TensorType = 7
	TensorQ8_0   TensorType = 8
	TensorQ8_1   TensorType = 9
	TensorQ2K    TensorType = 10
	TensorQ3K    TensorType = 11
	TensorQ4K    TensorType = 12
	TensorQ5K    TensorType = 13
	TensorQ6K    TensorType = 14
	TensorQ8K    TensorType = 15
	TensorIQ2XXS TensorType = 16
	TensorIQ2XS  TensorType = 17
	TensorIQ3XXS TensorType = 18
	TensorIQ1S   TensorType = 19
	TensorIQ4NL  TensorType = 20
	TensorIQ3S   TensorType = 21
	TensorIQ2S   TensorType = 22
	TensorIQ4XS  TensorType = 23
	TensorI8     TensorType = 24
	TensorI16    TensorType = 25
	TensorI32    TensorType = 26
	TensorI64    TensorType = 27
	TensorF64    TensorType = 28
	TensorIQ1M   TensorType = 29
	TensorBF16   TensorType = 30
	TensorTQ1_0  TensorType = 34
	TensorTQ2_0  TensorType = 35
	TensorMXF4   TensorType = 39
	TensorNVFP4  TensorType = 40
	TensorQ1_0   TensorType = 41
	TensorQ2_0   TensorType = 42
)

type layout struct {
	name        string
	block, size uint64 // elements per block, bytes per block
}

var layouts = map[TensorType]layout{
	TensorF32: {"f32", 1, 4}, TensorF16: {"f16", 1, 2}, TensorQ4_0: {"q4_0", 32, 18}, TensorQ4_1: {"q4_1", 32, 20},
	TensorQ5_0: {"q5_0", 32, 22}, TensorQ5_1: {"q5_1", 32, 24}, TensorQ8_0: {"q8_0", 32, 34}, TensorQ8_1: {"q8_1", 32, 36},
	TensorQ2K: {"q2_K", 256, 84}, TensorQ3K: {"q3_K", 256, 110}, TensorQ4K: {"q4_K", 256, 144},
	TensorQ5K: {"q5_K", 256, 176}, TensorQ6K: {"q6_K", 256, 210}, TensorQ8K: {"q8_K", 256, 292},
	TensorIQ4NL: {"iq4_nl", 32, 18}, TensorIQ4XS: {"iq4_xs", 256, 136},
	TensorI8: {"i8", 1, 1}, TensorI16: {"i16", 1, 2}, TensorI32: {"i32", 1, 4}, TensorI64: {"i64", 1, 8},
	TensorF64: {"f64", 1, 8}, TensorBF16: {"bf16", 1, 2}, TensorMXF4: {"mxfp4", 32, 17},
	TensorIQ2XXS: {"iq2_xxs", 256, 66}, TensorIQ2XS: {"iq2_xs", 256, 74}, TensorIQ3XXS: {"iq3_xxs", 256, 98},
	TensorIQ1S: {"iq1_s", 256, 50}, TensorIQ3S: {"iq3_s", 256, 110}, TensorIQ2S: {"iq2_s", 256, 82},
	TensorIQ1M: {"iq1_m", 256, 56}, TensorTQ1_0: {"tq1_0", 256, 54}, TensorTQ2_0: {"tq2_0", 256, 66},
	TensorNVFP4: {"nvfp4", 64, 36}, TensorQ1_0: {"q1_0", 128, 18}, TensorQ2_0: {"q2_0", 64, 18},
}

// Layout is t's ggml name ("q4_K"), elements per block and bytes per
// block, and whether this package knows t: the one table of ggml's types
// in this module (fs/ggml and ml/backend read it).
func (t TensorType) Layout() (name string, block, size uint64, ok bool) {
	l, ok := layouts[t]
	return l.name, l.block, l.size, ok
}

func (t TensorType) String() string {
	if l, ok := layouts[t]; ok {
		return l.name
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// BlockSize is the number of elements of a block of t (ggml_blck_size):
// 1 for the plain types and for a type this package does not know.
func (t TensorType) BlockSize() uint64 {
	if l, ok := layouts[t]; ok {
		return l.block
	}
	return 1
}

// RowSize is the byte size of n elements of type t, or an error if t is
// unknown or n is not a whole number of blocks.
func (t TensorType) RowSize(n uint64) (uint64, error) {
	l, ok := layouts[t]
	if !ok {
		return 0, fmt.Errorf("gguf: unknown tensor type %d", uint32(t))
	}
	if n%l.block != 0 {
		return 0, fmt.Errorf("gguf: %d elements of %s are not a whole number of %d-element blocks", n, t, l.block)
	}
	return n / l.block * l.size, nil
}

// TensorInfo is one entry of the tensor table.
type TensorInfo struct {
	Name string
	// Shape in ggml order: Shape[0] is the fastest-varying dimension (a
	// PyTorch [out, in] matrix is [in, out] here).
	Shape []uint64
	Type  TensorType
	// Offset of the data from the start of the data section.
	Offset uint64
}

// Elements is the product of the dimensions.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size is the tensor's data size in bytes (0 if the type is unknown).
func (t TensorInfo) Size() uint64 {
	if len(t.Shape) == 0 {
		return 0
	}
	row, err := t.Type.RowSize(t.Shape[0])
	if err != nil {
		return 0
	}
	return row * (t.Elements() / t.Shape[0])
}

func align(n, a uint64) uint64 { return (n + a - 1) / a * a }

// Float16 converts f to IEEE half precision bits, rounding to nearest even
// (overflow gives ±Inf, NaN stays NaN).
func Float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127+15 >= 0x1f: // too large
		return sign | 0x7c00
	case exp-127+15 <= 0: // subnormal half (or zero)
		e := exp - 127 + 15
		if e < -10 {
			return sign
		}
		m := mant | 0x800000 // implicit bit
		shift := uint32(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	e := uint16(exp - 127 + 15)
	half := e<<10 | uint16(mant>>13)
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, up to Inf: still correct
	}
	return sign | half
}

// Float16To32 converts IEEE half precision bits to float32 (exactly).
func Float16To32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = mant * 2^-24.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// BFloat16To32 converts bfloat16 bits to float32 (exactly).
func BFloat16To32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Int is an integer metadata value of any width as int64; uint64 values
// above the int64 range saturate at math.MaxInt64 (no model's hyperparameter
// comes near, and callers bound what they accept). False for other types.
func Int(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}
