package serve

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/chat"
	"github.com/ggml-rs/ggml-rs/go/grammar/schema"
)

// Tool calling: a request's tools are rendered by the model's own chat
// template (package chat, as llama.cpp renders them), the model's output
// is parsed back into calls in its family's format, and a tool_choice
// that requires a call constrains sampling with a grammar of the calls
// that format writes, each call's arguments held to its tool's schema.
// See docs/notes/tools.md.

// toolFormat is how a model family writes its tool calls.
type toolFormat int

const (
	// formatHermes: <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>
	// (Qwen3, Qwen2.5, Hermes), possibly several.
	formatHermes toolFormat = iota + 1
	// formatQwenXML: <tool_call>\n<function=N>\n<parameter=P>\nV\n</parameter>\n
	// </function>\n</tool_call> (Qwen3.5, Qwen3-Coder).
	formatQwenXML
	// formatHarmony: gpt-oss's <|channel|>commentary to=functions.N
	// <|constrain|>json<|message|>{...}<|call|> (or the recipient in the
	// role header).
	formatHarmony
	// formatLlama3: a reply that is {"name": N, "parameters": {...}}
	// (Llama 3.x, after an optional <|python_tag|>).
	formatLlama3
	// formatGeneric: a reply that is {"tool_call": {"name", "arguments"}},
	// {"tool_calls": [...]} or {"response": ...} (llama.cpp's generic
	// format, for templates that render tools in a way not known here).
	formatGeneric
)

// toolFormatOf tells a template's format from its text, as llama.cpp's
// handlers are chosen (gpt-oss's channels first, then Qwen3-Coder's XML,
// then the Hermes tags, then Llama 3's ipython role).
func toolFormatOf(src string) toolFormat {
	switch {
	case strings.Contains(src, "<|channel|>"):
		return formatHarmony
	case strings.Contains(src, "<tool_call>") && strings.Contains(src, "<function=") && strings.Contains(src, "<parameter="):
		return formatQwenXML
	case strings.Contains(src, "<tool_call>"):
		return formatHermes
	case strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, "ipython"):
		return formatLlama3
	}
	return formatGeneric
}

// toolChoice is OpenAI's tool_choice.
type toolChoice int

const (
	choiceAuto     toolChoice = iota // the model decides
	choiceNone                       // no calls: tools rendered, output not parsed
	choiceRequired                   // at least one call, forced by a grammar
	choiceNamed                      // a call of one function, forced by a grammar
)

// toolSet is a request's tools and how they may be used.
type toolSet struct {
	tools  []chat.Tool
	params map[string]json.RawMessage // each tool's parameters schema
	choice toolChoice
	named  string // choiceNamed's function
}

// forced reports whether a grammar must force a call.
func (ts *toolSet) forced() bool {
	return ts != nil && (ts.choice == choiceRequired || ts.choice == choiceNamed)
}

// parsed reports whether the output is parsed for calls.
func (ts *toolSet) parsed() bool { return ts != nil && ts.choice != choiceNone }

// parseTools reads a request's tools (Ollama's and OpenAI's shape:
// {"type": "function", "function": {"name", "description",
// "parameters"}}): each needs a name, names are unique, and parameters,
// when given, are a JSON schema the converter takes (a 400 otherwise).
func parseTools(raw []json.RawMessage) (*toolSet, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	ts := &toolSet{params: map[string]json.RawMessage{}}
	for i, r := range raw {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, badRequest("tools[%d]: %v", i, err)
		}
		if t.Type != "" && t.Type != "function" {
			return nil, badRequest("tools[%d]: type %q: only \"function\" tools are supported", i, t.Type)
		}
		if t.Function == nil || t.Function.Name == "" {
			return nil, badRequest("tools[%d]: a tool needs function.name", i)
		}
		name := t.Function.Name
		if strings.ContainsAny(name, " \t\r\n\"<>") {
			return nil, badRequest("tools[%d]: function name %q: no spaces, quotes or angle brackets", i, name)
		}
		if _, dup := ts.params[name]; dup {
			return nil, badRequest("tools[%d]: function %q is given twice", i, name)
		}
		p := bytes.TrimSpace(t.Function.Parameters)
		if len(p) == 0 || string(p) == "null" || string(p) == "{}" {
			p = nil
		} else {
			if p[0] != '{' {
				return nil, badRequest("tools[%d] (%s): parameters must be a JSON schema object", i, name)
			}
			if _, err := schema.ToGrammar(p); err != nil {
				return nil, badRequest("tools[%d] (%s): parameters: invalid JSON schema: %v", i, name, err)
			}
		}
		ts.params[name] = p
		ts.tools = append(ts.tools, chat.Tool{Name: name, Description: t.Function.Description, Parameters: p})
	}
	return ts, nil
}

