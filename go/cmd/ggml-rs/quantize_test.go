package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
)

// quantizeGolden: sha256 of `ggml-rs quantize` outputs on the generated
// models, each checked equal byte for byte to llama.cpp's
// llama_model_quantize (tools/llama-ref quantize, or llama-quantize with
// the same flags; the imatrix cases: llama-quantize --imatrix) when it was
// written here; `make parity` compares every model and type again.
var quantizeGolden = []struct {
	model   string
	args    []string
	sha     string
	imatrix string // a fixture of make (scripts/gen-imatrix.py), beside the model
}{
	{"llama-small-f16", []string{"-type", "Q4_K_M"}, "1293451c2ec7c6831fa3332cd5bd776ed1d48a30df03db12622dbbb2137e745c", ""},
	{"qwen3-small-f16", []string{"-type", "Q8_0"}, "74148fed39fb3d0c54b98ebdf166b62696f6d390e68d592e0a43a60b0af24fb7", ""},
	{"gpt-oss-small-f16", []string{"-type", "Q4_0"}, "e657484c8a9556c89dd9d1778205681458c9b2da9176c8bf688efd83e27fe44e", ""},
	{"qwen3moe-small-f16", []string{"-type", "Q3_K_M"}, "d13124c900f7c748498cedc521b1f2ff1c9d8987fd7f166bbdefae2afb37436a", ""},
	{"qwen3next-small-f16", []string{"-type", "Q5_K_S"}, "399ad7f80a9dbe7d4a29af44309b465b9f3c21e28d28d4e656cf54cd0427f687", ""},
	{"qwen35-small-f32", []string{"-type", "IQ4_XS"}, "43f962e1b445bb42690ea623b1f2df213c4706d70557efbb30509d8d7cf44be0", ""},
	{"qwen35moe-small-f16", []string{"-type", "Q6_K"}, "f95680959134499c6aa4d4ad2cf1dc1e1c4a52c8fe45c103c9e693fb82126f0d", ""},
	{"llama-small-f16", []string{"-type", "Q2_K", "-pure"}, "c3db0427e1263536a931ae009a79e729d9e883a44ca07eb34daf93b94c056174", ""},
	{"qwen35-small-f16", []string{"-type", "Q4_K_M", "-output-type", "q4_0", "-token-embedding-type", "q8_0"}, "4113fcd8519a569cf6c4b06a67d3a5ba067c8b23b2feafbbfeb35a27d4a97a01", ""},
	{"qwen3next-small-f32", []string{"-type", "BF16"}, "f664edd34decab317bf1c7c89caece94c5c3c269586485bd4dfc5f2ab92ee586", ""},
	{"llama-small-f16", []string{"-type", "IQ3_S", "-tensor-type", "attn_v=q8_0"}, "029e9df55e2befac24003ad6186dd2d2bea96373eeb5d72c43dccfb55f35acf4", ""},
	{"gpt-oss-small-f16", []string{"-type", "MXFP4_MOE"}, "daf53087a2659c885cc3cce1d253b2923752e1350a1fbafffecf7aa7ced5eb6d", ""},
	{"qwen3next-small-f16", []string{"-type", "TQ2_0"}, "9ebac5301b8c6b96e385d622b5ce1e877ab4b41fe8cd7b1928ecac66f19eec4d", ""},
	{"deepseek2-small-f16", []string{"-type", "Q4_K_M"}, "528097b323ff1416b27a308d1275b03a3dc78ede95703ca596a9cf41f2c259b7", ""},
	{"glm4moelite-small-f16", []string{"-type", "Q3_K_M"}, "ecf6f1e8ebed7e218111667c0ceba6b61ad92ecb7454a3fa729c23a014deee6c", ""},
	// with an importance matrix
	{"llama-small-f16", []string{"-type", "IQ2_XXS"}, "d82aed8602086ae1834ff9f23e74775380fb05cf67a63d4a1cff22e777730880", "imatrix.gguf"},
	{"llama-small-f16", []string{"-type", "IQ3_XXS"}, "249e8e26f5ee0ac6e9968cde6259cb4422fc5e8913ebb10885f33be6078f0d93", "imatrix.gguf"},
	{"llama-small-f16", []string{"-type", "IQ1_M"}, "f1bc62a9ecdf9ff277c84b56669351f6d83366f3cf51998402e01e32bac852c3", "imatrix.gguf"},
	{"qwen3moe-small-f16", []string{"-type", "Q4_0"}, "a6dfb9ee304b7a8269dc21c6abd3a514a2b908ea9a4918f1d3f43da87be509f4", "imatrix.gguf"},
	{"qwen3moe-small-f16", []string{"-type", "IQ2_S"}, "90ef5336edff07f2555dd69d9fd78b938240d3097fe05142b4f1964edf63f44d", "imatrix.gguf"},
	{"qwen35-small-f16", []string{"-type", "Q5_0"}, "3707f1de771b605a1be42bea8fd046645de7a16e79cbf29f0912280b3278f264", "imatrix.gguf"},
	{"qwen35-small-f16", []string{"-type", "Q2_K_S"}, "6f3ce3b5eb9e5a54ab9371df018cab408e139e38584fbeb00e281f8226c669d5", "imatrix.gguf"},
	{"qwen3-small-f16", []string{"-type", "Q4_K_M"}, "cca8ff418f5cefd138fafe34ead0fd5f4f5af0171d55ab771e26fafb0387b2ab", "imatrix.dat"},
}

