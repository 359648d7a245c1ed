package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// Builder collects a GGUF file's metadata and tensors, then writes it.
type Builder struct {
	kvs       []KV
	keys      map[string]bool
	tensors   []builderTensor
	names     map[string]bool
	alignment uint64
}

type builderTensor struct {
	info TensorInfo
	data []byte
}

// NewBuilder returns an empty file with the default alignment.
func NewBuilder() *Builder {
	return &Builder{keys: map[string]bool{}, names: map[string]bool{}, alignment: DefaultAlignment}
}

// Add appends a metadata entry. Keys must be unique and non-empty, and the
// value one of the types TypeOf accepts. general.alignment (a u32 power of
// two) sets the data alignment.
func (b *Builder) Add(key string, value any) error {
	if key == "" {
		return errors.New("gguf: empty key")
	}
	if b.keys[key] {
		return fmt.Errorf("gguf: duplicate key %q", key)
	}
	if _, _, err := TypeOf(value); err != nil {
		return fmt.Errorf("%w (key %q)", err, key)
	}
	if key == "general.alignment" {
		a, ok := value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: general.alignment must be a u32 power of two, not %v (%s)", value, TypeName(value))
		}
		b.alignment = uint64(a)
	}
	b.keys[key] = true
	b.kvs = append(b.kvs, KV{key, value})
	return nil
}

// AddTensor appends a tensor: shape in ggml order (fastest dimension
// first), data exactly its size.
func (b *Builder) AddTensor(name string, typ TensorType, shape []uint64, data []byte) error {
	if name == "" {
		return errors.New("gguf: empty tensor name")
	}
	if len(name) > 63 {
		return fmt.Errorf("gguf: tensor name %q is longer than ggml's 63 bytes", name)
	}
	if b.names[name] {
		return fmt.Errorf("gguf: duplicate tensor %q", name)
	}
	if len(shape) == 0 || len(shape) > 4 {
		return fmt.Errorf("gguf: tensor %q has %d dimensions (1 to 4)", name, len(shape))
	}
	for _, d := range shape {
		if d == 0 {
			return fmt.Errorf("gguf: tensor %q has a zero dimension %v", name, shape)
		}
	}
	info := TensorInfo{Name: name, Shape: append([]uint64(nil), shape...), Type: typ}
	if _, err := typ.RowSize(shape[0]); err != nil {
		return fmt.Errorf("%w (tensor %q)", err, name)
	}
	if n := info.Size(); uint64(len(data)) != n {
		return fmt.Errorf("gguf: tensor %q %s%v needs %d bytes, got %d", name, typ, shape, n, len(data))
	}
	b.names[name] = true
	b.tensors = append(b.tensors, builderTensor{info: info, data: data})
	return nil
}

// WriteTo writes the whole file: WriteHeader's header, then each tensor's
// data padded to the alignment.
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	infos := make([]TensorInfo, len(b.tensors))
	for i := range b.tensors {
		infos[i] = b.tensors[i].info
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	n, err := WriteHeader(bw, b.kvs, infos, b.alignment)
	if err != nil {
		return n, err
	}
	cw := &countingWriter{w: bw, n: n}
	e := encoder{w: cw}
	for i := range b.tensors {
		b.tensors[i].info.Offset = infos[i].Offset
		e.bytes(b.tensors[i].data)
		e.pad(b.alignment)
	}
	if e.err == nil {
		e.err = bw.Flush()
	}
	return cw.n, e.err
}

// WriteHeader writes a GGUF header (magic, version, the key/values, the
// tensor table, padding to alignment) for tensors whose data the caller
// writes afterwards, in table order, each padded to alignment (see
// PadTo). It sets each tensor's Offset as WriteTo would and returns the
// header's size. Shapes are written as given (ggml writes ggml_n_dims of
// a tensor: trailing 1s dropped; callers that must match it trim them).
func WriteHeader(w io.Writer, kvs []KV, tensors []TensorInfo, alignment uint64) (int64, error) {
	if alignment == 0 || alignment&(alignment-1) != 0 {
		return 0, fmt.Errorf("gguf: alignment %d is not a power of two", alignment)
	}
	for _, kv := range kvs {
		if _, _, err := TypeOf(kv.Value); err != nil {
			return 0, fmt.Errorf("%w (key %q)", err, kv.Key)
		}
	}
	cw := &countingWriter{w: bufio.NewWriterSize(w, 1<<20)}
	e := encoder{w: cw}
	e.u32(Magic)
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	var offset uint64
	for i := range tensors {
		t := &tensors[i]
		size := t.Size()
		if size == 0 {
			return 0, fmt.Errorf("gguf: tensor %q: bad shape %v for type %s", t.Name, t.Shape, t.Type)
		}
		t.Offset = offset
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
		offset = align(offset+size, alignment)
	}
	e.pad(alignment)
	if e.err == nil {
		e.err = cw.w.(*bufio.Writer).Flush()
	}
	return cw.n, e.err
}

// Padding is the number of zero bytes that follow n bytes of tensor data
// so that the next tensor starts aligned.
func Padding(n, alignment uint64) uint64 { return align(n, alignment) - n }

// WriteFile writes the file to path atomically (a temporary file in the
// same directory, renamed when complete).
func (b *Builder) WriteFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := b.WriteTo(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian GGUF items, keeping the first error.
type encoder struct {
	w   *countingWriter
	err error
	buf [8]byte
}

func (e *encoder) bytes(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.bytes(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.bytes(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.bytes(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.bytes(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

func (e *encoder) pad(a uint64) {
	if n := align(uint64(e.w.n), a) - uint64(e.w.n); n > 0 {
		e.bytes(make([]byte, n))
	}
}

func (e *encoder) value(v any) {
	t, elem, _ := TypeOf(v)
	e.u32(uint32(t))
	if t != TypeArray {
		e.scalar(v)
		return
	}
	e.u32(uint32(elem))
	switch a := v.(type) {
	case []uint8:
		e.array(len(a), func(i int) { e.u8(a[i]) })
	case []int8:
		e.array(len(a), func(i int) { e.u8(uint8(a[i])) })
	case []uint16:
		e.array(len(a), func(i int) { e.u16(a[i]) })
	case []int16:
		e.array(len(a), func(i int) { e.u16(uint16(a[i])) })
	case []uint32:
		e.array(len(a), func(i int) { e.u32(a[i]) })
	case []int32:
		e.array(len(a), func(i int) { e.u32(uint32(a[i])) })
	case []float32:
		e.array(len(a), func(i int) { e.u32(math.Float32bits(a[i])) })
	case []bool:
		e.array(len(a), func(i int) { e.scalar(a[i]) })
	case []string:
		e.array(len(a), func(i int) { e.str(a[i]) })
	case []uint64:
		e.array(len(a), func(i int) { e.u64(a[i]) })
	case []int64:
		e.array(len(a), func(i int) { e.u64(uint64(a[i])) })
	case []float64:
		e.array(len(a), func(i int) { e.u64(math.Float64bits(a[i])) })
	}
}

func (e *encoder) array(n int, item func(int)) {
	e.u64(uint64(n))
	for i := 0; i < n; i++ {
		item(i)
	}
}

func (e *encoder) scalar(v any) {
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	}
}
