package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
)

// File is a parsed GGUF header: metadata, tensor table and where the data
// starts. The reader checks structure and bounds (not every rule ggml
// has: the backend's own reader does that before it loads anything).
type File struct {
	Version   uint32
	KVs       []KV
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is the file offset of the data section.
	DataOffset uint64

	index map[string]int
}

// Limits that keep a corrupt header from allocating without bound.
const (
	maxString = 1 << 30
	maxArray  = 1 << 30
	maxCount  = 1 << 24
)

// Open reads the header of the GGUF file at path, which must be a regular
// file (a named pipe or device is refused without waiting on it).
func Open(path string) (*File, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	g, err := Read(f, uint64(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// Read parses a GGUF header from r; size is the file's size, for bounds
// checks of the tensor data (0: unchecked).
func Read(r io.Reader, size uint64) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 1<<16)}
	if m := d.u32(); d.err == nil && m != Magic {
		return nil, fmt.Errorf("not a GGUF file (magic %#08x)", m)
	}
	g := &File{Version: d.u32(), Alignment: DefaultAlignment, index: map[string]int{}}
	if d.err == nil && (g.Version < 2 || g.Version > 3) {
		return nil, fmt.Errorf("unsupported GGUF version %d", g.Version)
	}
	nt, nkv := d.u64(), d.u64()
	if d.err != nil {
		return nil, d.fail("header")
	}
	if nt > maxCount || nkv > maxCount {
		return nil, fmt.Errorf("implausible header: %d tensors, %d key/value pairs", nt, nkv)
	}
	for i := uint64(0); i < nkv; i++ {
		key := d.str()
		v := d.value()
		if d.err != nil {
			return nil, d.fail(fmt.Sprintf("key/value pair %d", i))
		}
		if _, dup := g.index[key]; dup {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		g.index[key] = len(g.KVs)
		g.KVs = append(g.KVs, KV{key, v})
		if key == "general.alignment" {
			a, ok := v.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("general.alignment must be a u32 power of two, not %v", v)
			}
			g.Alignment = uint64(a)
		}
	}
	names := map[string]bool{}
	for i := uint64(0); i < nt; i++ {
		t := TensorInfo{Name: d.str()}
		nd := d.u32()
		if d.err == nil && (nd == 0 || nd > 4) {
			return nil, fmt.Errorf("tensor %q has %d dimensions", t.Name, nd)
		}
		for j := uint32(0); j < nd && d.err == nil; j++ {
			t.Shape = append(t.Shape, d.u64())
		}
		t.Type = TensorType(d.u32())
		t.Offset = d.u64()
		if d.err != nil {
			return nil, d.fail(fmt.Sprintf("tensor %d", i))
		}
		if names[t.Name] {
			return nil, fmt.Errorf("duplicate tensor %q", t.Name)
		}
		names[t.Name] = true
		g.Tensors = append(g.Tensors, t)
	}
	g.DataOffset = align(d.n, g.Alignment)
	for _, t := range g.Tensors {
		if t.Offset%g.Alignment != 0 {
			return nil, fmt.Errorf("tensor %q: offset %d is not aligned to %d", t.Name, t.Offset, g.Alignment)
		}
		n := t.Size()
		if n == 0 {
			return nil, fmt.Errorf("tensor %q: bad shape %v for type %s", t.Name, t.Shape, t.Type)
		}
		if size > 0 && (g.DataOffset+t.Offset > size || n > size-g.DataOffset-t.Offset) {
			return nil, fmt.Errorf("tensor %q: data [%d, %d) runs past the end of the file (%d bytes)",
				t.Name, g.DataOffset+t.Offset, g.DataOffset+t.Offset+n, size)
		}
	}
	return g, nil
}

// Get returns the value of key.
func (g *File) Get(key string) (any, bool) {
	i, ok := g.index[key]
	if !ok {
		return nil, false
	}
	return g.KVs[i].Value, true
}

// Tensor returns the named tensor's entry.
func (g *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range g.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// decoder reads little-endian items, keeping the first error and the
// number of bytes consumed.
type decoder struct {
	r   *bufio.Reader
	n   uint64
	err error
	buf [8]byte
}

func (d *decoder) fail(what string) error {
	if errors.Is(d.err, io.EOF) || errors.Is(d.err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("truncated file in %s", what)
	}
	return fmt.Errorf("%s: %w", what, d.err)
}

func (d *decoder) read(n int) []byte {
	if d.err != nil {
		return d.buf[:n]
	}
	_, d.err = io.ReadFull(d.r, d.buf[:n])
	d.n += uint64(n)
	return d.buf[:n]
}

func (d *decoder) u8() uint8   { return d.read(1)[0] }
func (d *decoder) u16() uint16 { return binary.LittleEndian.Uint16(d.read(2)) }
func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.read(4)) }
func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.read(8)) }

func (d *decoder) str() string {
	n := d.u64()
	if d.err != nil {
		return ""
	}
	if n > maxString {
		d.err = fmt.Errorf("string length %d is implausible", n)
		return ""
	}
	b := make([]byte, n)
	_, d.err = io.ReadFull(d.r, b)
	d.n += n
	if d.err == nil && !utf8.Valid(b) {
		d.err = fmt.Errorf("string is not valid UTF-8: %q", b)
	}
	return string(b)
}

func (d *decoder) scalar(t ValueType) any {
	switch t {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		return int8(d.u8())
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		return int16(d.u16())
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		return int32(d.u32())
	case TypeFloat32:
		return math.Float32frombits(d.u32())
	case TypeBool:
		return d.u8() != 0
	case TypeString:
		return d.str()
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	}
	if d.err == nil {
		d.err = fmt.Errorf("unknown value type %d", uint32(t))
	}
	return nil
}

func (d *decoder) value() any {
	t := ValueType(d.u32())
	if t != TypeArray {
		return d.scalar(t)
	}
	elem := ValueType(d.u32())
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > maxArray {
		d.err = fmt.Errorf("array length %d is implausible", n)
		return nil
	}
	switch elem {
	case TypeUint8:
		return readArray(d, n, d.u8)
	case TypeInt8:
		return readArray(d, n, func() int8 { return int8(d.u8()) })
	case TypeUint16:
		return readArray(d, n, d.u16)
	case TypeInt16:
		return readArray(d, n, func() int16 { return int16(d.u16()) })
	case TypeUint32:
		return readArray(d, n, d.u32)
	case TypeInt32:
		return readArray(d, n, func() int32 { return int32(d.u32()) })
	case TypeFloat32:
		return readArray(d, n, func() float32 { return math.Float32frombits(d.u32()) })
	case TypeBool:
		return readArray(d, n, func() bool { return d.u8() != 0 })
	case TypeString:
		return readArray(d, n, d.str)
	case TypeUint64:
		return readArray(d, n, d.u64)
	case TypeInt64:
		return readArray(d, n, func() int64 { return int64(d.u64()) })
	case TypeFloat64:
		return readArray(d, n, func() float64 { return math.Float64frombits(d.u64()) })
	}
	d.err = fmt.Errorf("unsupported array element type %s", elem)
	return nil
}

func readArray[T any](d *decoder, n uint64, item func() T) []T {
	out := make([]T, 0, min(n, 1<<16))
	for i := uint64(0); i < n && d.err == nil; i++ {
		out = append(out, item())
	}
	return out
}
