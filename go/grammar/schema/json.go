package schema

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ggml-rs/ggml-rs/go/internal/jsonesc"
)

// A JSON value as llama.cpp's common_json (nlohmann::ordered_json) holds
// it: objects keep their keys in the order of first appearance (a repeated
// key keeps its first place and takes its last value), non-negative integers
// are unsigned, negative ones signed, and an integer that fits neither is a
// float. The converter depends on all three: property order, what
// minItems: 4294967296 truncates to, and how a const is printed.

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jInt   // negative integer (nlohmann number_integer)
	jUint  // non-negative integer (nlohmann number_unsigned)
	jFloat // number_float
	jString
	jArray
	jObject
)

type jvalue struct {
	k    jkind
	b    bool
	i    int64
	u    uint64
	f    float64
	s    string
	arr  []*jvalue
	keys []string // object keys, in order
	vals []*jvalue
	idx  map[string]int
}

func (v *jvalue) isObject() bool  { return v.k == jObject }
func (v *jvalue) isArray() bool   { return v.k == jArray }
func (v *jvalue) isString() bool  { return v.k == jString }
func (v *jvalue) isNull() bool    { return v.k == jNull }
func (v *jvalue) isBoolean() bool { return v.k == jBool }
func (v *jvalue) isInteger() bool { return v.k == jInt || v.k == jUint }
func (v *jvalue) isNumber() bool  { return v.k == jInt || v.k == jUint || v.k == jFloat }

// contains is nlohmann's contains: false for anything but an object.
func (v *jvalue) contains(key string) bool {
	if v.k != jObject {
		return false
	}
	_, ok := v.idx[key]
	return ok
}

func (v *jvalue) at(key string) *jvalue { return v.vals[v.idx[key]] }

// withKey is a copy of object v with key set to val (in place when present,
// appended when not), as `common_json alt = schema; alt[key] = val` does.
func (v *jvalue) withKey(key string, val *jvalue) *jvalue {
	c := &jvalue{k: jObject, keys: append([]string(nil), v.keys...), vals: append([]*jvalue(nil), v.vals...), idx: make(map[string]int, len(v.keys)+1)}
	for k, i := range v.idx {
		c.idx[k] = i
	}
	if i, ok := c.idx[key]; ok {
		c.vals[i] = val
	} else {
		c.idx[key] = len(c.keys)
		c.keys = append(c.keys, key)
		c.vals = append(c.vals, val)
	}
	return c
}

// getInt is get<int>(): a static_cast of the 64-bit integer to int, which
// keeps the low 32 bits.
func (v *jvalue) getInt() int32 {
	if v.k == jUint {
		return int32(v.u)
	}
	return int32(v.i)
}

// getInt64 is get<int64_t>() of an integer: an unsigned value above
// INT64_MAX wraps.
func (v *jvalue) getInt64() int64 {
	if v.k == jUint {
		return int64(v.u)
	}
	return v.i
}

// getFloat is get<double>().
func (v *jvalue) getFloat() float64 {
	switch v.k {
	case jInt:
		return float64(v.i)
	case jUint:
		return float64(v.u)
	}
	return v.f
}

// isTrue is `value == true`: only the boolean true (nlohmann compares
// values of different types other than numbers as unequal).
func (v *jvalue) isTrue() bool { return v.k == jBool && v.b }

// ---- parsing ----

type jparser struct {
	s        string
	pos      int
	depth    int
	maxDepth int
}

// parseJSON parses text as nlohmann::json::parse does (strict RFC 8259, a
// leading UTF-8 byte order mark skipped), with a bound on nesting.
func parseJSON(text string, maxDepth int) (*jvalue, error) {
	p := &jparser{s: text, maxDepth: maxDepth}
	if strings.HasPrefix(p.s, "\xEF\xBB\xBF") {
		p.pos = 3
	}
	p.ws()
	if p.pos >= len(p.s) {
		return nil, p.errf("unexpected end of input; expected a value")
	}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos < len(p.s) {
		return nil, p.errf("unexpected %s after the value; expected end of input", p.what())
	}
	return v, nil
}

