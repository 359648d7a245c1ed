// Package bpe is byte-level byte-pair encoding (GPT-2 style; GGUF
// tokenizer.ggml.model "gpt2"): text is split into pieces by a
// pre-tokenizer, each piece's UTF-8 bytes are mapped to printable runes,
// and adjacent symbols are merged by the rank of the vocabulary's merges.
package bpe

import (
	"fmt"
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

// byteRune maps each byte to the printable rune GPT-2 uses for it; runeByte
// is its inverse.
var (
	byteRune [256]rune
	runeByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = rune(256 + n)
			n++
		}
		runeByte[byteRune[b]] = byte(b)
	}
}

// ByteRune is the rune that stands for byte b in a byte-level vocabulary.
func ByteRune(b byte) rune { return byteRune[b] }

// Tokenizer is a byte-level BPE tokenizer.
type Tokenizer struct {
	tokens       []string
	types        []int32
	vocab        map[string]int32
	ranks        map[[2]string]int
	pre          PreTokenizer
	ignoreMerges bool
	special      []special.Token // control, unknown and user-defined tokens, longest first
	BOS          int32           // -1: none
	EOS          int32
	AddBOS       bool           // Encode with special adds BOS
	AddEOS       bool           // and EOS
	eog          map[int32]bool // end-of-generation tokens besides EOS (markEOG)
	ownTypes     bool           // types is a copy of New's argument
}

// New builds a tokenizer. types may be nil (all normal); pre names the
// pre-tokenizer (see Pre). AddBOS starts as llama.cpp's default for pre.
func New(tokens []string, types []int32, merges []string, pre string) (*Tokenizer, error) {
	if types != nil && len(types) != len(tokens) {
		return nil, fmt.Errorf("bpe: %d token types for %d tokens", len(types), len(tokens))
	}
	t := &Tokenizer{tokens: tokens, types: types, vocab: make(map[string]int32, len(tokens)),
		ranks: make(map[[2]string]int, len(merges)), BOS: -1, EOS: -1}
	spec, _ := pres(pre)
	t.pre, t.ignoreMerges, t.AddBOS = spec.pretokenizer(), spec.ignoreMerges, spec.addBOS
	t.markEOG()
	for i, s := range tokens {
		// llama.cpp refuses duplicates; the last one wins here.
		t.vocab[s] = int32(i)
		switch t.typ(int32(i)) {
		case TypeControl, TypeUnknown:
			t.special = append(t.special, special.Token{ID: int32(i), Text: s, ParseOnly: true})
		case TypeUserDefined:
			t.special = append(t.special, special.Token{ID: int32(i), Text: s})
		}
	}
	special.Sort(t.special)
	for r, m := range merges {
		// As llama.cpp: split at the first space after the first byte; a
		// merge without one never applies.
		i := strings.IndexByte(m[min(1, len(m)):], ' ')
		if i < 0 {
			continue
		}
		i += min(1, len(m))
		a, b := m[:i], m[i+1:]
		if _, dup := t.ranks[[2]string{a, b}]; !dup {
			t.ranks[[2]string{a, b}] = r
		}
	}
	return t, nil
}

func (t *Tokenizer) typ(id int32) int32 {
	if t.types == nil {
		return TypeNormal
	}
	return t.types[id]
}

// Vocab is the number of tokens.
func (t *Tokenizer) Vocab() int { return len(t.tokens) }

// Token returns id's text (as stored in the vocabulary).
func (t *Tokenizer) Token(id int32) string { return t.tokens[id] }

// Encode tokenizes text as llama.cpp's llama_tokenize with add_special
// and parse_special both set to withSpecial: user-defined tokens written in
// the text are always recognised, control and unknown ones only with
// withSpecial, which also adds BOS (if AddBOS) and EOS (if AddEOS).
func (t *Tokenizer) Encode(text string, withSpecial bool) []int32 {
	var ids []int32
	var m merge.Merger
	var buf []byte
	if withSpecial && t.AddBOS && t.BOS >= 0 {
		ids = append(ids, t.BOS)
	}
	for _, f := range special.Partition(text, t.special, withSpecial) {
		if f.ID >= 0 {
			ids = append(ids, f.ID)
			continue
		}
		for _, piece := range t.pre(f.Text) {
			ids = t.encodePiece(ids, piece, &m, &buf)
		}
	}
	if withSpecial && t.AddEOS && t.EOS >= 0 {
		ids = append(ids, t.EOS)
	}
	return ids
}

// encodePiece appends the ids of one pre-tokenized piece: its bytes mapped
// to runes, merged lowest rank first (leftmost on ties). m and buf are
// scratch space.
func (t *Tokenizer) encodePiece(ids []int32, piece string, m *merge.Merger, buf *[]byte) []int32 {
	b := (*buf)[:0]
	for i := 0; i < len(piece); i++ {
		b = utf8.AppendRune(b, byteRune[piece[i]])
	}
	*buf = b
	mapped := string(b)
	if t.ignoreMerges {
		if id, ok := t.vocab[mapped]; ok {
			return append(ids, id)
		}
	}
	m.Run(mapped, t.lookup)
	m.Each(func(s string) {
		if id, ok := t.vocab[s]; ok {
			ids = append(ids, id)
			return
		}
		// Not in the vocabulary (a broken one): llama.cpp looks up each
		// byte of the symbol's UTF-8 as a token of its own.
		for i := 0; i < len(s); i++ {
			if id, ok := t.vocab[s[i:i+1]]; ok {
				ids = append(ids, id)
			}
		}
	})
	return ids
}

// lookup is the merge.Lookup of encodePiece: a pair merges by its rank.
func (t *Tokenizer) lookup(pair string, mid int) (uint32, merge.Kind) {
	if r, ok := t.ranks[[2]string{pair[:mid], pair[mid:]}]; ok {
		return uint32(r), merge.Ranked
	}
	return 0, merge.None
}

// DecodeBytes is the bytes of ids; control tokens give nothing,
// user-defined ones their text.
func (t *Tokenizer) DecodeBytes(ids []int32) []byte {
	var out []byte
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.tokens) {
			continue
		}
		s := t.tokens[id]
		switch t.typ(id) {
		case TypeControl, TypeUnused:
			continue
		case TypeUserDefined:
			out = append(out, s...)
			continue
		}
		for _, r := range s {
			if b, ok := runeByte[r]; ok {
				out = append(out, b)
			} else {
				out = utf8.AppendRune(out, r)
			}
		}
	}
	return out
}

// Decode is the text of ids.
func (t *Tokenizer) Decode(ids []int32) string { return string(t.DecodeBytes(ids)) }

// IsEOG reports whether id ends generation: EOS, or one of the tokens
// llama.cpp's loader marks (an end-of-turn such as <|im_end|>, <|eot_id|>,
// <|end|>, gpt-oss's <|return|> and <|call|>; see markEOG).
func (t *Tokenizer) IsEOG(id int32) bool { return id == t.EOS || t.eog[id] }
