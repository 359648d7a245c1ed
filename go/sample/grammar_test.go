package sample

import (
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/grammar"
)

// A vocabulary of short pieces, some several characters long, and an EOG.
var testPieces = []string{"{", "}", "a", "b", "ab", "ba", "{a", "b}", "}}", "x", "a}", "{{", "</s>"}

const testEOG = 12

// prefixOK is the naive reference of the language {[ab]*}: whether text is
// a prefix of a sentence, and whether it is a sentence.
func prefixOK(text string) (prefix, whole bool) {
	if text == "" {
		return true, false
	}
	if text[0] != '{' {
		return false, false
	}
	body := text[1:]
	for i, c := range body {
		switch {
		case c == 'a' || c == 'b':
		case c == '}' && i == len(body)-1:
			return true, true
		default:
			return false, false
		}
	}
	return true, false
}

// With a grammar, every pick is a token the naive reference allows: greedy
// gives the best allowed token at each step (checked against the naive
// mask), sampling at any temperature stays in the language, and the
// sequence ends with the EOG token exactly when the text is a sentence.
func TestGrammarConstrainsPicks(t *testing.T) {
	g, err := grammar.Compile(`root ::= "{" [ab]* "}"`, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	pieces := make([][]byte, len(testPieces))
	for i, p := range testPieces {
		pieces[i] = []byte(p)
	}
	v := grammar.NewVocab(pieces, []int32{testEOG})
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 300; trial++ {
		o := Options{Seed: int64(trial)}
		if trial%3 != 0 {
			o.Temperature, o.TopK, o.TopP = 0.5+rng.Float32(), trial%7, 0.9
		}
		s := New(o)
		s.Grammar = grammar.NewState(g, v)
		text := ""
		for step := 0; step < 40; step++ {
			logits := make([]float32, len(pieces))
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * 3)
			}
			id := s.Sample(logits)
			if id < 0 {
				t.Fatalf("trial %d step %d: %v", trial, step, s.Err())
			}
			_, whole := prefixOK(text)
			if id == testEOG {
				if !whole {
					t.Fatalf("trial %d: EOG after %q, not a sentence", trial, text)
				}
				break
			}
			if ok, _ := prefixOK(text + testPieces[id]); !ok {
				t.Fatalf("trial %d: %q after %q leaves the language", trial, testPieces[id], text)
			}
			if o.Temperature == 0 { // the best token the naive mask allows
				best, bv := int32(-1), float32(math.Inf(-1))
				for i, p := range testPieces {
					allowed, _ := prefixOK(text + p)
					if i == testEOG {
						allowed = whole
					}
					if allowed && logits[i] > bv {
						best, bv = int32(i), logits[i]
					}
				}
				if id != best {
					t.Fatalf("trial %d: greedy picked %q, the best allowed is %q", trial, testPieces[id], testPieces[best])
				}
			}
			text += testPieces[id]
		}
		if strings.Count(text, "}") > 1 {
			t.Fatalf("trial %d: %q", trial, text)
		}
	}
}

// A grammar no token can continue is an error, not a pick outside it.
func TestGrammarDeadEnd(t *testing.T) {
	g, err := grammar.Compile(`root ::= "{" "z"`, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	pieces := make([][]byte, len(testPieces))
	for i, p := range testPieces {
		pieces[i] = []byte(p)
	}
	s := New(Options{})
	s.Grammar = grammar.NewState(g, grammar.NewVocab(pieces, []int32{testEOG}))
	logits := make([]float32, len(pieces))
	if id := s.Sample(logits); id != 0 {
		t.Fatalf("first pick %d, want 0 ({)", id)
	}
	if id := s.Sample(logits); id != -1 || s.Err() == nil || !strings.Contains(s.Err().Error(), "no token") {
		t.Fatalf("dead end: %d, %v", id, s.Err())
	}
}
