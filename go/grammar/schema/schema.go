package schema

import (
	"errors"
	"fmt"
	"strings"
)

// Options tunes a conversion. The zero value is what llama-server does
// (json_schema_to_grammar: no dotall) with the default limits.
type Options struct {
	// Dotall makes "." in a pattern match any character, newlines too
	// (llama.cpp's common_grammar_options.dotall, used by build_grammar;
	// json_schema_to_grammar, hence llama-server, leaves it off).
	Dotall bool

	// Limits for hostile input; 0 means the default. A schema past one is
	// an error (ErrLimit), never a hang, a crash or an unbounded allocation.
	MaxInputBytes   int // size of the schema text (default 4 MiB)
	MaxDepth        int // JSON nesting, and recursion through the schema and its $refs (default 1000)
	MaxGrammarBytes int // size of the grammar written (default 16 MiB)
	MaxSteps        int // units of work: schema nodes built and visited, rule-name probes (default 1,000,000)
}

// Default limits.
const (
	DefaultMaxInputBytes   = 4 << 20
	DefaultMaxDepth        = 1000
	DefaultMaxGrammarBytes = 16 << 20
	DefaultMaxSteps        = 1_000_000
)

// ErrLimit is wrapped by the error of a schema past one of the limits.
var ErrLimit = errors.New("schema exceeds a conversion limit")

// Result is a grammar and the warnings llama.cpp prints for it on stderr
// ("WARNING: JSON schema conversion was incomplete: ..."): each a pattern
// with no grammar equivalent, for which any string is accepted.
type Result struct {
	Grammar  string
	Warnings []string
}

// ToGrammar converts a JSON schema to GBNF text, the same text as
// llama.cpp's json_schema_to_grammar (what llama-server does with
// json_schema and response_format), or an error for a schema it refuses,
// with its message where it has one.
func ToGrammar(schema []byte) (string, error) {
	r, err := Convert(schema, Options{})
	if err != nil {
		return "", err
	}
	return r.Grammar, nil
}

// Convert is ToGrammar with options, and the warnings.
func Convert(schema []byte, opts Options) (res Result, err error) {
	lim := newLimits(opts)
	if len(schema) > lim.maxInput {
		return Result{}, fmt.Errorf("%w: the schema is %d bytes, over %d", ErrLimit, len(schema), lim.maxInput)
	}
	root, err := parseJSON(string(schema), lim.maxDepth)
	if err != nil {
		if strings.Contains(err.Error(), "nesting deeper") {
			return Result{}, fmt.Errorf("%w: %v", ErrLimit, err)
		}
		return Result{}, err
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		switch e := r.(type) {
		case errSchema:
			err = errors.New("JSON schema conversion failed:\n" + e.msg)
		case errRuntime:
			err = errors.New("JSON schema conversion failed:\n" + e.msg)
		case errConversion:
			err = errors.New(e.msg)
		case limitError:
			err = fmt.Errorf("%w: %s", ErrLimit, e.msg)
		default:
			// a bug, not the caller's input: still an error, not a crash
			err = fmt.Errorf("schema: internal error converting the schema: %v", r)
		}
		res = Result{}
	}()
	doc := buildDocument(root, lim)
	c := newConverter(opts.Dotall, lim)
	c.visit(doc, "")
	c.checkErrors()
	return Result{Grammar: c.formatGrammar(), Warnings: c.warnings}, nil
}

// JSON is the grammar llama-server uses for response_format
// {"type": "json_object"} without a schema: the conversion of the empty
// schema {}, any JSON value (root ::= value).
func JSON() string {
	g, err := ToGrammar([]byte("{}"))
	if err != nil {
		panic(err) // a constant input
	}
	return g
}

// OllamaJSON is the language Ollama constrains format: "json" to (its
// llm/server.go's grammarJSON), written here in our own rules: one JSON
// object at the root; white space (space, tab, newline) may follow an
// opening bracket, a colon, a comma or a keyword, and precede a closing
// bracket, nowhere else. The same language gives the same allowed tokens
// at every step, so generations match Ollama's.
const OllamaJSON = `root   ::= obj
obj    ::= "{" sp ( member ( "," sp member )* )? sp "}"
member ::= str ":" sp val
arr    ::= "[" sp ( val ( "," sp val )* )? sp "]"
val    ::= obj | arr | str | num | kw sp
kw     ::= "true" | "false" | "null"
str    ::= "\"" ( plain | "\\" esc )* "\""
plain  ::= [^"\\\x7F\x00-\x1F]
esc    ::= ["\\/bfnrt] | "u" hex hex hex hex
hex    ::= [0-9a-fA-F]
num    ::= "-"? ( [0-9] | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
sp     ::= [ \t\n]*
`

type limits struct {
	maxInput, maxDepth, maxGrammar, maxSteps int
	grammar, steps                           int
}

type limitError struct{ msg string }

func newLimits(o Options) *limits {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	return &limits{
		maxInput:   def(o.MaxInputBytes, DefaultMaxInputBytes),
		maxDepth:   def(o.MaxDepth, DefaultMaxDepth),
		maxGrammar: def(o.MaxGrammarBytes, DefaultMaxGrammarBytes),
		maxSteps:   def(o.MaxSteps, DefaultMaxSteps),
	}
}

func (l *limits) enter(depth int) {
	if depth > l.maxDepth {
		panic(limitError{fmt.Sprintf("recursion through the schema deeper than %d levels (nesting, or a $ref cycle)", l.maxDepth)})
	}
}

func (l *limits) step() {
	l.steps++
	if l.steps > l.maxSteps {
		panic(limitError{fmt.Sprintf("conversion takes more than %d steps", l.maxSteps)})
	}
}

func (l *limits) grow(n int) {
	l.grammar += n
	if l.grammar > l.maxGrammar {
		panic(limitError{fmt.Sprintf("the grammar would be over %d bytes", l.maxGrammar)})
	}
}
