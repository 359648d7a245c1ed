package quantize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
)

// Imatrix is an importance matrix as llama-quantize uses it: for each
// weight tensor (by name), one importance weight per input column, per
// expert for the 3-D expert tensors (n_embd × n_expert values). It is read
// from llama.cpp's files (llama-imatrix's GGUF output, or the legacy
// binary format) by LoadImatrix.
type Imatrix struct {
	// Path as given: written to quantize.imatrix.file.
	Path string
	// Entries: the weights of each tensor, the mean of the squared
	// activations llama-imatrix summed (in_sum2 / counts).
	Entries map[string][]float32
	// Datasets the matrix was computed on (imatrix.datasets), and how many
	// chunks of text (imatrix.chunk_count; 0 when not known).
	Datasets   []string
	ChunkCount int
}

// LoadImatrix reads an importance matrix file: a GGUF file as
// llama-imatrix writes it (tensors NAME.in_sum2 and NAME.counts, F32, the
// imatrix.datasets / chunk_count / chunk_size keys), or llama.cpp's legacy
// binary format. The values are what llama-quantize computes from them:
// each sum divided by its expert's count (1 where the count is 0); in the
// legacy format, divided by the call count.
func LoadImatrix(path string) (*Imatrix, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return nil, fmt.Errorf("imatrix %s: %w", path, errShort(err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var m *Imatrix
	if string(magic[:]) == "GGUF" {
		m, err = loadImatrixGGUF(f, uint64(st.Size()))
	} else {
		m, err = loadImatrixLegacy(f, uint64(st.Size()))
	}
	if err != nil {
		return nil, fmt.Errorf("imatrix %s: %w", path, err)
	}
	m.Path = path
	for name, e := range m.Entries {
		for _, v := range e {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("imatrix %s: entry %s has the non-finite value %v", path, name, v)
			}
			if v < 0 {
				return nil, fmt.Errorf("imatrix %s: entry %s has the negative value %v (a mean of squares cannot be)", path, name, v)
			}
		}
	}
	return m, nil
}

func errShort(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("file too short")
	}
	return err
}

// maxImatrixValues bounds one entry (2^31 floats: far above any model's
// n_embd × n_expert) so that a corrupt count cannot ask for all memory.
const maxImatrixValues = 1 << 31

func loadImatrixGGUF(f *os.File, size uint64) (*Imatrix, error) {
	g, err := gguf.Read(f, size)
	if err != nil {
		return nil, err
	}
	m := &Imatrix{Entries: map[string][]float32{}}
	meta := 0
	if v, ok := g.Get("imatrix.datasets"); ok {
		meta++
		if ds, ok := v.([]string); ok {
			m.Datasets = ds
		}
	}
	if v, ok := g.Get("imatrix.chunk_count"); ok {
		meta++
		n, _ := gguf.Int(v)
		m.ChunkCount = int(uint32(n))
	}
	if _, ok := g.Get("imatrix.chunk_size"); ok {
		meta++
	}
	if meta < 3 {
		return nil, errors.New("missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size): not a file of llama-imatrix")
	}
	type pair struct{ sum2, sum, counts *gguf.TensorInfo }
	pairs := map[string]*pair{}
	var names []string
	for i := range g.Tensors {
		t := &g.Tensors[i]
		for _, suf := range []string{".in_sum2", ".in_sum", ".counts"} {
			name, ok := strings.CutSuffix(t.Name, suf)
			if !ok || name == "" {
				continue
			}
			p := pairs[name]
			if p == nil {
				p = &pair{}
				pairs[name] = p
				names = append(names, name)
			}
			switch suf {
			case ".in_sum2":
				p.sum2 = t
			case ".in_sum":
				p.sum = t
			default:
				p.counts = t
			}
			break
		}
	}
	if len(g.Tensors) == 0 {
		return nil, errors.New("no data (no tensors)")
	}
	read := func(t *gguf.TensorInfo) ([]float32, error) {
		if t.Type != gguf.TensorF32 {
			return nil, fmt.Errorf("%s is %s: sums and counts must be F32", t.Name, t.Type)
		}
		n := t.Elements()
		if n == 0 || n > maxImatrixValues {
			return nil, fmt.Errorf("%s has %d values", t.Name, n)
		}
		if g.DataOffset+t.Offset+4*n > size {
			return nil, fmt.Errorf("%s: data past the end of the file", t.Name)
		}
		buf := make([]byte, 4*n)
		if _, err := f.ReadAt(buf, int64(g.DataOffset+t.Offset)); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, errShort(err))
		}
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
		return out, nil
	}
	for _, name := range names {
		p := pairs[name]
		if p.sum2 == nil || p.counts == nil || (p.sum != nil && p.sum.Elements() != p.sum2.Elements()) {
			return nil, fmt.Errorf("mismatched sums and counts for %s", name)
		}
		sums, err := read(p.sum2)
		if err != nil {
			return nil, err
		}
		counts, err := read(p.counts)
		if err != nil {
			return nil, err
		}
		if len(sums)%len(counts) != 0 {
			return nil, fmt.Errorf("%s: %d sums are not a whole number of rows for %d counts", name, len(sums), len(counts))
		}
		ne0 := len(sums) / len(counts)
		e := make([]float32, len(sums))
		for j, c := range counts {
			// llama.cpp rounds the stored count to an integer, then
			// divides in single precision
			cnt := float32(math.Round(float64(c)))
			for i := j * ne0; i < (j+1)*ne0; i++ {
				if cnt > 0 {
					e[i] = sums[i] / cnt
				} else {
					e[i] = 1
				}
			}
		}
		m.Entries[name] = e
	}
	return m, nil
}

