package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ggml-rs/ggml-rs/go/internal/jsonesc"
)

// toJSON is llama.cpp's value_to_json: keys in insertion order, strings
// with their UTF-8 as it is (only quotes, backslashes and control bytes
// escaped), floats as C++ streams them (%g), none and undefined as null.
func toJSON(v Value, indent int, itemSep, keySep string) string {
	var b strings.Builder
	writeJSON(&b, v, 0, indent, itemSep, keySep, nil)
	return b.String()
}

// toJSONLimited is toJSON that stops at the string size limit.
func toJSONLimited(e *evaluator, v Value, indent int, itemSep, keySep string) (string, error) {
	var b strings.Builder
	var err error
	writeJSON(&b, v, 0, indent, itemSep, keySep, func() bool {
		if b.Len() > e.limits.StringSize {
			err = e.checkLen(int64(b.Len()))
			return false
		}
		return true
	})
	return b.String(), err
}

func writeJSON(b *strings.Builder, v Value, lvl, indent int, itemSep, keySep string, ok func() bool) bool {
	if ok != nil && !ok() {
		return false
	}
	if lvl > 512 {
		b.WriteString("null")
		return true
	}
	pad := func(l int) string {
		if indent > 0 {
			return strings.Repeat(" ", l*indent)
		}
		return ""
	}
	nl := ""
	if indent >= 0 {
		nl = "\n"
	}
	switch x := v.(type) {
	case Bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case Int:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case Float:
		b.WriteString(cppFloat(float64(x)))
	case String:
		writeJSONString(b, string(x))
	case *Array:
		b.WriteByte('[')
		if len(x.Items) > 0 {
			b.WriteString(nl)
			for i, it := range x.Items {
				b.WriteString(pad(lvl + 1))
				if !writeJSON(b, it, lvl+1, indent, itemSep, keySep, ok) {
					return false
				}
				if i < len(x.Items)-1 {
					b.WriteString(itemSep)
				}
				b.WriteString(nl)
			}
			b.WriteString(pad(lvl))
		}
		b.WriteByte(']')
	case *Object:
		b.WriteByte('{')
		if x.Len() > 0 {
			b.WriteString(nl)
			for i, k := range x.keys {
				b.WriteString(pad(lvl + 1))
				ks, _ := toString(k)
				writeJSONString(b, ks)
				b.WriteString(keySep)
				if !writeJSON(b, x.vals[i], lvl+1, indent, itemSep, keySep, ok) {
					return false
				}
				if i < x.Len()-1 {
					b.WriteString(itemSep)
				}
				b.WriteString(nl)
			}
			b.WriteString(pad(lvl))
		}
		b.WriteByte('}')
	default:
		b.WriteString("null")
	}
	return true
}

func writeJSONString(b *strings.Builder, s string) { jsonesc.Write(b, s) }

// cppFloat is a double written by a C++ stream with default settings
// (%g, six significant digits).
func cppFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', 6, 64)
	switch s {
	case "NaN":
		return "nan"
	case "+Inf":
		return "inf"
	case "-Inf":
		return "-inf"
	}
	// Go writes e+06 as e+06 too; both pad the exponent to two digits
	return s
}

// ensureASCII escapes non-ASCII characters inside JSON strings as \uXXXX
// (surrogate pairs above the BMP; a bad byte as \ufffd).
func ensureASCII(j string) string {
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(j); {
		c := j[i]
		if !inStr {
			b.WriteByte(c)
			inStr = c == '"'
			i++
			continue
		}
		if esc {
			b.WriteByte(c)
			esc = false
			i++
			continue
		}
		switch {
		case c == '\\':
			esc = true
			b.WriteByte(c)
			i++
			continue
		case c == '"':
			inStr = false
			b.WriteByte(c)
			i++
			continue
		case c < 0x80:
			b.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(j[i:])
		if r == utf8.RuneError && size <= 1 {
			b.WriteString(`\ufffd`)
			i++
			continue
		}
		if r <= 0xFFFF {
			fmt.Fprintf(&b, `\u%04x`, r)
		} else {
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+((r>>10)&0x3FF), 0xDC00+(r&0x3FF))
		}
		i += size
	}
	return b.String()
}
