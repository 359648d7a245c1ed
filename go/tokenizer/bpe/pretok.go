package bpe

import (
	"strings"
	"unicode"
)

// The pre-tokenizers split text into pieces before BPE, as llama.cpp's
// (src/unicode.cpp: its hand-written versions of the models' regular
// expressions) do. Go's regexp has no lookahead (they use \s+(?!\S)), so
// each is written by hand as an ordered alternation over code points: the
// first alternative that matches at the current position wins, each greedy
// with its own backtracking.
//
//	gpt2:      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//	llama3:    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//	qwen2:     as llama3 with \p{N} (one digit) for \p{N}{1,3}
//	qwen35:    as qwen2 with marks (\p{M}) counted as letters
//	glm4:      llama3's, merges ignored for whole-token pieces
//	gpt-4o:    [^\r\n\p{L}\p{N}]?U*L+C?|[^\r\n\p{L}\p{N}]?U+L*C?|\p{N}{1,3}|
//	            ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//	           (also llama4's): U a letter but a-z, L a letter but A-Z, C
//	           a contraction ('s 't 're 've 'm 'll 'd, either case), as
//	           llama.cpp's std::regex runs it (its text collapsed to one
//	           byte a category: every other letter is both U and L)
//	deepseek-v3:
//	           three splits in turn: \p{N}{1,3}; runs of CJK ideographs
//	           and kana ([一-龥぀-ゟ゠-ヿ]); then
//	           [!-/:-@[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//	            ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//	default:   four splits in turn (llama.cpp's fallback): [\p{P}$+<=>^~|]+,
//	           then gpt2's within each piece, then \p{N}+, then [0-9]{3}
//	           (each keeps the text between matches as pieces)
//
// \s is Unicode white space (the same set as llama.cpp's). Text is decoded
// as llama.cpp decodes it: a byte that does not start a complete sequence
// becomes U+FFFD; surrogates and overlong forms are decoded (and encoded
// back) as they are.

// PreTokenizer splits text into pieces.
type PreTokenizer func(text string) []string

// preSpec is what a tokenizer.ggml.pre name means to llama.cpp.
type preSpec struct {
	split        []splitFn
	ignoreMerges bool // a piece that is a token is taken whole
	addBOS       bool // add BOS unless tokenizer.ggml.add_bos_token says otherwise
	noBOS        bool // no BOS token at all, whatever the file says (GLM's)
}

func pres(name string) (preSpec, bool) {
	gpt2 := func(rs []rune) []int { return spans(rs, gpt2At) }
	llama3 := func(rs []rune) []int {
		return spans(rs, func(rs []rune, i int) int { return llama3At(rs, i, 3, false) })
	}
	qwen2 := func(rs []rune) []int {
		return spans(rs, func(rs []rune, i int) int { return llama3At(rs, i, 1, false) })
	}
	qwen35 := func(rs []rune) []int {
		return spans(rs, func(rs []rune, i int) int { return llama3At(rs, i, 1, true) })
	}
	switch name {
	case "", "default":
		return preSpec{split: []splitFn{matches(punctRun), gpt2, matches(numberRun), matches(threeDigits)}}, true
	case "gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat",
		"mellum", "modern-bert", "trillion", "granite-docling", "a.x-4.0":
		return preSpec{split: []splitFn{gpt2}}, true
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano":
		return preSpec{split: []splitFn{llama3}, ignoreMerges: true, addBOS: true}, true
	case "smaug-bpe", "dbrx":
		return preSpec{split: []splitFn{llama3}}, true
	case "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open":
		return preSpec{split: []splitFn{qwen2}}, true
	case "qwen35":
		return preSpec{split: []splitFn{qwen35}}, true
	case "gpt-4o", "llama4", "kanana2", "talkie":
		return preSpec{split: []splitFn{func(rs []rune) []int { return spans(rs, gpt4oAt) }}}, true
	case "glm4", "glm5":
		return preSpec{split: []splitFn{llama3}, ignoreMerges: true, noBOS: true}, true
	case "chatglm-bpe":
		return preSpec{split: []splitFn{llama3}, noBOS: true}, true
	case "deepseek-v3":
		return preSpec{split: []splitFn{matches(upToThreeNumbers), matches(cjkRun), matches(deepseek3At)}}, true
	case "smollm", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2":
		// Every digit alone, then GPT-2's split.
		return preSpec{split: []splitFn{matches(oneDigit), gpt2}}, true
	}
	return preSpec{split: []splitFn{gpt2}}, false
}

