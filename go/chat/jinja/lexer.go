package jinja

import "strings"

type tokenType int

const (
	tokEOF tokenType = iota
	tokText
	tokNumber
	tokString
	tokIdent
	tokEquals
	tokOpenParen
	tokCloseParen
	tokOpenStatement
	tokCloseStatement
	tokOpenExpression
	tokCloseExpression
	tokOpenSquare
	tokCloseSquare
	tokOpenCurly
	tokCloseCurly
	tokComma
	tokDot
	tokColon
	tokPipe
	tokAdditive       // + - ~
	tokMultiplicative // * / %
	tokComparison     // < > <= >= == !=
	tokUnary          // - + before an operand
	tokComment
)

type token struct {
	t   tokenType
	val string
	pos int
}

// The lexer's table, longest first where prefixes overlap, as llama.cpp
// orders it.
var tokenTable = []struct {
	seq string
	t   tokenType
}{
	{"{%-", tokOpenStatement}, {"-%}", tokCloseStatement},
	{"{{-", tokOpenExpression}, {"-}}", tokCloseExpression},
	{"{%", tokOpenStatement}, {"%}", tokCloseStatement},
	{"{{", tokOpenExpression}, {"}}", tokCloseExpression},
	{"(", tokOpenParen}, {")", tokCloseParen},
	{"{", tokOpenCurly}, {"}", tokCloseCurly},
	{"[", tokOpenSquare}, {"]", tokCloseSquare},
	{",", tokComma}, {".", tokDot}, {":", tokColon}, {"|", tokPipe},
	{"<=", tokComparison}, {">=", tokComparison}, {"==", tokComparison}, {"!=", tokComparison},
	{"<", tokComparison}, {">", tokComparison},
	{"+", tokAdditive}, {"-", tokAdditive}, {"~", tokAdditive},
	{"*", tokMultiplicative}, {"/", tokMultiplicative}, {"%", tokMultiplicative},
	{"=", tokEquals},
}

var escapes = map[byte]byte{
	'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f', 'v': '\v',
	'\\': '\\', '\'': '\'', '"': '"',
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isWord(c byte) bool {
	return isDigit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

type lexer struct {
	src    string // normalised source
	orig   string // as given, for error positions
	pos    int
	tokens []token
}

// at is src[i], or 0 past the end (C++'s std::string gives '\0' at size()).
func (l *lexer) at(i int) byte {
	if i >= 0 && i < len(l.src) {
		return l.src[i]
	}
	return 0
}

// nextIs: is the byte n after pos one of chars (false near the end, as
// llama.cpp's next_pos_is).
func (l *lexer) nextIs(chars string, n int) bool {
	if l.pos+n >= len(l.src) {
		return false
	}
	return strings.IndexByte(chars, l.src[l.pos+n]) >= 0
}

func (l *lexer) fail(msg string, pos int) error {
	return &Error{Kind: "lexer", Msg: msg, Pos: pos, src: l.orig}
}

// consumeWhile reads while pred holds, unescaping backslashes (only string
// literals let a backslash through their predicate).
func (l *lexer) consumeWhile(pred func(byte) bool) (string, error) {
	var b strings.Builder
	for pred(l.at(l.pos)) {
		if l.at(l.pos) == '\\' {
			l.pos++
			if l.pos >= len(l.src) {
				return "", l.fail("unexpected end of input after escape character", l.pos)
			}
			c := l.src[l.pos]
			l.pos++
			u, ok := escapes[c]
			if !ok {
				return "", l.fail("unknown escape character \\"+string(c), l.pos)
			}
			b.WriteByte(u)
			continue
		}
		b.WriteByte(l.at(l.pos))
		l.pos++
		if l.pos > len(l.src) {
			return "", l.fail("unexpected end of input during consume_while", l.pos)
		}
	}
	return b.String(), nil
}

func (l *lexer) consumeNumber() (string, error) {
	num, err := l.consumeWhile(isDigit)
	if err != nil {
		return "", err
	}
	if l.pos < len(l.src) && l.src[l.pos] == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]) {
		l.pos++
		frac, err := l.consumeWhile(isDigit)
		if err != nil {
			return "", err
		}
		num += "." + frac
	}
	return num, nil
}

