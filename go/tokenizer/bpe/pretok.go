package bpe

import "unicode"

// The pre-tokenizers split text into pieces before BPE, as the regular
// expressions of the models' Hugging Face tokenizers do. Go's regexp has
// no lookahead (they use \s+(?!\S)), so each is written by hand as an
// ordered alternation over runes: the first alternative that matches at
// the current position wins, each greedy with its own backtracking.
//
//	gpt2:      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//	llama-bpe: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//	qwen2:     as llama-bpe with \p{N} (one digit) for \p{N}{1,3}
//
// \s is Unicode white space (as in the regex engines those tokenizers use).

// PreTokenizer splits text into pieces.
type PreTokenizer func(text string) []string

// Pre returns the pre-tokenizer named by tokenizer.ggml.pre ("default",
// "gpt2", "llama-bpe" (llama3), "qwen2"; also a few aliases), and whether
// the name is known (unknown names get gpt2's).
func Pre(name string) (PreTokenizer, bool) {
	switch name {
	case "", "default", "gpt2", "gpt-2":
		return splitGPT2, true
	case "llama-bpe", "llama3", "llama-v3", "smaug-bpe", "dbrx":
		return func(s string) []string { return splitLlama3(s, 3) }, true
	case "qwen2", "qwen35", "deepseek-r1-qwen", "megrez":
		return func(s string) []string { return splitLlama3(s, 1) }, true
	}
	return splitGPT2, false
}

func isL(r rune) bool     { return unicode.IsLetter(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isS(r rune) bool     { return unicode.IsSpace(r) }
func isNL(r rune) bool    { return r == '\r' || r == '\n' }
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }

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

func splitGPT2(s string) []string {
	rs := []rune(s)
	var out []string
	for i := 0; i < len(rs); {
		j := gpt2At(rs, i)
		out = append(out, string(rs[i:j]))
		i = j
	}
	return out
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
	return whitespace(rs, i)
}

func splitLlama3(s string, maxDigits int) []string {
	rs := []rune(s)
	var out []string
	for i := 0; i < len(rs); {
		j := llama3At(rs, i, maxDigits)
		out = append(out, string(rs[i:j]))
		i = j
	}
	return out
}

func llama3At(rs []rune, i, maxDigits int) int {
	if n := contraction(rs, i, true); n > 0 {
		return i + n
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if isL(rs[i]) {
		return run(rs, i, isL)
	}
	if !isNL(rs[i]) && !isN(rs[i]) && i+1 < len(rs) && isL(rs[i+1]) {
		return run(rs, i+1, isL)
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
	k := i
	if rs[k] == ' ' && k+1 < len(rs) {
		k++
	}
	if isOther(rs[k]) {
		return run(rs, run(rs, k, isOther), isNL)
	}
	// \s*[\r\n]+: up to the last newline of the space run.
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
	return whitespace(rs, i)
}