// Pre returns the pre-tokenizer named by tokenizer.ggml.pre and whether
// the name is known (unknown names get gpt2's; llama.cpp refuses them).
func Pre(name string) (PreTokenizer, bool) {
	p, ok := pres(name)
	return p.pretokenizer(), ok
}

// NoBOS is whether llama.cpp's vocabulary has no BOS token for
// pre-tokenizer name (GLM's), whatever tokenizer.ggml.bos_token_id says.
func NoBOS(name string) bool {
	p, _ := pres(name)
	return p.noBOS
}

// DefaultAddBOS is whether llama.cpp adds BOS for pre-tokenizer name when
// the model says nothing (tokenizer.ggml.add_bos_token absent).
func DefaultAddBOS(name string) bool {
	p, _ := pres(name)
	return p.addBOS
}

func (p preSpec) pretokenizer() PreTokenizer {
	return func(text string) []string {
		rs := decode(text)
		pieces := []int{len(rs)}
		for _, f := range p.split {
			var next []int
			at := 0
			for _, n := range pieces {
				next = append(next, f(rs[at:at+n])...)
				at += n
			}
			pieces = next
		}
		out := make([]string, 0, len(pieces))
		at := 0
		for _, n := range pieces {
			if n > 0 {
				out = append(out, encode(rs[at:at+n]))
			}
			at += n
		}
		return out
	}
}

// splitFn splits rs into pieces and returns their lengths.
type splitFn func(rs []rune) []int

// spans applies an ordered alternation: at returns the end of the piece
// that starts at i.
func spans(rs []rune, at func(rs []rune, i int) int) []int {
	var out []int
	for i := 0; i < len(rs); {
		j := at(rs, i)
		out = append(out, j-i)
		i = j
	}
	return out
}

// matches splits rs at the matches of a pattern (the length of the match
// at i, 0 if none), keeping both the matches and the text between them,
// as llama.cpp's std::regex splits do.
func matches(match func(rs []rune, i int) int) splitFn {
	return func(rs []rune) []int {
		var out []int
		last := 0
		for i := 0; i < len(rs); {
			n := match(rs, i)
			if n == 0 {
				i++
				continue
			}
			if i > last {
				out = append(out, i-last)
			}
			out = append(out, n)
			i += n
			last = i
		}
		if last < len(rs) {
			out = append(out, len(rs)-last)
		}
		return out
	}
}

func punctRun(rs []rune, i int) int {
	return run(rs, i, func(r rune) bool { return unicode.IsPunct(r) || strings.ContainsRune("$+<=>^~|", r) }) - i
}

func numberRun(rs []rune, i int) int { return run(rs, i, isN) - i }

// oneDigit matches one number character (\p{N}).
func oneDigit(rs []rune, i int) int {
	if isN(rs[i]) {
		return 1
	}
	return 0
}

// upToThreeNumbers matches \p{N}{1,3}.
func upToThreeNumbers(rs []rune, i int) int {
	j := i
	for j < len(rs) && j-i < 3 && isN(rs[j]) {
		j++
	}
	return j - i
}

// cjkRun matches [一-龥぀-ゟ゠-ヿ]+: CJK ideographs to U+9FA5, hiragana
// and katakana.
func cjkRun(rs []rune, i int) int {
	return run(rs, i, func(r rune) bool { return r >= 0x4E00 && r <= 0x9FA5 || r >= 0x3040 && r <= 0x30FF }) - i
}

