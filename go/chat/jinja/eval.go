package jinja

import (
	"errors"
	"math"
	"strings"
	"time"
)

// Limits bound what one render may cost, so that a hostile template fails
// with an error instead of hanging or exhausting memory.
type Limits struct {
	Steps      int64 // nodes evaluated and items iterated
	CallDepth  int   // nested macro calls
	StringSize int   // bytes of any one string
	TotalBytes int64 // bytes of all strings built
}

// DefaultLimits are generous for real chat templates (a long
// conversation renders in well under 1% of them).
var DefaultLimits = Limits{Steps: 5_000_000, CallDepth: 100, StringSize: 32 << 20, TotalBytes: 1 << 30}

// llama.cpp's messages for a loop control outside a loop (the construct
// tests compare them).
var (
	errBreak    = errors.New("Break statement executed")    //lint:ignore ST1005 llama.cpp's text
	errContinue = errors.New("Continue statement executed") //lint:ignore ST1005 llama.cpp's text
)

type evaluator struct {
	src    string
	now    time.Time
	limits Limits
	steps  int64
	depth  int
	bytes  int64
}

func (e *evaluator) step() error {
	e.steps++
	if e.steps > e.limits.Steps {
		return &Error{Kind: "limit", Msg: "template ran too long (step limit)", Pos: -1}
	}
	return nil
}

// str makes a string the template built, within the size limits.
func (e *evaluator) str(s string) (Value, error) {
	if len(s) > e.limits.StringSize {
		return nil, &Error{Kind: "limit", Msg: "string larger than the output limit", Pos: -1}
	}
	e.bytes += int64(len(s))
	if e.bytes > e.limits.TotalBytes {
		return nil, &Error{Kind: "limit", Msg: "template built too much text", Pos: -1}
	}
	return String(s), nil
}

// checkLen refuses before building a string of n bytes.
func (e *evaluator) checkLen(n int64) error {
	if n > int64(e.limits.StringSize) || n < 0 {
		return &Error{Kind: "limit", Msg: "string larger than the output limit", Pos: -1}
	}
	return nil
}

// gather appends what a value shows as output: strings, numbers and bools,
// lists item by item; none, undefined and dicts show nothing.
func gather(b *strings.Builder, v Value) {
	switch x := v.(type) {
	case String:
		b.WriteString(string(x))
	case Int, Float, Bool:
		s, _ := toString(x)
		b.WriteString(s)
	case *Array:
		for _, it := range x.Items {
			gather(b, it)
		}
	}
}

func (e *evaluator) execBody(nodes []node, s *scope) (Value, error) {
	var b strings.Builder
	for _, n := range nodes {
		v, err := e.exec(n, s)
		if err != nil {
			return nil, err
		}
		gather(&b, v)
		if b.Len() > e.limits.StringSize {
			return nil, e.checkLen(int64(b.Len()))
		}
	}
	return e.str(b.String())
}

// exec evaluates one node; an error without a position gets the node's.
func (e *evaluator) exec(n node, s *scope) (Value, error) {
	if err := e.step(); err != nil {
		return nil, err
	}
	v, err := e.execImpl(n, s)
	if err != nil && err != errBreak && err != errContinue {
		return nil, at(err, n.position(), e.src)
	}
	return v, err
}

