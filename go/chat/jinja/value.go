package jinja

import (
	"math"
	"strconv"
	"strings"
)

// Value is a template value: one of Undefined, None, Bool, Int, Float,
// String, *Array (lists and tuples), *Object, *Func, Kwarg.
type Value interface {
	typeName() string
}

type (
	// Undefined is a missing variable, key or index; hint says which.
	Undefined struct{ hint string }
	// None is Jinja's none.
	None struct{}
	// Bool, Int, Float and String are the scalars.
	Bool   bool
	Int    int64
	Float  float64
	String string
	// Array is a list, or a tuple when Tuple is set (immutable; how
	// dict.items() pairs come).
	Array struct {
		Items []Value
		Tuple bool
	}
	// Object is a dict with its insertion order; NoBuiltins marks the
	// loop object and namespaces' siblings that have no methods.
	Object struct {
		keys       []Value
		vals       []Value
		hashes     []string       // hashKey of each key
		index      map[string]int // by hash, once there are many keys
		noBuiltins bool
	}
	// Func is a built-in, a bound method (this is its first argument) or a
	// macro.
	Func struct {
		name string
		fn   func(e *evaluator, args *funcArgs) (Value, error)
		this Value
	}
	// Kwarg is a keyword argument of a call.
	Kwarg struct {
		key string
		val Value
	}
)

func (Undefined) typeName() string { return "Undefined" }
func (None) typeName() string      { return "None" }
func (Bool) typeName() string      { return "Boolean" }
func (Int) typeName() string       { return "Integer" }
func (Float) typeName() string     { return "Float" }
func (String) typeName() string    { return "String" }
func (a *Array) typeName() string {
	if a.Tuple {
		return "Tuple"
	}
	return "Array"
}
func (*Object) typeName() string { return "Object" }
func (*Func) typeName() string   { return "Function" }
func (Kwarg) typeName() string   { return "KwArg" }

// NewObject returns an empty object.
func NewObject() *Object { return &Object{} }

// Len is the number of keys.
func (o *Object) Len() int { return len(o.keys) }

// hashKey is the identity of an object key: llama.cpp hashes an integer,
// a bool and an integral float alike (1, true and 1.0 are one key).
func hashKey(v Value) (string, bool) {
	switch x := v.(type) {
	case String:
		// strings are their own hash (no allocation); every other kind
		// and a string starting with NUL get a NUL-led tag
		if len(x) == 0 || x[0] != 0 {
			return string(x), true
		}
		return "\x00s" + string(x), true
	case Int:
		return "\x00n" + strconv.FormatInt(int64(x), 10), true
	case Bool:
		if x {
			return "\x00n1", true
		}
		return "\x00n0", true
	case Float:
		f := float64(x)
		if math.Trunc(f) == f && math.Abs(f) < 1<<62 {
			return "\x00n" + strconv.FormatInt(int64(f), 10), true
		}
		return "\x00f" + strconv.FormatUint(math.Float64bits(f), 16), true
	case None:
		return "\x00none", true
	case *Array:
		if !x.Tuple {
			return "", false
		}
		var b strings.Builder
		b.WriteString("\x00t(")
		for _, it := range x.Items {
			k, ok := hashKey(it)
			if !ok {
				return "", false
			}
			b.WriteString(strconv.Itoa(len(k)))
			b.WriteByte(':')
			b.WriteString(k)
		}
		b.WriteByte(')')
		return b.String(), true
	case Kwarg:
		k, ok := hashKey(x.val)
		return "\x00k" + x.key + "=" + k, ok
	}
	return "", false
}

