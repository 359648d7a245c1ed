package bpe

import (
	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/special"
)

// The tokenizer as it was before the merge loop became a heap: the
// reference of the differential tests. Its merge loop rescans all symbols
// after every merge, so its time grows with the square of the length of a
// piece.

func (t *Tokenizer) naiveEncode(text string, withSpecial bool) []int32 {
	var ids []int32
	if withSpecial && t.AddBOS && t.BOS >= 0 {
		ids = append(ids, t.BOS)
	}
	for _, f := range special.Partition(text, t.special, withSpecial) {
		if f.ID >= 0 {
			ids = append(ids, f.ID)
			continue
		}
		for _, piece := range t.pre(f.Text) {
			ids = t.naiveEncodePiece(ids, piece)
		}
	}
	if withSpecial && t.AddEOS && t.EOS >= 0 {
		ids = append(ids, t.EOS)
	}
	return ids
}

func (t *Tokenizer) naiveEncodePiece(ids []int32, piece string) []int32 {
	var mapped []rune
	for i := 0; i < len(piece); i++ {
		mapped = append(mapped, byteRune[piece[i]])
	}
	if t.ignoreMerges {
		if id, ok := t.vocab[string(mapped)]; ok {
			return append(ids, id)
		}
	}
	syms := make([]string, len(mapped))
	for i, r := range mapped {
		syms[i] = string(r)
	}
	for len(syms) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := t.ranks[[2]string{syms[i], syms[i+1]}]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] += syms[at+1]
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	for _, s := range syms {
		if id, ok := t.vocab[s]; ok {
			ids = append(ids, id)
			continue
		}
		for i := 0; i < len(s); i++ {
			if id, ok := t.vocab[s[i:i+1]]; ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}
