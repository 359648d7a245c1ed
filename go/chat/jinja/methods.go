package jinja

import (
	"sort"
	"strconv"
	"strings"
)

// The built-in methods and filters of each type, as llama.cpp's
// get_builtins (common/jinja/value.cpp). x.name and x|name both find them.
var (
	intMethods, floatMethods, stringMethods, boolMethods   map[string]builtin
	arrayMethods, objectMethods, noneMethods, undefMethods map[string]builtin
)

// method binds a value's built-in name, nil when it has none.
func method(v Value, name string) *Func {
	var table map[string]builtin
	switch x := v.(type) {
	case Int:
		table = intMethods
	case Float:
		table = floatMethods
	case String:
		table = stringMethods
	case Bool:
		table = boolMethods
	case *Array:
		table = arrayMethods
	case *Object:
		if x.noBuiltins {
			return nil
		}
		table = objectMethods
	case None:
		table = noneMethods
	case Undefined:
		table = undefMethods
	}
	if f, ok := table[name]; ok {
		return &Func{name: name, fn: f, this: v}
	}
	return nil
}

func constant(v func() Value) builtin {
	return func(*evaluator, *funcArgs) (Value, error) { return v(), nil }
}

func defaultFn(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.count(2, 3); err != nil {
		return nil, err
	}
	v := a.args[0]
	var empty bool
	if b, _ := truthy(a.kwargOrPos("boolean", 2)); b {
		t, _ := truthy(v)
		empty = !t
	} else {
		empty = isUndefined(v) || isNone(v)
	}
	if empty {
		return a.args[1], nil
	}
	return v, nil
}

func stringDefault(e *evaluator, a *funcArgs) (Value, error) {
	in := a.args[0]
	var def Value = String("")
	if len(a.args) > 1 && !isUndefined(a.args[1]) {
		def = a.args[1]
	}
	if b, _ := truthy(a.kwargOrPos("boolean", 2)); b {
		if t, _ := truthy(in); !t {
			return def, nil
		}
	}
	return in, nil
}

// strip is Python's strip family over bytes: C's isspace, or the bytes of
// chars.
func strip(s string, left, right bool, chars Value) string {
	match := func(c byte) bool { return isSpace(c) }
	if !isUndefined(chars) {
		cs, _ := toString(chars)
		match = func(c byte) bool { return strings.IndexByte(cs, c) >= 0 }
	}
	i, j := 0, len(s)
	if left {
		for i < j && match(s[i]) {
			i++
		}
	}
	if right {
		for j > i && match(s[j-1]) {
			j--
		}
	}
	return s[i:j]
}

func stripFn(left, right bool) builtin {
	return func(e *evaluator, a *funcArgs) (Value, error) {
		if err := a.kinds(1, "String"); err != nil {
			return nil, err
		}
		return String(strip(string(a.args[0].(String)), left, right, a.kwargOrPos("chars", 1))), nil
	}
}

func mapASCII(s string, f func(byte) byte) string {
	b := []byte(s)
	for i := range b {
		b[i] = f(b[i])
	}
	return string(b)
}

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 32
	}
	return c
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 32
	}
	return c
}

func splitFn(reverse bool) builtin {
	return func(e *evaluator, a *funcArgs) (Value, error) {
		if err := a.count(1, 3); err != nil {
			return nil, err
		}
		in, ok := a.args[0].(String)
		if !ok {
			return nil, errorf("split() first argument must be a string")
		}
		s := string(in)
		delim := " "
		if len(a.args) > 1 {
			d, err := toString(a.args[1])
			if err != nil {
				return nil, err
			}
			delim = d
		}
		if delim == "" {
			return nil, errorf("empty separator")
		}
		maxsplit := int64(-1)
		if len(a.args) > 2 {
			n, ok := asInt(a.args[2])
			if !ok {
				return nil, errorf("%s is not an int value", a.args[2].typeName())
			}
			maxsplit = n
		}
		out := &Array{}
		for maxsplit != 0 {
			var i int
			if reverse {
				i = strings.LastIndex(s, delim)
			} else {
				i = strings.Index(s, delim)
			}
			if i < 0 {
				break
			}
			if err := e.step(); err != nil {
				return nil, err
			}
			if reverse {
				out.Items = append(out.Items, String(s[i+len(delim):]))
				s = s[:i]
			} else {
				out.Items = append(out.Items, String(s[:i]))
				s = s[i+len(delim):]
			}
			maxsplit--
		}
		out.Items = append(out.Items, String(s))
		if reverse {
			for i, j := 0, len(out.Items)-1; i < j; i, j = i+1, j-1 {
				out.Items[i], out.Items[j] = out.Items[j], out.Items[i]
			}
		}
		return out, nil
	}
}

