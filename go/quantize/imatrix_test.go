package quantize

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// imatrixGGUF writes an imatrix file as llama-imatrix does, with the
// given extra tweak of the builder.
func imatrixGGUF(t *testing.T, meta bool, add func(b *gguf.Builder)) string {
	t.Helper()
	b := gguf.NewBuilder()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Add("general.type", "imatrix"))
	if meta {
		must(b.Add("imatrix.datasets", []string{"wiki.train.raw", "other"}))
		must(b.Add("imatrix.chunk_count", uint32(12)))
		must(b.Add("imatrix.chunk_size", uint32(512)))
	}
	add(b)
	p := filepath.Join(t.TempDir(), "imatrix.gguf")
	must(b.WriteFile(p))
	return p
}

func TestLoadImatrixGGUF(t *testing.T) {
	p := imatrixGGUF(t, true, func(b *gguf.Builder) {
		// a dense tensor: 4 columns seen by 3 tokens (count stored as 2.6:
		// llama.cpp rounds it)
		b.AddTensor("blk.0.attn_q.weight.in_sum2", gguf.TensorF32, []uint64{4, 1}, f32bytes(3, 6, 9, 1))
		b.AddTensor("blk.0.attn_q.weight.counts", gguf.TensorF32, []uint64{1, 1}, f32bytes(2.6))
		// three experts of 2 columns; the second saw no token
		b.AddTensor("blk.0.ffn_down_exps.weight.in_sum2", gguf.TensorF32, []uint64{2, 3}, f32bytes(2, 4, 5, 5, 10, 20))
		b.AddTensor("blk.0.ffn_down_exps.weight.counts", gguf.TensorF32, []uint64{1, 3}, f32bytes(2, 0, 10))
	})
	m, err := LoadImatrix(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{
		"blk.0.attn_q.weight":        {1, 2, 3, float32(1) / 3},
		"blk.0.ffn_down_exps.weight": {1, 2, 1, 1, 1, 2},
	}
	if len(m.Entries) != len(want) {
		t.Fatalf("entries %v", m.Entries)
	}
	for name, w := range want {
		if got := m.Entries[name]; !equalF32(got, w) {
			t.Errorf("%s = %v, want %v", name, got, w)
		}
	}
	if m.ChunkCount != 12 || len(m.Datasets) != 2 || m.Datasets[0] != "wiki.train.raw" || m.Path != p {
		t.Errorf("metadata: %+v", m)
	}
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func legacyFile(entries []struct {
	name  string
	ncall int32
	vals  []float32
}, trailer []byte) []byte {
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, int32(len(entries)))
	for _, e := range entries {
		binary.Write(&buf, binary.LittleEndian, int32(len(e.name)))
		buf.WriteString(e.name)
		binary.Write(&buf, binary.LittleEndian, e.ncall)
		binary.Write(&buf, binary.LittleEndian, int32(len(e.vals)))
		buf.Write(f32bytes(e.vals...))
	}
	buf.Write(trailer)
	return buf.Bytes()
}

func TestLoadImatrixLegacy(t *testing.T) {
	entries := []struct {
		name  string
		ncall int32
		vals  []float32
	}{{"blk.0.attn_k.weight", 4, []float32{4, 8, 2}}, {"output.weight", 0, []float32{5, 6}}}
	var trailer bytes.Buffer
	binary.Write(&trailer, binary.LittleEndian, int32(33))
	binary.Write(&trailer, binary.LittleEndian, int32(9))
	trailer.WriteString("data.text")
	dir := t.TempDir()
	p := filepath.Join(dir, "legacy.dat")
	if err := os.WriteFile(p, legacyFile(entries, trailer.Bytes()), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadImatrix(p)
	if err != nil {
		t.Fatal(err)
	}
	if !equalF32(m.Entries["blk.0.attn_k.weight"], []float32{1, 2, 0.5}) || !equalF32(m.Entries["output.weight"], []float32{5, 6}) {
		t.Errorf("values %v (divided by the call count; as they are when it is 0)", m.Entries)
	}
	if m.ChunkCount != 33 || len(m.Datasets) != 1 || m.Datasets[0] != "data.text" {
		t.Errorf("trailer: %d %v", m.ChunkCount, m.Datasets)
	}
	// the trailer is optional
	if err := os.WriteFile(p, legacyFile(entries, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := LoadImatrix(p); err != nil || m.ChunkCount != 0 || len(m.Entries) != 2 {
		t.Errorf("without the trailer: %v %v", m, err)
	}
}

func TestLoadImatrixRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := []struct {
		name  string
		ncall int32
		vals  []float32
	}{{"a.weight", 1, []float32{1, 2}}}
	full := legacyFile(good, nil)
	nan := []struct {
		name  string
		ncall int32
		vals  []float32
	}{{"a.weight", 1, []float32{1, float32(math.NaN())}}}
	neg := []struct {
		name  string
		ncall int32
		vals  []float32
	}{{"a.weight", 1, []float32{1, -2}}}
	cases := []struct {
		path, want string
	}{
		{filepath.Join(dir, "absent"), "no such file"},
		{write("empty", nil), "too short"},
		{write("zero", []byte{0, 0, 0, 0}), "no data"},
		{write("cut", full[:len(full)-3]), "bad value count"},
		{write("nan", legacyFile(nan, nil)), "non-finite"},
		{write("neg", legacyFile(neg, nil)), "negative"},
		{imatrixGGUF(t, false, func(b *gguf.Builder) {
			b.AddTensor("x.weight.in_sum2", gguf.TensorF32, []uint64{2, 1}, f32bytes(1, 2))
			b.AddTensor("x.weight.counts", gguf.TensorF32, []uint64{1, 1}, f32bytes(1))
		}), "missing imatrix metadata"},
		{imatrixGGUF(t, true, func(b *gguf.Builder) {
			b.AddTensor("x.weight.in_sum2", gguf.TensorF32, []uint64{2, 1}, f32bytes(1, 2))
		}), "mismatched sums and counts for x.weight"},
		{imatrixGGUF(t, true, func(b *gguf.Builder) {
			b.AddTensor("x.weight.in_sum2", gguf.TensorF16, []uint64{2, 1}, []byte{0, 60, 0, 60})
			b.AddTensor("x.weight.counts", gguf.TensorF32, []uint64{1, 1}, f32bytes(1))
		}), "must be F32"},
		{imatrixGGUF(t, true, func(b *gguf.Builder) {
			b.AddTensor("x.weight.in_sum2", gguf.TensorF32, []uint64{3, 1}, f32bytes(1, 2, 3))
			b.AddTensor("x.weight.counts", gguf.TensorF32, []uint64{1, 2}, f32bytes(1, 1))
		}), "not a whole number of rows"},
	}
	for _, c := range cases {
		_, err := LoadImatrix(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", filepath.Base(c.path), err, c.want)
		}
	}
}

func TestImatrixFilterAndForTensor(t *testing.T) {
	m := &Imatrix{Entries: map[string][]float32{
		"blk.0.attn_v.weight": {1, 1}, "blk.0.ffn_up.weight": {1, 1}, "blk.0.ffn_up_exps.weight": {1, 2, 3, 4},
		"token_embd.weight": {1, 1, 1},
	}}
	m.Filter([]string{"ffn_"}, nil)
	if len(m.Entries) != 2 {
		t.Errorf("include ffn_: %v", m.Entries)
	}
	m.Filter(nil, []string{"exps"})
	if _, ok := m.Entries["blk.0.ffn_up.weight"]; !ok || len(m.Entries) != 1 {
		t.Errorf("exclude exps: %v", m.Entries)
	}
	m.Entries["blk.0.ffn_up_exps.weight"] = []float32{1, 2, 3, 4}
	m.Entries["token_embd.weight"] = []float32{1, 1, 1}
	// per expert: 2 columns x 2 experts
	if w, err := m.forTensor(gguf.TensorInfo{Name: "blk.0.ffn_up_exps.weight", Shape: []uint64{2, 5, 2}}); err != nil || len(w) != 4 {
		t.Errorf("experts: %v %v", w, err)
	}
	if _, err := m.forTensor(gguf.TensorInfo{Name: "blk.0.ffn_up.weight", Shape: []uint64{4, 5}}); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Errorf("wrong size: %v", err)
	}
	// llama.cpp's exception: the token embeddings quantize without it
	if w, err := m.forTensor(gguf.TensorInfo{Name: "token_embd.weight", Shape: []uint64{4, 5}}); err != nil || w != nil {
		t.Errorf("token_embd of the wrong size: %v %v", w, err)
	}
	if w, err := m.forTensor(gguf.TensorInfo{Name: "blk.0.attn_q.weight", Shape: []uint64{4, 5}}); err != nil || w != nil {
		t.Errorf("absent: %v %v", w, err)
	}
}

func TestImatrixKeys(t *testing.T) {
	long := "/" + strings.Repeat("d", 200) + "/im.gguf"
	kvs := imatrixKVs(&Imatrix{Path: long, Datasets: []string{"a", "b"}, ChunkCount: 3, Entries: map[string][]float32{"x": nil, "y": nil}})
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	if strings.Join(keys, " ") != "quantize.imatrix.file quantize.imatrix.dataset quantize.imatrix.entries_count quantize.imatrix.chunks_count" {
		t.Errorf("keys %v", keys)
	}
	if f := kvs[0].Value.(string); len(f) != 127 || !strings.HasPrefix(long, f) {
		t.Errorf("file %q: llama-quantize keeps the first 127 bytes", f)
	}
	if kvs[2].Value != uint32(2) || kvs[3].Value != uint32(3) {
		t.Errorf("counts %v %v", kvs[2].Value, kvs[3].Value)
	}
	kvs = imatrixKVs(&Imatrix{Path: "im", Entries: map[string][]float32{"x": nil}})
	if len(kvs) != 2 {
		t.Errorf("no dataset, no chunk count: %v", kvs)
	}
}

func TestTensorTypeOverride(t *testing.T) {
	o, err := ParseTensorTypeOverride(`BLK\.1\.ffn_(up|down)=Q5_K`)
	if err != nil || o.Type != gguf.TensorQ5K || !o.re.MatchString("blk.1.ffn_down.weight") || o.re.MatchString("blk.11.ffn_down.weight") {
		t.Errorf("override %+v %v", o, err)
	}
	for s, want := range map[string]string{
		"attn_v": "want PATTERN=TYPE", "=q8_0": "missing tensor name", "attn_v=": "missing quantization type",
		"attn_v=q9_9": "unknown tensor type", "attn_(v=q8_0": "bad pattern",
	} {
		if _, err := ParseTensorTypeOverride(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", s, err, want)
		}
	}
}
