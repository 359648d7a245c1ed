package quantize

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

func TestBlockIndexAndOrder(t *testing.T) {
	for _, c := range []struct {
		name string
		l    int
		ok   bool
	}{{"blk.12.attn_q.weight", 12, true}, {"blk.3x", 3, true}, {"blk.x.weight", 0, false}, {"output.weight", 0, false}} {
		l, ok := blockIndex(c.name)
		if l != c.l || ok != c.ok {
			t.Errorf("blockIndex(%q) = %d, %v; want %d, %v", c.name, l, ok, c.l, c.ok)
		}
	}
	ts := []gguf.TensorInfo{{Name: "blk.10.a"}, {Name: "blk.2.b"}, {Name: "token_embd.weight"}, {Name: "blk.2.a"}, {Name: "output.weight"}}
	sortTensors(ts)
	var got []string
	for _, t := range ts {
		got = append(got, t.Name)
	}
	want := "output.weight token_embd.weight blk.2.a blk.2.b blk.10.a"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s (non-layer tensors first, layers numerically, then by name)", got, want)
	}
}

func TestFallback(t *testing.T) {
	for _, c := range []struct {
		ncols    uint64
		in, want gguf.TensorType
		fell     bool
	}{
		{256, gguf.TensorQ4K, gguf.TensorQ4K, false},
		{128, gguf.TensorQ4K, gguf.TensorQ5_0, true},
		{128, gguf.TensorQ5K, gguf.TensorQ5_1, true},
		{128, gguf.TensorQ6K, gguf.TensorQ8_0, true},
		{128, gguf.TensorQ2K, gguf.TensorQ4_0, true},
		{128, gguf.TensorIQ4XS, gguf.TensorIQ4NL, true},
		{100, gguf.TensorQ6K, gguf.TensorF16, true},
		{100, gguf.TensorQ4_0, gguf.TensorF16, true},
	} {
		got, fell, err := fallback(gguf.TensorInfo{Name: "x", Shape: []uint64{c.ncols, 4}}, c.in)
		if err != nil || got != c.want || fell != c.fell {
			t.Errorf("fallback(%d, %s) = %s, %v, %v; want %s, %v", c.ncols, c.in, got, fell, err, c.want, c.fell)
		}
	}
}