func replaceFn(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.kinds(3, "String", "String", "String", "Integer"); err != nil {
		return nil, err
	}
	s, old, nw := string(a.args[0].(String)), string(a.args[1].(String)), string(a.args[2].(String))
	if len(a.args) > 3 {
		if n, _ := asInt(a.args[3]); n > 0 {
			return nil, errorf("NotImplemented: String replace with count argument not implemented")
		}
	}
	if old == nw {
		return String(s), nil
	}
	var n int64
	if old == "" {
		n = int64(len(s)) + int64(len(nw))*int64(len(s)+1)
	} else {
		n = int64(len(s)) + int64(strings.Count(s, old))*(int64(len(nw))-int64(len(old)))
	}
	if err := e.checkLen(n); err != nil {
		return nil, err
	}
	if old == "" {
		var b strings.Builder
		b.WriteString(nw)
		for i := 0; i < len(s); i++ {
			b.WriteByte(s[i])
			b.WriteString(nw)
		}
		return e.str(b.String())
	}
	return e.str(strings.ReplaceAll(s, old, nw))
}

// formatFn is str.format with '{}' placeholders only, as llama.cpp's:
// each takes the next positional argument's string; any other '{' is an
// error.
func formatFn(e *evaluator, a *funcArgs) (Value, error) {
	f, ok := a.args[0].(String)
	if !ok {
		return nil, errorf("format() first argument must be a string")
	}
	var b strings.Builder
	next := 1
	for i := 0; i < len(f); i++ {
		if f[i] != '{' {
			b.WriteByte(f[i])
			continue
		}
		if i+1 >= len(f) || f[i+1] != '}' {
			return nil, errorf("NotImplemented: format() only supports simple '{}' placeholders")
		}
		i++
		v, err := a.pos(next)
		if err != nil {
			return nil, err
		}
		next++
		s, err := toString(v)
		if err != nil {
			return nil, err
		}
		b.WriteString(s)
		if err := e.checkLen(int64(b.Len())); err != nil {
			return nil, err
		}
	}
	return e.str(b.String())
}

func sliceFn(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.count(2, 4); err != nil {
		return nil, err
	}
	var ints []int64
	for _, v := range a.args[1:] {
		n, ok := v.(Int)
		if !ok {
			if !isUndefined(v) {
				return nil, errorf("Function '%s' expected value of type Integer, got %s", a.name, v.typeName())
			}
		}
		ints = append(ints, int64(n))
	}
	var start, stop, step int64 = 0, ints[0], 1
	if len(ints) >= 2 {
		start, stop = ints[0], ints[1]
	}
	if len(ints) == 3 {
		step = ints[2]
	}
	if step == 0 {
		return nil, errorf("slice step cannot be zero")
	}
	switch x := a.args[0].(type) {
	case String:
		var b strings.Builder
		for _, i := range pySlice(int64(len(x)), start, stop, step) {
			b.WriteByte(x[i])
		}
		return String(b.String()), nil
	case *Array:
		out := &Array{Tuple: x.Tuple}
		for _, i := range pySlice(int64(len(x.Items)), start, stop, step) {
			out.Items = append(out.Items, x.Items[i])
		}
		return out, nil
	}
	return nil, errorf("slice of %s", a.args[0].typeName())
}

func indentFn(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.count(1, 4); err != nil {
		return nil, err
	}
	in, ok := a.args[0].(String)
	if !ok {
		return nil, errorf("indent() first argument must be a string")
	}
	width := a.kwargOrPos("width", 1)
	first, _ := truthy(a.kwargOrPos("first", 2))
	blank, _ := truthy(a.kwargOrPos("blank", 3))
	ind := "    "
	switch w := width.(type) {
	case Int:
		if w < 0 || int64(w)*int64(len(in)+1) > int64(e.limits.StringSize) {
			return nil, e.checkLen(-1)
		}
		ind = strings.Repeat(" ", int(w))
	case String:
		ind = string(w)
	}
	s := string(in)
	var out strings.Builder
	lines := strings.Split(s, "\n")
	if strings.HasSuffix(s, "\n") {
		lines = lines[:len(lines)-1]
	}
	if s == "" {
		lines = nil
	}
	for _, line := range lines {
		if out.Len() > 0 {
			out.WriteByte('\n')
		}
		var add bool
		if out.Len() == 0 {
			add = first
		} else {
			add = line != "" || blank
		}
		if add {
			out.WriteString(ind)
		}
		out.WriteString(line)
	}
	if s != "" && s[len(s)-1] == '\n' {
		out.WriteByte('\n')
		if blank {
			out.WriteString(ind)
		}
	}
	return e.str(out.String())
}

func joinFn(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.count(1, 3); err != nil {
		return nil, err
	}
	arr, ok := a.args[0].(*Array)
	if !ok {
		return nil, errorf("join() first argument must be an array")
	}
	d := a.kwargOrPos("d", 1)
	attr := a.kwargOrPos("attribute", 2)
	delim := ""
	if !isUndefined(d) {
		s, err := toString(d)
		if err != nil {
			return nil, err
		}
		delim = s
	}
	var b strings.Builder
	for i, v := range arr.Items {
		if !isUndefined(attr) {
			v = getAttribute(v, attr, Undefined{})
		}
		switch v.(type) {
		case String, Int, Float:
		default:
			return nil, errorf("join() can only join arrays of strings or numerics")
		}
		s, _ := toString(v)
		b.WriteString(s)
		if i < len(arr.Items)-1 {
			b.WriteString(delim)
		}
		if b.Len() > e.limits.StringSize {
			return nil, e.checkLen(int64(b.Len()))
		}
	}
	return e.str(b.String())
}

