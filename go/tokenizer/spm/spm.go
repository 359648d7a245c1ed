// Package spm is SentencePiece-style BPE (GGUF tokenizer.ggml.model
// "llama"): spaces become "▁" (with a leading one added), adjacent
// symbols are merged best score first when the merge is a token, and
// what is left outside the vocabulary falls back to <0xXX> byte tokens.
package spm

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/merge"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/special"
)

// Token types of GGUF's tokenizer.ggml.token_type.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

const space = "▁"

// Tokenizer is a SentencePiece-style tokenizer.
type Tokenizer struct {
	tokens   []string
	scores   []float32
	types    []int32
	vocab    map[string]int32
	bytes    [256]int32 // <0xXX> ids, -1 if absent
	special  []special.Token
	BOS, EOS int32
	UNK      int32
	AddBOS   bool // Encode with special adds BOS
	AddEOS   bool // and EOS
	// AddSpacePrefix adds "▁" before the text (and Decode drops it).
	AddSpacePrefix bool

	nanScore bool      // some score is NaN
	spanners []spanner // tokens that may span a cut before "▁"
	cuttable bool      // encodeSegment may cut text (see there)
}

// New builds a tokenizer; scores and types may be nil.
func New(tokens []string, scores []float32, types []int32) (*Tokenizer, error) {
	if (scores != nil && len(scores) != len(tokens)) || (types != nil && len(types) != len(tokens)) {
		return nil, fmt.Errorf("spm: %d tokens, %d scores, %d types", len(tokens), len(scores), len(types))
	}
	t := &Tokenizer{tokens: tokens, scores: scores, types: types, vocab: make(map[string]int32, len(tokens)),
		BOS: -1, EOS: -1, UNK: -1, AddBOS: true, AddSpacePrefix: true}
	for i := range t.bytes {
		t.bytes[i] = -1
	}
	for i, s := range tokens {
		id := int32(i)
		switch t.typ(id) {
		case TypeByte:
			var b byte
			if _, err := fmt.Sscanf(s, "<0x%02X>", &b); err == nil {
				t.bytes[b] = id
			}
		case TypeUnknown:
			if t.UNK < 0 {
				t.UNK = id
			}
			t.special = append(t.special, special.Token{ID: id, Text: s, ParseOnly: true})
		case TypeControl:
			t.special = append(t.special, special.Token{ID: id, Text: s, ParseOnly: true})
		case TypeUserDefined:
			t.special = append(t.special, special.Token{ID: id, Text: s})
		}
		// Every token, as llama.cpp's text_to_token (which refuses
		// duplicates; the last one wins here).
		t.vocab[s] = id
	}
	special.Sort(t.special)
	for _, sc := range scores {
		t.nanScore = t.nanScore || sc != sc
	}
	t.findSpanners()
	return t, nil
}

func (t *Tokenizer) typ(id int32) int32 {
	if t.types == nil {
		return TypeNormal
	}
	return t.types[id]
}

func (t *Tokenizer) score(id int32) float32 {
	if t.scores == nil {
		return 0
	}
	return t.scores[id]
}

// Vocab is the number of tokens.
func (t *Tokenizer) Vocab() int { return len(t.tokens) }

// Encode tokenizes text as llama.cpp's llama_tokenize with add_special
// and parse_special both set to withSpecial: user-defined tokens written
// in the text are always recognised, control and unknown ones only with
// withSpecial, which also adds BOS (if AddBOS) and EOS (if AddEOS). With
// AddSpacePrefix, a space is put before the text and after every special
// token.
func (t *Tokenizer) Encode(text string, withSpecial bool) []int32 {
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
		ids = t.encodeSegment(ids, strings.ReplaceAll(seg, " ", space))
		prevSpecial = false
	}
	if withSpecial && t.AddEOS && t.EOS >= 0 {
		ids = append(ids, t.EOS)
	}
	return ids
}

// encodeSegment is llama.cpp's SPM session: symbols are UTF-8 sequences
// by their lead byte's length alone (so invalid bytes stay bytes), the
// best-scoring adjacent pair that is a token is merged (leftmost on ties)
// until none is, and symbols that are not tokens become byte tokens.
//
// Long text is cut into pieces of about cutEvery bytes, before a "▁"
// that no token can span (see cutSafe), and the pieces are merged one by
// one: as no merge can cross such a cut, the merges are those of the whole
// text (each piece's in the same order), and the merge loop's working set
// stays small.
func (t *Tokenizer) encodeSegment(ids []int32, s string) []int32 {
	m := merge.Merger{FirstOnly: t.nanScore}
	emit := func(sym string) {
		if id, ok := t.vocab[sym]; ok {
			ids = append(ids, id)
			return
		}
		for i := 0; i < len(sym); i++ {
			switch {
			case t.bytes[sym[i]] >= 0:
				ids = append(ids, t.bytes[sym[i]])
			case t.UNK >= 0:
				// No byte tokens (llama.cpp looks for the byte as a
				// token and fails): one unknown token for the symbol.
				ids = append(ids, t.UNK)
				i = len(sym)
			}
		}
	}
	last := 0
	if t.cuttable {
		// Cuts only between symbols, as the merge loop splits s; after a
		// cut that is not safe, the next try is a little further on (in a
		// long run of "▁", say, none is).
		try := cutEvery
		for i := 0; i < len(s); i += min(merge.SymbolLen(s[i]), len(s)-i) {
			if i < try || !strings.HasPrefix(s[i:], space) {
				continue
			}
			if !t.cutSafe(s, i) {
				try = i + cutRetry
				continue
			}
			m.Run(s[last:i], t.lookup)
			m.Each(emit)
			last, try = i, i+cutEvery
		}
	}
	m.Run(s[last:], t.lookup)
	m.Each(emit)
	return ids
}

