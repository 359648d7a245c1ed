//go:generate python3 gen_strip_table.py

// Package wordpiece is BERT's uncased WordPiece tokenizer: text is cleaned
// (control characters dropped, whitespace unified), CJK ideographs are
// spaced out, accents are stripped (canonical decomposition, nonspacing
// marks removed), text is lowercased and split on whitespace and
// punctuation, and each word becomes the greedy longest-match sequence of
// vocabulary pieces (continuations spelled "##piece"), or [UNK] when it
// cannot be spelled. Encode wraps the result in [CLS] … [SEP].
//
// The vocabulary comes either as BERT's vocab.txt spelling ("word",
// "##piece") or as llama.cpp's GGUF spelling of it (word starts prefixed
// with U+2581, continuations bare, special tokens unchanged); New accepts
// both.
package wordpiece

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Token types of tokenizer.ggml.token_type (llama.cpp's numbering).
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// phantomSpace marks word-start pieces in llama.cpp's spelling.
const phantomSpace = "\u2581"

// maxWordChars: longer words become [UNK] without a search (BERT's rule).
const maxWordChars = 100

// Special holds the ids of the special tokens; -1 where absent.
type Special struct {
	CLS, SEP, UNK, PAD, MASK int32
}

// Tokenizer maps text to token ids. It is safe for concurrent use.
type Tokenizer struct {
	tokens  []string         // id -> spelling as given
	pieces  []string         // id -> vocab.txt spelling ("##" for continuations)
	starts  map[string]int32 // word-start pieces
	conts   map[string]int32 // continuation pieces, without "##"
	special []specialToken   // control tokens matched verbatim in the input, longest first
	sp      Special
	longest int // the longest key of starts and conts, in bytes
}

type specialToken struct {
	text string
	id   int32
}

// New builds a tokenizer from a vocabulary in either spelling. types may
// be nil (then [..]-bracketed tokens named in sp count as control tokens);
// sp.UNK must name a token.
func New(tokens []string, types []int32, sp Special) (*Tokenizer, error) {
	if len(tokens) == 0 {
		return nil, errors.New("wordpiece: empty vocabulary")
	}
	if types != nil && len(types) != len(tokens) {
		return nil, fmt.Errorf("wordpiece: %d token types for %d tokens", len(types), len(tokens))
	}
	for _, id := range []int32{sp.CLS, sp.SEP, sp.UNK, sp.PAD, sp.MASK} {
		if id >= int32(len(tokens)) {
			return nil, fmt.Errorf("wordpiece: special token id %d is outside the %d-token vocabulary", id, len(tokens))
		}
	}
	if sp.UNK < 0 {
		return nil, errors.New("wordpiece: the vocabulary has no unknown token")
	}
	isControl := func(i int) bool {
		if types != nil {
			return types[i] == TypeControl
		}
		id := int32(i)
		return id == sp.CLS || id == sp.SEP || id == sp.UNK || id == sp.PAD || id == sp.MASK
	}
	phantom := slices.ContainsFunc(tokens, func(s string) bool { return strings.HasPrefix(s, phantomSpace) })

	t := &Tokenizer{
		tokens: tokens, pieces: make([]string, len(tokens)),
		starts: make(map[string]int32, len(tokens)), conts: make(map[string]int32, len(tokens)/4),
		sp: sp,
	}
	// Earlier ids win on duplicate spellings, as a vocab.txt lookup does.
	put := func(m map[string]int32, k string, id int32) {
		if _, dup := m[k]; !dup {
			m[k] = id
			t.longest = max(t.longest, len(k))
		}
	}
	for i, s := range tokens {
		id := int32(i)
		switch {
		case isControl(i):
			t.pieces[i] = s
			if s != "" {
				t.special = append(t.special, specialToken{s, id})
			}
			// A control token is also an ordinary word start, as in vocab.txt.
			put(t.starts, s, id)
		case phantom && strings.HasPrefix(s, phantomSpace):
			w := s[len(phantomSpace):]
			t.pieces[i] = w
			put(t.starts, w, id)
		case phantom:
			t.pieces[i] = "##" + s
			put(t.conts, s, id)
		case strings.HasPrefix(s, "##") && len(s) > 2:
			t.pieces[i] = s
			put(t.conts, s[2:], id)
		default:
			t.pieces[i] = s
			put(t.starts, s, id)
		}
	}
	sort.SliceStable(t.special, func(i, j int) bool { return len(t.special[i].text) > len(t.special[j].text) })
	return t, nil
}

// Special returns the special token ids.
func (t *Tokenizer) Special() Special { return t.sp }

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Piece is token id's vocab.txt spelling ("##ing" for a continuation), or
// "" for an id outside the vocabulary.
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Encode tokenizes text and adds [CLS] before and [SEP] after (when the
// vocabulary has them).
func (t *Tokenizer) Encode(text string) []int32 {
	ids := make([]int32, 0, len(text)/3+2)
	if t.sp.CLS >= 0 {
		ids = append(ids, t.sp.CLS)
	}
	ids = t.AppendTokens(ids, text)
	if t.sp.SEP >= 0 {
		ids = append(ids, t.sp.SEP)
	}
	return ids
}

// AppendTokens appends text's tokens to ids, without [CLS]/[SEP]. Control
// tokens spelled out in text ("[MASK]") become those tokens.
func (t *Tokenizer) AppendTokens(ids []int32, text string) []int32 {
	// next[i] is where special[i] next occurs in text from pos on
	// (len(text) if nowhere): looked up again only once pos has passed
	// it, so that text is searched for each control token about once, not
	// once for every control token in it.
	var next []int
	pos := 0
	for pos < len(text) {
		if next == nil {
			next = make([]int, len(t.special))
			for i := range next {
				next[i] = -1
			}
		}
		at, tok := len(text), (*specialToken)(nil)
		for i := range t.special { // longest first, so a tie keeps the longest
			if next[i] < pos {
				next[i] = len(text)
				if j := strings.Index(text[pos:], t.special[i].text); j >= 0 {
					next[i] = pos + j
				}
			}
			if next[i] < at {
				at, tok = next[i], &t.special[i]
			}
		}
		ids = t.appendPlain(ids, text[pos:at])
		if tok == nil {
			break
		}
		ids = append(ids, tok.id)
		pos = at + len(tok.text)
	}
	return ids
}

// appendPlain tokenizes text that holds no control tokens.
func (t *Tokenizer) appendPlain(ids []int32, text string) []int32 {
	var word []rune
	flush := func() {
		if len(word) > 0 {
			ids = t.appendWord(ids, word)
			word = word[:0]
		}
	}
	for _, r := range normalize(text) {
		switch {
		case isWhitespace(r):
			flush()
		case isPunctuation(r):
			flush()
			ids = t.appendWord(ids, []rune{r})
		default:
			word = append(word, r)
		}
	}
	flush()
	return ids
}

// appendWord appends the greedy longest-match pieces of one word, or
// [UNK] when some part of it matches no piece.
func (t *Tokenizer) appendWord(ids []int32, word []rune) []int32 {
	if len(word) > maxWordChars {
		return append(ids, t.sp.UNK)
	}
	s := string(word)
	// Byte offsets of rune boundaries, so that pieces end on whole runes.
	bounds := make([]int, 0, len(word)+1)
	for i := range s {
		bounds = append(bounds, i)
	}
	bounds = append(bounds, len(s))

	n := len(ids)
	start := 0 // index into bounds
	for start < len(bounds)-1 {
		m := t.starts
		if start > 0 {
			m = t.conts
		}
		found := false
		for end := len(bounds) - 1; end > start; end-- {
			if bounds[end]-bounds[start] > t.longest {
				continue // longer than any piece
			}
			if id, ok := m[s[bounds[start]:bounds[end]]]; ok {
				ids = append(ids, id)
				start, found = end, true
				break
			}
		}
		if !found {
			return append(ids[:n], t.sp.UNK)
		}
	}
	return ids
}

// normalize is BERT's text normalisation: control characters (and NUL,
// U+FFFD) dropped, whitespace made a space, spaces around CJK ideographs,
// accents stripped, lowercase.
func normalize(text string) []rune {
	out := make([]rune, 0, len(text))
	for _, r := range text {
		switch {
		case r == 0 || r == utf8.RuneError || isControl(r):
			continue
		case isWhitespace(r):
			out = append(out, ' ')
		case isCJK(r):
			out = append(out, ' ', r, ' ')
		default:
			out = appendStripped(out, r)
		}
	}
	for i, r := range out {
		out[i] = unicode.ToLower(r)
	}
	return out
}

// appendStripped appends r's canonical decomposition without nonspacing
// marks.
func appendStripped(out []rune, r rune) []rune {
	if r < 0xC0 {
		return append(out, r) // nothing below decomposes
	}
	if unicode.Is(unicode.Mn, r) {
		return out
	}
	if r >= 0xAC00 && r <= 0xD7A3 { // Hangul syllable: L V (T)
		const sBase, lBase, vBase, tBase, vCount, tCount = 0xAC00, 0x1100, 0x1161, 0x11A7, 21, 28
		s := r - sBase
		out = append(out, lBase+s/(vCount*tCount), vBase+(s%(vCount*tCount))/tCount)
		if tt := s % tCount; tt != 0 {
			out = append(out, tBase+tt)
		}
		return out
	}
	i := sort.Search(len(stripKeys), func(i int) bool { return stripKeys[i] >= r })
	if i < len(stripKeys) && stripKeys[i] == r {
		for _, d := range stripVals[i] {
			if !unicode.Is(unicode.Mn, d) {
				out = append(out, d)
			}
		}
		return out
	}
	return append(out, r)
}

// isWhitespace: Unicode's White_Space property (tested after controls
// are dropped, so of the Cc characters only tab, newline and carriage
// return remain).
func isWhitespace(r rune) bool { return unicode.IsSpace(r) }

// isControl: the Unicode categories Cc, Cf, Co and Cs, except tab,
// newline and carriage return (whitespace). Unassigned code points are
// kept, as Hugging Face's tokenizers keep them.
func isControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if r < 0x80 {
		return r < 0x20 || r == 0x7f
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// isPunctuation: all non-alphanumeric ASCII printables (BERT counts "$",
// "+", "^" … as punctuation) and Unicode P*.
func isPunctuation(r rune) bool {
	if (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126) {
		return true
	}
	return unicode.IsPunct(r)
}

// isCJK: the CJK Unified Ideographs blocks BERT spaces out (not Hangul,
// Hiragana or Katakana), with the ranges of Hugging Face's tokenizers (the
// reference), whose Extension E range starts at U+2B920 where Google's
// original BERT code has U+2B820.
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}
