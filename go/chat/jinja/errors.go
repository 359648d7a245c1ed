package jinja

import (
	"errors"
	"fmt"
)

// Error is a template that failed: to lex or parse (Kind "lexer",
// "parser"), to render ("runtime"), by raise_exception ("raised": Msg is
// the template's message), or past a limit ("limit").
type Error struct {
	Kind string
	Msg  string
	Pos  int // byte offset in the template, -1 when unknown
	src  string
}

func (e *Error) Error() string {
	if e.Pos >= 0 && e.src != "" {
		line, col := lineCol(e.src, e.Pos)
		return fmt.Sprintf("chat template %s error at line %d, column %d: %s", e.Kind, line, col, e.Msg)
	}
	return fmt.Sprintf("chat template %s error: %s", e.Kind, e.Msg)
}

func lineCol(src string, pos int) (int, int) {
	line, col := 1, 1
	for i := 0; i < pos && i < len(src); i++ {
		if src[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// errorf makes a runtime error without a position; the evaluator gives it
// the position of the statement that failed.
func errorf(format string, args ...any) error {
	return &Error{Kind: "runtime", Msg: fmt.Sprintf(format, args...), Pos: -1}
}

func raised(msg string) error {
	return &Error{Kind: "raised", Msg: msg, Pos: -1}
}

// at sets the position of an error that has none.
func at(err error, pos int, src string) error {
	var e *Error
	if errors.As(err, &e) && e.Pos < 0 {
		e.Pos = pos
		e.src = src
	}
	return err
}
