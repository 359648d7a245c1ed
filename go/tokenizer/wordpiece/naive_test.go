package wordpiece

import "strings"

// The tokenizer as it was before control tokens were looked for once per
// text and pieces longer than any in the vocabulary were skipped: the
// reference of the differential tests. It searched the rest of the text
// for every control token after each one it found, so its time grew with
// the square of the length of text dense with them.

func (t *Tokenizer) naiveAppendTokens(ids []int32, text string) []int32 {
	for len(text) > 0 {
		at, tok := t.naiveNextSpecial(text)
		ids = t.naiveAppendPlain(ids, text[:at])
		if tok == nil {
			break
		}
		ids = append(ids, tok.id)
		text = text[at+len(tok.text):]
	}
	return ids
}

func (t *Tokenizer) naiveNextSpecial(text string) (at int, tok *specialToken) {
	at = len(text)
	for i := range t.special {
		if j := strings.Index(text, t.special[i].text); j >= 0 && j < at {
			at, tok = j, &t.special[i]
		}
	}
	return at, tok
}

func (t *Tokenizer) naiveAppendPlain(ids []int32, text string) []int32 {
	var word []rune
	flush := func() {
		if len(word) > 0 {
			ids = t.naiveAppendWord(ids, word)
			word = word[:0]
		}
	}
	for _, r := range normalize(text) {
		switch {
		case isWhitespace(r):
			flush()
		case isPunctuation(r):
			flush()
			ids = t.naiveAppendWord(ids, []rune{r})
		default:
			word = append(word, r)
		}
	}
	flush()
	return ids
}

func (t *Tokenizer) naiveAppendWord(ids []int32, word []rune) []int32 {
	if len(word) > maxWordChars {
		return append(ids, t.sp.UNK)
	}
	s := string(word)
	bounds := make([]int, 0, len(word)+1)
	for i := range s {
		bounds = append(bounds, i)
	}
	bounds = append(bounds, len(s))
	n := len(ids)
	start := 0
	for start < len(bounds)-1 {
		m := t.starts
		if start > 0 {
			m = t.conts
		}
		found := false
		for end := len(bounds) - 1; end > start; end-- {
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