func (p *jparser) errf(format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < p.pos && i < len(p.s); i++ {
		if p.s[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, fmt.Sprintf(format, args...))
}

func (p *jparser) what() string {
	if p.pos >= len(p.s) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(p.s[p.pos]))
}

func (p *jparser) ws() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jparser) value() (*jvalue, error) {
	if p.pos >= len(p.s) {
		return nil, p.errf("unexpected end of input; expected a value")
	}
	switch c := p.s[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &jvalue{k: jString, s: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case strings.HasPrefix(p.s[p.pos:], "true"):
		p.pos += 4
		return &jvalue{k: jBool, b: true}, nil
	case strings.HasPrefix(p.s[p.pos:], "false"):
		p.pos += 5
		return &jvalue{k: jBool}, nil
	case strings.HasPrefix(p.s[p.pos:], "null"):
		p.pos += 4
		return &jvalue{k: jNull}, nil
	}
	return nil, p.errf("unexpected %s; expected a value", p.what())
}

func (p *jparser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.errf("nesting deeper than %d levels", p.maxDepth)
	}
	return nil
}

func (p *jparser) object() (*jvalue, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // {
	o := &jvalue{k: jObject, idx: map[string]int{}}
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == '}' {
		p.pos++
		p.depth--
		return o, nil
	}
	for {
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != '"' {
			return nil, p.errf("unexpected %s; expected a string as an object key", p.what())
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return nil, p.errf("unexpected %s; expected ':'", p.what())
		}
		p.pos++
		p.ws()
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		if i, ok := o.idx[key]; ok {
			o.vals[i] = val // first place, last value
		} else {
			o.idx[key] = len(o.keys)
			o.keys = append(o.keys, key)
			o.vals = append(o.vals, val)
		}
		p.ws()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			p.pos++
			p.depth--
			return o, nil
		}
		return nil, p.errf("unexpected %s; expected ',' or '}'", p.what())
	}
}

func (p *jparser) array() (*jvalue, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // [
	a := &jvalue{k: jArray}
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] == ']' {
		p.pos++
		p.depth--
		return a, nil
	}
	for {
		p.ws()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		a.arr = append(a.arr, v)
		p.ws()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.pos < len(p.s) && p.s[p.pos] == ']' {
			p.pos++
			p.depth--
			return a, nil
		}
		return nil, p.errf("unexpected %s; expected ',' or ']'", p.what())
	}
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func (p *jparser) hex4() (rune, bool) {
	if p.pos+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		h := hexVal(p.s[p.pos+i])
		if h < 0 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	p.pos += 4
	return r, true
}

func (p *jparser) str() (string, error) {
	p.pos++ // "
	var b strings.Builder
	for {
		if p.pos >= len(p.s) {
			return "", p.errf("unterminated string")
		}
		c := p.s[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c == '\\':
			p.pos++
			if p.pos >= len(p.s) {
				return "", p.errf("unterminated string")
			}
			e := p.s[p.pos]
			p.pos++
			switch e {
			case '"', '\\', '/':
				b.WriteByte(e)
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.errf("'\\u' must be followed by 4 hex digits")
				}
				if r >= 0xD800 && r <= 0xDBFF {
					if !strings.HasPrefix(p.s[p.pos:], "\\u") {
						return "", p.errf("surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF")
					}
					p.pos += 2
					lo, ok := p.hex4()
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return "", p.errf("surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF")
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				} else if r >= 0xDC00 && r <= 0xDFFF {
					return "", p.errf("surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF")
				}
				b.WriteRune(r)
			default:
				return "", p.errf("invalid escape '\\%c' in string", e)
			}
		case c < 0x20:
			return "", p.errf("control character U+%04X must be escaped in a string", c)
		case c < 0x80:
			b.WriteByte(c)
			p.pos++
		default:
			r, n := utf8.DecodeRuneInString(p.s[p.pos:])
			if r == utf8.RuneError && n <= 1 {
				return "", p.errf("ill-formed UTF-8 byte 0x%02X in string", c)
			}
			b.WriteString(p.s[p.pos : p.pos+n])
			p.pos += n
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *jparser) number() (*jvalue, error) {
	start := p.pos
	if p.s[p.pos] == '-' {
		p.pos++
	}
	if p.pos >= len(p.s) || !isDigit(p.s[p.pos]) {
		return nil, p.errf("invalid number; expected a digit")
	}
	if p.s[p.pos] == '0' {
		p.pos++
	} else {
		for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
			p.pos++
		}
	}
	isFloat := false
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		isFloat = true
		p.pos++
		if p.pos >= len(p.s) || !isDigit(p.s[p.pos]) {
			return nil, p.errf("invalid number; expected a digit after '.'")
		}
		for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
			p.pos++
		}
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		isFloat = true
		p.pos++
		if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(p.s) || !isDigit(p.s[p.pos]) {
			return nil, p.errf("invalid number; expected a digit in the exponent")
		}
		for p.pos < len(p.s) && isDigit(p.s[p.pos]) {
			p.pos++
		}
	}
	tok := p.s[start:p.pos]
	if !isFloat {
		// nlohmann: strtoll / strtoull, a float when out of range
		if tok[0] == '-' {
			if i, err := strconv.ParseInt(tok, 10, 64); err == nil {
				return &jvalue{k: jInt, i: i}, nil
			}
		} else if u, err := strconv.ParseUint(tok, 10, 64); err == nil {
			return &jvalue{k: jUint, u: u}, nil
		}
	}
	// strtod; nlohmann refuses a result that is not finite (out_of_range
	// 406), an underflow is 0
	f, _ := strconv.ParseFloat(tok, 64)
	if math.IsInf(f, 0) {
		p.pos = start
		return nil, p.errf("number overflow parsing '%s'", tok)
	}
	return &jvalue{k: jFloat, f: f}, nil
}

