package jinja

import (
	"math"
	"strings"
)

// binary is llama.cpp's binary_expression: and/or short-circuit to an
// operand, == and != compare, arithmetic on numbers is done in doubles,
// + and ~ concatenate (none or undefined beside a string count as "").
func (e *evaluator) binary(x *binaryNode, s *scope) (Value, error) {
	l, err := e.exec(x.left, s)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "and", "or":
		ok, err := truthy(l)
		if err != nil {
			return nil, err
		}
		if ok == (x.op == "or") {
			return l, nil
		}
		return e.exec(x.right, s)
	}
	r, err := e.exec(x.right, s)
	if err != nil {
		return nil, err
	}
	op := x.op
	switch op {
	case "==":
		return Bool(equal(l, r)), nil
	case "!=":
		return Bool(!equal(l, r)), nil
	}
	concatNull := func() (Value, bool, error) {
		ln, rn := isNone(l) || isUndefined(l), isNone(r) || isUndefined(r)
		_, ls := l.(String)
		_, rs := r.(String)
		if (ln && rs) || (rn && ls) {
			a, b := "", ""
			if ls {
				a = string(l.(String))
			}
			if rs {
				b = string(r.(String))
			}
			v, err := e.str(a + b)
			return v, true, err
		}
		return nil, false, nil
	}
	member := func() (Value, error) {
		in, err := isIn(l, r)
		if err != nil {
			return nil, err
		}
		if op == "not in" {
			in = !in
		}
		return Bool(in), nil
	}
	if isUndefined(l) || isUndefined(r) {
		if isUndefined(r) && (op == "in" || op == "not in") {
			return Bool(op == "not in"), nil
		}
		if op == "+" || op == "~" {
			if v, ok, err := concatNull(); ok || err != nil {
				return v, err
			}
		}
		return nil, errorf("Cannot perform operation %s on undefined values", op)
	}
	if isNone(l) || isNone(r) {
		if !isNone(r) && (op == "in" || op == "not in") {
			return member()
		}
		if op == "+" || op == "~" {
			if v, ok, err := concatNull(); ok || err != nil {
				return v, err
			}
		}
		return nil, errorf("Cannot perform operation on null values")
	}
	if isNumber(l) && isNumber(r) {
		a, b := numFloat(l), numFloat(r)
		_, lf := l.(Float)
		_, rf := r.(Float)
		isF := lf || rf
		switch op {
		case "+", "-", "*":
			var res float64
			switch op {
			case "+":
				res = a + b
			case "-":
				res = a - b
			default:
				res = a * b
			}
			if isF {
				return Float(res), nil
			}
			return Int(floatToInt(res)), nil
		case "/":
			return Float(a / b), nil
		case "%":
			rem := math.Mod(a, b)
			if isF {
				return Float(rem), nil
			}
			return Int(floatToInt(rem)), nil
		case "<":
			return Bool(a < b), nil
		case ">":
			return Bool(a > b), nil
		case ">=":
			return Bool(a >= b), nil
		case "<=":
			return Bool(a <= b), nil
		}
	}
	la, lArr := l.(*Array)
	ra, rArr := r.(*Array)
	if lArr && rArr {
		if op == "+" {
			out := &Array{Items: append(append([]Value{}, la.Items...), ra.Items...)}
			return out, nil
		}
	} else if rArr {
		_ = ra
		if op == "in" || op == "not in" {
			return member()
		}
	}
	_, ls := l.(String)
	_, rs := r.(String)
	if (ls || rs) && (op == "~" || op == "+") {
		a, err := toString(l)
		if err != nil {
			return nil, err
		}
		b, err := toString(r)
		if err != nil {
			return nil, err
		}
		if err := e.checkLen(int64(len(a)) + int64(len(b))); err != nil {
			return nil, err
		}
		return e.str(a + b)
	}
	if op == "*" {
		str, n, ok := "", int64(0), false
		if li, isI := r.(Int); ls && isI {
			str, n, ok = string(l.(String)), int64(li), true
		} else if ri, isI := l.(Int); rs && isI {
			str, n, ok = string(r.(String)), int64(ri), true
		}
		if ok {
			if n <= 0 {
				return String(""), nil
			}
			if len(str) > 0 && n > int64(e.limits.StringSize)/int64(len(str)) {
				return nil, e.checkLen(math.MaxInt64)
			}
			return e.str(strings.Repeat(str, int(n)))
		}
	}
	if ls && rs && (op == "in" || op == "not in") {
		return member()
	}
	if _, ok := r.(*Object); ok && (op == "in" || op == "not in") {
		return member()
	}
	return nil, errorf("Unknown operator \"%s\" between %s and %s", op, l.typeName(), r.typeName())
}

// floatToInt is C++'s static_cast<int64_t> of a double, saturated rather
// than undefined out of range.
func floatToInt(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= 9.2233720368547758e18:
		return math.MaxInt64
	case f <= -9.2233720368547758e18:
		return math.MinInt64
	}
	return int64(f)
}

// isIn is llama.cpp's test_is_in: needle in a list, a substring, a key.
func isIn(needle, hay Value) (bool, error) {
	switch h := hay.(type) {
	case Undefined:
		return false, nil
	case *Array:
		for _, it := range h.Items {
			if equal(needle, it) {
				return true, nil
			}
		}
		return false, nil
	case String:
		n, ok := needle.(String)
		if !ok {
			return false, errorf("%s", "'in' test expects args[1] as string when args[0] is string, got args[1] as "+needle.typeName())
		}
		return strings.Contains(string(h), string(n)), nil
	case *Object:
		if _, ok := hashKey(needle); !ok {
			return false, errorf("Object key of unhashable type: %s", needle.typeName())
		}
		_, found, err := h.Get(needle)
		return found, err
	}
	return false, errorf("%s", "'in' test expects iterable as first argument, got "+hay.typeName())
}
