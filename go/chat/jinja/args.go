package jinja

// funcArgs are a call's arguments: positional values and Kwargs in order,
// and the caller's scope (macros run in a copy of it).
type funcArgs struct {
	args  []Value
	scope *scope
	name  string
}

func (a *funcArgs) kwarg(key string) (Value, bool) {
	for _, v := range a.args {
		if k, ok := v.(Kwarg); ok && k.key == key {
			return k.val, true
		}
	}
	return nil, false
}

// kwargOrPos is the keyword argument key, else positional argument pos
// when that one is no keyword, else undefined.
func (a *funcArgs) kwargOrPos(key string, pos int) Value {
	if v, ok := a.kwarg(key); ok {
		return v
	}
	if pos < len(a.args) {
		if _, isKw := a.args[pos].(Kwarg); !isKw {
			return a.args[pos]
		}
	}
	return Undefined{}
}

func (a *funcArgs) pos(i int) (Value, error) {
	if i < len(a.args) {
		return a.args[i], nil
	}
	return nil, errorf("Function '%s' expected at least %d arguments, got %d", a.name, i+1, len(a.args))
}

func (a *funcArgs) posOr(i int, def Value) Value {
	if i < len(a.args) {
		return a.args[i]
	}
	return def
}

func (a *funcArgs) count(min, max int) error {
	if n := len(a.args); n < min || n > max {
		return errorf("Function '%s' expected between %d and %d arguments, got %d", a.name, min, max, n)
	}
	return nil
}

// kinds checks the first arguments' types ("" accepts any); required is
// how many must be there.
func (a *funcArgs) kinds(required int, kinds ...string) error {
	if err := a.count(required, 999); err != nil {
		return err
	}
	for i, k := range kinds {
		if i >= required || i >= len(a.args) || k == "" {
			continue
		}
		if kindOf(a.args[i]) != k {
			return errorf("Function '%s' expected value of type %s, got %s", a.name, k, a.args[i].typeName())
		}
	}
	return nil
}

// kindOf names a value's C++ class as the type checks see it (a tuple is
// an array).
func kindOf(v Value) string {
	switch v.(type) {
	case *Array:
		return "Array"
	}
	return v.typeName()
}
