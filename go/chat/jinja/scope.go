package jinja

// scope is llama.cpp's context: the variables visible at one point. A new
// scope (a for loop, a macro call) starts as a copy of its parent, so what
// a loop body sets stays in the loop while namespaces, lists and dicts are
// shared.
type scope struct {
	vars map[string]Value
}

func newScope() *scope {
	s := &scope{vars: map[string]Value{}}
	for _, k := range []string{"true", "True"} {
		s.vars[k] = Bool(true)
	}
	for _, k := range []string{"false", "False"} {
		s.vars[k] = Bool(false)
	}
	s.vars["none"] = None{}
	s.vars["None"] = None{}
	return s
}

func (s *scope) child() *scope {
	c := &scope{vars: make(map[string]Value, len(s.vars))}
	for k, v := range s.vars {
		c.vars[k] = v
	}
	return c
}

func (s *scope) get(name string) Value {
	if v, ok := s.vars[name]; ok {
		return v
	}
	return Undefined{hint: name}
}

func (s *scope) set(name string, v Value) { s.vars[name] = v }
