package jinja

import (
	"strconv"
	"strings"
)

func init() {
	toInt := func(e *evaluator, a *funcArgs) (Value, error) {
		n, _ := asInt(a.args[0])
		return Int(n), nil
	}
	toFloat := func(e *evaluator, a *funcArgs) (Value, error) {
		f, _ := asFloat(a.args[0])
		return Float(f), nil
	}
	boolString := func(e *evaluator, a *funcArgs) (Value, error) {
		if a.args[0].(Bool) {
			return String("True"), nil
		}
		return String("False"), nil
	}
	noneString := func(e *evaluator, a *funcArgs) (Value, error) { return String("None"), nil }
	emptyArray := constant(func() Value { return &Array{} })
	emptyString := constant(func() Value { return String("") })
	undef := constant(func() Value { return Undefined{} })
	zero := constant(func() Value { return Int(0) })

	intMethods = map[string]builtin{
		"default": defaultFn,
		"abs": func(e *evaluator, a *funcArgs) (Value, error) {
			n := a.args[0].(Int)
			if n < 0 {
				n = -n
			}
			return n, nil
		},
		"int": toInt, "float": toFloat,
		"safe": tojsonFn, "string": tojsonFn, "tojson": tojsonFn,
	}
	floatMethods = map[string]builtin{
		"default": defaultFn,
		"abs": func(e *evaluator, a *funcArgs) (Value, error) {
			f := a.args[0].(Float)
			if f < 0 {
				f = -f
			}
			return f, nil
		},
		"int": func(e *evaluator, a *funcArgs) (Value, error) {
			return Int(floatToInt(float64(a.args[0].(Float)))), nil
		},
		"float": toFloat,
		"safe":  tojsonFn, "string": tojsonFn, "tojson": tojsonFn,
	}
	boolMethods = map[string]builtin{
		"default": defaultFn, "int": toInt, "float": toFloat,
		"safe": boolString, "string": boolString, "tojson": tojsonFn,
	}
	stringMethods = map[string]builtin{
		"default": stringDefault,
		"upper": func(e *evaluator, a *funcArgs) (Value, error) {
			return String(mapASCII(string(a.args[0].(String)), upper)), nil
		},
		"lower": func(e *evaluator, a *funcArgs) (Value, error) {
			return String(mapASCII(string(a.args[0].(String)), lower)), nil
		},
		"strip": stripFn(true, true), "rstrip": stripFn(false, true), "lstrip": stripFn(true, false),
		"title": func(e *evaluator, a *funcArgs) (Value, error) {
			b := []byte(a.args[0].(String))
			next := true
			for i, c := range b {
				switch {
				case isSpace(c):
					next = true
				case next:
					b[i] = upper(c)
					next = false
				default:
					b[i] = lower(c)
				}
			}
			return String(b), nil
		},
		"capitalize": func(e *evaluator, a *funcArgs) (Value, error) {
			b := []byte(a.args[0].(String))
			for i := range b {
				if i == 0 {
					b[i] = upper(b[i])
				} else {
					b[i] = lower(b[i])
				}
			}
			return String(b), nil
		},
		"length": func(e *evaluator, a *funcArgs) (Value, error) {
			return Int(len(a.args[0].(String))), nil
		},
		"startswith": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(2, "String", "String"); err != nil {
				return nil, err
			}
			s, p := a.args[0].(String), a.args[1].(String)
			return Bool(len(s) >= len(p) && s[:len(p)] == p), nil
		},
		"endswith": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(2, "String", "String"); err != nil {
				return nil, err
			}
			s, p := a.args[0].(String), a.args[1].(String)
			return Bool(len(s) >= len(p) && s[len(s)-len(p):] == p), nil
		},
		"int":   stringToInt,
		"float": stringToFloat,
		"split": splitFn(false), "rsplit": splitFn(true),
		"replace": replaceFn,
		"format":  formatFn,
		"string":  func(e *evaluator, a *funcArgs) (Value, error) { return a.args[0], nil },
		"safe":    func(e *evaluator, a *funcArgs) (Value, error) { return a.args[0], nil },
		"slice":   sliceFn,
		"tojson":  tojsonFn,
		"indent":  indentFn,
		"join": func(e *evaluator, a *funcArgs) (Value, error) {
			return nil, errorf("NotImplemented: String join builtin not implemented")
		},
	}
	arrayMethods = map[string]builtin{
		"default": defaultFn,
		"list": func(e *evaluator, a *funcArgs) (Value, error) {
			return &Array{Items: append([]Value{}, a.args[0].(*Array).Items...)}, nil
		},
		"first": func(e *evaluator, a *funcArgs) (Value, error) {
			if it := a.args[0].(*Array).Items; len(it) > 0 {
				return it[0], nil
			}
			return Undefined{}, nil
		},
		"last": func(e *evaluator, a *funcArgs) (Value, error) {
			if it := a.args[0].(*Array).Items; len(it) > 0 {
				return it[len(it)-1], nil
			}
			return Undefined{}, nil
		},
		"length": func(e *evaluator, a *funcArgs) (Value, error) {
			return Int(len(a.args[0].(*Array).Items)), nil
		},
		"slice":      sliceFn,
		"selectattr": selectAttr(false), "select": selectAttr(false),
		"rejectattr": selectAttr(true), "reject": selectAttr(true),
		"join":   joinFn,
		"string": reprString,
		"tojson": tojsonFn,
		"map": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.count(2, 2); err != nil {
				return nil, err
			}
			arr := a.args[0].(*Array)
			if _, ok := a.args[1].(Kwarg); !ok {
				return nil, errorf("NotImplemented: map: filter-mapping not implemented")
			}
			attr := a.kwargOrPos("attribute", 1)
			def, ok := a.kwarg("default")
			if !ok {
				def = Undefined{}
			}
			out := &Array{Tuple: arr.Tuple}
			for _, it := range arr.Items {
				out.Items = append(out.Items, getAttribute(it, attr, def))
			}
			return out, nil
		},
		"append": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.count(2, 2); err != nil {
				return nil, err
			}
			arr := a.args[0].(*Array)
			if arr.Tuple {
				return nil, errorf("Attempting to modify immutable type")
			}
			if err := e.step(); err != nil {
				return nil, err
			}
			arr.Items = append(arr.Items, a.args[1])
			return arr, nil
		},
		"pop": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.count(1, 2); err != nil {
				return nil, err
			}
			arr := a.args[0].(*Array)
			if arr.Tuple {
				return nil, errorf("Attempting to modify immutable type")
			}
			idx := int64(-1)
			if len(a.args) == 2 {
				n, ok := a.args[1].(Int)
				if !ok {
					return nil, errorf("Function 'pop' expected value of type Integer, got %s", a.args[1].typeName())
				}
				idx = int64(n)
			}
			if idx < 0 {
				idx += int64(len(arr.Items))
			}
			if idx < 0 || idx >= int64(len(arr.Items)) {
				return nil, errorf("Index %d out of bounds for array of size %d", idx, len(arr.Items))
			}
			v := arr.Items[idx]
			arr.Items = append(arr.Items[:idx], arr.Items[idx+1:]...)
			return v, nil
		},
		"sort": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.count(1, 4); err != nil {
				return nil, err
			}
			arr := a.args[0].(*Array)
			rev, _ := truthy(a.kwargOrPos("reverse", 1))
			return &Array{Items: sortedCopy(e, a, arr.Items, rev, a.kwargOrPos("attribute", 3)), Tuple: arr.Tuple}, nil
		},
		"reverse": func(e *evaluator, a *funcArgs) (Value, error) {
			arr := a.args[0].(*Array)
			out := &Array{Tuple: arr.Tuple}
			for i := len(arr.Items) - 1; i >= 0; i-- {
				out.Items = append(out.Items, arr.Items[i])
			}
			return out, nil
		},
		"min": minMax("<"), "max": minMax(">"),
		"unique": func(e *evaluator, a *funcArgs) (Value, error) {
			return nil, errorf("NotImplemented: Array unique builtin not implemented")
		},
	}
	objectMethods = map[string]builtin{
		"get": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.count(2, 3); err != nil {
				return nil, err
			}
			if _, ok := a.args[1].(String); !ok {
				return nil, errorf("get: second argument must be a string (key)")
			}
			var def Value = None{}
			if len(a.args) == 3 {
				def = a.args[2]
			}
			if v, ok, _ := a.args[0].(*Object).Get(a.args[1]); ok {
				return v, nil
			}
			return def, nil
		},
		"keys": func(e *evaluator, a *funcArgs) (Value, error) {
			return &Array{Items: append([]Value{}, a.args[0].(*Object).keys...)}, nil
		},
		"values": func(e *evaluator, a *funcArgs) (Value, error) {
			return &Array{Items: append([]Value{}, a.args[0].(*Object).vals...)}, nil
		},
		"items": func(e *evaluator, a *funcArgs) (Value, error) {
			o := a.args[0].(*Object)
			out := &Array{}
			for i, k := range o.keys {
				out.Items = append(out.Items, &Array{Items: []Value{k, o.vals[i]}, Tuple: true})
			}
			return out, nil
		},
		"tojson": tojsonFn,
		"string": reprString,
		"length": func(e *evaluator, a *funcArgs) (Value, error) {
			return Int(a.args[0].(*Object).Len()), nil
		},
		"dictsort": func(e *evaluator, a *funcArgs) (Value, error) {
			o := a.args[0].(*Object)
			byValue := false
			if s, ok := a.kwargOrPos("by", 2).(String); ok && s == "value" {
				byValue = true
			}
			rev, _ := truthy(a.kwargOrPos("reverse", 3))
			pairs := make([]Value, o.Len())
			for i, k := range o.keys {
				pairs[i] = &Array{Items: []Value{k, o.vals[i]}, Tuple: true}
			}
			idx := Int(0)
			if byValue {
				idx = 1
			}
			sorted := sortedCopy(e, a, pairs, rev, idx)
			out := NewObject()
			for _, p := range sorted {
				kv := p.(*Array).Items
				_ = out.Set(kv[0], kv[1])
			}
			return out, nil
		},
		"join": func(e *evaluator, a *funcArgs) (Value, error) {
			return nil, errorf("NotImplemented: object join not implemented")
		},
	}
	noneMethods = map[string]builtin{
		"default": defaultFn, "tojson": tojsonFn, "string": noneString, "safe": noneString,
		"items": emptyArray, "map": emptyArray, "reject": emptyArray, "rejectattr": emptyArray,
		"select": emptyArray, "selectattr": emptyArray, "unique": emptyArray,
	}
	undefMethods = map[string]builtin{
		"default": defaultFn, "capitalize": emptyString, "first": undef, "items": emptyArray,
		"join": emptyString, "last": undef, "length": zero, "list": emptyArray, "lower": emptyString,
		"map": emptyArray, "max": undef, "min": undef, "reject": emptyArray, "rejectattr": emptyArray,
		"replace": emptyString, "reverse": emptyArray, "safe": emptyString, "select": emptyArray,
		"selectattr": emptyArray, "sort": emptyArray, "string": emptyString, "strip": emptyString,
		"sum": zero, "title": emptyString, "truncate": emptyString, "unique": emptyArray,
		"upper": emptyString, "wordcount": zero,
	}
}