// getAttribute is item[attr] for selectattr, map, join, sort: a list
// index (digits in a string count), or a dict key.
func getAttribute(v, attr, def Value) Value {
	if isUndefined(attr) {
		return def
	}
	switch x := v.(type) {
	case *Array:
		idx := attr
		if s, ok := attr.(String); ok && s != "" && strings.Trim(string(s), "0123456789") == "" {
			n, err := strconv.ParseInt(string(s), 10, 64)
			if err != nil {
				return def
			}
			idx = Int(n)
		}
		var i int64
		switch y := idx.(type) {
		case Int:
			i = int64(y)
		case Bool:
			i, _ = asInt(y)
		default:
			return def
		}
		if i < 0 {
			i += int64(len(x.Items))
		}
		if i >= 0 && i < int64(len(x.Items)) {
			return x.Items[i]
		}
	case *Object:
		if r, ok, _ := x.Get(attr); ok {
			return r
		}
	}
	return def
}

func selectAttr(reject bool) builtin {
	return func(e *evaluator, a *funcArgs) (Value, error) {
		if err := a.count(2, 4); err != nil {
			return nil, err
		}
		arr, ok := a.args[0].(*Array)
		if !ok {
			return nil, errorf("Function '%s' expected value of type Array, got %s", a.name, a.args[0].typeName())
		}
		if _, ok := a.args[1].(String); !ok {
			return nil, errorf("Function '%s' expected value of type String, got %s", a.name, a.args[1].typeName())
		}
		attr := a.args[1]
		out := &Array{}
		keep := func(sel bool, item Value) {
			if sel != reject {
				out.Items = append(out.Items, item)
			}
		}
		runTest := func(name string, x, arg Value) (bool, error) {
			t, ok := tests[name]
			if !ok {
				return false, errorf("selectattr: unknown test '%s'", name)
			}
			r, err := t(e, &funcArgs{scope: a.scope, name: "test_is_" + name, args: []Value{x, arg}})
			if err != nil {
				return false, err
			}
			return truthy(r)
		}
		for _, item := range arr.Items {
			if err := e.step(); err != nil {
				return nil, err
			}
			switch len(a.args) {
			case 2:
				t, _ := truthy(getAttribute(item, attr, Undefined{}))
				keep(t, item)
			case 3:
				name, _ := toString(a.args[1])
				t, err := runTest(name, item, a.args[2])
				if err != nil {
					return nil, err
				}
				keep(t, item)
			case 4:
				name, err := toString(a.args[2])
				if err != nil {
					return nil, err
				}
				t, err := runTest(name, getAttribute(item, attr, Undefined{}), a.args[3])
				if err != nil {
					return nil, err
				}
				keep(t, item)
			}
		}
		return out, nil
	}
}

func reprString(e *evaluator, a *funcArgs) (Value, error) {
	s, err := toString(a.args[0])
	if err != nil {
		return nil, err
	}
	return e.str(s)
}

func sortedCopy(e *evaluator, a *funcArgs, items []Value, reverse bool, attr Value) []Value {
	out := append([]Value{}, items...)
	sort.SliceStable(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if !isUndefined(attr) {
			x, y = getAttribute(x, attr, Undefined{}), getAttribute(y, attr, Undefined{})
		}
		if reverse {
			return compare(x, y, ">")
		}
		return compare(x, y, "<")
	})
	return out
}

// compare is llama.cpp's value_compare for sort, min, max and the
// comparison tests: numbers as doubles, strings (or a string and a number)
// as strings, bools for (in)equality only; anything else is false.
func compare(a, b Value, op string) bool {
	if isNumber(a) && isNumber(b) {
		x, y := numFloat(a), numFloat(b)
		switch op {
		case "==":
			return x == y
		case ">=":
			return x >= y
		case ">":
			return x > y
		case "<":
			return x < y
		case "!=":
			return x != y
		}
	}
	_, as := a.(String)
	_, bs := b.(String)
	if (bs && isNumber(a)) || (as && isNumber(b)) || (as && bs) {
		x, _ := toString(a)
		y, _ := toString(b)
		switch op {
		case "==":
			return x == y
		case ">=":
			return x >= y
		case ">":
			return x > y
		case "<":
			return x < y
		case "!=":
			return x != y
		}
	}
	ab, aok := a.(Bool)
	bb, bok := b.(Bool)
	if aok && bok {
		switch op {
		case "==":
			return ab == bb
		case "!=":
			return ab != bb
		}
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
