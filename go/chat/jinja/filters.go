package jinja

var filterAliases = map[string]string{"count": "length", "d": "default", "e": "escape", "trim": "strip"}

// Filters that turn a non-string input into its string first.
var stringFilters = map[string]bool{
	"capitalize": true, "lower": true, "replace": true, "strip": true,
	"title": true, "upper": true, "wordcount": true,
}

// applyFilter is value|name or value|name(args): the input's built-in
// method of that name.
func (e *evaluator) applyFilter(f node, in Value, s *scope) (Value, error) {
	var id *identNode
	var argNodes []node
	switch x := f.(type) {
	case *identNode:
		id = x
	case *callNode:
		c, ok := x.callee.(*identNode)
		if !ok {
			return nil, errorf("Filter callee must be an identifier")
		}
		id, argNodes = c, x.args
	default:
		return nil, errorf("Invalid filter expression")
	}
	name := id.name
	if a, ok := filterAliases[name]; ok {
		name = a
	}
	if _, isStr := in.(String); !isStr && !isUndefined(in) && stringFilters[name] {
		str, err := toString(in)
		if err != nil {
			return nil, err
		}
		in = String(str)
	}
	a := &funcArgs{scope: s}
	for _, an := range argNodes {
		v, err := e.exec(an, s)
		if err != nil {
			return nil, err
		}
		a.args = append(a.args, v)
	}
	fn := method(in, name)
	if fn == nil {
		return nil, errorf("Unknown (built-in) filter '%s' for type %s", name, in.typeName())
	}
	return e.invoke(fn, a)
}

// test is value is [not] name, or name(args) / name arg.
func (e *evaluator) test(x *testNode, s *scope) (Value, error) {
	in, err := e.exec(x.operand, s)
	if err != nil {
		return nil, err
	}
	a := &funcArgs{scope: s, args: []Value{in}}
	var name string
	switch t := x.test.(type) {
	case *identNode:
		name = t.name
	case *callNode:
		c, ok := t.callee.(*identNode)
		if !ok {
			return nil, errorf("Test callee must be an identifier")
		}
		name = c.name
		for _, an := range t.args {
			v, err := e.exec(an, s)
			if err != nil {
				return nil, err
			}
			a.args = append(a.args, v)
		}
	default:
		return nil, errorf("Invalid test expression")
	}
	fn, ok := tests[name]
	if !ok {
		return nil, errorf("Unknown test '%s'", name)
	}
	a.name = "test_is_" + name
	r, err := fn(e, a)
	if err != nil {
		return nil, err
	}
	if x.negate {
		b, err := truthy(r)
		return Bool(!b), err
	}
	return r, nil
}

var tests map[string]builtin

func typeTest(kinds ...string) builtin {
	return func(e *evaluator, a *funcArgs) (Value, error) {
		if err := a.count(1, 999); err != nil {
			return nil, err
		}
		k := a.args[0].typeName()
		if arr, ok := a.args[0].(*Array); ok && arr.Tuple {
			k = "Array" // a tuple is an array to the type tests
		}
		for _, want := range kinds {
			if k == want {
				return Bool(true), nil
			}
		}
		return Bool(false), nil
	}
}

func compareTest(op string) builtin {
	return func(e *evaluator, a *funcArgs) (Value, error) {
		if err := a.count(2, 2); err != nil {
			return nil, err
		}
		return Bool(compare(a.args[0], a.args[1], op)), nil
	}
}

func init() {
	intTest := func(f func(int64) bool) builtin {
		return func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(1, "Integer"); err != nil {
				return nil, err
			}
			return Bool(f(int64(a.args[0].(Int)))), nil
		}
	}
	tests = map[string]builtin{
		"boolean":  typeTest("Boolean"),
		"callable": typeTest("Function"),
		"odd":      intTest(func(n int64) bool { return n%2 != 0 }),
		"even":     intTest(func(n int64) bool { return n%2 == 0 }),
		"false": func(e *evaluator, a *funcArgs) (Value, error) {
			b, ok := a.args[0].(Bool)
			return Bool(ok && !bool(b)), nil
		},
		"true": func(e *evaluator, a *funcArgs) (Value, error) {
			b, ok := a.args[0].(Bool)
			return Bool(ok && bool(b)), nil
		},
		"divisibleby": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(2, "Integer", "Integer"); err != nil {
				return nil, err
			}
			d := int64(a.args[1].(Int))
			if d == 0 {
				return nil, errorf("division by zero")
			}
			return Bool(int64(a.args[0].(Int))%d == 0), nil
		},
		"string":   typeTest("String"),
		"integer":  typeTest("Integer"),
		"float":    typeTest("Float"),
		"number":   typeTest("Integer", "Float"),
		"iterable": typeTest("Object", "Array", "String", "Undefined"),
		"sequence": typeTest("Object", "Array", "String", "Undefined"),
		"mapping":  typeTest("Object"),
		"lower": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(1, "String"); err != nil {
				return nil, err
			}
			s := string(a.args[0].(String))
			return Bool(mapASCII(s, lower) == s), nil
		},
		"upper": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(1, "String"); err != nil {
				return nil, err
			}
			s := string(a.args[0].(String))
			return Bool(mapASCII(s, upper) == s), nil
		},
		"none":      typeTest("None"),
		"defined":   func(e *evaluator, a *funcArgs) (Value, error) { return Bool(!isUndefined(a.args[0])), nil },
		"undefined": typeTest("Undefined"),
		"eq":        compareTest("=="), "equalto": compareTest("=="),
		"ge": compareTest(">="), "gt": compareTest(">"), "greaterthan": compareTest(">"),
		"lt": compareTest("<"), "lessthan": compareTest("<"), "ne": compareTest("!="),
		"in": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.count(2, 999); err != nil {
				return nil, err
			}
			b, err := isIn(a.args[0], a.args[1])
			return Bool(b), err
		},
		"test": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.kinds(1, "String"); err != nil {
				return nil, err
			}
			_, ok := tests[string(a.args[0].(String))]
			return Bool(ok), nil
		},
		"sameas": func(e *evaluator, a *funcArgs) (Value, error) {
			if err := a.count(2, 999); err != nil {
				return nil, err
			}
			x, y := a.args[0], a.args[1]
			switch xv := x.(type) {
			case Undefined:
				return Bool(false), nil
			case None:
				return Bool(isNone(y)), nil
			case Bool:
				yv, ok := y.(Bool)
				return Bool(ok && xv == yv), nil
			case Int:
				yv, ok := y.(Int)
				return Bool(ok && xv >= -5 && xv <= 256 && xv == yv), nil
			case *Array:
				return Bool(x == y), nil
			case *Object:
				return Bool(x == y), nil
			case *Func:
				return Bool(x == y), nil
			}
			return Bool(false), nil
		},
	}
}