// cutEvery is the least length of the pieces encodeSegment cuts text into
// and cutRetry how far on it tries again after a cut that is not safe
// (variables for the tests).
var cutEvery, cutRetry = 1024, 64

// maxSpanners bounds len(Tokenizer.spanners) for cutting text: beyond it
// testing cuts would cost more than it saves.
const maxSpanners = 4096

// spanner is a token that could span a cut before a "▁": at offset k > 0
// it has "▁" or, at its end, a prefix of it.
type spanner struct {
	text string
	k    int
}

// findSpanners lists the tokens that may span a cut before a "▁" (the
// tokens merges can make: all of them) and says whether there are few
// enough for cutting text.
func (t *Tokenizer) findSpanners() {
	for _, tok := range t.tokens {
		for k := 1; k < len(tok); k++ {
			if rest := tok[k:]; strings.HasPrefix(rest, space) || strings.HasPrefix(space, rest) {
				t.spanners = append(t.spanners, spanner{tok, k})
			}
		}
		if len(t.spanners) > maxSpanners {
			t.spanners = nil
			return
		}
	}
	// NaN scores make a merge's turn depend on what lies left of it in the
	// whole text (see lookup), so those vocabularies are never cut.
	t.cuttable = !t.nanScore
}

// cutSafe reports whether no token spans s[:i] and s[i:], where s[i:]
// starts with "▁": then no merge can cross i.
func (t *Tokenizer) cutSafe(s string, i int) bool {
	for _, sp := range t.spanners {
		if a := i - sp.k; a >= 0 && strings.HasPrefix(s[a:], sp.text) {
			return false
		}
	}
	return true
}

// lookup is the merge.Lookup of encodeSegment: a pair merges if it is a
// token, higher scores first. Equal scores (0 and -0 included) merge
// leftmost first. A NaN score, which a "best so far" scan neither picks
// over another nor replaces once picked, is merge.FirstOnly.
func (t *Tokenizer) lookup(pair string, _ int) (uint32, merge.Kind) {
	id, ok := t.vocab[pair]
	if !ok {
		return 0, merge.None
	}
	sc := t.score(id)
	if sc != sc {
		return 0, merge.FirstOnly
	}
	if sc == 0 {
		sc = 0 // -0 ties with 0
	}
	// The order of floats as unsigned integers, reversed (best first).
	b := math.Float32bits(sc)
	if b>>31 != 0 {
		b = ^b
	} else {
		b |= 1 << 31
	}
	return ^b, merge.Ranked
}

// DecodeBytes is the bytes of ids: byte tokens give their byte, "▁" a
// space; control tokens give nothing. With AddSpacePrefix, a leading space
// of the first token of ids is dropped when dropLeading.
func (t *Tokenizer) DecodeBytes(ids []int32, dropLeading bool) []byte {
	var out []byte
	for k, id := range ids {
		if id < 0 || int(id) >= len(t.tokens) {
			continue
		}
		s := t.tokens[id]
		switch t.typ(id) {
		case TypeControl, TypeUnused:
			continue
		case TypeByte:
			var b byte
			if _, err := fmt.Sscanf(s, "<0x%02X>", &b); err == nil {
				out = append(out, b)
			}
			continue
		case TypeUnknown:
			out = append(out, " \u2047 "...)
			continue
		}
		s = strings.ReplaceAll(s, space, " ")
		if k == 0 && dropLeading && t.AddSpacePrefix {
			s = strings.TrimPrefix(s, " ")
		}
		out = append(out, s...)
	}
	return out
}

// Decode is the text of ids (a sequence from the start: its leading space
// prefix is dropped).
func (t *Tokenizer) Decode(ids []int32) string {
	first := 0
	for first < len(ids) && ids[first] >= 0 && int(ids[first]) < len(t.tokens) && t.typ(ids[first]) == TypeControl {
		first++
	}
	b := t.DecodeBytes(ids[first:], true)
	if !utf8.Valid(b) {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return string(b)
}

// IsEOG reports whether id ends generation.
func (t *Tokenizer) IsEOG(id int32) bool {
	if id == t.EOS {
		return true
	}
	if id >= 0 && int(id) < len(t.tokens) && t.typ(id) == TypeControl {
		switch t.tokens[id] {
		case "<end_of_turn>", "<|end|>", "<|eot_id|>", "<|im_end|>":
			return true
		}
	}
	return false
}
