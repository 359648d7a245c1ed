package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// Element types, numbered as llama.cpp's llama_gretype.
const (
	tEnd      uint8 = 0 // end of a rule
	tAlt      uint8 = 1 // start of another alternative
	tRuleRef  uint8 = 2 // non-terminal: value is a rule id
	tChar     uint8 = 3 // terminal: a code point (starts a character set)
	tCharNot  uint8 = 4 // terminal: a negated character set ([^...])
	tRngUpper uint8 = 5 // the preceding char is the lower end of a range
	tCharAlt  uint8 = 6 // another char of the same set
	tCharAny  uint8 = 7 // any code point (.)
	tToken    uint8 = 8 // terminal: token id (<[id]> or <name>)
	tTokenNot uint8 = 9 // terminal: any token but id (!<...>)
)

type elem struct {
	typ uint8
	val uint32
}

// Limits on what Compile accepts; beyond them it returns an error rather
// than spending unbounded time or memory (llama.cpp has only its
// repetition threshold and would allocate or recurse without bound).
const (
	// MaxGrammarBytes bounds the grammar text.
	MaxGrammarBytes = 4 << 20
	// MaxRules bounds the rule count, the rules that {m,n}, *, + and ?
	// and groups synthesize included.
	MaxRules = 1 << 16
	// MaxElements bounds the elements of all rules together (what long
	// literals repeated {m,n} times expand to).
	MaxElements = 1 << 22
	// MaxNesting bounds the nesting of parentheses.
	MaxNesting = 1000
	// maxRepetition is llama.cpp's MAX_REPETITION_THRESHOLD: the largest
	// {m,n} count, and the largest product of nested repetition counts.
	maxRepetition = 2000
)

// TokenResolver maps the text of a token reference <name> (angle brackets
// included, as llama.cpp tokenizes it with parse_special) to the one
// token it tokenizes to; ok is false when it is not exactly one token.
type TokenResolver func(text string) (id int32, ok bool)

// Error is a refused grammar.
type Error struct {
	Pos  int    // byte offset in the grammar text (-1: not positional)
	Line int    // 1-based line of Pos
	Col  int    // 1-based byte column of Pos
	Msg  string // what is wrong
}

func (e *Error) Error() string {
	if e.Pos < 0 {
		return "grammar: " + e.Msg
	}
	return fmt.Sprintf("grammar: %d:%d: %s", e.Line, e.Col, e.Msg)
}

type parser struct {
	src     []byte
	resolve TokenResolver
	symbols map[string]uint32
	names   []string // symbol id -> name
	rules   [][]elem // by symbol id; nil: not (yet) defined
	nElems  int
	depth   int
}

// parseErr is panicked inside the parser and recovered in parse.
type parseErr struct{ e *Error }

func (p *parser) fail(pos int, format string, args ...any) {
	e := &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
	if pos >= 0 {
		e.Line = 1 + strings.Count(string(p.src[:pos]), "\n")
		e.Col = pos + 1 - (strings.LastIndexByte(string(p.src[:pos]), '\n') + 1)
	}
	panic(parseErr{e})
}