func (e *evaluator) execImpl(n node, s *scope) (Value, error) {
	switch x := n.(type) {
	case *stringLit:
		return String(x.val), nil
	case *intLit:
		return Int(x.val), nil
	case *floatLit:
		return Float(x.val), nil
	case *commentNode, *noopNode, *blankNode:
		return Undefined{}, nil
	case *breakNode:
		return nil, errBreak
	case *continueNode:
		return nil, errContinue
	case *identNode:
		v := s.get(x.name)
		if !isUndefined(v) {
			return v, nil
		}
		if f, ok := globals[x.name]; ok {
			return &Func{name: x.name, fn: f}, nil
		}
		return v, nil
	case *arrayLit, *tupleLit:
		var items []node
		if a, ok := x.(*arrayLit); ok {
			items = a.items
		} else {
			items = x.(*tupleLit).items
		}
		arr := &Array{}
		for _, it := range items {
			v, err := e.exec(it, s)
			if err != nil {
				return nil, err
			}
			arr.Items = append(arr.Items, v)
		}
		return arr, nil
	case *objectLit:
		o := NewObject()
		for i := range x.keys {
			k, err := e.exec(x.keys[i], s)
			if err != nil {
				return nil, err
			}
			v, err := e.exec(x.vals[i], s)
			if err != nil {
				return nil, err
			}
			if err := o.Set(k, v); err != nil {
				return nil, err
			}
		}
		return o, nil
	case *ifNode:
		t, err := e.exec(x.test, s)
		if err != nil {
			return nil, err
		}
		ok, err := truthy(t)
		if err != nil {
			return nil, err
		}
		if ok {
			return e.execBody(x.body, s)
		}
		return e.execBody(x.alt, s)
	case *forNode:
		return e.execFor(x, s)
	case *setNode:
		return e.execSet(x, s)
	case *macroNode:
		s.set(x.name, e.macro(x))
		return Undefined{}, nil
	case *callBlockNode:
		return e.execCallBlock(x, s)
	case *filterBlockNode:
		body, err := e.execBody(x.body, s)
		if err != nil {
			return nil, err
		}
		return e.applyFilter(x.filter, body, s)
	case *binaryNode:
		return e.binary(x, s)
	case *unaryNode:
		return e.unary(x, s)
	case *memberNode:
		return e.member(x, s)
	case *callNode:
		return e.call(x, s)
	case *filterNode:
		in, err := e.exec(x.operand, s)
		if err != nil {
			return nil, err
		}
		return e.applyFilter(x.filter, in, s)
	case *testNode:
		return e.test(x, s)
	case *ternaryNode:
		c, err := e.exec(x.cond, s)
		if err != nil {
			return nil, err
		}
		ok, err := truthy(c)
		if err != nil {
			return nil, err
		}
		if ok {
			return e.exec(x.yes, s)
		}
		return e.exec(x.no, s)
	case *selectNode:
		c, err := e.exec(x.test, s)
		if err != nil {
			return nil, err
		}
		ok, err := truthy(c)
		if err != nil || !ok {
			return Undefined{}, err
		}
		return e.exec(x.lhs, s)
	case *kwargNode:
		id, ok := x.key.(*identNode)
		if !ok {
			return nil, errorf("Keyword argument key must be identifiers")
		}
		v, err := e.exec(x.val, s)
		if err != nil {
			return nil, err
		}
		return Kwarg{id.name, v}, nil
	}
	return nil, errorf("cannot evaluate this expression")
}

func (e *evaluator) unary(x *unaryNode, s *scope) (Value, error) {
	v, err := e.exec(x.x, s)
	if err != nil {
		return nil, err
	}
	switch x.op {
	case "not":
		b, err := truthy(v)
		return Bool(!b), err
	case "-":
		switch y := v.(type) {
		case Int:
			return -y, nil
		case Float:
			return -y, nil
		}
		return nil, errorf("Unary - operator requires numeric operand")
	case "+":
		if isNumber(v) {
			return v, nil
		}
		return nil, errorf("Unary + operator requires numeric operand")
	}
	return nil, errorf("Unknown unary operator '%s'", x.op)
}

func (e *evaluator) execSet(x *setNode, s *scope) (Value, error) {
	var rhs Value
	var err error
	if x.value != nil {
		rhs, err = e.exec(x.value, s)
	} else {
		rhs, err = e.execBody(x.body, s)
	}
	if err != nil {
		return nil, err
	}
	switch t := x.target.(type) {
	case *identNode:
		s.set(t.name, rhs)
	case *tupleLit:
		arr, ok := rhs.(*Array)
		if !ok {
			return nil, errorf("Cannot unpack non-iterable type in set: %s", rhs.typeName())
		}
		if len(arr.Items) != len(t.items) {
			if len(t.items) > len(arr.Items) {
				return nil, errorf("Too few items to unpack in set")
			}
			return nil, errorf("Too many items to unpack in set")
		}
		for i, it := range t.items {
			id, ok := it.(*identNode)
			if !ok {
				return nil, errorf("Cannot unpack to non-identifier in set")
			}
			s.set(id.name, arr.Items[i])
		}
	case *memberNode:
		if t.computed {
			return nil, errorf("Cannot assign to computed member")
		}
		id, ok := t.prop.(*identNode)
		if !ok {
			return nil, errorf("Cannot assign to member with non-identifier property")
		}
		obj, err := e.exec(t.object, s)
		if err != nil {
			return nil, err
		}
		o, ok := obj.(*Object)
		if !ok {
			return nil, errorf("Cannot assign to member of non-object")
		}
		o.SetString(id.name, rhs)
	default:
		return nil, errorf("Invalid LHS inside assignment expression")
	}
	return Undefined{}, nil
}

