package schema

import (
	"math"
	"strconv"
	"strings"
)

// Regular-expression patterns to GBNF, as llama.cpp's _pattern_to_rule:
// only patterns anchored with ^ and $; groups, (?:), alternation, classes
// with GBNF escapes, . (no newline, or any character with Dotall),
// * + ? {m,n}. A pattern with no grammar equivalent (lookarounds, \d, \w,
// an unanchored pattern ...) is "not supported": a warning, and any string
// is accepted; a pattern that is not a regular expression ("(a", "*a") is
// an error.

const maxPatternDepth = 100

type patternError struct {
	invalid bool // not a valid regex (an error), else unsupported (a warning)
	msg     string
}

func isNonLiteral(c byte) bool {
	switch c {
	case '|', '.', '(', ')', '[', ']', '{', '}', '*', '+', '?', '^', '$':
		return true
	}
	return false
}

// escapedInRegexpsButNotInLiterals is the same set as isNonLiteral.
func escapedInRegexpsButNotInLiterals(c byte) bool { return isNonLiteral(c) }

// gbnfEscapeLength is gbnf_escape_length: the length of the escape at
// pattern[pos] that GBNF reads the same way (\xHH, \uHHHH, \UHHHHHHHH,
// \t \r \n \\ \" \[ \] \-), 0 for any other.
func gbnfEscapeLength(p string, pos int) int {
	if pos+1 >= len(p) || p[pos] != '\\' {
		return 0
	}
	nHex := 0
	switch p[pos+1] {
	case 'x':
		nHex = 2
	case 'u':
		nHex = 4
	case 'U':
		nHex = 8
	case 't', 'r', 'n', '\\', '"', '[', ']', '-':
		return 2
	default:
		return 0
	}
	if pos+2+nHex > len(p) {
		return 0
	}
	for i := pos + 2; i < pos+2+nHex; i++ {
		if hexVal(p[i]) < 0 {
			return 0
		}
	}
	return 2 + nHex
}

