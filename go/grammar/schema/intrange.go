package schema

import (
	"math"
	"strconv"
	"strings"
)

// buildMinMaxInt is build_min_max_int: the decimal integers of
// [min, max] (MinInt64 / MaxInt64: unbounded) as digit-range rules, written
// with the same alternatives, digit classes and counts as llama.cpp,
// including its char arithmetic on digits and its wrap-around negation,
// so that even a bound where it writes an odd grammar gives the same text.
func buildMinMaxInt(minV, maxV int64, out *strings.Builder, decimalsLeft int, topLevel bool) {
	hasMin := minV != math.MinInt64
	hasMax := maxV != math.MaxInt64

	digitRange := func(from, to byte) {
		out.WriteByte('[')
		if from == to {
			out.WriteByte(from)
		} else {
			out.WriteByte(from)
			out.WriteByte('-')
			out.WriteByte(to)
		}
		out.WriteByte(']')
	}
	moreDigits := func(minDigits, maxDigits int) {
		out.WriteString("[0-9]")
		if minDigits == maxDigits && minDigits == 1 {
			return
		}
		out.WriteByte('{')
		out.WriteString(strconv.Itoa(minDigits))
		if maxDigits != minDigits {
			out.WriteByte(',')
			if maxDigits != math.MaxInt32 {
				out.WriteString(strconv.Itoa(maxDigits))
			}
		}
		out.WriteByte('}')
	}
	var uniformRange func(from, to string)
	uniformRange = func(from, to string) {
		i := 0
		for i < len(from) && i < len(to) && from[i] == to[i] {
			i++
		}
		if i > 0 {
			out.WriteString(`"` + from[:i] + `"`)
		}
		if i < len(from) && i < len(to) {
			if i > 0 {
				out.WriteByte(' ')
			}
			subLen := len(from) - i - 1
			if subLen > 0 {
				fromSub := from[i+1:]
				toSub := to[i+1:]
				subZeros := strings.Repeat("0", subLen)
				subNines := strings.Repeat("9", subLen)
				toReached := false
				out.WriteByte('(')
				if fromSub == subZeros {
					digitRange(from[i], to[i]-1)
					out.WriteByte(' ')
					moreDigits(subLen, subLen)
				} else {
					out.WriteByte('[')
					out.WriteByte(from[i])
					out.WriteString("] ")
					out.WriteByte('(')
					uniformRange(fromSub, subNines)
					out.WriteByte(')')
					if int(from[i]) < int(to[i])-1 {
						out.WriteString(" | ")
						if toSub == subNines {
							digitRange(from[i]+1, to[i])
							toReached = true
						} else {
							digitRange(from[i]+1, to[i]-1)
						}
						out.WriteByte(' ')
						moreDigits(subLen, subLen)
					}
				}
				if !toReached {
					out.WriteString(" | ")
					digitRange(to[i], to[i])
					out.WriteByte(' ')
					uniformRange(subZeros, toSub)
				}
				out.WriteByte(')')
			} else {
				out.WriteByte('[')
				out.WriteByte(from[i])
				out.WriteByte('-')
				out.WriteByte(to[i])
				out.WriteByte(']')
			}
		}
	}

	if hasMin && hasMax {
		if minV < 0 && maxV < 0 {
			out.WriteString(`"-" (`)
			buildMinMaxInt(-maxV, -minV, out, decimalsLeft, true)
			out.WriteString(")")
			return
		}
		if minV < 0 {
			out.WriteString(`"-" (`)
			buildMinMaxInt(0, -minV, out, decimalsLeft, true)
			out.WriteString(") | ")
			minV = 0
		}
		minS := strconv.FormatInt(minV, 10)
		maxS := strconv.FormatInt(maxV, 10)
		for digits := len(minS); digits < len(maxS); digits++ {
			uniformRange(minS, strings.Repeat("9", digits))
			minS = "1" + strings.Repeat("0", digits)
			out.WriteString(" | ")
		}
		uniformRange(minS, maxS)
		return
	}

	lessDecimals := max(decimalsLeft-1, 1)

	if hasMin {
		switch {
		case minV < 0:
			out.WriteString(`"-" (`)
			buildMinMaxInt(math.MinInt64, -minV, out, decimalsLeft, false)
			out.WriteString(") | [0] | [1-9] ")
			moreDigits(0, decimalsLeft-1)
		case minV == 0:
			if topLevel {
				out.WriteString("[0] | [1-9] ")
				moreDigits(0, lessDecimals)
			} else {
				moreDigits(1, decimalsLeft)
			}
		case minV <= 9:
			c := byte('0' + minV)
			rangeStart := byte('0')
			if topLevel {
				rangeStart = '1'
			}
			if c > rangeStart {
				digitRange(rangeStart, c-1)
				out.WriteByte(' ')
				moreDigits(1, lessDecimals)
				out.WriteString(" | ")
			}
			digitRange(c, '9')
			out.WriteByte(' ')
			moreDigits(0, lessDecimals)
		default:
			minS := strconv.FormatInt(minV, 10)
			l := len(minS)
			c := minS[0]
			if c > '1' {
				start := byte('0')
				if topLevel {
					start = '1'
				}
				digitRange(start, c-1)
				out.WriteByte(' ')
				moreDigits(l, lessDecimals)
				out.WriteString(" | ")
			}
			digitRange(c, c)
			out.WriteString(" (")
			rest, _ := strconv.ParseInt(minS[1:], 10, 64) // std::stoll of the digits after the first
			buildMinMaxInt(rest, math.MaxInt64, out, lessDecimals, false)
			out.WriteString(")")
			if c < '9' {
				out.WriteString(" | ")
				digitRange(c+1, '9')
				out.WriteByte(' ')
				moreDigits(l-1, lessDecimals)
			}
		}
		return
	}

	if hasMax {
		if maxV >= 0 {
			if topLevel {
				out.WriteString(`"-" [1-9] `)
				moreDigits(0, lessDecimals)
				out.WriteString(" | ")
			}
			buildMinMaxInt(0, maxV, out, decimalsLeft, true)
		} else {
			out.WriteString(`"-" (`)
			buildMinMaxInt(-maxV, math.MaxInt64, out, decimalsLeft, false)
			out.WriteString(")")
		}
		return
	}

	panic(errRuntime{"At least one of min_value or max_value must be set"})
}

// errRuntime is a std::runtime_error thrown while converting, which
// json_schema_to_grammar wraps as "JSON schema conversion failed:\n" + what.
type errRuntime struct{ msg string }

func (e errRuntime) Error() string { return e.msg }