func TestParseFileType(t *testing.T) {
	for s, want := range map[string]FileType{"q4_k_m": MostlyQ4KM, "Q4_K": MostlyQ4KM, "F16": MostlyF16, "iq4_xs": MostlyIQ4XS, "bf16": MostlyBF16} {
		if got, err := ParseFileType(s); err != nil || got != want {
			t.Errorf("ParseFileType(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParseFileType("Q9_K"); err == nil || !strings.Contains(err.Error(), "unknown file type") {
		t.Errorf("ParseFileType(Q9_K): %v", err)
	}
	if typ, err := ParseTensorType("Q6_k"); err != nil || typ != gguf.TensorQ6K {
		t.Errorf("ParseTensorType(Q6_k) = %v, %v", typ, err)
	}
}

func TestRulesKeepAndMix(t *testing.T) {
	for _, c := range []struct {
		name  string
		shape []uint64
		keep  bool
	}{
		{"blk.0.attn_norm.weight", []uint64{256}, true},
		{"blk.0.ffn_gate_inp.weight", []uint64{256, 8}, true},
		{"blk.0.ssm_conv1d.weight", []uint64{4, 256}, true},
		{"blk.0.attn_q.bias", []uint64{256, 2}, true},
		{"blk.0.attn_q.weight", []uint64{256, 256, 1}, false},
		{"blk.0.attn_q.weight", []uint64{256, 1}, true}, // ggml_n_dims 1
	} {
		if got := !allowsQuantization("llama", gguf.TensorInfo{Name: c.name, Shape: c.shape}); got != c.keep {
			t.Errorf("%s %v kept = %v, want %v", c.name, c.shape, got, c.keep)
		}
	}
	// Q4_K_M: attn_v and ffn_down of the first/last eighth and every third
	// layer get Q6_K; the output Q6_K.
	c := &chooser{hp: hparams{arch: "llama", nLayer: 8}, ftype: MostlyQ4KM, tied: false, nAttnV: 8}
	var got []string
	for i := 0; i < 8; i++ {
		typ, err := c.typeFor(gguf.TensorInfo{Name: "blk.x.attn_v.weight", Shape: []uint64{256, 256}}, catAttnV, gguf.TensorQ4K)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, typ.String())
	}
	if want := "q6_K q4_K q4_K q6_K q4_K q4_K q6_K q6_K"; strings.Join(got, " ") != want {
		t.Errorf("attn_v types %v, want %s", got, want)
	}
	if typ, _ := c.typeFor(gguf.TensorInfo{Name: "output.weight", Shape: []uint64{256, 64}}, catOutput, gguf.TensorQ4K); typ != gguf.TensorQ6K {
		t.Errorf("output.weight %s, want q6_K", typ)
	}
}

// model writes a small llama-like F16 model.
func model(t *testing.T, dir string) string {
	t.Helper()
	b := gguf.NewBuilder()
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: "llama"}, {Key: "general.file_type", Value: uint32(1)},
		{Key: "llama.block_count", Value: uint32(2)}, {Key: "llama.attention.head_count", Value: uint32(4)},
		{Key: "llama.attention.head_count_kv", Value: uint32(2)}, {Key: "tokenizer.ggml.tokens", Value: []string{"a", "b"}},
	} {
		if err := b.Add(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(1))
	f16 := func(n int) []byte {
		out := make([]byte, 2*n)
		for i := 0; i < n; i++ {
			h := gguf.Float16(float32(rng.NormFloat64()))
			out[2*i], out[2*i+1] = byte(h), byte(h>>8)
		}
		return out
	}
	add := func(name string, typ gguf.TensorType, shape []uint64, data []byte) {
		if err := b.AddTensor(name, typ, shape, data); err != nil {
			t.Fatal(err)
		}
	}
	add("token_embd.weight", gguf.TensorF16, []uint64{256, 97}, f16(256*97))
	for l := 0; l < 2; l++ {
		p := "blk." + string(rune('0'+l)) + "."
		add(p+"attn_norm.weight", gguf.TensorF32, []uint64{256}, make([]byte, 4*256))
		add(p+"attn_v.weight", gguf.TensorF16, []uint64{256, 128}, f16(256*128))
		add(p+"ffn_down.weight", gguf.TensorF16, []uint64{96, 256}, f16(96*256))
	}
	path := filepath.Join(dir, "in.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestThreadsDoNotChangeTheOutput(t *testing.T) {
	dir := t.TempDir()
	in := model(t, dir)
	var outs [][]byte
	for _, threads := range []int{1, 3, 8} {
		out := filepath.Join(dir, "out.gguf")
		if err := Run(in, out, Options{FileType: MostlyQ4KM, Threads: threads}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, data)
	}
	for i := 1; i < len(outs); i++ {
		if !bytes.Equal(outs[0], outs[i]) {
			t.Fatalf("output %d differs from the single-threaded one", i)
		}
	}
	g, err := gguf.Open(filepath.Join(dir, "out.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := g.Get("general.file_type"); v != uint32(MostlyQ4KM) {
		t.Errorf("general.file_type %v", v)
	}
	if last := g.KVs[len(g.KVs)-1]; last.Key != "general.file_type" {
		t.Errorf("last key %s, want general.file_type (moved to the end as llama.cpp does)", last.Key)
	}
	want := map[string]gguf.TensorType{
		"token_embd.weight":      gguf.TensorQ6K, // tied: the output rule
		"blk.0.attn_norm.weight": gguf.TensorF32,
		"blk.0.attn_v.weight":    gguf.TensorQ4K,  // use_more_bits(0, 2) is false
		"blk.1.attn_v.weight":    gguf.TensorQ6K,  // the last eighth
		"blk.0.ffn_down.weight":  gguf.TensorQ5_0, // Q4_K, 96 columns: fallback
		"blk.1.ffn_down.weight":  gguf.TensorQ8_0, // Q6_K, 96 columns: fallback
	}
	for name, typ := range want {
		if ti, ok := g.Tensor(name); !ok || ti.Type != typ {
			t.Errorf("%s: %v, want %s", name, ti.Type, typ)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("files left in the directory: %v", entries)
	}
}

// failingFile fails its writes once limit bytes are written, as a full
// disk does.
type failingFile struct {
	*os.File
	limit int
}

func (f *failingFile) Write(b []byte) (int, error) {
	if len(b) > f.limit {
		n, _ := f.File.Write(b[:f.limit])
		f.limit = 0
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.limit -= len(b)
	return f.File.Write(b)
}

// writeInput writes a one-block llama GGUF holding the named F32 tensors,
// 256 x rows each, and returns its path.
func writeInput(t *testing.T, rows uint64, names ...string) string {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in.gguf")
	b := gguf.NewBuilder()
	b.Add("general.architecture", "llama")
	b.Add("llama.block_count", uint32(1))
	w := make([]byte, 4*256*rows)
	for i := 0; i < len(w); i += 4 {
		binary.LittleEndian.PutUint32(w[i:], math.Float32bits(float32(i%97)/97))
	}
	for _, n := range names {
		b.AddTensor(n, gguf.TensorF32, []uint64{256, rows}, w)
	}
	if err := b.WriteFile(in); err != nil {
		t.Fatal(err)
	}
	return in
}

// TestFullDisk: a write that fails part way (no space left) is the error,
// and neither the output nor the temporary file is left behind.
func TestFullDisk(t *testing.T) {
	in := writeInput(t, 256, "blk.0.attn_q.weight", "blk.0.ffn_up.weight")
	dir := t.TempDir()
	old := createOutput
	defer func() { createOutput = old }()
	createOutput = func(d, pattern string) (outputFile, error) {
		f, err := os.CreateTemp(d, pattern)
		if err != nil {
			return nil, err
		}
		return &failingFile{File: f, limit: 50000}, nil
	}
	out := filepath.Join(dir, "out.gguf")
	err := Run(in, out, Options{FileType: MostlyQ8_0, Threads: 2})
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("error %v, want the write's ENOSPC", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestOutputMode: a new output gets 0666 less the umask, as a file that
// open(2) creates (not the temporary file's 0600); a replaced output keeps
// its own mode.
func TestOutputMode(t *testing.T) {
	in := writeInput(t, 4, "blk.0.attn_q.weight")
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	if got := umask(); got != 0o027 {
		t.Fatalf("umask() = %o, want 027", got)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	if err := Run(in, out, Options{FileType: MostlyQ8_0, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("new output: mode %v (%v), want 0640", st.Mode().Perm(), err)
	}
	if err := os.Chmod(out, 0o604); err != nil {
		t.Fatal(err)
	}
	if err := Run(in, out, Options{FileType: MostlyQ8_0, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o604 {
		t.Fatalf("replaced output: mode %v (%v), want its own 0604", st.Mode().Perm(), err)
	}
}
