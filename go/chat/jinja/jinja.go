// Package jinja is a Jinja template engine with the semantics of
// llama.cpp's own (common/jinja in the pinned sources), which is what
// llama-server renders chat templates with: the same lexer quirks
// (lstrip_blocks and trim_blocks on), the same values, operators, filters,
// tests and methods, the same output of each value. It exists so that a
// GGUF's tokenizer.chat_template gives byte for byte llama.cpp's prompt.
//
// Rendering is bounded (Limits): a hostile template fails with an *Error,
// it does not hang, exhaust memory or crash the process.
package jinja

import (
	"fmt"
	"strings"
	"time"
)

// Template is a parsed template; it is safe for concurrent use.
type Template struct {
	src  string // as normalised by the lexer
	body []node
}

// Parse lexes and parses a template.
func Parse(src string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, &Error{Kind: "parser", Msg: fmt.Sprint("internal error: ", r), Pos: -1}
		}
	}()
	toks, norm, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	body, err := parse(toks, norm)
	if err != nil {
		return nil, err
	}
	return &Template{src: norm, body: body}, nil
}

// Source is the template text as the lexer normalised it.
func (t *Template) Source() string { return t.src }

// Execute renders the template with the variables of vars (an object:
// keys are names). now is what strftime_now formats; limits bound the
// work.
func (t *Template) Execute(vars *Object, now time.Time, limits Limits) (out string, err error) {
	e := &evaluator{src: t.src, now: now, limits: limits}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &Error{Kind: "runtime", Msg: fmt.Sprint("internal error: ", r), Pos: -1}
		}
	}()
	s := newScope()
	if vars != nil {
		for i, k := range vars.keys {
			ks, ok := k.(String)
			if !ok {
				return "", fmt.Errorf("jinja: variable names must be strings, not %s", k.typeName())
			}
			s.set(string(ks), vars.vals[i])
		}
	}
	var b strings.Builder
	for _, n := range t.body {
		v, err := e.exec(n, s)
		if err == errBreak || err == errContinue {
			return "", &Error{Kind: "runtime", Msg: err.Error(), Pos: n.position(), src: t.src}
		}
		if err != nil {
			return "", err
		}
		gather(&b, v)
		if b.Len() > limits.StringSize {
			return "", e.checkLen(int64(b.Len()))
		}
	}
	return b.String(), nil
}

// FromGo converts JSON-like Go values (nil, bool, ints, float64, string,
// []any, and *Object for ordered dicts; map[string]any is converted with
// its keys sorted) into template values.
func FromGo(v any) Value {
	switch x := v.(type) {
	case nil:
		return None{}
	case Value:
		return x
	case bool:
		return Bool(x)
	case int:
		return Int(x)
	case int64:
		return Int(x)
	case float64:
		return Float(x)
	case string:
		return String(x)
	case []any:
		a := &Array{}
		for _, it := range x {
			a.Items = append(a.Items, FromGo(it))
		}
		return a
	case []string:
		a := &Array{}
		for _, it := range x {
			a.Items = append(a.Items, String(it))
		}
		return a
	case map[string]any:
		o := NewObject()
		for _, k := range sortedKeys(x) {
			o.SetString(k, FromGo(x[k]))
		}
		return o
	}
	return Undefined{hint: fmt.Sprintf("%T", v)}
}
