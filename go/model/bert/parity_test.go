package bert_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
	"github.com/ggml-rs/ggml-rs/go/internal/testmodel"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
)

// embedTolerance bounds |ours - llama.cpp's| per element of the
// normalised embeddings (elements of about n_embd^-1/2 = 0.09 here), about
// 1e-3 of an element as the logits' 2e-3 is of their spread, for CPUs
// other than the golden files'. Measured here: at most 9.2e-7 with the same
// flash-attention setting. Flash attention without llama.cpp's F16 keys and
// values was 2.6e-4 to 4.7e-3 away.
const embedTolerance = 1e-4

// TestNomicBERTParity holds the Nomic BERT encoders (nomic-bert and its
// MoE variant) to llama.cpp's pooled embeddings (scripts/parity.py
// embed-golden: tools/llama-ref embed) on the generated models in F16,
// Q8_0 and Q4_0, sequences of 3 to 130 tokens, flash attention on and off.
func TestNomicBERTParity(t *testing.T) {
	for _, name := range []string{
		"nomic-bert-small-f16", "nomic-bert-small-q8_0", "nomic-bert-small-q4_0",
		"nomic-bert-moe-small-f16", "nomic-bert-moe-small-q8_0", "nomic-bert-moe-small-q4_0",
	} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile("../../../tests/golden/embed_" + name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				ModelSHA256 string      `json:"model_sha256"`
				Sequences   [][]int32   `json:"sequences"`
				FAOn        [][]float64 `json:"fa_on"`
				FAOff       [][]float64 `json:"fa_off"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Sequences) < 4 || len(doc.FAOn) != len(doc.Sequences) || len(doc.FAOff) != len(doc.Sequences) {
				t.Fatalf("golden file: %d sequences, %d and %d embeddings", len(doc.Sequences), len(doc.FAOn), len(doc.FAOff))
			}
			path := testmodel.Path(t, name)
			if sum := testfile.SHA256(t, path); sum != doc.ModelSHA256 {
				t.Fatalf("%s has SHA-256 %s, the golden file was made from %s", path, sum, doc.ModelSHA256)
			}
			for _, c := range []struct {
				fa   string
				mode ml.FlashAttentionType
				want [][]float64
			}{{"on", ml.FlashAttentionEnabled, doc.FAOn}, {"off", ml.FlashAttentionDisabled, doc.FAOff}} {
				t.Run("fa-"+c.fa, func(t *testing.T) {
					b, err := ml.NewBackend(path, ml.BackendParams{AllocMemory: true, NumThreads: 2, FlashAttention: c.mode})
					if err != nil {
						t.Fatal(err)
					}
					defer b.Close()
					if err := b.Load(context.Background(), nil); err != nil {
						t.Fatal(err)
					}
					m, err := bert.New(b)
					if err != nil {
						t.Fatal(err)
					}
					got, err := m.Embed(doc.Sequences)
					if err != nil {
						t.Fatal(err)
					}
					worst := 0.0
					for i, want := range c.want {
						var n float64
						for _, x := range want {
							n += x * x
						}
						n = math.Sqrt(n)
						if len(got[i]) != len(want) {
							t.Fatalf("sequence %d: %d values, llama.cpp %d", i, len(got[i]), len(want))
						}
						for j, x := range want {
							worst = max(worst, math.Abs(float64(got[i][j])-x/n))
						}
					}
					t.Logf("max |ours - llama.cpp| %.2e over %d sequences (normalised)", worst, len(c.want))
					if worst > embedTolerance {
						t.Errorf("max |ours - llama.cpp| %.2e, at most %.0e", worst, embedTolerance)
					}
				})
			}
		})
	}
}