// stoi is std::stoi's parse: white space, a sign, decimal digits, the rest
// ignored; ok false where it throws (no digits, or out of int range).
func stoi(s string) (int32, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == i {
		return 0, false
	}
	v, err := strconv.ParseInt(s[start:j], 10, 64)
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

type seqItem struct {
	s       []byte
	literal bool
}

func (it seqItem) rule() string {
	if it.literal {
		return `"` + string(it.s) + `"`
	}
	return string(it.s)
}

func (c *converter) patternToRule(pattern, name string) (rule string, perr *patternError) {
	defer func() {
		if r := recover(); r != nil {
			if pe, ok := r.(*patternError); ok {
				rule, perr = "", pe
				return
			}
			panic(r)
		}
	}()
	unsupported := func(msg string) { panic(&patternError{false, msg}) }
	invalid := func(msg string) { panic(&patternError{true, msg}) }

	if len(pattern) < 2 || pattern[0] != '^' || pattern[len(pattern)-1] != '$' {
		unsupported("not anchored with '^' and '$'")
	}
	sub := pattern[1 : len(pattern)-1]
	subRuleIDs := map[string]string{}
	i := 0
	length := len(sub)
	parenDepth := 0

	getDot := func() string {
		r := `[^\x0A\x0D]`
		if c.dotall {
			r = `[\U00000000-\U0010FFFF]`
		}
		return c.addRule("dot", r)
	}

	var transform func() string
	transform = func() string {
		var seq []seqItem

		joinSeq := func() string {
			var results []string
			var lit []byte
			haveLit := false
			flush := func() {
				if haveLit && len(lit) > 0 {
					results = append(results, `"`+string(lit)+`"`)
				}
				lit = lit[:0]
				haveLit = false
			}
			for _, it := range seq {
				if it.literal {
					lit = append(lit, it.s...)
					haveLit = true
				} else {
					flush()
					results = append(results, string(it.s))
				}
			}
			flush()
			return strings.Join(results, " ")
		}

		for i < length {
			ch := sub[i]
			switch {
			case ch == '.':
				seq = append(seq, seqItem{[]byte(getDot()), false})
				i++
			case ch == '(':
				i++
				if i < length && sub[i] == '?' {
					if i+1 < length && sub[i+1] == ':' {
						i += 2 // non-capturing group, a plain group here
					} else {
						unsupported("unsupported group syntax") // lookaround, named group, inline flags, ...
					}
				}
				parenDepth++
				if parenDepth > maxPatternDepth {
					unsupported("pattern nesting too deep")
				}
				seq = append(seq, seqItem{[]byte("(" + transform() + ")"), false})
			case ch == ')':
				i++
				if parenDepth == 0 {
					invalid("unbalanced parentheses")
				}
				parenDepth--
				return joinSeq()
			case ch == '^' || ch == '$':
				unsupported("anchor inside the pattern")
			case ch == '[':
				sb := []byte{ch}
				i++
				for i < length && sub[i] != ']' {
					if sub[i] == '\\' {
						n := gbnfEscapeLength(sub, i)
						if n == 0 {
							unsupported("unsupported escape in character class: " + substr(sub, i, 2))
						}
						sb = append(sb, sub[i:i+n]...)
						i += n
					} else {
						sb = append(sb, sub[i])
						i++
					}
				}
				if i >= length {
					invalid("unterminated character class")
				}
				sb = append(sb, ']')
				i++
				seq = append(seq, seqItem{sb, false})
			case ch == '|':
				seq = append(seq, seqItem{[]byte("|"), false})
				i++
			case ch == '*' || ch == '+' || ch == '?':
				if len(seq) == 0 {
					invalid("nothing to repeat")
				}
				last := &seq[len(seq)-1]
				if last.literal {
					last.s = []byte(last.rule())
					last.literal = false
				}
				last.s = append(last.s, ch)
				i++
			case ch == '{':
				cb := []byte{ch}
				i++
				for i < length && sub[i] != '}' {
					cb = append(cb, sub[i])
					i++
				}
				if i >= length {
					unsupported("unterminated curly brackets")
				}
				cb = append(cb, '}')
				i++
				nums := strings.Split(string(cb[1:len(cb)-1]), ",")
				minTimes, maxTimes := int32(0), int32(intMax)
				if len(nums) != 1 && len(nums) != 2 {
					unsupported("wrong number of values in curly brackets")
				}
				ok := true
				if len(nums) == 1 {
					minTimes, ok = stoi(nums[0])
					maxTimes = minTimes
				} else {
					if nums[0] != "" && ok {
						minTimes, ok = stoi(nums[0])
					}
					if nums[1] != "" && ok {
						maxTimes, ok = stoi(nums[1])
					}
				}
				if !ok {
					unsupported("invalid number in curly brackets")
				}
				if len(seq) == 0 {
					invalid("nothing to repeat")
				}
				last := &seq[len(seq)-1]
				s := string(last.s)
				if !last.literal {
					id, seen := subRuleIDs[s]
					if !seen {
						subRuleIDs[s] = ""
						id = c.addRule(name+"-"+strconv.Itoa(len(subRuleIDs)), s)
						subRuleIDs[s] = id
					}
					s = id
				} else {
					s = `"` + s + `"`
				}
				last.s = []byte(buildRepetition(s, minTimes, maxTimes, ""))
				last.literal = false
			default:
				var lit []byte
				for i < length {
					if sub[i] == '\\' {
						if i == length-1 {
							invalid("trailing backslash")
						}
						next := sub[i+1]
						if escapedInRegexpsButNotInLiterals(next) {
							i++
							lit = append(lit, sub[i])
							i++
						} else {
							n := gbnfEscapeLength(sub, i)
							if n == 0 {
								unsupported("unsupported escape: " + substr(sub, i, 2))
							}
							lit = append(lit, sub[i:i+n]...)
							i += n
						}
					} else if sub[i] == '"' {
						lit = append(lit, '\\', '"')
						i++
					} else if !isNonLiteral(sub[i]) &&
						(i == length-1 || len(lit) == 0 || sub[i+1] == '.' || !isNonLiteral(sub[i+1])) {
						lit = append(lit, sub[i])
						i++
					} else {
						break
					}
				}
				if len(lit) == 0 { // nothing consumed, e.g. a stray ']' or '}'
					unsupported("unsupported character: " + string([]byte{ch}))
				}
				seq = append(seq, seqItem{lit, true})
			}
		}
		return joinSeq()
	}

	r := transform()
	if parenDepth != 0 {
		invalid("unbalanced parentheses")
	}
	return c.addRule(name, `"\"" (`+r+`) "\""`), nil
}

// substr is std::string::substr(pos, n).
func substr(s string, pos, n int) string {
	if pos+n > len(s) {
		return s[pos:]
	}
	return s[pos : pos+n]
}
