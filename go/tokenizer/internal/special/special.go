// Package special splits text at special tokens written in it, as
// llama.cpp's tokenizer does before it pre-tokenizes the rest
// (llama_vocab::impl::tokenizer_st_partition).
package special

import (
	"math/bits"
	"sort"
	"strings"
)

// Token is a special token: control, unknown or user-defined.
type Token struct {
	ID   int32
	Text string
	// ParseOnly: recognised only when special tokens are parsed (control
	// and unknown tokens); user-defined tokens are always split out.
	ParseOnly bool
}

// Sort orders tokens as llama.cpp's special-token cache: longest text
// first (equal lengths by id, where llama.cpp's unstable sort leaves the
// order unspecified).
func Sort(toks []Token) {
	sort.SliceStable(toks, func(i, j int) bool {
		if len(toks[i].Text) != len(toks[j].Text) {
			return len(toks[i].Text) > len(toks[j].Text)
		}
		return toks[i].ID < toks[j].ID
	})
}

// Fragment is a piece of text (ID < 0) or a special token (its ID).
type Fragment struct {
	Text string
	ID   int32
}

// Partition splits text at the special tokens toks (in Sort's order): each
// token in turn splits every remaining text fragment at each of its
// occurrences, left to right. Without parse, ParseOnly tokens are skipped.
//
// Splitting every fragment for every token would take time proportional
// to the number of tokens times the number of fragments; instead each
// token's occurrences are looked for in the whole text (skipping the bytes
// earlier tokens took), which gives the same fragments.
func Partition(text string, toks []Token, parse bool) []Fragment {
	if text == "" {
		return nil
	}
	var taken bitmap // bytes of text that tokens took
	type match struct {
		at  int
		tok *Token
	}
	var found []match
	for k := range toks {
		tok := &toks[k]
		if tok.Text == "" || tok.ParseOnly && !parse {
			continue
		}
		// tok's leftmost occurrences that do not overlap one another or a
		// byte taken before: those a split of each fragment finds.
		for from := 0; from <= len(text)-len(tok.Text); {
			i := strings.Index(text[from:], tok.Text)
			if i < 0 {
				break
			}
			at, end := from+i, from+i+len(tok.Text)
			if taken == nil {
				taken = make(bitmap, (len(text)+63)/64)
			}
			if q := taken.last(at, end); q >= 0 {
				// Any occurrence that starts at or before q overlaps it.
				from = taken.nextFree(q)
				continue
			}
			taken.set(at, end)
			found = append(found, match{at, tok})
			from = end
		}
	}
	if len(found) == 0 {
		return []Fragment{{Text: text, ID: -1}}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].at < found[j].at })
	var frags []Fragment
	last := 0
	for _, m := range found {
		if m.at > last {
			frags = append(frags, Fragment{Text: text[last:m.at], ID: -1})
		}
		frags = append(frags, Fragment{ID: m.tok.ID})
		last = m.at + len(m.tok.Text)
	}
	if last < len(text) {
		frags = append(frags, Fragment{Text: text[last:], ID: -1})
	}
	return frags
}

// bitmap is a set of byte positions.
type bitmap []uint64

// set adds [i, j).
func (b bitmap) set(i, j int) {
	for ; i < j && i%64 != 0; i++ {
		b[i/64] |= 1 << (i % 64)
	}
	for ; i+64 <= j; i += 64 {
		b[i/64] = ^uint64(0)
	}
	for ; i < j; i++ {
		b[i/64] |= 1 << (i % 64)
	}
}

// last is the last position in [i, j) in b, or -1.
func (b bitmap) last(i, j int) int {
	for j > i {
		w := b[(j-1)/64]
		// Keep the bits of positions [max(i, word start), j).
		lo := max(i, (j-1)/64*64)
		w &= ^uint64(0) >> (63 - (j-1)%64)
		w &= ^uint64(0) << (lo % 64)
		if w != 0 {
			return (j-1)/64*64 + 63 - bits.LeadingZeros64(w)
		}
		j = lo
	}
	return -1
}

// nextFree is the first position after i not in b (len(b)*64 at most).
func (b bitmap) nextFree(i int) int {
	i++
	for i < len(b)*64 {
		w := ^b[i/64] >> (i % 64) // free positions from i on
		if w != 0 {
			return i + bits.TrailingZeros64(w)
		}
		i = (i/64 + 1) * 64
	}
	return i
}