func (e *evaluator) execFor(x *forNode, s *scope) (Value, error) {
	sc := s.child()
	iterExpr, testExpr := x.iterable, node(nil)
	if sel, ok := x.iterable.(*selectNode); ok {
		iterExpr, testExpr = sel.lhs, sel.test
	}
	it, err := e.exec(iterExpr, sc)
	if err != nil {
		return nil, err
	}
	if isUndefined(it) {
		it = &Array{}
	}
	var items []Value
	obj, isObj := it.(*Object)
	switch y := it.(type) {
	case *Object:
		for i, k := range y.keys {
			items = append(items, &Array{Items: []Value{k, y.vals[i]}, Tuple: true})
		}
	case *Array:
		items = append(items, y.Items...)
	default:
		return nil, errorf("Expected iterable or object type in for loop: got %s", it.typeName())
	}
	_ = obj
	// bind sets the loop variable(s) of item i in a scope
	bind := func(dst *scope, item Value) error {
		switch lv := x.loopVar.(type) {
		case *identNode:
			if isObj {
				dst.set(lv.name, item.(*Array).Items[0])
			} else {
				dst.set(lv.name, item)
			}
		case *tupleLit:
			arr, ok := item.(*Array)
			if !ok {
				return errorf("Cannot unpack non-iterable type: %s", item.typeName())
			}
			if len(lv.items) != len(arr.Items) {
				if len(lv.items) > len(arr.Items) {
					return errorf("Too few items to unpack")
				}
				return errorf("Too many items to unpack")
			}
			for j, v := range lv.items {
				id, ok := v.(*identNode)
				if !ok {
					return errorf("Cannot unpack non-identifier type")
				}
				dst.set(id.name, arr.Items[j])
			}
		default:
			return errorf("Invalid loop variable(s)")
		}
		return nil
	}
	if _, ok := x.loopVar.(*tupleLit); ok {
		for _, item := range items {
			if _, ok := item.(*Array); !ok {
				return nil, errorf("Cannot unpack non-iterable type: %s", item.typeName())
			}
		}
	}
	// the items the inline test keeps (for x in xs if cond)
	var kept, shown []Value
	for _, item := range items {
		if err := e.step(); err != nil {
			return nil, err
		}
		shownItem := item
		if isObj {
			if _, ok := x.loopVar.(*identNode); ok {
				shownItem = item.(*Array).Items[0]
			}
		}
		if testExpr != nil {
			ls := sc.child()
			if err := bind(ls, item); err != nil {
				return nil, err
			}
			t, err := e.exec(testExpr, ls)
			if err != nil {
				return nil, err
			}
			ok, err := truthy(t)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		kept = append(kept, item)
		shown = append(shown, shownItem)
	}
	var b strings.Builder
	none := true
	n := len(kept)
	for i := range kept {
		loop := NewObject()
		loop.noBuiltins = true
		loop.SetString("index", Int(i+1))
		loop.SetString("index0", Int(i))
		loop.SetString("revindex", Int(n-i))
		loop.SetString("revindex0", Int(n-i-1))
		loop.SetString("first", Bool(i == 0))
		loop.SetString("last", Bool(i == n-1))
		loop.SetString("length", Int(n))
		if i > 0 {
			loop.SetString("previtem", shown[i-1])
		} else {
			loop.SetString("previtem", Undefined{hint: "previtem"})
		}
		if i < n-1 {
			loop.SetString("nextitem", shown[i+1])
		} else {
			loop.SetString("nextitem", Undefined{hint: "nextitem"})
		}
		sc.set("loop", loop)
		if err := bind(sc, kept[i]); err != nil {
			return nil, err
		}
		stop := false
		for _, st := range x.body {
			v, err := e.exec(st, sc)
			if err == errContinue {
				break
			}
			if err == errBreak {
				stop = true
				break
			}
			if err != nil {
				return nil, err
			}
			gather(&b, v)
			if b.Len() > e.limits.StringSize {
				return nil, e.checkLen(int64(b.Len()))
			}
		}
		if stop {
			break
		}
		none = false
	}
	if none {
		for _, st := range x.alt {
			v, err := e.exec(st, s)
			if err != nil {
				return nil, err
			}
			gather(&b, v)
		}
	}
	return e.str(b.String())
}

// macro makes the function a {% macro %} defines. Its body runs in a copy
// of the caller's scope (llama.cpp's behaviour), with the parameters bound.
func (e *evaluator) macro(x *macroNode) *Func {
	return &Func{name: x.name, fn: func(e *evaluator, a *funcArgs) (Value, error) {
		ms := a.scope.child()
		if err := e.bindParams(x.name, x.args, a, ms); err != nil {
			return nil, err
		}
		return e.execBody(x.body, ms)
	}}
}

func (e *evaluator) bindParams(name string, params []node, a *funcArgs, dst *scope) error {
	for i, p := range params {
		if i < len(a.args) {
			switch q := p.(type) {
			case *identNode:
				dst.set(q.name, a.kwargOrPos(q.name, i))
			case *kwargNode:
				id, ok := q.key.(*identNode)
				if !ok {
					return errorf("Keyword argument key must be an identifier in '%s'", name)
				}
				dst.set(id.name, a.kwargOrPos(id.name, i))
			default:
				return errorf("Invalid parameter type in '%s'", name)
			}
			continue
		}
		q, ok := p.(*kwargNode)
		if !ok {
			return errorf("Not enough arguments provided to '%s'", name)
		}
		id, ok := q.key.(*identNode)
		if !ok {
			return errorf("Keyword argument key must be an identifier in '%s'", name)
		}
		v, err := e.exec(q.val, a.scope)
		if err != nil {
			return err
		}
		dst.set(id.name, v)
	}
	return nil
}

func (e *evaluator) execCallBlock(x *callBlockNode, s *scope) (Value, error) {
	callee, err := e.exec(x.call.callee, s)
	if err != nil {
		return nil, err
	}
	f, ok := callee.(*Func)
	if !ok {
		return nil, errorf("Callee is not a function: got %s", callee.typeName())
	}
	callerScope := s.child()
	caller := &Func{name: "caller", fn: func(e *evaluator, a *funcArgs) (Value, error) {
		bs := callerScope.child()
		if err := e.bindParams("caller", x.callerArgs, a, bs); err != nil {
			return nil, err
		}
		return e.execBody(x.body, bs)
	}}
	cs := s.child()
	cs.set("caller", caller)
	a := &funcArgs{scope: cs}
	for _, an := range x.call.args {
		v, err := e.exec(an, s)
		if err != nil {
			return nil, err
		}
		a.args = append(a.args, v)
	}
	return e.invoke(f, a)
}

func (e *evaluator) call(x *callNode, s *scope) (Value, error) {
	a := &funcArgs{scope: s}
	for _, an := range x.args {
		v, err := e.exec(an, s)
		if err != nil {
			return nil, err
		}
		a.args = append(a.args, v)
	}
	callee, err := e.exec(x.callee, s)
	if err != nil {
		return nil, err
	}
	f, ok := callee.(*Func)
	if !ok {
		return nil, errorf("Callee is not a function: got %s", callee.typeName())
	}
	return e.invoke(f, a)
}

// invoke calls a function (a bound method gets its value first).
func (e *evaluator) invoke(f *Func, a *funcArgs) (Value, error) {
	e.depth++
	defer func() { e.depth-- }()
	if e.depth > e.limits.CallDepth {
		return nil, &Error{Kind: "limit", Msg: "calls nested too deep", Pos: -1}
	}
	args := &funcArgs{scope: a.scope, name: f.name}
	if f.this != nil {
		args.args = append([]Value{f.this}, a.args...)
	} else {
		args.args = a.args
	}
	return f.fn(e, args)
}

func (e *evaluator) member(x *memberNode, s *scope) (Value, error) {
	obj, err := e.exec(x.object, s)
	if err != nil {
		return nil, err
	}
	var prop Value
	switch {
	case x.computed:
		if sl, ok := x.prop.(*sliceNode); ok {
			return e.slice(obj, sl, s)
		}
		prop, err = e.exec(x.prop, s)
		if err != nil {
			return nil, err
		}
	default:
		if il, ok := x.prop.(*intLit); ok {
			if il.val < 0 {
				return nil, errorf("Static member property cannot be negative")
			}
			prop = Int(il.val)
			break
		}
		id, ok := x.prop.(*identNode)
		if !ok {
			return nil, errorf("Static member property must be an identifier")
		}
		prop = String(id.name)
		// obj.name is a built-in method before it is a key
		if f := method(obj, id.name); f != nil {
			return f, nil
		}
	}
	undef := Undefined{hint: "object_property"}
	if isUndefined(prop) {
		return undef, nil
	}
	if _, ok := hashKey(prop); !ok {
		return nil, errorf("Type: %s is not allowed as object key", prop.typeName())
	}
	switch o := obj.(type) {
	case Undefined:
		return undef, nil
	case *Object:
		v, ok, err := o.Get(prop)
		if err != nil {
			return nil, err
		}
		if ok {
			return v, nil
		}
		if k, isStr := prop.(String); isStr {
			if f := method(obj, string(k)); f != nil {
				return f, nil
			}
		} else if k, err := toString(prop); err == nil {
			if f := method(obj, k); f != nil {
				return f, nil
			}
		}
		return Undefined{hint: "object_property"}, nil
	case *Array, String:
		switch p := prop.(type) {
		case Int, Bool:
			idx, _ := asInt(p)
			if arr, ok := o.(*Array); ok {
				if idx < 0 {
					idx += int64(len(arr.Items))
				}
				if idx >= 0 && idx < int64(len(arr.Items)) {
					return arr.Items[idx], nil
				}
				return undef, nil
			}
			str := string(o.(String))
			if idx >= 0 && idx < int64(len(str)) {
				return String(str[idx : idx+1]), nil
			}
			return undef, nil
		case String:
			if f := method(obj, string(p)); f != nil {
				return f, nil
			}
			return Undefined{hint: string(p)}, nil
		}
		return undef, nil
	}
	k, ok := prop.(String)
	if !ok {
		return nil, errorf("Cannot access property with non-string: got %s", prop.typeName())
	}
	if f := method(obj, string(k)); f != nil {
		return f, nil
	}
	return Undefined{hint: string(k)}, nil
}

func (e *evaluator) slice(obj Value, sl *sliceNode, s *scope) (Value, error) {
	var size int64
	switch o := obj.(type) {
	case *Array:
		size = int64(len(o.Items))
	case String:
		size = int64(len(o))
	}
	eval := func(n node, def Value) (Value, error) {
		if n == nil {
			return def, nil
		}
		return e.exec(n, s)
	}
	step, err := eval(sl.step, Int(1))
	if err != nil {
		return nil, err
	}
	st, ok := asInt(step)
	if !ok {
		return nil, errorf("%s is not an int value", step.typeName())
	}
	defStart, defStop := Value(Int(0)), Value(Int(size))
	if st < 0 {
		defStart, defStop = Int(size-1), Int(-1)
	}
	start, err := eval(sl.start, defStart)
	if err != nil {
		return nil, err
	}
	stop, err := eval(sl.stop, defStop)
	if err != nil {
		return nil, err
	}
	f := method(obj, "slice")
	if f == nil {
		return nil, errorf("Unknown (built-in) filter 'slice' for type %s", obj.typeName())
	}
	return e.invoke(f, &funcArgs{scope: s, args: []Value{start, stop, step}})
}

// pySlice is Python's slicing of n items, as llama.cpp computes it: the
// indices taken, in order.
func pySlice(n, start, stop, step int64) []int64 {
	dir := int64(0)
	if step > 0 {
		dir = 1
	} else if step < 0 {
		dir = -1
	}
	var a, b int64
	if dir >= 0 {
		a = clampIdx(start, n, 0, n)
		b = clampIdx(stop, n, 0, n)
	} else {
		a = start
		if a < 0 {
			a = max64(n+a, 0)
		} else {
			a = min64(a, n-1)
		}
		b = stop
		if b < -1 {
			b = max64(n+b, -1)
		} else {
			b = min64(b, n-1)
		}
	}
	var out []int64
	if dir == 0 {
		return out
	}
	for i := a; dir*i < dir*b; i += step {
		if i >= 0 && i < n {
			out = append(out, i)
		}
	}
	return out
}

func clampIdx(v, n, lo, hi int64) int64 {
	if v < 0 {
		return max64(n+v, lo)
	}
	return min64(v, hi)
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

var _ = math.Inf