func isPS(r rune) bool     { return unicode.IsPunct(r) || unicode.IsSymbol(r) }
func isASCIIL(r rune) bool { return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' }

// deepseek3At is the last of DeepSeek V3's splits, at i (the length of
// the match, 0 if none: the text is then left as it is, between
// matches). Its alternatives in order:
func deepseek3At(rs []rune, i int) int {
	c := rs[i]
	// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
	if c < 0x80 && isPS(c) && i+1 < len(rs) && isASCIIL(rs[i+1]) {
		return run(rs, i+1, isASCIIL) - i
	}
	// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
	if !isNL(c) && !isL(c) && !isPS(c) && i+1 < len(rs) && isLM(rs[i+1]) {
		return run(rs, i+1, isLM) - i
	}
	if isLM(c) {
		return run(rs, i, isLM) - i
	}
	// ' ?[\p{P}\p{S}]+[\r\n]*'
	k := i
	if c == ' ' && k+1 < len(rs) && isPS(rs[k+1]) {
		k++
	}
	if isPS(rs[k]) {
		return run(rs, run(rs, k, isPS), isNL) - i
	}
	// \s*[\r\n]+, then \s+(?!\S) and \s+
	j := run(rs, i, isS)
	for p := j - 1; p >= i; p-- {
		if isNL(rs[p]) {
			return p + 1 - i
		}
	}
	if j > i {
		return whitespace(rs, i) - i
	}
	return 0
}

func threeDigits(rs []rune, i int) int {
	if i+3 <= len(rs) && isDigit(rs[i]) && isDigit(rs[i+1]) && isDigit(rs[i+2]) {
		return 3
	}
	return 0
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }
func isL(r rune) bool     { return unicode.IsLetter(r) }
func isLM(r rune) bool    { return unicode.IsLetter(r) || unicode.IsMark(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isS(r rune) bool     { return unicode.IsSpace(r) }
func isNL(r rune) bool    { return r == '\r' || r == '\n' }
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }

// decode is llama.cpp's unicode_cpts_from_utf8: well-formed sequences
// (by their lead byte's length and continuation bytes only) give their
// code point, anything else U+FFFD for one byte.
func decode(s string) []rune {
	rs := make([]rune, 0, len(s))
	cont := func(i int) bool { return i < len(s) && s[i]&0xC0 == 0x80 }
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c < 0x80:
			rs = append(rs, rune(c))
			i++
		case c&0x40 == 0:
			rs, i = append(rs, 0xFFFD), i+1
		case c&0x20 == 0 && cont(i+1):
			rs = append(rs, rune(c&0x1F)<<6|rune(s[i+1]&0x3F))
			i += 2
		case c&0x20 != 0 && c&0x10 == 0 && cont(i+1) && cont(i+2):
			rs = append(rs, rune(c&0x0F)<<12|rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F))
			i += 3
		case c&0x30 == 0x30 && c&0x08 == 0 && cont(i+1) && cont(i+2) && cont(i+3):
			rs = append(rs, rune(c&0x07)<<18|rune(s[i+1]&0x3F)<<12|rune(s[i+2]&0x3F)<<6|rune(s[i+3]&0x3F))
			i += 4
		default:
			rs, i = append(rs, 0xFFFD), i+1
		}
	}
	return rs
}

// encode is llama.cpp's unicode_cpt_to_utf8 (surrogates included). Above
// U+10FFFF, where llama.cpp throws, it writes U+FFFD.
func encode(rs []rune) string {
	b := make([]byte, 0, len(rs))
	for _, r := range rs {
		switch {
		case r < 0:
			b = append(b, "\uFFFD"...)
		case r <= 0x7F:
			b = append(b, byte(r))
		case r <= 0x7FF:
			b = append(b, 0xC0|byte(r>>6), 0x80|byte(r&0x3F))
		case r <= 0xFFFF:
			b = append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
		case r <= 0x10FFFF:
			b = append(b, 0xF0|byte(r>>18), 0x80|byte(r>>12&0x3F), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
		default:
			b = append(b, "\uFFFD"...)
		}
	}
	return string(b)
}

// contraction matches 's 't 're 've 'm 'll 'd at i (length in runes, 0 if none).
func contraction(rs []rune, i int, fold bool) int {
	if rs[i] != '\'' || i+1 >= len(rs) {
		return 0
	}
	low := func(r rune) rune {
		if fold {
			return unicode.ToLower(r)
		}
		return r
	}
	a := low(rs[i+1])
	switch a {
	case 's', 't', 'm', 'd':
		return 2
	}
	if i+2 < len(rs) {
		b := low(rs[i+2])
		if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
			return 3
		}
	}
	return 0
}

func run(rs []rune, i int, f func(rune) bool) int {
	j := i
	for j < len(rs) && f(rs[j]) {
		j++
	}
	return j
}

