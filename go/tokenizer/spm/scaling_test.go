package spm

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/tokenizer/bpe"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/testvocab"
)

type vocabCase struct {
	name  string
	tk    *Tokenizer
	count int // random inputs
	size  int // their largest size in bytes
}

// gpt2SPM is a SentencePiece tokenizer of the first GGUF byte-level BPE
// vocabulary (50k tokens), or nil.
func gpt2SPM(t testing.TB, vs []testvocab.Vocab) *Tokenizer {
	for _, v := range vs {
		if v.Model != "gpt2" || len(v.Tokens) < 10000 {
			continue
		}
		byteOf := map[rune]byte{}
		for b := 0; b < 256; b++ {
			byteOf[bpe.ByteRune(byte(b))] = byte(b)
		}
		toks, scores, types := testvocab.SPMFromBPE(v, func(r rune) (byte, bool) { b, ok := byteOf[r]; return b, ok })
		tk, err := New(toks, scores, types)
		if err != nil {
			t.Fatal(err)
		}
		tk.BOS, tk.EOS = 1, 2
		return tk
	}
	return nil
}

// vocabCases are the vocabularies of the differential test: the tiny one
// and variants of it (no scores; scores with many ties, ±0 and infinities;
// NaN scores; no byte tokens; no space prefix; tokens with "▁" inside),
// the GGUF SentencePiece vocabularies at hand and a 50k one made of a
// byte-level BPE vocabulary.
func vocabCases(t *testing.T) []vocabCase {
	base := tiny(t)
	rng := rand.New(rand.NewSource(7))
	variant := func(tokens []string, scores []float32, types []int32) *Tokenizer {
		tk, err := New(tokens, scores, types)
		if err != nil {
			t.Fatal(err)
		}
		tk.BOS, tk.EOS = base.BOS, base.EOS
		return tk
	}
	pick := func(vals ...float32) []float32 {
		out := make([]float32, len(base.tokens))
		for i := range out {
			out[i] = vals[rng.Intn(len(vals))]
		}
		return out
	}
	negZero := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	cuts := append(slices.Clone(base.tokens), "o▁w", "d▁", "▁▁▁", "l\xe2", "▁h", "o▁", "\xe2\x96")
	cutTypes := append(slices.Clone(base.types), 1, 1, 1, 1, 1, 1, 1)
	cutScores := append(slices.Clone(base.scores), 5, 0.5, 3, 9, 1.5, 0.25, 7)
	noPrefix := variant(base.tokens, base.scores, base.types)
	noPrefix.AddSpacePrefix = false
	noBytes := slices.Clone(base.types)
	for i := range noBytes {
		if noBytes[i] == TypeByte {
			noBytes[i] = TypeNormal
		}
	}
	// Too many tokens with "▁" inside for cutting text.
	many, manyScores, manyTypes := slices.Clone(base.tokens), slices.Clone(base.scores), slices.Clone(base.types)
	for i := range maxSpanners/3 + 1 {
		many = append(many, fmt.Sprintf("%d▁▁▁", i))
		manyScores = append(manyScores, float32(i%7))
		manyTypes = append(manyTypes, TypeNormal)
	}
	cases := []vocabCase{
		{"tiny", base, 300, 3000},
		{"tiny, no scores", variant(base.tokens, nil, base.types), 200, 3000},
		{"tiny, ties", variant(base.tokens, pick(0, negZero, 1, 1, 2, inf, -inf), base.types), 200, 3000},
		{"tiny, NaN", variant(base.tokens, pick(0, 1, 2, nan, nan, negZero), base.types), 200, 3000},
		{"tiny, no byte tokens", variant(base.tokens, base.scores, noBytes), 100, 2000},
		{"tiny, no types", variant(base.tokens, base.scores, nil), 100, 2000},
		{"tiny, no space prefix", noPrefix, 100, 2000},
		{"tiny, ▁ inside tokens", variant(cuts, cutScores, cutTypes), 300, 3000},
		{"tiny, too many ▁ inside tokens", variant(many, manyScores, manyTypes), 50, 2000},
	}
	if c := cases[len(cases)-1]; c.tk.cuttable || !cases[len(cases)-2].tk.cuttable {
		t.Fatal("cuttable: want the second last vocabulary cut and the last not")
	}
	vs, err := testvocab.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Model != "llama" {
			continue
		}
		tk, err := New(v.Tokens, v.Scores, v.Types)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, vocabCase{v.Name, tk, 100, 2000})
	}
	if tk := gpt2SPM(t, vs); tk != nil {
		cases = append(cases, vocabCase{"gpt2 as SPM", tk, 60, 800})
		scores := slices.Clone(tk.scores)
		for i := range scores {
			if rng.Intn(50) == 0 {
				scores[i] = nan
			}
		}
		cases = append(cases, vocabCase{"gpt2 as SPM, NaN", variant(tk.tokens, scores, tk.types), 30, 800})
	} else {
		testvocab.RequireIfSet(t)
		t.Log("no GGUF byte-level BPE vocabulary ($GGML_RS_VOCABS): no 50k vocabulary")
	}
	return cases
}

