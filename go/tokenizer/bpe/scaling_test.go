package bpe

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/testvocab"
)

type vocabCase struct {
	name  string
	tk    *Tokenizer
	count int // random inputs
	size  int // their largest size in bytes
}

// runs is a byte-level vocabulary whose merges make runs of letters merge
// in many orders (ties of pairs at many places), with some merges whose
// result is not a token (a broken vocabulary: bytes are looked up one by
// one), and a user-defined token.
func runs(t testing.TB, pre string) *Tokenizer {
	var tokens []string
	var types []int32
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(ByteRune(byte(b))))
		types = append(types, TypeNormal)
	}
	merges := []string{"a a", "aa a", "a aa", "aa aa", "b a", "a b", "ab ab", "ba b", "Ġ a", "Ġa a", "Ġ Ġ", "ĠĠ ĠĠ",
		"aaa aa", "aaaa a", "bab a", "x y", "y x", "xy x", "yx y", "ĊĊ Ċ", "Ċ Ċ", "é é"}
	for _, m := range merges {
		if w := strings.ReplaceAll(m, " ", ""); w != "aaaa" && w != "abab" && w != "xyx" {
			tokens = append(tokens, w)
			types = append(types, TypeNormal)
		}
	}
	tokens = append(tokens, "<s>", "</s>", "<|u|>")
	types = append(types, TypeControl, TypeControl, TypeUserDefined)
	tk, err := New(tokens, types, merges, pre)
	if err != nil {
		t.Fatal(err)
	}
	tk.BOS, tk.EOS, tk.AddBOS = int32(len(tokens)-3), int32(len(tokens)-2), true
	return tk
}

// vocabCases are the vocabularies of the differential test: the tiny one
// and runs with each kind of pre-tokenizer, and every GGUF byte-level
// BPE vocabulary at hand.
func vocabCases(t *testing.T) []vocabCase {
	var cases []vocabCase
	for _, pre := range []string{"gpt2", "llama-bpe", "smaug-bpe", "qwen2", "qwen35", "default"} {
		cases = append(cases, vocabCase{"tiny " + pre, tiny(t, pre), 100, 2000}, vocabCase{"runs " + pre, runs(t, pre), 100, 2000})
	}
	vs, err := testvocab.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Model != "gpt2" {
			continue
		}
		tk, err := New(v.Tokens, v.Types, v.Merges, v.Pre)
		if err != nil {
			t.Fatal(err)
		}
		c := vocabCase{v.Name, tk, 100, 2000}
		if len(v.Tokens) > 10000 {
			c.count, c.size = 40, 1000
		}
		cases = append(cases, c)
	}
	if len(cases) == 12 {
		t.Log("no GGUF vocabularies ($GGML_RS_VOCABS, $GGML_RS_MODELS)")
	}
	return cases
}

// TestMatchesNaive: the heap-based merge loop gives the ids of the
// rescanning loop (naive_test.go), for random text (scripts, white
// space, emoji, broken UTF-8, contractions, special tokens), long runs of
// one letter, long words, white space runs and prose, with every
// vocabulary of vocabCases, with and without specials.
func TestMatchesNaive(t *testing.T) {
	for _, c := range vocabCases(t) {
		rng := rand.New(rand.NewSource(1))
		var extra []string
		for _, sp := range c.tk.special {
			extra = append(extra, sp.Text)
		}
		inputs := testvocab.Inputs(rng, c.size, c.count, []string{"", " ", "hello world"},
			[]string{"a", " ", "ab", "xyx", "\n", "aaab"}, extra)
		for _, in := range inputs {
			for _, withSpecial := range []bool{false, true} {
				want := c.tk.naiveEncode(in, withSpecial)
				if got := c.tk.Encode(in, withSpecial); !slices.Equal(got, want) {
					t.Fatalf("%s, %q (special %v):\n got %v\nwant %v", c.name, in, withSpecial, got, want)
				}
			}
		}
	}
}

// scalingVocabs are GPT-2's vocabulary with the gpt2 and the llama-bpe
// pre-tokenizers (the latter takes whole words that are tokens), or the
// tiny vocabulary without them.
func scalingVocabs(t testing.TB) map[string]*Tokenizer {
	vs, err := testvocab.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Tokenizer{}
	for _, v := range vs {
		if v.Model == "gpt2" && len(v.Tokens) > 10000 && (v.Pre == "gpt-2" || v.Pre == "llama-bpe") {
			tk, err := New(v.Tokens, v.Types, v.Merges, v.Pre)
			if err != nil {
				t.Fatal(err)
			}
			out[v.Name] = tk
		}
	}
	if len(out) == 0 {
		testvocab.RequireIfSet(t)
		out["tiny"] = tiny(t, "gpt2")
	}
	return out
}

// TestScaling: 1 MB of prose, and a 1 MB word, cost about ten times
// the CPU time of 100 KB (within testvocab.MaxRatio), not a hundred times.
func TestScaling(t *testing.T) {
	for name, tk := range scalingVocabs(t) {
		rng := rand.New(rand.NewSource(1))
		encode := func(s string) { tk.Encode(s, true) }
		testvocab.Scaling(t, name+", prose", encode, testvocab.English(rng, 100_000), testvocab.English(rng, 1_000_000))
		testvocab.Scaling(t, name+", one word", encode, testvocab.LongWord(rng, 100_000), testvocab.LongWord(rng, 1_000_000))
	}
}

// BenchmarkEncode: prose and one long word of 0.1, 1 and 10 MB.
func BenchmarkEncode(b *testing.B) {
	for name, tk := range scalingVocabs(b) {
		for _, kind := range []string{"prose", "word"} {
			for _, mb := range []float64{0.1, 1, 10} {
				rng := rand.New(rand.NewSource(1))
				n := int(mb * 1e6)
				s := testvocab.English(rng, n)
				if kind == "word" {
					s = testvocab.LongWord(rng, n)
				}
				b.Run(fmt.Sprintf("%s/%s/%gMB", name, kind, mb), func(b *testing.B) {
					b.SetBytes(int64(len(s)))
					for range b.N {
						tk.Encode(s, true)
					}
				})
			}
		}
	}
}
