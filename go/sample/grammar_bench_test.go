package sample

import (
	"os"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/grammar"
	"github.com/ggml-rs/ggml-rs/go/grammar/schema"
)

// BenchmarkGrammarStep: what a JSON-schema grammar adds to one sampling
// step on SmolLM2's 49,152-token vocabulary (GGML_RS_SMOLLM2), greedy:
// "allowed" when the model's own pick is one the grammar allows (one
// check), "refused" when it is not (the whole mask, then the pick again);
// "none" is the step without a grammar. Each iteration samples one token of
// the text {"name": "Felix", "age": 12, ...} and accepts it.
//
//	GGML_RS_SMOLLM2=... go test -run - -bench GrammarStep ./sample
func BenchmarkGrammarStep(b *testing.B) {
	path := os.Getenv("GGML_RS_SMOLLM2")
	if path == "" {
		b.Skip("GGML_RS_SMOLLM2 is not set")
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	v, _, err := grammar.VocabFromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	text, err := schema.ToGrammar([]byte(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},` +
		`"colors":{"type":"array","items":{"type":"string"}}},"required":["name","age","colors"]}`))
	if err != nil {
		b.Fatal(err)
	}
	g, err := grammar.Compile(text, "root", nil)
	if err != nil {
		b.Fatal(err)
	}
	// The ids of a text the grammar accepts, one token a step: the longest
	// piece that is a prefix of the rest.
	want := `{"name": "Felix the cat", "age": 12, "colors": ["black", "white", "grey", "orange"]}`
	var ids []int32
	for rest := want; rest != ""; {
		best, bl := int32(-1), 0
		for id := int32(0); id < int32(v.Size()); id++ {
			p := string(v.Piece(id))
			if len(p) > bl && len(p) <= len(rest) && rest[:len(p)] == p && !v.IsEOG(id) {
				best, bl = id, len(p)
			}
		}
		ids, rest = append(ids, best), rest[bl:]
	}
	// A 147k vocabulary (Qwen's and Llama 3's are 150k and 128k): SmolLM2's
	// pieces three times, the copies behind a space and behind "ab" (new
	// tokens, sharing the trie's deeper levels as real ones do).
	big := make([][]byte, 0, 3*v.Size())
	for _, pre := range []string{"", " ", "ab"} {
		for id := int32(0); id < int32(v.Size()); id++ {
			big = append(big, append([]byte(pre), v.Piece(id)...))
		}
	}
	vocabs := map[string]*grammar.Vocab{"49k": v, "147k": grammar.NewVocab(big, v.EOG())}
	for _, mode := range []string{"none/49k", "allowed/49k", "refused/49k", "none/147k", "allowed/147k", "refused/147k"} {
		v := vocabs[mode[strings.Index(mode, "/")+1:]]
		logits := make([]float32, v.Size())
		mode := mode[:strings.Index(mode, "/")] + "/" + mode[strings.Index(mode, "/")+1:]
		b.Run(mode, func(b *testing.B) {
			var s *Sampler
			i := len(ids)
			for n := 0; n < b.N; n++ {
				if i == len(ids) {
					b.StopTimer()
					s, i = New(Options{}), 0
					if !strings.HasPrefix(mode, "none") {
						s.Grammar = grammar.NewState(g, v)
					}
					b.StartTimer()
				}
				want := ids[i]
				pick := want
				if strings.HasPrefix(mode, "refused") {
					pick = (want + 7919) % int32(len(logits)) // a token the grammar refuses, as a rule
				}
				logits[pick] = 10
				logits[want] = 5
				got := s.Sample(logits)
				logits[pick], logits[want] = 0, 0
				if got != want && !strings.HasPrefix(mode, "refused") {
					b.Fatalf("step %d: got %d, want %d (%v)", i, got, want, s.Err())
				}
				if got < 0 {
					b.Fatal(s.Err())
				}
				if strings.HasPrefix(mode, "refused") && got != want {
					s.Grammar = nil // the refusal picked an allowed other: restart
					i = len(ids)
					continue
				}
				i++
			}
		})
	}
}