// Set inserts or replaces a key, keeping the first insertion's place.
func (o *Object) Set(k, v Value) error {
	h, ok := hashKey(k)
	if !ok {
		return errorf("Object key of unhashable type: %s", k.typeName())
	}
	if i := o.find(h); i >= 0 {
		o.vals[i] = v
		return nil
	}
	if o.index != nil {
		o.index[h] = len(o.keys)
	} else if len(o.keys) >= 16 {
		o.index = make(map[string]int, 32)
		for i, hk := range o.hashes {
			o.index[hk] = i
		}
		o.index[h] = len(o.keys)
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
	o.hashes = append(o.hashes, h)
	return nil
}

func (o *Object) find(h string) int {
	if o.index != nil {
		if i, ok := o.index[h]; ok {
			return i
		}
		return -1
	}
	for i, hk := range o.hashes {
		if hk == h {
			return i
		}
	}
	return -1
}

// SetString is Set with a string key.
func (o *Object) SetString(k string, v Value) { _ = o.Set(String(k), v) }

// Get looks a key up.
func (o *Object) Get(k Value) (Value, bool, error) {
	h, ok := hashKey(k)
	if !ok {
		return nil, false, errorf("Object key of unhashable type: %s", k.typeName())
	}
	i := o.find(h)
	if i < 0 {
		return nil, false, nil
	}
	return o.vals[i], true, nil
}

// GetString is Get with a string key.
func (o *Object) GetString(k string) (Value, bool) {
	v, ok, _ := o.Get(String(k))
	return v, ok
}

func isUndefined(v Value) bool { _, ok := v.(Undefined); return ok }
func isNone(v Value) bool      { _, ok := v.(None); return ok }
func isNumber(v Value) bool {
	switch v.(type) {
	case Int, Float:
		return true
	}
	return false
}

// truthy is llama.cpp's as_bool.
func truthy(v Value) (bool, error) {
	switch x := v.(type) {
	case Undefined, None:
		return false, nil
	case Bool:
		return bool(x), nil
	case Int:
		return x != 0, nil
	case Float:
		return x != 0, nil
	case String:
		return len(x) > 0, nil
	case *Array:
		return len(x.Items) > 0, nil
	case *Object:
		return x.Len() > 0, nil
	}
	return false, errorf("%s is not a bool value", v.typeName())
}

// asFloat and asInt are llama.cpp's numeric views (bools count as 0/1).
func asFloat(v Value) (float64, bool) {
	switch x := v.(type) {
	case Int:
		return float64(x), true
	case Float:
		return float64(x), true
	case Bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func asInt(v Value) (int64, bool) {
	switch x := v.(type) {
	case Int:
		return int64(x), true
	case Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, true
		}
		return int64(f), true
	case Bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// formatFloat is llama.cpp's float to string: C's "%f", trailing zeros
// dropped, one kept after the point.
func formatFloat(f float64) string {
	var s string
	switch {
	case math.IsNaN(f):
		s = "nan"
		if math.Signbit(f) {
			s = "-nan"
		}
		return s
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s = strconv.FormatFloat(f, 'f', 6, 64)
	s = strings.TrimRight(s, "0")
	if strings.HasSuffix(s, ".") {
		s += "0"
	}
	return s
}

// toString is llama.cpp's as_string: what ~, + and string() make of a
// value.
func toString(v Value) (string, error) {
	switch x := v.(type) {
	case String:
		return string(x), nil
	case Int:
		return strconv.FormatInt(int64(x), 10), nil
	case Float:
		return formatFloat(float64(x)), nil
	case Bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case None:
		return "None", nil
	case *Array:
		var b strings.Builder
		if x.Tuple {
			b.WriteByte('(')
		} else {
			b.WriteByte('[')
		}
		for i, it := range x.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(repr(it))
		}
		if x.Tuple && len(x.Items) == 1 {
			b.WriteByte(',')
		}
		if x.Tuple {
			b.WriteByte(')')
		} else {
			b.WriteByte(']')
		}
		return b.String(), nil
	case *Object:
		var b strings.Builder
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(repr(k))
			b.WriteString(": ")
			b.WriteString(repr(x.vals[i]))
		}
		b.WriteByte('}')
		return b.String(), nil
	}
	return "", errorf("%s is not a string value", v.typeName())
}

// repr is how an item shows inside a list or dict's string.
func repr(v Value) string {
	switch x := v.(type) {
	case String:
		if strings.Contains(string(x), "'") {
			return toJSON(x, -1, ", ", ": ")
		}
		return "'" + string(x) + "'"
	case Undefined:
		if x.hint != "" {
			return "Undefined (hint: '" + x.hint + "')"
		}
		return "Undefined"
	case *Func:
		r := "Function<" + x.name + ">("
		if x.this != nil {
			r += repr(x.this)
		}
		return r + ")"
	case Kwarg:
		return "KwArg"
	}
	s, _ := toString(v)
	return s
}

// equal is llama.cpp's == between values.
func equal(a, b Value) bool {
	switch x := a.(type) {
	case Int, Float, Bool:
		if !isNumber(b) {
			if _, ok := b.(Bool); !ok {
				return false
			}
		}
		ai, _ := asInt(a)
		bi, _ := asInt(b)
		return ai == bi && numFloat(x) == numFloat(b)
	case String:
		y, ok := b.(String)
		return ok && x == y
	case None:
		return isNone(b)
	case Undefined:
		return isUndefined(b)
	case *Array:
		y, ok := b.(*Array)
		if !ok || x.Tuple != y.Tuple || !hashableItems(x.Items) || !hashableItems(y.Items) || len(x.Items) != len(y.Items) {
			return false
		}
		for i := range x.Items {
			if !equal(x.Items[i], y.Items[i]) {
				return false
			}
		}
		return true
	case *Object:
		y, ok := b.(*Object)
		if !ok || !hashableItems(x.vals) || !hashableItems(y.vals) || x.Len() != y.Len() {
			return false
		}
		for i := range x.keys {
			if !equal(x.keys[i], y.keys[i]) || !equal(x.vals[i], y.vals[i]) {
				return false
			}
		}
		return true
	case *Func:
		y, ok := b.(*Func)
		return ok && x == y
	}
	return false
}

// numFloat is the float view llama.cpp keeps beside an integer (an
// integer too large for a double compares as an infinity).
func numFloat(v Value) float64 {
	switch x := v.(type) {
	case Int:
		f := float64(x)
		if int64(f) != int64(x) {
			if x < 0 {
				return math.Inf(-1)
			}
			return math.Inf(1)
		}
		return f
	case Float:
		return float64(x)
	case Bool:
		if x {
			return 1
		}
		return 0
	}
	return 0
}

// hashableItems: llama.cpp compares lists and dicts only when every item
// is immutable and hashable (scalars, none, tuples of them).
func hashableItems(items []Value) bool {
	for _, it := range items {
		switch x := it.(type) {
		case String, Int, Float, Bool, None:
		case *Array:
			if !x.Tuple || !hashableItems(x.Items) {
				return false
			}
		default:
			return false
		}
	}
	return true
}
