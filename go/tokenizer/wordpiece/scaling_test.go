package wordpiece

import (
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/testvocab"
)

// minilm is all-MiniLM-L6-v2's vocab.txt (30k pieces) if it has been
// fetched, else nil.
func minilm(t testing.TB) *Tokenizer {
	data, err := os.ReadFile("../../../.cache/all-minilm-l6-v2/vocab.txt")
	if err != nil {
		return nil
	}
	tokens := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	tok, err := New(tokens, nil, Special{CLS: 101, SEP: 102, UNK: 100, PAD: 0, MASK: 103})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestMatchesNaive: the tokenizer gives the ids of the one that searched
// the rest of the text for control tokens after each (naive_test.go), for
// random text dense with control tokens (and near misses), long words
// and prose, in both spellings of the small vocabulary and with MiniLM's.
func TestMatchesNaive(t *testing.T) {
	plain, ph := spellings(t)
	toks := []*Tokenizer{plain, ph}
	if m := minilm(t); m != nil {
		toks = append(toks, m)
	}
	extra := []string{"[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "[MAS", "[SEP", "SEP]", "[[SEP]]", "unaffable", "hello"}
	for _, tok := range toks {
		rng := rand.New(rand.NewSource(1))
		inputs := []string{"", strings.Repeat("[SEP]", 500), strings.Repeat("[SEP] [MASK]x", 300),
			strings.Repeat("a", 99), strings.Repeat("a", 100), strings.Repeat("ab", 50), strings.Repeat("b", 3000),
			testvocab.LongWord(rng, 99), testvocab.English(rng, 3000)}
		for range 300 {
			inputs = append(inputs, testvocab.Random(rng, rng.Intn(2000), extra))
		}
		for _, in := range inputs {
			want := tok.naiveAppendTokens(nil, in)
			if got := tok.AppendTokens(nil, in); !slices.Equal(got, want) {
				t.Fatalf("%q:\n got %v\nwant %v", in, got, want)
			}
		}
	}
}

// TestScaling: 1 MB of prose, of text dense with control tokens, of one
// word and of 100-letter words cost about ten times the CPU time of 100 KB
// (within testvocab.MaxRatio), not a hundred times.
func TestScaling(t *testing.T) {
	tok, name := minilm(t), "MiniLM"
	if tok == nil {
		var err error
		if tok, err = New(vocab, nil, special); err != nil {
			t.Fatal(err)
		}
		name = "small vocabulary"
	}
	rng := rand.New(rand.NewSource(1))
	dense := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(testvocab.English(rng, 40))
			b.WriteString([]string{"[SEP]", "[MASK]", "[CLS]"}[rng.Intn(3)])
		}
		return b.String()
	}
	words := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(testvocab.LongWord(rng, 100))
			b.WriteByte(' ')
		}
		return b.String()
	}
	encode := func(s string) { tok.Encode(s) }
	testvocab.Scaling(t, name+", prose", encode, testvocab.English(rng, 100_000), testvocab.English(rng, 1_000_000))
	testvocab.Scaling(t, name+", control tokens", encode, dense(100_000), dense(1_000_000))
	testvocab.Scaling(t, name+", one word", encode, testvocab.LongWord(rng, 100_000), testvocab.LongWord(rng, 1_000_000))
	testvocab.Scaling(t, name+", 100-letter words", encode, words(100_000), words(1_000_000))
}