// parseToolChoice reads OpenAI's tool_choice: "auto" (or absent), "none",
// "required", or {"type": "function", "function": {"name": N}} naming one
// of the tools.
func (ts *toolSet) parseToolChoice(v json.RawMessage) error {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch s {
		case "auto":
			return nil
		case "none":
			if ts != nil {
				ts.choice = choiceNone
			}
			return nil
		case "required":
			if ts == nil {
				return badRequest("tool_choice \"required\" needs tools")
			}
			ts.choice = choiceRequired
			return nil
		}
		return badRequest("tool_choice %q: \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(v, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return badRequest("tool_choice %s: \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", clipJSON(v))
	}
	if ts == nil {
		return badRequest("tool_choice names function %q, but there are no tools", named.Function.Name)
	}
	if _, ok := ts.params[named.Function.Name]; !ok {
		return badRequest("tool_choice names function %q, which is not among the tools", named.Function.Name)
	}
	ts.choice, ts.named = choiceNamed, named.Function.Name
	return nil
}

// toolCall is a call parsed from the model's output.
type toolCall struct {
	ID   string
	Name string
	Args json.RawMessage // a JSON object
}

// newCallID is a call's id: "call_" and 24 random lowercase letters and
// digits (Ollama's shape, OpenAI's length).
func newCallID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "call_" + string(b)
}

// --- the grammar of a forced call ------------------------------------------