// whitespace matches \s+(?!\S) then \s+ at i (a space run); it returns the end.
func whitespace(rs []rune, i int) int {
	j := run(rs, i, isS)
	if j == len(rs) || j-i == 1 {
		return j // all of it (at the end), or the lone \s+
	}
	return j - 1 // leave one space to prefix the next word
}

func gpt2At(rs []rune, i int) int {
	if n := contraction(rs, i, false); n > 0 {
		return i + n
	}
	k := i
	if rs[k] == ' ' && k+1 < len(rs) {
		k++
	}
	switch {
	case isL(rs[k]):
		return run(rs, k, isL)
	case isN(rs[k]):
		return run(rs, k, isN)
	case isOther(rs[k]):
		return run(rs, k, isOther)
	}
	if isS(rs[i]) {
		return whitespace(rs, i)
	}
	return i + 1
}

// llama3At is llama3's alternation (maxDigits 3), qwen2's (1) and, with
// marks, qwen35's.
func llama3At(rs []rune, i, maxDigits int, marks bool) int {
	letter, other := isL, isOther
	if marks {
		letter = isLM
		other = func(r rune) bool { return isOther(r) && !unicode.IsMark(r) }
	}
	if n := contraction(rs, i, true); n > 0 {
		return i + n
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isNL(rs[i]) && !isN(rs[i]) && (letter(rs[i]) || i+1 < len(rs) && letter(rs[i+1])) {
		return run(rs, i+1, letter)
	}
	// \p{N}{1,maxDigits}
	if isN(rs[i]) {
		j := i + 1
		for j < len(rs) && j-i < maxDigits && isN(rs[j]) {
			j++
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if e := othersAt(rs, i, other, isNL); e > 0 {
		return e
	}
	return spacesAt(rs, i)
}

// gpt4oAt is gpt-4o's alternation at i (it returns the piece's end).
func gpt4oAt(rs []rune, i int) int {
	isU := func(r rune) bool { return isL(r) && !(r >= 'a' && r <= 'z') }
	isLo := func(r rune) bool { return isL(r) && !(r >= 'A' && r <= 'Z') }
	// C? after a word ending at e.
	withSuffix := func(e int) int {
		if e < len(rs) {
			e += contraction(rs, e, true)
		}
		return e
	}
	// U*L+C? from k: U* backtracks to the last letter after which L+
	// can start (greedy U*, then at least one L).
	upperLower := func(k int) int {
		for j := run(rs, k, isU); j >= k; j-- {
			if j < len(rs) && isLo(rs[j]) {
				return withSuffix(run(rs, j, isLo))
			}
		}
		return -1
	}
	// U+L*C? from k.
	upperThenLower := func(k int) int {
		u := run(rs, k, isU)
		if u == k {
			return -1
		}
		return withSuffix(run(rs, u, isLo))
	}
	prefix := !isNL(rs[i]) && !isL(rs[i]) && !isN(rs[i]) && i+1 < len(rs)
	for _, word := range []func(int) int{upperLower, upperThenLower} {
		if prefix {
			if e := word(i + 1); e > 0 {
				return e
			}
		}
		if e := word(i); e > 0 {
			return e
		}
	}
	if isN(rs[i]) {
		return i + upToThreeNumbers(rs, i)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	if e := othersAt(rs, i, isOther, func(r rune) bool { return isNL(r) || r == '/' }); e > 0 {
		return e
	}
	return spacesAt(rs, i)
}

// othersAt matches ' ?[other]+[tail]*' at i (llama3's and gpt-4o's
// punctuation runs) and returns its end, 0 if none.
func othersAt(rs []rune, i int, other, tail func(rune) bool) int {
	k := i
	if rs[k] == ' ' && k+1 < len(rs) {
		k++
	}
	if !other(rs[k]) {
		return 0
	}
	return run(rs, run(rs, k, other), tail)
}

// spacesAt matches \s*[\r\n]+|\s+(?!\S)|\s+ at i (up to the last newline
// of the space run, else the run less the space that prefixes the next
// word) and returns its end; a character that none matches is a piece.
func spacesAt(rs []rune, i int) int {
	j := run(rs, i, isS)
	last := -1
	for p := i; p < j; p++ {
		if isNL(rs[p]) {
			last = p
		}
	}
	if last >= 0 {
		return last + 1
	}
	if j > i {
		return whitespace(rs, i)
	}
	return i + 1
}
