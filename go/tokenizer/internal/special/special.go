// Package special splits text at special tokens written in it, as
// llama.cpp's tokenizer does before it pre-tokenizes the rest
// (llama_vocab::impl::tokenizer_st_partition).
package special

import (
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
func Partition(text string, toks []Token, parse bool) []Fragment {
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