// at is the byte at i, 0 past the end (the text is NUL-terminated in
// llama.cpp: a NUL byte ends it there too).
func (p *parser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

// context is a short quote of the text at pos for error messages.
func (p *parser) context(pos int) string {
	end := pos + 24
	if end > len(p.src) {
		end = len(p.src)
	}
	if pos >= len(p.src) {
		return "end of input"
	}
	return strconv.Quote(string(p.src[pos:end]))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isWordChar(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == '-' || isDigit(c)
}

// decodeUTF8At decodes one code point of the grammar text as llama.cpp's
// decode_utf8 does (lenient: continuation bytes read as one-byte chars,
// stops at the end).
func (p *parser) decodeUTF8At(i int) (uint32, int) {
	lookup := [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}
	first := p.at(i)
	n := lookup[first>>4]
	value := uint32(first) & (uint32(1)<<(8-n) - 1)
	end := i + n
	pos := i + 1
	for ; pos < end && p.at(pos) != 0; pos++ {
		value = value<<6 + uint32(p.at(pos)&0x3f)
	}
	return value, pos
}

func (p *parser) parseHex(i, size int) (uint32, int) {
	var v uint32
	pos := i
	for ; pos < i+size && p.at(pos) != 0; pos++ {
		c := p.at(pos)
		v <<= 4
		switch {
		case 'a' <= c && c <= 'f':
			v += uint32(c-'a') + 10
		case 'A' <= c && c <= 'F':
			v += uint32(c-'A') + 10
		case '0' <= c && c <= '9':
			v += uint32(c - '0')
		default:
			p.fail(i, "expecting %d hex chars at %s", size, p.context(i))
		}
	}
	if pos != i+size {
		p.fail(i, "expecting %d hex chars at %s", size, p.context(i))
	}
	return v, pos
}

func (p *parser) parseSpace(i int, newlineOK bool) int {
	for {
		c := p.at(i)
		switch {
		case c == '#':
			for p.at(i) != 0 && p.at(i) != '\r' && p.at(i) != '\n' {
				i++
			}
		case c == ' ' || c == '\t' || (newlineOK && (c == '\r' || c == '\n')):
			i++
		default:
			return i
		}
	}
}

func (p *parser) parseName(i int) int {
	pos := i
	for isWordChar(p.at(pos)) {
		pos++
	}
	if pos == i {
		p.fail(i, "expecting name at %s", p.context(i))
	}
	return pos
}

func (p *parser) parseInt(i int) int {
	pos := i
	for isDigit(p.at(pos)) {
		pos++
	}
	if pos == i {
		p.fail(i, "expecting integer at %s", p.context(i))
	}
	return pos
}

func (p *parser) parseChar(i int) (uint32, int) {
	if p.at(i) == '\\' {
		switch c := p.at(i + 1); c {
		case 'x':
			return p.parseHex(i+2, 2)
		case 'u':
			return p.parseHex(i+2, 4)
		case 'U':
			return p.parseHex(i+2, 8)
		case 't':
			return '\t', i + 2
		case 'r':
			return '\r', i + 2
		case 'n':
			return '\n', i + 2
		case '\\', '"', '[', ']', '-':
			return uint32(c), i + 2
		default:
			p.fail(i, "unknown escape at %s", p.context(i))
		}
	} else if p.at(i) != 0 {
		return p.decodeUTF8At(i)
	}
	p.fail(i, "unexpected end of input")
	return 0, 0
}

func (p *parser) parseToken(i int) (uint32, int) {
	pos := i
	if p.at(pos) != '<' {
		p.fail(pos, "expecting '<' at %s", p.context(pos))
	}
	pos++
	if p.at(pos) == '[' {
		pos++
		end := p.parseInt(pos)
		id, err := strconv.ParseUint(string(p.src[pos:end]), 10, 32)
		if err != nil {
			p.fail(pos, "parsed token id is too big at %s", p.context(pos))
		}
		pos = end
		if p.at(pos) != ']' {
			p.fail(pos, "expecting ']' at %s", p.context(pos))
		}
		pos++
		if p.at(pos) != '>' {
			p.fail(pos, "expecting '>' at %s", p.context(pos))
		}
		return uint32(id), pos + 1
	}
	if p.resolve == nil {
		p.fail(i, "no vocab to parse token at %s", p.context(i))
	}
	for p.at(pos) != 0 && p.at(pos) != '>' {
		pos++
	}
	if p.at(pos) != '>' {
		p.fail(pos, "expecting '>' at %s", p.context(pos))
	}
	pos++
	id, ok := p.resolve(string(p.src[i:pos]))
	if !ok || id < 0 {
		p.fail(i, "invalid token '%s': not exactly one token of the vocabulary", p.src[i:pos])
	}
	return uint32(id), pos
}

func (p *parser) symbolID(name string) uint32 {
	if id, ok := p.symbols[name]; ok {
		return id
	}
	return p.newSymbol(name)
}

func (p *parser) newSymbol(name string) uint32 {
	if len(p.names) >= MaxRules {
		p.fail(-1, "more than %d rules (MaxRules)", MaxRules)
	}
	id := uint32(len(p.names))
	p.symbols[name] = id
	p.names = append(p.names, name)
	return id
}

// generateSymbol is llama.cpp's generate_symbol_id: base_N, N the id.
func (p *parser) generateSymbol(base string) uint32 {
	if len(p.names) >= MaxRules {
		p.fail(-1, "more than %d rules (MaxRules)", MaxRules)
	}
	id := uint32(len(p.names))
	name := base + "_" + strconv.Itoa(int(id))
	p.symbols[name] = id
	p.names = append(p.names, name)
	return id
}

func (p *parser) addRule(id uint32, rule []elem) {
	p.nElems += len(rule)
	if p.nElems > MaxElements {
		p.fail(-1, "grammar expands to more than %d elements (MaxElements)", MaxElements)
	}
	for uint32(len(p.rules)) <= id {
		p.rules = append(p.rules, nil)
	}
	p.rules[id] = rule
}

func (p *parser) grow(rule []elem, add int) {
	if p.nElems+len(rule)+add > MaxElements {
		p.fail(-1, "grammar expands to more than %d elements (MaxElements)", MaxElements)
	}
}

func (p *parser) parseAlternates(i int, ruleName string, ruleID uint32, nested bool) int {
	var rule []elem
	pos := p.parseSequence(i, ruleName, &rule, nested)
	for p.at(pos) == '|' {
		rule = append(rule, elem{tAlt, 0})
		pos = p.parseSpace(pos+1, true)
		pos = p.parseSequence(pos, ruleName, &rule, nested)
	}
	rule = append(rule, elem{tEnd, 0})
	p.addRule(ruleID, rule)
	return pos
}

const noMax = ^uint64(0)

func (p *parser) parseSequence(i int, ruleName string, rulep *[]elem, nested bool) int {
	rule := *rulep
	defer func() { *rulep = rule }()
	lastSymStart := len(rule)
	pos := i
	nPrevRules := uint64(1)

	repeat := func(minTimes, maxTimes uint64) {
		unbounded := maxTimes == noMax
		if lastSymStart == len(rule) {
			p.fail(pos, "expecting preceding item to */+/?/{ at %s", p.context(pos))
		}
		prev := append([]elem(nil), rule[lastSymStart:]...)
		total := uint64(1)
		if !unbounded && maxTimes > 0 {
			total = maxTimes
		} else if minTimes > 0 {
			total = minTimes
		}
		if nPrevRules*total > maxRepetition {
			p.fail(pos, "number of rules that are going to be repeated multiplied by the new repetition exceeds sane defaults (%d), please reduce the number of repetitions or rule complexity", maxRepetition)
		}
		if minTimes == 0 {
			rule = rule[:lastSymStart]
		} else {
			p.grow(rule, int(minTimes-1)*len(prev))
			for k := uint64(1); k < minTimes; k++ {
				rule = append(rule, prev...)
			}
		}
		var lastRec uint32
		nOpt := uint64(1)
		if !unbounded {
			nOpt = maxTimes - minTimes
		}
		for k := uint64(0); k < nOpt; k++ {
			rec := append(make([]elem, 0, len(prev)+3), prev...)
			id := p.generateSymbol(ruleName)
			if k > 0 || unbounded {
				ref := lastRec
				if unbounded {
					ref = id
				}
				rec = append(rec, elem{tRuleRef, ref})
			}
			rec = append(rec, elem{tAlt, 0}, elem{tEnd, 0})
			p.addRule(id, rec)
			lastRec = id
		}
		if nOpt > 0 {
			rule = append(rule, elem{tRuleRef, lastRec})
		}
		nPrevRules *= total
	}

	for p.at(pos) != 0 {
		c := p.at(pos)
		switch {
		case c == '"':
			pos++
			lastSymStart = len(rule)
			nPrevRules = 1
			for p.at(pos) != '"' {
				if p.at(pos) == 0 {
					p.fail(pos, "unexpected end of input in a literal")
				}
				var v uint32
				v, pos = p.parseChar(pos)
				rule = append(rule, elem{tChar, v})
			}
			pos = p.parseSpace(pos+1, nested)
		case c == '[':
			pos++
			start := tChar
			if p.at(pos) == '^' {
				pos++
				start = tCharNot
			}
			lastSymStart = len(rule)
			nPrevRules = 1
			for p.at(pos) != ']' {
				if p.at(pos) == 0 {
					p.fail(pos, "unexpected end of input in a character class")
				}
				var v uint32
				v, pos = p.parseChar(pos)
				typ := start
				if lastSymStart < len(rule) {
					typ = tCharAlt
				}
				rule = append(rule, elem{typ, v})
				if p.at(pos) == '-' && p.at(pos+1) != ']' {
					if p.at(pos+1) == 0 {
						p.fail(pos, "unexpected end of input in a character class")
					}
					v, pos = p.parseChar(pos + 1)
					rule = append(rule, elem{tRngUpper, v})
				}
			}
			pos = p.parseSpace(pos+1, nested)
		case c == '<' || c == '!':
			typ := tToken
			if c == '!' {
				typ = tTokenNot
				pos++
			}
			var id uint32
			id, pos = p.parseToken(pos)
			lastSymStart = len(rule)
			nPrevRules = 1
			rule = append(rule, elem{typ, id})
			pos = p.parseSpace(pos, nested)
		case isWordChar(c):
			end := p.parseName(pos)
			ref := p.symbolID(string(p.src[pos:end]))
			pos = p.parseSpace(end, nested)
			lastSymStart = len(rule)
			nPrevRules = 1
			rule = append(rule, elem{tRuleRef, ref})
		case c == '(':
			open := pos
			if p.depth >= MaxNesting {
				p.fail(pos, "parentheses nested deeper than %d (MaxNesting)", MaxNesting)
			}
			p.depth++
			pos = p.parseSpace(pos+1, true)
			before := len(p.names)
			sub := p.generateSymbol(ruleName)
			pos = p.parseAlternates(pos, ruleName, sub, true)
			p.depth--
			nPrevRules = uint64(len(p.names) - before)
			if nPrevRules < 1 {
				nPrevRules = 1
			}
			lastSymStart = len(rule)
			rule = append(rule, elem{tRuleRef, sub})
			if p.at(pos) != ')' {
				p.fail(pos, "expecting ')' at %s (to close the '(' at offset %d)", p.context(pos), open)
			}
			pos = p.parseSpace(pos+1, nested)
		case c == '.':
			lastSymStart = len(rule)
			nPrevRules = 1
			rule = append(rule, elem{tCharAny, 0})
			pos = p.parseSpace(pos+1, nested)
		case c == '*':
			pos = p.parseSpace(pos+1, nested)
			repeat(0, noMax)
		case c == '+':
			pos = p.parseSpace(pos+1, nested)
			repeat(1, noMax)
		case c == '?':
			pos = p.parseSpace(pos+1, nested)
			repeat(0, 1)
		case c == '{':
			pos = p.parseSpace(pos+1, nested)
			if !isDigit(p.at(pos)) {
				p.fail(pos, "expecting an int at %s", p.context(pos))
			}
			end := p.parseInt(pos)
			minTimes := parseCount(p.src[pos:end])
			pos = p.parseSpace(end, nested)
			maxTimes := noMax
			switch p.at(pos) {
			case '}':
				maxTimes = minTimes
				pos = p.parseSpace(pos+1, nested)
			case ',':
				pos = p.parseSpace(pos+1, nested)
				if isDigit(p.at(pos)) {
					end := p.parseInt(pos)
					maxTimes = parseCount(p.src[pos:end])
					pos = p.parseSpace(end, nested)
				}
				if p.at(pos) != '}' {
					p.fail(pos, "expecting '}' at %s", p.context(pos))
				}
				pos = p.parseSpace(pos+1, nested)
			default:
				p.fail(pos, "expecting ',' at %s", p.context(pos))
			}
			if minTimes > maxRepetition {
				p.fail(pos, "number of repetitions exceeds sane defaults (%d), please reduce the number of repetitions", maxRepetition)
			}
			if maxTimes != noMax && maxTimes > maxRepetition {
				maxTimes = noMax
			}
			if maxTimes != noMax && maxTimes < minTimes {
				// llama.cpp computes max-min in unsigned arithmetic and
				// would try to synthesize ~2^64 rules.
				p.fail(pos, "repetition {%d,%d}: the maximum is below the minimum", minTimes, maxTimes)
			}
			repeat(minTimes, maxTimes)
		default:
			return pos
		}
	}
	return pos
}

// parseCount is std::stoull of a digit string, saturating (an overflow
// throws in llama.cpp; any count beyond maxRepetition is refused or
// treated as unbounded anyway).
func parseCount(b []byte) uint64 {
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return noMax - 1
	}
	return v
}

func (p *parser) parseRule(i int) int {
	nameEnd := p.parseName(i)
	pos := p.parseSpace(nameEnd, false)
	name := string(p.src[i:nameEnd])
	id := p.symbolID(name)
	if !(p.at(pos) == ':' && p.at(pos+1) == ':' && p.at(pos+2) == '=') {
		p.fail(pos, "expecting ::= at %s", p.context(pos))
	}
	pos = p.parseSpace(pos+3, true)
	pos = p.parseAlternates(pos, name, id, false)
	switch p.at(pos) {
	case '\r':
		if p.at(pos+1) == '\n' {
			pos += 2
		} else {
			pos++
		}
	case '\n':
		pos++
	case 0:
	default:
		p.fail(pos, "expecting newline or end at %s", p.context(pos))
	}
	return p.parseSpace(pos, true)
}

// parse is llama_grammar_parser::parse: the rules by symbol id, their
// names, and the validation that every referenced rule is defined.
func parse(src string, resolve TokenResolver) (p *parser, err error) {
	if len(src) > MaxGrammarBytes {
		return nil, &Error{Pos: -1, Msg: fmt.Sprintf("grammar text of %d bytes exceeds %d (MaxGrammarBytes)", len(src), MaxGrammarBytes)}
	}
	if k := strings.IndexByte(src, 0); k >= 0 {
		src = src[:k] // a C string ends there
	}
	p = &parser{src: []byte(src), resolve: resolve, symbols: map[string]uint32{}}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseErr)
			if !ok {
				panic(r)
			}
			p, err = nil, pe.e
		}
	}()
	pos := p.parseSpace(0, true)
	for p.at(pos) != 0 {
		pos = p.parseRule(pos)
	}
	for id, rule := range p.rules {
		if rule == nil {
			p.fail(-1, "undefined rule %q (referenced but never defined)", p.names[id])
		}
		for _, e := range rule {
			if e.typ == tRuleRef && (int(e.val) >= len(p.rules) || p.rules[e.val] == nil) {
				p.fail(-1, "undefined rule identifier %q (referenced by %q)", p.names[e.val], p.names[id])
			}
		}
	}
	return p, nil
}
