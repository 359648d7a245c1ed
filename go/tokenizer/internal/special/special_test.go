package special

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// naivePartition is the Partition that splits every fragment for every
// token (the reference: its time grows with tokens × fragments).
func naivePartition(text string, toks []Token, parse bool) []Fragment {
	if text == "" {
		return nil
	}
	frags := []Fragment{{Text: text, ID: -1}}
	for _, tok := range toks {
		if tok.Text == "" || tok.ParseOnly && !parse {
			continue
		}
		var next []Fragment
		for _, f := range frags {
			if f.ID >= 0 || !strings.Contains(f.Text, tok.Text) {
				next = append(next, f)
				continue
			}
			rest := f.Text
			for {
				i := strings.Index(rest, tok.Text)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, Fragment{Text: rest[:i], ID: -1})
				}
				next = append(next, Fragment{ID: tok.ID})
				rest = rest[i+len(tok.Text):]
			}
			if rest != "" {
				next = append(next, Fragment{Text: rest, ID: -1})
			}
		}
		frags = next
	}
	return frags
}

// TestPartitionMatchesNaive: random texts over a small alphabet and random
// sets of overlapping tokens (duplicates, empty and parse-only ones
// included) split as naivePartition splits them.
func TestPartitionMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	word := func(alpha string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[rng.Intn(len(alpha))]
		}
		return string(b)
	}
	for iter := 0; iter < 20000; iter++ {
		alpha := []string{"ab", "abc", "a<>|", "abcdefgh"}[rng.Intn(4)]
		var toks []Token
		for n := rng.Intn(8); n > 0; n-- {
			toks = append(toks, Token{ID: int32(len(toks)), Text: word(alpha, rng.Intn(6)), ParseOnly: rng.Intn(3) == 0})
		}
		if len(toks) > 1 && rng.Intn(4) == 0 {
			toks = append(toks, Token{ID: int32(len(toks)), Text: toks[0].Text})
		}
		Sort(toks)
		n := rng.Intn(200)
		if iter%100 == 0 {
			n = rng.Intn(3000) // spans bitmap words
		}
		text := word(alpha, n)
		parse := rng.Intn(2) == 0
		if got, want := Partition(text, toks, parse), naivePartition(text, toks, parse); !slices.Equal(got, want) {
			t.Fatalf("%q with %+v (parse %v):\n got %+v\nwant %+v", text, toks, parse, got, want)
		}
	}
}

func TestBitmap(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for iter := 0; iter < 200; iter++ {
		n := 1 + rng.Intn(300)
		b := make(bitmap, (n+63)/64)
		ref := make([]bool, len(b)*64)
		for k := rng.Intn(6); k > 0; k-- {
			i := rng.Intn(n)
			j := i + rng.Intn(n-i+1)
			b.set(i, j)
			for p := i; p < j; p++ {
				ref[p] = true
			}
		}
		for i := 0; i < n; i++ {
			for j := i; j <= n; j++ {
				want := -1
				for p := j - 1; p >= i; p-- {
					if ref[p] {
						want = p
						break
					}
				}
				if got := b.last(i, j); got != want {
					t.Fatalf("last(%d, %d) = %d, want %d", i, j, got, want)
				}
			}
			want := i + 1
			for want < len(ref) && ref[want] {
				want++
			}
			if got := b.nextFree(i); got != want {
				t.Fatalf("nextFree(%d) = %d, want %d", i, got, want)
			}
		}
	}
}
