package llama

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/grammar"
	"github.com/ggml-rs/ggml-rs/go/grammar/schema"
	"github.com/ggml-rs/ggml-rs/go/internal/testmodel"
)

var pieces = []string{"{", "}", "\"", "a", "b", ":", " ", "1", "2", "\"a\"", "true", "{\"", "</s>"}

const eos = 12

// The grammar as Ollama's sample package drives it (ids and pieces, Apply
// on every candidate, Accept of the pick) allows exactly what a
// grammar.State allows, step after step, on random walks.
func TestGrammarAsOllamaDrivesIt(t *testing.T) {
	text := string(SchemaToGrammar([]byte(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"required":["a"]}`)))
	if text == "" {
		t.Fatal("SchemaToGrammar refused a valid schema")
	}
	want, _ := schema.ToGrammar([]byte(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"required":["a"]}`))
	if text != want {
		t.Fatalf("SchemaToGrammar differs from schema.ToGrammar")
	}
	ids := make([]uint32, len(pieces))
	bs := make([][]byte, len(pieces))
	for i, p := range pieces {
		ids[i], bs[i] = uint32(i), []byte(p)
	}
	g0, err := grammar.Compile(text, "root", nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2))
	for walk := 0; walk < 50; walk++ {
		g := NewGrammar(text, ids, pieces, []int32{eos})
		if g == nil {
			t.Fatal("NewGrammar refused the grammar")
		}
		ref := grammar.NewState(g0, grammar.NewVocab(bs, []int32{eos}))
		for step := 0; step < 30; step++ {
			// All candidates (the mask path) or a few (token by token).
			n := len(pieces)
			if step%2 == 1 {
				n = 5
			}
			perm := rng.Perm(len(pieces))[:n]
			tds := make([]TokenData, n)
			for i, id := range perm {
				tds[i] = TokenData{ID: int32(id), Logit: 1}
			}
			g.Apply(tds)
			var allowed []int32
			for _, td := range tds {
				ok, err := ref.Allows(td.ID)
				if err != nil {
					t.Fatal(err)
				}
				if ok != !math.IsInf(float64(td.Logit), -1) {
					t.Fatalf("walk %d step %d: token %q: reference allows %v, Apply left %v", walk, step, pieces[td.ID], ok, td.Logit)
				}
				if ok {
					allowed = append(allowed, td.ID)
				}
			}
			if len(allowed) == 0 {
				continue
			}
			pick := allowed[rng.Intn(len(allowed))]
			g.Accept(pick)
			if err := ref.Accept(pick); err != nil {
				t.Fatal(err)
			}
			if pick == eos {
				break
			}
		}
		g.Free()
	}
	if SchemaToGrammar([]byte(`{"type":`)) != nil || SchemaToGrammar([]byte(`{"$ref":"#/nowhere"}`)) != nil {
		t.Fatal("SchemaToGrammar accepted an invalid schema")
	}
	if NewGrammar(`root ::= undefined`, ids, pieces, nil) != nil {
		t.Fatal("NewGrammar accepted a grammar with an undefined rule")
	}
}

// The llama.cpp engine's constructors say it is not there; GetModelArch
// reads the file.
func TestNoLlamaEngine(t *testing.T) {
	path := testmodel.Path(t, "qwen3-small-q8_0")
	if arch, err := GetModelArch(path); err != nil || arch != "qwen3" {
		t.Fatalf("GetModelArch: %q, %v", arch, err)
	}
	if _, err := GetModelArch(path + ".missing"); err == nil {
		t.Fatal("GetModelArch of a missing file")
	}
	if _, err := LoadModelFromFile(path, ModelParams{VocabOnly: true}); !errors.Is(err, ErrNoLlamaEngine) {
		t.Fatalf("LoadModelFromFile: %v", err)
	}
	if _, err := NewContextWithModel(nil, NewContextParams(512, 512, 1, 2, 0, "")); !errors.Is(err, ErrNoLlamaEngine) {
		t.Fatal(err)
	}
	if _, err := NewBatch(512, 1, 0); !errors.Is(err, ErrNoLlamaEngine) {
		t.Fatal(err)
	}
	if _, err := NewSamplingContext(nil, SamplingParams{}); !errors.Is(err, ErrNoLlamaEngine) {
		t.Fatal(err)
	}
}