// TestMatchesNaive: the heap-based merge loop and the cutting of long
// text give the ids of the rescanning loop (naive_test.go), for random
// text (scripts, white space, emoji, broken UTF-8, special tokens), long
// runs of one letter, long words, white space runs and prose, with every
// vocabulary of vocabCases, with and without specials, with the usual
// pieces and with pieces of a few bytes (cuts everywhere they may be).
func TestMatchesNaive(t *testing.T) {
	defer func(every, retry int) { cutEvery, cutRetry = every, retry }(cutEvery, cutRetry)
	for _, c := range vocabCases(t) {
		rng := rand.New(rand.NewSource(1))
		var extra []string
		for _, sp := range c.tk.special {
			extra = append(extra, sp.Text)
		}
		inputs := testvocab.Inputs(rng, c.size, c.count, []string{"", " ", "▁", "hello world"},
			[]string{"a", " ", "▁", "lo", "hello "}, extra)
		for _, in := range inputs {
			for _, withSpecial := range []bool{false, true} {
				want := c.tk.naiveEncode(in, withSpecial)
				for _, every := range []int{1024, 8} {
					cutEvery, cutRetry = every, every/4
					if got := c.tk.Encode(in, withSpecial); !slices.Equal(got, want) {
						t.Fatalf("%s, %q (special %v, cuts every %d):\n got %v\nwant %v", c.name, in, withSpecial, every, got, want)
					}
				}
			}
		}
	}
}

// scalingVocab is the 50k vocabulary, or the tiny one without it.
func scalingVocab(t testing.TB) (string, *Tokenizer) {
	vs, err := testvocab.Load()
	if err != nil {
		t.Fatal(err)
	}
	if tk := gpt2SPM(t, vs); tk != nil {
		return "gpt2 as SPM", tk
	}
	testvocab.RequireIfSet(t)
	return "tiny", tiny(t)
}

// TestScaling: 1 MB of prose, and a 1 MB word, cost about ten times
// the CPU time of 100 KB (within testvocab.MaxRatio), not a hundred times.
func TestScaling(t *testing.T) {
	name, tk := scalingVocab(t)
	rng := rand.New(rand.NewSource(1))
	encode := func(s string) { tk.Encode(s, true) }
	testvocab.Scaling(t, name+", prose", encode, testvocab.English(rng, 100_000), testvocab.English(rng, 1_000_000))
	testvocab.Scaling(t, name+", one word", encode, testvocab.LongWord(rng, 100_000), testvocab.LongWord(rng, 1_000_000))
}

// BenchmarkEncode: prose and one long word of 0.1, 1 and 10 MB.
func BenchmarkEncode(b *testing.B) {
	name, tk := scalingVocab(b)
	b.Logf("vocabulary: %s", name)
	for _, kind := range []string{"prose", "word"} {
		for _, mb := range []float64{0.1, 1, 10} {
			rng := rand.New(rand.NewSource(1))
			n := int(mb * 1e6)
			s := testvocab.English(rng, n)
			if kind == "word" {
				s = testvocab.LongWord(rng, n)
			}
			b.Run(fmt.Sprintf("%s/%gMB", kind, mb), func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				for range b.N {
					tk.Encode(s, true)
				}
			})
		}
	}
}