// ---- dump ----

// dump is nlohmann's dump() (no indent, ensure_ascii off): "," and ":"
// without spaces, floats in the shortest round-trip form with nlohmann's
// layout (1.0, 1e+16, 0.0001, 1e-05), control characters as \u00xx.
func (v *jvalue) dump() string {
	var b strings.Builder
	v.dumpTo(&b)
	return b.String()
}

func (v *jvalue) dumpTo(b *strings.Builder) {
	switch v.k {
	case jNull:
		b.WriteString("null")
	case jBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case jInt:
		b.WriteString(strconv.FormatInt(v.i, 10))
	case jUint:
		b.WriteString(strconv.FormatUint(v.u, 10))
	case jFloat:
		b.WriteString(dumpFloat(v.f))
	case jString:
		dumpString(b, v.s)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			e.dumpTo(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			dumpString(b, k)
			b.WriteByte(':')
			v.vals[i].dumpTo(b)
		}
		b.WriteByte('}')
	}
}

func dumpString(b *strings.Builder, s string) { jsonesc.Write(b, s) }

// dumpFloat lays out the shortest round-trip digits of f as nlohmann's
// to_chars does (format_buffer with min_exp -4, max_exp 15).
func dumpFloat(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	var out []byte
	if math.Signbit(f) {
		out = append(out, '-')
		f = -f
	}
	if f == 0 {
		return string(append(out, "0.0"...))
	}
	// digits and decimal exponent: f = 0.d1d2...dk * 10^n
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k := len(digits)
	n := x + 1
	const minExp, maxExp = -4, 15
	switch {
	case k <= n && n <= maxExp:
		out = append(out, digits...)
		out = append(out, strings.Repeat("0", n-k)...)
		out = append(out, ".0"...)
	case 0 < n && n <= maxExp:
		out = append(out, digits[:n]...)
		out = append(out, '.')
		out = append(out, digits[n:]...)
	case minExp < n && n <= 0:
		out = append(out, "0."...)
		out = append(out, strings.Repeat("0", -n)...)
		out = append(out, digits...)
	default:
		out = append(out, digits[0])
		if k > 1 {
			out = append(out, '.')
			out = append(out, digits[1:]...)
		}
		out = append(out, 'e')
		ex := n - 1
		if ex < 0 {
			out = append(out, '-')
			ex = -ex
		} else {
			out = append(out, '+')
		}
		if ex < 10 {
			out = append(out, '0')
		}
		out = strconv.AppendInt(out, int64(ex), 10)
	}
	return string(out)
}
