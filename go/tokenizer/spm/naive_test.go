package spm

import (
	"strings"

	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/special"
)

// The tokenizer as it was before the merge loop became a heap (and long
// text was cut): the reference of the differential tests. Its merge loop
// rescans all symbols after every merge, so its time grows with the
// square of the length of the text.

func (t *Tokenizer) naiveEncode(text string, withSpecial bool) []int32 {
	var ids []int32
	if withSpecial && t.AddBOS && t.BOS >= 0 {
		ids = append(ids, t.BOS)
	}
	prevSpecial := true
	for _, f := range special.Partition(text, t.special, withSpecial) {
		if f.ID >= 0 {
			ids = append(ids, f.ID)
			prevSpecial = true
			continue
		}
		seg := f.Text
		if t.AddSpacePrefix && prevSpecial {
			seg = " " + seg
		}
		ids = t.naiveEncodeSegment(ids, strings.ReplaceAll(seg, " ", space))
		prevSpecial = false
	}
	if withSpecial && t.AddEOS && t.EOS >= 0 {
		ids = append(ids, t.EOS)
	}
	return ids
}

func (t *Tokenizer) naiveEncodeSegment(ids []int32, s string) []int32 {
	var syms []string
	for i := 0; i < len(s); {
		n := min(utf8Len(s[i]), len(s)-i)
		syms = append(syms, s[i:i+n])
		i += n
	}
	for len(syms) > 1 {
		at := -1
		var best float32
		for i := 0; i+1 < len(syms); i++ {
			if id, ok := t.vocab[syms[i]+syms[i+1]]; ok {
				if sc := t.score(id); at < 0 || sc > best {
					at, best = i, sc
				}
			}
		}
		if at < 0 {
			break
		}
		syms[at] += syms[at+1]
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	for _, sym := range syms {
		if id, ok := t.vocab[sym]; ok {
			ids = append(ids, id)
			continue
		}
		for i := 0; i < len(sym); i++ {
			switch {
			case t.bytes[sym[i]] >= 0:
				ids = append(ids, t.bytes[sym[i]])
			case t.UNK >= 0:
				ids = append(ids, t.UNK)
				i = len(sym)
			}
		}
	}
	return ids
}

func utf8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}
