// Package safetensors reads the safetensors format: an 8-byte
// little-endian header length, a JSON header mapping tensor names to
// dtype, shape and data offsets, then the raw little-endian tensor data.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
)

// Tensor is one entry of the header.
type Tensor struct {
	Name  string
	DType string // "F32", "F16", "BF16", "I64" …
	// Shape in PyTorch order (slowest dimension first).
	Shape []int64
	// Begin and End are byte offsets into the data section.
	Begin, End int64
}

// Elements is the product of the dimensions (1 for a scalar).
func (t Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is an open safetensors file.
type File struct {
	f        *os.File
	path     string
	Tensors  []Tensor // sorted by data offset
	Metadata map[string]string
	data     int64 // file offset of the data section
}

// maxHeader bounds the JSON header (the format's reference limit is 100 MB).
const maxHeader = 100 << 20

var dtypeSizes = map[string]int64{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
	"U16": 2, "U32": 4, "U64": 8, "F8_E4M3": 1, "F8_E5M2": 1,
}

// Open reads and checks the header of the file at path: every tensor's
// byte range must match its dtype and shape and lie inside the file. The
// path must name a regular file (a named pipe or device is refused without
// waiting on it).
func Open(path string) (*File, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	s, err := parse(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func parse(f *os.File, path string) (*File, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: not a valid safetensors file: %s", path, fmt.Sprintf(format, args...))
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	var lenBuf [8]byte
	if _, err := io.ReadFull(f, lenBuf[:]); err != nil {
		return nil, bad("too short for the header length")
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > maxHeader || int64(n) > size-8 {
		return nil, bad("header length %d does not fit the file (%d bytes)", n, size)
	}
	header := make([]byte, n)
	if _, err := io.ReadFull(f, header); err != nil {
		return nil, bad("truncated header")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return nil, bad("header is not a JSON object: %v", err)
	}
	s := &File{f: f, path: path, data: 8 + int64(n)}
	dataSize := size - s.data
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &s.Metadata); err != nil {
				return nil, bad("__metadata__ is not a string map: %v", err)
			}
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, bad("tensor %q: %v", name, err)
		}
		el, ok := dtypeSizes[e.DType]
		if !ok {
			return nil, bad("tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > dataSize {
			return nil, bad("tensor %q: data offsets %v outside the %d-byte data section", name, e.Offsets, dataSize)
		}
		t := Tensor{Name: name, DType: e.DType, Shape: e.Shape, Begin: e.Offsets[0], End: e.Offsets[1]}
		elems := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && elems > math.MaxInt64/8/d) {
				return nil, bad("tensor %q: bad shape %v", name, e.Shape)
			}
			elems *= d
		}
		if elems*el != t.End-t.Begin {
			return nil, bad("tensor %q: %s%v needs %d bytes, the offsets give %d", name, e.DType, e.Shape, elems*el, t.End-t.Begin)
		}
		s.Tensors = append(s.Tensors, t)
	}
	sort.Slice(s.Tensors, func(i, j int) bool { return s.Tensors[i].Begin < s.Tensors[j].Begin })
	for i := 1; i < len(s.Tensors); i++ {
		if s.Tensors[i].Begin < s.Tensors[i-1].End {
			return nil, bad("tensors %q and %q overlap", s.Tensors[i-1].Name, s.Tensors[i].Name)
		}
	}
	return s, nil
}

// Close closes the file.
func (s *File) Close() error { return s.f.Close() }

// Tensor returns the entry named name.
func (s *File) Tensor(name string) (Tensor, bool) {
	i := slices.IndexFunc(s.Tensors, func(t Tensor) bool { return t.Name == name })
	if i < 0 {
		return Tensor{}, false
	}
	return s.Tensors[i], true
}

// Bytes reads a tensor's raw data.
func (s *File) Bytes(t Tensor) ([]byte, error) {
	b := make([]byte, t.End-t.Begin)
	if _, err := s.f.ReadAt(b, s.data+t.Begin); err != nil {
		return nil, fmt.Errorf("%s: reading tensor %q: %w", s.path, t.Name, err)
	}
	return b, nil
}

// Float32s reads a floating-point tensor (F32, F16 or BF16) as float32.
func (s *File) Float32s(t Tensor) ([]float32, error) {
	b, err := s.Bytes(t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elements())
	switch t.DType {
	case "F32":
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case "F16":
		for i := range out {
			out[i] = gguf.Float16To32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case "BF16":
		for i := range out {
			out[i] = gguf.BFloat16To32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	default:
		return nil, fmt.Errorf("%s: tensor %q is %s, not a floating-point type this reader converts", s.path, t.Name, t.DType)
	}
	return out, nil
}