// tokenize is llama.cpp's lexer (common/jinja/lexer.cpp), quirks
// included: lstrip_blocks and trim_blocks on, CR/CRLF to LF, one trailing
// newline dropped.
func tokenize(source string) ([]token, string, error) {
	if source == "" {
		return nil, "", nil
	}
	src := strings.ReplaceAll(source, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	if source[len(source)-1] == '\n' {
		src = src[:len(src)-1]
	}
	l := &lexer{src: src, orig: source}
	curly := 0
	for l.pos < len(l.src) {
		last := tokCloseStatement
		if len(l.tokens) > 0 {
			last = l.tokens[len(l.tokens)-1].t
		}
		if last == tokCloseStatement || last == tokCloseExpression || last == tokComment {
			if done := l.text(); done {
				continue
			}
		}
		if l.at(l.pos) == '{' && l.nextIs("#", 1) {
			start := l.pos
			l.pos += 2
			var b strings.Builder
			for !(l.at(l.pos) == '#' && l.nextIs("}", 1)) {
				if l.pos+2 >= len(l.src) {
					return nil, "", l.fail("missing end of comment tag", l.pos)
				}
				b.WriteByte(l.src[l.pos])
				l.pos++
			}
			l.tokens = append(l.tokens, token{tokComment, b.String(), start})
			l.pos += 2
			continue
		}
		if l.at(l.pos) == '-' && (last == tokOpenExpression || last == tokOpenStatement) {
			l.pos++
			if l.pos >= len(l.src) {
				break
			}
		}
		if _, err := l.consumeWhile(isSpace); err != nil {
			return nil, "", err
		}
		if l.pos >= len(l.src) {
			break
		}
		ch := l.src[l.pos]
		closing := ch == '-' && l.nextIs("%}", 1)
		if !closing && (ch == '-' || ch == '+') {
			start := l.pos
			prev := tokEOF
			if len(l.tokens) > 0 {
				prev = l.tokens[len(l.tokens)-1].t
			}
			if prev == tokText || prev == tokEOF {
				return nil, "", l.fail("unexpected character: "+string(ch), l.pos)
			}
			switch prev {
			case tokIdent, tokNumber, tokString, tokCloseParen, tokCloseSquare:
				// a binary operator: the table below takes it
			default:
				l.pos++
				num, err := l.consumeNumber()
				if err != nil {
					return nil, "", err
				}
				t := tokNumber
				if num == "" {
					t = tokUnary
				}
				l.tokens = append(l.tokens, token{t, string(ch) + num, start})
				continue
			}
		}
		matched := false
		for _, m := range tokenTable {
			if m.seq == "}}" && curly > 0 {
				continue
			}
			if strings.HasPrefix(l.src[l.pos:], m.seq) {
				l.tokens = append(l.tokens, token{m.t, m.seq, l.pos})
				switch m.t {
				case tokOpenExpression:
					curly = 0
				case tokOpenCurly:
					curly++
				case tokCloseCurly:
					curly--
				}
				l.pos += len(m.seq)
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		start := l.pos
		switch {
		case ch == '\'' || ch == '"':
			l.pos++
			s, err := l.consumeWhile(func(c byte) bool { return c != ch })
			if err != nil {
				return nil, "", err
			}
			l.tokens = append(l.tokens, token{tokString, s, start})
			l.pos++
		case isDigit(ch):
			num, err := l.consumeNumber()
			if err != nil {
				return nil, "", err
			}
			l.tokens = append(l.tokens, token{tokNumber, num, start})
		case isWord(ch):
			w, err := l.consumeWhile(isWord)
			if err != nil {
				return nil, "", err
			}
			l.tokens = append(l.tokens, token{tokIdent, w, start})
		default:
			return nil, "", l.fail("unexpected character: "+string(ch), l.pos)
		}
	}
	return l.tokens, l.src, nil
}

// text consumes the text up to the next block, with the whitespace
// control of the blocks on either side; true when it made a token.
func (l *lexer) text() bool {
	rstripPrev, canRmNewline := false, false
	if l.pos > 3 {
		c0, c1, c2 := l.src[l.pos-3], l.src[l.pos-2], l.src[l.pos-1]
		rstripPrev = c0 == '-' && (c1 == '%' || c1 == '}' || c1 == '#') && c2 == '}'
		canRmNewline = (c1 == '#' || c1 == '%' || c1 == '-') && c2 == '}'
	}
	start := l.pos
	end := start
	for l.pos < len(l.src) && !(l.src[l.pos] == '{' && l.nextIs("%{#", 1)) {
		l.pos++
		end = l.pos
	}
	// lstrip_blocks: spaces before a {% or {# on their own line go
	if l.at(l.pos) == '{' && l.nextIs("%#-", 1) {
		for cur := end; cur > start; cur-- {
			c := l.src[cur-1]
			if cur == 1 {
				end = 0
				break
			}
			if c == '\n' {
				end = cur
				break
			}
			if !isSpace(c) {
				break
			}
		}
	}
	text := ""
	if end > start {
		text = l.src[start:end]
	}
	// trim_blocks: the newline after a block goes
	if canRmNewline && strings.HasPrefix(text, "\n") {
		text = text[1:]
	}
	if rstripPrev {
		text = strings.TrimLeft(text, " \t\r\n")
	}
	if l.at(l.pos) == '{' && l.nextIs("{%#", 1) && l.nextIs("-", 2) {
		text = strings.TrimRight(text, " \t\r\n")
	}
	if text == "" {
		return false
	}
	l.tokens = append(l.tokens, token{tokText, text, start})
	return true
}
