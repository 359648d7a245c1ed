package jinja

type builtin = func(e *evaluator, a *funcArgs) (Value, error)

// globals are the functions a template can call by name.
var globals map[string]builtin

func init() {
	globals = map[string]builtin{
		"raise_exception": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(1, "String"); err != nil {
				return nil, err
			}
			return nil, raised(string(a.args[0].(String)))
		},
		"dict":         toObject,
		"namespace":    toObject,
		"strftime_now": strftimeNow,
		"range":        rangeFn,
		"tojson":       tojsonFn,
	}
}

// toObject is dict() and namespace(): a dict or list of pairs, then
// keyword arguments.
func toObject(e *evaluator, a *funcArgs) (Value, error) {
	out := NewObject()
	iterFirst := false
	switch it := a.posOr(0, Undefined{}).(type) {
	case *Array:
		iterFirst = true
		for _, p := range it.Items {
			pair, ok := p.(*Array)
			if !ok || len(pair.Items) != 2 {
				return nil, errorf("namespace/dict() iterable argument must consist of tuples, not %s", p.typeName())
			}
			if err := out.Set(pair.Items[0], pair.Items[1]); err != nil {
				return nil, err
			}
		}
	case *Object:
		iterFirst = true
		for i, k := range it.keys {
			_ = out.Set(k, it.vals[i])
		}
	}
	for _, v := range a.args {
		if k, ok := v.(Kwarg); ok {
			out.SetString(k.key, k.val)
		} else if !iterFirst {
			return nil, errorf("namespace/dict() arguments must be kwargs, dict and/or iterable of tuples, not %s", v.typeName())
		}
		iterFirst = false
	}
	return out, nil
}

func rangeFn(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.count(1, 3); err != nil {
		return nil, err
	}
	for _, v := range a.args {
		if _, ok := v.(Int); !ok {
			return nil, errorf("Function 'range' expected value of type Integer, got %s", v.typeName())
		}
	}
	var start, stop, step int64 = 0, int64(a.args[0].(Int)), 1
	if len(a.args) >= 2 {
		start, stop = int64(a.args[0].(Int)), int64(a.args[1].(Int))
	}
	if len(a.args) == 3 {
		step = int64(a.args[2].(Int))
	}
	if step == 0 {
		return nil, errorf("range() step argument must not be zero")
	}
	out := &Array{}
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		if err := e.step(); err != nil {
			return nil, err
		}
		out.Items = append(out.Items, Int(i))
	}
	return out, nil
}

// tojsonFn is tojson(value, ensure_ascii, indent, separators, sort_keys).
func tojsonFn(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.count(1, 5); err != nil {
		return nil, err
	}
	ascii, indentV, sepV, sortV := a.kwargOrPos("ensure_ascii", 1), a.kwargOrPos("indent", 2),
		a.kwargOrPos("separators", 3), a.kwargOrPos("sort_keys", 4)
	indent := -1
	if i, ok := indentV.(Int); ok {
		indent = int(i)
		if indent > 64 {
			return nil, errorf("tojson indent too large")
		}
	}
	if b, _ := truthy(sortV); b {
		return nil, errorf("NotImplemented: tojson sort_keys=true not implemented")
	}
	itemSep, keySep := ", ", ": "
	if indent >= 0 {
		itemSep = ","
	}
	if seps, ok := sepV.(*Array); ok {
		if len(seps.Items) > 0 {
			s, err := toString(seps.Items[0])
			if err != nil {
				return nil, err
			}
			itemSep = s
		}
		if len(seps.Items) > 1 {
			s, err := toString(seps.Items[1])
			if err != nil {
				return nil, err
			}
			keySep = s
		}
	}
	j, err := toJSONLimited(e, a.args[0], indent, itemSep, keySep)
	if err != nil {
		return nil, err
	}
	if b, _ := truthy(ascii); b {
		j = ensureASCII(j)
	}
	return e.str(j)
}

func strftimeNow(e *evaluator, a *funcArgs) (Value, error) {
	if err := a.kinds(1, "String"); err != nil {
		return nil, err
	}
	s, err := Strftime(string(a.args[0].(String)), e.now)
	if err != nil {
		return nil, errorf("strftime_now: failed to format time")
	}
	return String(s), nil
}