// imatrixFixtures: sha256 of the generated importance matrices, so that a
// changed generator fails here by name rather than as a changed output.
var imatrixFixtures = map[string]string{
	"llama-small-f16.imatrix.gguf":    "c2b7277aa774c171d87c28b927aa3ecda5b7d33ffa7bbce411180280f720d36c",
	"qwen3moe-small-f16.imatrix.gguf": "c8285cf5266dd50e9fb5abc701606710ca44582ef8369bb9ab618b514f3eb7e1",
	"qwen35-small-f16.imatrix.gguf":   "7b5e7f749454185110530a84dad27a952042fae9b5532b3dd2db19b910aafe98",
	"qwen3-small-f16.imatrix.dat":     "c942c4c60bbe7a6142e1c403a4308c98a0ce1ab2c61b53733933f43f2c89fead",
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
		if c.imatrix != "" {
			name += " -imatrix " + c.imatrix
		}
		t.Run(name, func(t *testing.T) {
			in, err := filepath.Abs(quantizeModel(t, c.model))
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out.gguf")
			args := append([]string{"quantize", "-q", "-threads", "2"}, c.args...)
			if c.imatrix != "" {
				// The path is written to the output (quantize.imatrix.file):
				// the same relative name as the reference was given.
				fixture := strings.TrimSuffix(in, ".gguf") + "." + c.imatrix
				if want, got := imatrixFixtures[filepath.Base(fixture)], testfile.SHA256(t, fixture); got != want {
					t.Fatalf("%s has sha256 %s, want %s: scripts/gen-imatrix.py or its numpy changed (rm it; make test rewrites it)", fixture, got, want)
				}
				data, err := os.ReadFile(fixture)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, c.imatrix), data, 0o644); err != nil {
					t.Fatal(err)
				}
				wd, err := os.Getwd()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Chdir(dir); err != nil {
					t.Fatal(err)
				}
				defer os.Chdir(wd)
				args = append(args, "-imatrix", c.imatrix)
			}
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
	// importance matrices elsewhere (dir must hold only the inputs)
	imdir := t.TempDir()
	short := filepath.Join(imdir, "short.dat") // 32 values for a 64-column tensor
	var legacy bytes.Buffer
	name := "blk.0.attn_q.weight"
	binary.Write(&legacy, binary.LittleEndian, []int32{1, int32(len(name))})
	legacy.WriteString(name)
	binary.Write(&legacy, binary.LittleEndian, []int32{1, 32})
	binary.Write(&legacy, binary.LittleEndian, make([]float32, 32))
	if err := os.WriteFile(short, legacy.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
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
		{"another model's imatrix", []string{"-type", "Q4_0", "-imatrix", short, nan, out}, 1, "the imatrix has 32 values for blk.0.attn_q.weight, which needs 64"},
		{"not an imatrix", []string{"-type", "Q4_0", "-imatrix", notGGUF, nan, out}, 1, "imatrix " + notGGUF},
		{"missing imatrix", []string{"-type", "Q4_0", "-imatrix", filepath.Join(imdir, "none"), nan, out}, 1, "no such file"},
		{"weights filter without an imatrix", []string{"-include-weights", "ffn", nan, out}, 2, "need -imatrix"},
		{"both weights filters", []string{"-imatrix", short, "-include-weights", "a", "-exclude-weights", "b", nan, out}, 2, "cannot be used together"},
		{"bad tensor type", []string{"-tensor-type", "attn_q", nan, out}, 2, "want PATTERN=TYPE"},
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

// TestQuantizeNeedsImatrix: the file types that are garbage without an
// importance matrix refuse to run without one, as llama-quantize does,
// and one of another model is refused by name.
func TestQuantizeNeedsImatrix(t *testing.T) {
	in := quantizeModel(t, "llama-small-f16")
	other := strings.TrimSuffix(quantizeModel(t, "qwen3moe-small-f16"), ".gguf") + ".imatrix.gguf"
	out := filepath.Join(t.TempDir(), "out.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-type", "IQ2_XXS"}, "IQ2_XXS needs an importance matrix (-imatrix): tensor blk.0.attn_k.weight would be iq2_xxs"},
		{[]string{"-type", "Q2_K_S"}, "Q2_K_S needs an importance matrix"},
		{[]string{"-type", "IQ2_M", "-imatrix", other}, "an imatrix of another model?"},
	} {
		status, _, stderr := capture(t, append(append([]string{"quantize", "-q"}, c.args...), in, out)...)
		if status != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: status %d, %q; want 1 and %q", c.args, status, stderr, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", c.args, out)
		}
	}
}