// loadImatrixLegacy reads the format llama-imatrix wrote before GGUF:
// int32 entry count; per entry int32 name length, the name, int32 call
// count, int32 value count, the values (f32); then, optionally, int32
// chunk count, int32 dataset name length and the name.
func loadImatrixLegacy(f *os.File, size uint64) (*Imatrix, error) {
	r := &legacyReader{r: io.LimitReader(f, int64(size)), left: size}
	n := r.i32()
	if r.err != nil || n < 1 {
		return nil, errors.New("no data (neither a GGUF file nor an imatrix of the legacy format)")
	}
	m := &Imatrix{Entries: map[string][]float32{}}
	for i := 0; i < int(n); i++ {
		name := r.str()
		ncall := r.i32()
		nval := r.i32()
		if r.err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, r.err)
		}
		if nval < 1 || uint64(nval)*4 > r.left {
			return nil, fmt.Errorf("entry %d (%q): bad value count %d", i+1, name, nval)
		}
		vals := r.f32s(int(nval))
		if r.err != nil {
			return nil, fmt.Errorf("entry %d (%q): %w", i+1, name, r.err)
		}
		if ncall > 0 {
			for j := range vals {
				vals[j] /= float32(ncall)
			}
		}
		m.Entries[name] = vals
	}
	if r.left > 0 {
		m.ChunkCount = int(r.i32())
		if l := r.i32(); r.err == nil && l > 0 && uint64(l) <= r.left {
			if b := r.bytes(int(l)); r.err == nil {
				if i := bytes.IndexByte(b, 0); i >= 0 {
					b = b[:i]
				}
				m.Datasets = []string{string(b)}
			}
		}
	}
	return m, nil
}

type legacyReader struct {
	r    io.Reader
	left uint64
	err  error
}

func (l *legacyReader) bytes(n int) []byte {
	if l.err != nil {
		return nil
	}
	if uint64(n) > l.left {
		l.err = errors.New("file too short")
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(l.r, b); err != nil {
		l.err = errShort(err)
		return nil
	}
	l.left -= uint64(n)
	return b
}

func (l *legacyReader) i32() int32 {
	b := l.bytes(4)
	if b == nil {
		return 0
	}
	return int32(binary.LittleEndian.Uint32(b))
}

func (l *legacyReader) str() string {
	n := l.i32()
	if l.err != nil {
		return ""
	}
	if n < 0 || uint64(n) > l.left {
		l.err = fmt.Errorf("bad name length %d", n)
		return ""
	}
	b := l.bytes(int(n))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i] // llama.cpp reads the name as a C string
	}
	return string(b)
}

func (l *legacyReader) f32s(n int) []float32 {
	b := l.bytes(4 * n)
	if b == nil {
		return nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// Filter keeps the entries whose name contains one of include (when not
// empty), then drops those that contain one of exclude, as llama-quantize's
// --include-weights / --exclude-weights.
func (m *Imatrix) Filter(include, exclude []string) {
	for name := range m.Entries {
		keep := len(include) == 0
		for _, s := range include {
			keep = keep || strings.Contains(name, s)
		}
		for _, s := range exclude {
			keep = keep && !strings.Contains(name, s)
		}
		if !keep {
			delete(m.Entries, name)
		}
	}
}

// forTensor: the weights of a tensor being quantized, or nil when the
// matrix has none for it (llama.cpp then quantizes without). A matrix
// whose size is not the tensor's columns × experts is another model's:
// an error, except for token_embd (llama.cpp's exception, which it
// quantizes without).
func (m *Imatrix) forTensor(t gguf.TensorInfo) ([]float32, error) {
	e, ok := m.Entries[t.Name]
	if !ok {
		return nil, nil
	}
	want := t.Shape[0]
	if len(t.Shape) > 2 {
		want *= t.Shape[2]
	}
	if uint64(len(e)) != want {
		if isTokenEmbd(t.Name) {
			return nil, nil
		}
		shape := fmt.Sprintf("%d columns", t.Shape[0])
		if want != t.Shape[0] {
			shape += fmt.Sprintf(" x %d experts", want/t.Shape[0])
		}
		return nil, fmt.Errorf("the imatrix has %d values for %s, which needs %d (%s): an imatrix of another model?",
			len(e), t.Name, want, shape)
	}
	return e, nil
}