// callGrammar is the GBNF of one call, in the format f, of the named
// function or (named "") of any of the tools; its start rule is
// callRoot. Each tool's arguments follow its schema (llama.cpp's
// converter, the rules renamed apart per tool).
func (ts *toolSet) callGrammar(f toolFormat) (string, error) {
	var b strings.Builder
	var alts []string
	for i, t := range ts.tools {
		if ts.choice == choiceNamed && t.Name != ts.named {
			continue
		}
		prefix := fmt.Sprintf("t%d-", i)
		params := ts.params[t.Name]
		if params == nil {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		rule := prefix + "call"
		alts = append(alts, rule)
		if f == formatQwenXML {
			body, err := xmlArgsGrammar(&b, prefix, params)
			if err != nil {
				return "", badRequest("tool %s: %v", t.Name, err)
			}
			fmt.Fprintf(&b, "%s ::= \"<tool_call>\\n<function=%s>\\n\" %s \"</function>\\n</tool_call>\"\n", rule, t.Name, body)
			continue
		}
		args, err := schema.ToGrammar(params)
		if err != nil {
			return "", badRequest("tool %s: parameters: invalid JSON schema: %v", t.Name, err)
		}
		b.WriteString(renameRules(args, prefix))
		name := gbnfString(t.Name)
		var open, close string
		switch f {
		case formatHarmony:
			open, close = `"<|channel|>commentary to=functions.`+name+` <|constrain|>json<|message|>"`, ""
		case formatHermes:
			open, close = `"<tool_call>\n{\"name\": \"`+name+`\", \"arguments\": "`, `"}\n</tool_call>"`
		case formatLlama3:
			open, close = `"{\"name\": \"`+name+`\", \"parameters\": "`, `"}"`
		default:
			open, close = `"{\"tool_call\": {\"name\": \"`+name+`\", \"arguments\": "`, `"}}"`
		}
		fmt.Fprintf(&b, "%s ::= %s %sroot %s\n", rule, open, prefix, close)
	}
	fmt.Fprintf(&b, "%s ::= %s\n", callRoot, strings.Join(alts, " | "))
	return b.String(), nil
}

// callRoot is the start rule of a call grammar (no name the schema
// converter writes).
const callRoot = "x-tool-call-root"

// xmlArgsGrammar writes the rules of Qwen3.5's XML arguments for a
// parameters schema and returns the sequence that uses them: each
// required property in the schema's order, then each optional one or not,
// as "<parameter=P>\nV\n</parameter>\n"; V is the text of a string
// property (one of its enum values, or text without "<"), else the JSON
// of its schema.
func xmlArgsGrammar(b *strings.Builder, prefix string, params json.RawMessage) (string, error) {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(params, &s); err != nil {
		return "", err
	}
	order, err := propertyOrder(params)
	if err != nil {
		return "", err
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	var seq []string
	for _, opt := range []bool{false, true} {
		for i, name := range order {
			if required[name] == opt {
				continue
			}
			p := s.Properties[name]
			rule := fmt.Sprintf("%sp%d", prefix, i)
			var prop struct {
				Type json.RawMessage `json:"type"`
				Enum []any           `json:"enum"`
			}
			json.Unmarshal(p, &prop)
			var value string
			if string(prop.Type) == `"string"` {
				var lits []string
				for _, e := range prop.Enum {
					if es, ok := e.(string); ok {
						lits = append(lits, `"`+gbnfString(es)+`"`)
					}
				}
				if len(lits) > 0 {
					value = "(" + strings.Join(lits, " | ") + ")"
				} else {
					value = "[^<]*"
				}
			} else {
				g, err := schema.ToGrammar(p)
				if err != nil {
					return "", fmt.Errorf("parameter %s: invalid JSON schema: %v", name, err)
				}
				vp := rule + "-"
				b.WriteString(renameRules(g, vp))
				value = vp + "root"
			}
			fmt.Fprintf(b, "%s ::= \"<parameter=%s>\\n\" %s \"\\n</parameter>\\n\"\n", rule, gbnfString(name), value)
			if opt {
				rule += "?"
			}
			seq = append(seq, rule)
		}
	}
	if len(seq) == 0 {
		return `""`, nil
	}
	return strings.Join(seq, " "), nil
}

// propertyOrder lists the keys of a schema's "properties" in their order.
func propertyOrder(params json.RawMessage) ([]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(params, &top); err != nil {
		return nil, err
	}
	props, ok := top["properties"]
	if !ok {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(props))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("properties is not an object")
	}
	var keys []string
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// gbnfString escapes text for a GBNF string literal.
func gbnfString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return r.Replace(s)
}

// renameRules prefixes every rule name of a GBNF text (definitions and
// references; not inside string literals, character classes or token
// references), so that several converted schemas live in one grammar.
func renameRules(g, prefix string) string {
	var b strings.Builder
	for i := 0; i < len(g); {
		c := g[i]
		switch {
		case c == '"' || c == '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(g) && g[j] != end {
				if g[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(g))
			b.WriteString(g[i:j])
			i = j
		case c == '<':
			j := strings.IndexByte(g[i:], '>')
			if j < 0 {
				j = len(g) - i - 1
			}
			b.WriteString(g[i : i+j+1])
			i += j + 1
		case c == '{': // a repetition count
			j := strings.IndexByte(g[i:], '}')
			if j < 0 {
				j = len(g) - i - 1
			}
			b.WriteString(g[i : i+j+1])
			i += j + 1
		case c == '#':
			j := strings.IndexByte(g[i:], '\n')
			if j < 0 {
				j = len(g) - i
			}
			b.WriteString(g[i : i+j])
			i += j
		case isNameChar(c):
			j := i
			for j < len(g) && isNameChar(g[j]) {
				j++
			}
			b.WriteString(prefix)
			b.WriteString(g[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	if s := b.String(); !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return b.String()
}

func isNameChar(c byte) bool {
	return c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
