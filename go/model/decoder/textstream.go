package decoder

import (
	"strings"
	"unicode/utf8"
)

// TextDecoder is what streaming text needs of a tokenizer.
type TextDecoder interface {
	Decode(ids []int32) string
}

// TextStream turns generated tokens into text as they come, without decoding
// the whole generation at every token: the text of a few tokens before
// (context) is decoded with the new ones and cut off, so that a piece's
// leading space and multi-byte characters split across tokens come out
// as the whole text would have them. A piece that ends inside a UTF-8
// character is held back until the character completes (or a few tokens
// pass).
type TextStream struct {
	dec  TextDecoder
	ctx  []int32 // tokens already turned into text, the last few
	base string  // their text
	pend []int32 // tokens not yet turned into text
}

const (
	streamContext = 4 // tokens of context decoded with new ones
	streamHold    = 8 // tokens held back at most for an incomplete character
)

// NewTextStream starts a stream of the text generated after prompt.
func NewTextStream(dec TextDecoder, prompt []int32) *TextStream {
	d := &TextStream{dec: dec}
	d.setContext(prompt)
	return d
}

func (d *TextStream) setContext(ids []int32) {
	if len(ids) > streamContext {
		ids = ids[len(ids)-streamContext:]
	}
	d.ctx = append(d.ctx[:0], ids...)
	d.base = d.dec.Decode(d.ctx)
}

// Add takes a generated token and returns the text it completes ("" while
// a character is incomplete).
func (d *TextStream) Add(id int32) string {
	d.pend = append(d.pend, id)
	s := d.text()
	if len(d.pend) < streamHold && (incompleteTail(s) || strings.HasSuffix(s, "\uFFFD")) {
		return ""
	}
	return d.commit(s)
}

// incompleteTail reports whether s ends inside a UTF-8 character that
// more bytes could complete.
func incompleteTail(s string) bool {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return !utf8.FullRuneInString(s[i:])
		}
	}
	return false
}

// ValidUTF8 replaces each byte that is not part of a valid UTF-8
// character with U+FFFD, as JSON encoding would: the text streamed and
// matched against stop sequences is the text the client reads.
func ValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Flush returns the text of the tokens held back.
func (d *TextStream) Flush() string {
	if len(d.pend) == 0 {
		return ""
	}
	return d.commit(d.text())
}

func (d *TextStream) text() string {
	all := make([]int32, 0, len(d.ctx)+len(d.pend))
	all = append(append(all, d.ctx...), d.pend...)
	full := d.dec.Decode(all)
	if strings.HasPrefix(full, d.base) {
		return full[len(d.base):]
	}
	// The context decodes differently followed by these tokens (a byte
	// sequence completed across them): decode the new tokens alone.
	return d.dec.Decode(d.pend)
}

func (d *TextStream) commit(s string) string {
	all := append(append([]int32(nil), d.ctx...), d.pend...)
	d.pend = d.pend[:0]
	d.setContext(all)
	return ValidUTF8(s)
}
