package backend

// A small GGUF (version 3) writer for test fixtures: key/values of every
// type (arrays included), tensor infos, and tensor data padded to the
// alignment (general.alignment when set as a u32, else 32).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// GGUF value types.
const (
	ggufU8 uint32 = iota
	ggufI8
	ggufU16
	ggufI16
	ggufU32
	ggufI32
	ggufF32
	ggufBool
	ggufStr
	ggufArr
	ggufU64
	ggufI64
	ggufF64
)

type ggufKV struct {
	key   string
	value any
}

type ggufTensor struct {
	name  string
	typ   uint32 // ggml type id
	shape []uint64
	data  []byte
}

type ggufFile struct {
	kvs     []ggufKV
	tensors []ggufTensor
}

func (g *ggufFile) kv(key string, value any) *ggufFile {
	g.kvs = append(g.kvs, ggufKV{key, value})
	return g
}

func (g *ggufFile) tensor(name string, typ uint32, shape []uint64, data []byte) *ggufFile {
	g.tensors = append(g.tensors, ggufTensor{name, typ, shape, data})
	return g
}

func (g *ggufFile) alignment() uint64 {
	for _, kv := range g.kvs {
		if a, ok := kv.value.(uint32); ok && kv.key == "general.alignment" {
			return uint64(a)
		}
	}
	return 32
}

type ggufBuf struct{ bytes.Buffer }

func (b *ggufBuf) put(v any) {
	if err := binary.Write(&b.Buffer, binary.LittleEndian, v); err != nil {
		panic(err)
	}
}

func (b *ggufBuf) str(s string) {
	b.put(uint64(len(s)))
	b.WriteString(s)
}

func (b *ggufBuf) pad(align uint64) {
	for uint64(b.Len())%align != 0 {
		b.WriteByte(0)
	}
}

// ggufType is the GGUF type of a Go value (and of its elements, for a slice).
func ggufType(v any) (typ, elem uint32) {
	switch v.(type) {
	case uint8:
		return ggufU8, 0
	case int8:
		return ggufI8, 0
	case uint16:
		return ggufU16, 0
	case int16:
		return ggufI16, 0
	case uint32:
		return ggufU32, 0
	case int32:
		return ggufI32, 0
	case float32:
		return ggufF32, 0
	case bool:
		return ggufBool, 0
	case string:
		return ggufStr, 0
	case uint64:
		return ggufU64, 0
	case int64:
		return ggufI64, 0
	case float64:
		return ggufF64, 0
	case []uint8:
		return ggufArr, ggufU8
	case []int8:
		return ggufArr, ggufI8
	case []uint16:
		return ggufArr, ggufU16
	case []int16:
		return ggufArr, ggufI16
	case []uint32:
		return ggufArr, ggufU32
	case []int32:
		return ggufArr, ggufI32
	case []float32:
		return ggufArr, ggufF32
	case []bool:
		return ggufArr, ggufBool
	case []string:
		return ggufArr, ggufStr
	case []uint64:
		return ggufArr, ggufU64
	case []int64:
		return ggufArr, ggufI64
	case []float64:
		return ggufArr, ggufF64
	}
	panic(fmt.Sprintf("gguf writer: unsupported value %T", v))
}

func (b *ggufBuf) value(v any) {
	typ, elem := ggufType(v)
	b.put(typ)
	switch x := v.(type) {
	case string:
		b.str(x)
	case []string:
		b.put(elem)
		b.put(uint64(len(x)))
		for _, s := range x {
			b.str(s)
		}
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []uint64, []int64, []float64:
		b.put(elem)
		b.put(uint64(lenOf(x)))
		b.put(x)
	default:
		b.put(x)
	}
}

func lenOf(v any) int {
	switch x := v.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	}
	panic("lenOf")
}

// encode returns the file's bytes and the offset where the tensor data
// starts.
func (g *ggufFile) encode() ([]byte, uint64) {
	align := g.alignment()
	var b ggufBuf
	b.WriteString("GGUF")
	b.put(uint32(3))
	b.put(uint64(len(g.tensors)))
	b.put(uint64(len(g.kvs)))
	for _, kv := range g.kvs {
		b.str(kv.key)
		b.value(kv.value)
	}
	var offset uint64
	for _, t := range g.tensors {
		b.str(t.name)
		b.put(uint32(len(t.shape)))
		for _, d := range t.shape {
			b.put(d)
		}
		b.put(t.typ)
		b.put(offset)
		offset += uint64(len(t.data))
		offset = (offset + align - 1) / align * align
	}
	if len(g.tensors) > 0 {
		b.pad(align)
	}
	dataStart := uint64(b.Len())
	for _, t := range g.tensors {
		b.Write(t.data)
		b.pad(align)
	}
	return b.Bytes(), dataStart
}

// write stores the file in a fresh temporary directory and returns its path.
func (g *ggufFile) write(tb testing.TB) string {
	tb.Helper()
	data, _ := g.encode()
	return writeFile(tb, data)
}

func writeFile(tb testing.TB, data []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "model.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// ---- tensor data ----------------------------------------------------------

// ggml type ids used by the fixtures.
const (
	ggmlF32  = 0
	ggmlF16  = 1
	ggmlQ4_0 = 2
	ggmlQ8_0 = 8
)

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// q8_0Blocks encodes blocks of 32 int8 values with one f16 scale each
// (d, then the values); it returns the bytes and the values they decode to.
func q8_0Blocks(scales []float32, qs []int8) ([]byte, []float32) {
	var out []byte
	var vals []float32
	for b, d := range scales {
		h := float32ToFloat16(d)
		out = append(out, byte(h), byte(h>>8))
		for _, q := range qs[32*b : 32*b+32] {
			out = append(out, byte(q))
			vals = append(vals, float16ToFloat32(h)*float32(q))
		}
	}
	return out, vals
}

// q4_0Blocks encodes blocks of 32 4-bit values (0..15, stored minus 8)
// with one f16 scale each: byte j holds value j in its low nibble and
// value j+16 in its high nibble.
func q4_0Blocks(scales []float32, qs []uint8) ([]byte, []float32) {
	var out []byte
	var vals []float32
	for b, d := range scales {
		h := float32ToFloat16(d)
		out = append(out, byte(h), byte(h>>8))
		q := qs[32*b : 32*b+32]
		for j := 0; j < 16; j++ {
			out = append(out, q[j]&0x0f|q[j+16]<<4)
		}
		for j := 0; j < 32; j++ {
			vals = append(vals, float16ToFloat32(h)*float32(int(q[j])-8))
		}
	}
	return out, vals
}