func minMax(op string) builtin {
	return func(e *evaluator, a *funcArgs) (Value, error) {
		if err := a.count(1, 4); err != nil {
			return nil, err
		}
		items := a.args[0].(*Array).Items
		if len(items) == 0 {
			return Undefined{}, nil
		}
		attr := a.kwargOrPos("attribute", 2)
		best := items[0]
		for _, it := range items {
			x, y := it, best
			if !isUndefined(attr) {
				x, y = getAttribute(x, attr, Undefined{}), getAttribute(y, attr, Undefined{})
			}
			if compare(x, y, op) {
				best = it
			}
		}
		return best, nil
	}
}

// stringToInt is C++'s std::stoi in base 10 (or the base kwarg): leading
// whitespace and a sign, then digits up to the first non-digit; the
// default (0) when there are none or the number overflows an int.
func stringToInt(e *evaluator, a *funcArgs) (Value, error) {
	def := a.kwargOrPos("default", 1)
	base := int64(10)
	if b := a.kwargOrPos("base", 2); !isUndefined(b) {
		base, _ = asInt(b)
	}
	if base != 10 {
		return nil, errorf("NotImplemented: int() with a base other than 10")
	}
	s := strings.TrimLeft(string(a.args[0].(String)), " \t\n\v\f\r")
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j > i {
		if n, err := strconv.ParseInt(s[:j], 10, 32); err == nil {
			return Int(n), nil
		}
	}
	if isUndefined(def) {
		return Int(0), nil
	}
	n, _ := asInt(def)
	return Int(n), nil
}

// stringToFloat is std::stod: the longest leading number, else the
// default (0.0).
func stringToFloat(e *evaluator, a *funcArgs) (Value, error) {
	s := strings.TrimLeft(string(a.args[0].(String)), " \t\n\v\f\r")
	for j := len(s); j > 0; j-- {
		if f, err := strconv.ParseFloat(s[:j], 64); err == nil {
			return Float(f), nil
		}
	}
	def := a.kwargOrPos("default", 1)
	if isUndefined(def) {
		return Float(0), nil
	}
	f, _ := asFloat(def)
	return Float(f), nil
}
