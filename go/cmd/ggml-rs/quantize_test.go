package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ggmlrs/gguf"
	"ggmlrs/internal/testfile"
)

// quantizeGolden: sha256 of `ggml-rs quantize` outputs on the generated
// models, each checked equal byte for byte to llama.cpp's
// llama_model_quantize (tools/llama-ref quantize, same flags) when it was
// written here; `make parity` compares every model and type again.
var quantizeGolden = []struct {
	model string
	args  []string
	sha   string
}{
	{"llama-small-f16", []string{"-type", "Q4_K_M"}, "1293451c2ec7c6831fa3332cd5bd776ed1d48a30df03db12622dbbb2137e745c"},
	{"qwen3-small-f16", []string{"-type", "Q8_0"}, "74148fed39fb3d0c54b98ebdf166b62696f6d390e68d592e0a43a60b0af24fb7"},
	{"gpt-oss-small-f16", []string{"-type", "Q4_0"}, "e657484c8a9556c89dd9d1778205681458c9b2da9176c8bf688efd83e27fe44e"},
	{"qwen3moe-small-f16", []string{"-type", "Q3_K_M"}, "d13124c900f7c748498cedc521b1f2ff1c9d8987fd7f166bbdefae2afb37436a"},
	{"qwen3next-small-f16", []string{"-type", "Q5_K_S"}, "399ad7f80a9dbe7d4a29af44309b465b9f3c21e28d28d4e656cf54cd0427f687"},
	{"qwen35-small-f32", []string{"-type", "IQ4_XS"}, "43f962e1b445bb42690ea623b1f2df213c4706d70557efbb30509d8d7cf44be0"},
	{"qwen35moe-small-f16", []string{"-type", "Q6_K"}, "f95680959134499c6aa4d4ad2cf1dc1e1c4a52c8fe45c103c9e693fb82126f0d"},
	{"llama-small-f16", []string{"-type", "Q2_K", "-pure"}, "c3db0427e1263536a931ae009a79e729d9e883a44ca07eb34daf93b94c056174"},
	{"qwen35-small-f16", []string{"-type", "Q4_K_M", "-output-type", "q4_0", "-token-embedding-type", "q8_0"}, "4113fcd8519a569cf6c4b06a67d3a5ba067c8b23b2feafbbfeb35a27d4a97a01"},
	{"qwen3next-small-f32", []string{"-type", "BF16"}, "f664edd34decab317bf1c7c89caece94c5c3c269586485bd4dfc5f2ab92ee586"},
}

// quantizeModel: a generated model; in CI (CI=true) a missing one fails
// even when GGML_RS_MODELS is not set.
func quantizeModel(t *testing.T, name string) string {
	t.Helper()
	if os.Getenv("CI") == "true" && os.Getenv("GGML_RS_MODELS") == "" {
		t.Setenv("GGML_RS_MODELS", "../../../.cache/models")
	}
	return modelPath(t, name)
}

func TestQuantizeMatchesLlamaCpp(t *testing.T) {
	dir := t.TempDir()
	for _, c := range quantizeGolden {
		name := c.model + " " + strings.Join(c.args, " ")
		t.Run(name, func(t *testing.T) {
			in := quantizeModel(t, c.model)
			out := filepath.Join(dir, "out.gguf")
			args := append([]string{"quantize", "-q", "-threads", "2"}, c.args...)
			if status, _, stderr := capture(t, append(args, in, out)...); status != 0 {
				t.Fatalf("status %d: %s", status, stderr)
			}
			if got := testfile.SHA256(t, out); got != c.sha {
				t.Errorf("sha256 %s, want %s (llama.cpp's output)", got, c.sha)
			}
		})
	}
}

// badModel writes a small F16 llama model with a NaN in its last weight,
// which the quantizer rejects after it has written earlier tensors.
func badModel(t *testing.T, dir string) string {
	t.Helper()
	b := gguf.NewBuilder()
	for _, kv := range []gguf.KV{{Key: "general.architecture", Value: "llama"}, {Key: "llama.block_count", Value: uint32(1)}} {
		if err := b.Add(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	ok := make([]byte, 2*64*4)
	bad := make([]byte, 2*64*4)
	nan := gguf.Float16(float32(math.NaN()))
	bad[10], bad[11] = byte(nan), byte(nan>>8)
	if err := b.AddTensor("blk.0.attn_q.weight", gguf.TensorF16, []uint64{64, 4}, ok); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTensor("blk.0.ffn_up.weight", gguf.TensorF16, []uint64{64, 4}, bad); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "bad.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestQuantizeBadInput(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "model.txt")
	if err := os.WriteFile(notGGUF, []byte("not a model, just some text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nan := badModel(t, dir)
	out := filepath.Join(dir, "out.gguf")
	for _, c := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"unknown type", []string{"-type", "Q9_K", nan, out}, 2, `unknown file type "Q9_K"`},
		{"unknown output type", []string{"-output-type", "q7", nan, out}, 2, `unknown tensor type "q7"`},
		{"one argument", []string{nan}, 2, "takes IN.gguf and OUT.gguf"},
		{"output is input", []string{nan, nan}, 1, "is the input"},
		{"output is input by another name", []string{nan, filepath.Join(dir, ".", "x", "..", "bad.gguf")}, 1, "is the input"},
		{"not a GGUF", []string{notGGUF, out}, 1, "not a GGUF file"},
		{"missing input", []string{filepath.Join(dir, "none.gguf"), out}, 1, "no such file"},
		{"unwritable output directory", []string{"-type", "F16", nan, filepath.Join(dir, "no-such-dir", "out.gguf")}, 1, "cannot write"},
		{"a NaN half way", []string{"-type", "Q8_0", nan, out}, 1, "tensor blk.0.ffn_up.weight"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, _ := os.ReadFile(nan)
			status, _, stderr := capture(t, append([]string{"quantize", "-q"}, c.args...)...)
			if status != c.status || !strings.Contains(stderr, c.want) {
				t.Fatalf("status %d, stderr %q; want status %d and %q", status, stderr, c.status, c.want)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); c.status == 1 && n != 0 {
				t.Errorf("error is %d lines: %q", n+1, stderr)
			}
			after, _ := os.ReadFile(nan)
			if string(before) != string(after) {
				t.Errorf("the input changed")
			}
			entries, _ := os.ReadDir(dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if strings.Join(names, " ") != "bad.gguf model.txt" {
				t.Errorf("directory holds %v after a failed run (want only the inputs: no partial output)", names)
			}
		})
	}
}
