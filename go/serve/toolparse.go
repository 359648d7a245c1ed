package serve

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
)

// Parsing a model's output back into tool calls, as it streams: a
// toolParser takes the answer's text (after the reasoning is split off)
// piece by piece and returns the text that is answer for certain and the
// calls completed; text that may still become a call is held. Text that
// looks like a call but does not parse as one (or names no tool of the
// request) is answer, as in Ollama. gpt-oss's calls are parsed by its
// harmony splitter (thinking.go), which reads the channels.
type toolParser interface {
	add(text string) (content string, calls []toolCall)
	flush() (content string, calls []toolCall)
}

// newToolParser is the parser of a format's calls, or nil (harmony:
// parsed by the splitter).
func newToolParser(f toolFormat, ts *toolSet) toolParser {
	switch f {
	case formatHermes, formatQwenXML:
		return &tagParser{ts: ts, xml: f == formatQwenXML}
	case formatLlama3, formatGeneric:
		return &jsonReplyParser{ts: ts, llama3: f == formatLlama3}
	}
	return nil
}

const (
	openToolCall  = "<tool_call>"
	closeToolCall = "</tool_call>"
)

// tagParser reads calls between <tool_call> and </tool_call>: a JSON
// object {"name", "arguments"} (Hermes, Qwen3) or Qwen3.5's XML function
// block. White space after a call is dropped.
type tagParser struct {
	ts        *toolSet
	xml       bool
	inCall    bool
	afterCall bool
	buf       string
}

func (p *tagParser) content(s string) string {
	if p.afterCall {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return ""
		}
		p.afterCall = false
	}
	return s
}

func (p *tagParser) add(text string) (string, []toolCall) {
	p.buf += text
	var co strings.Builder
	var calls []toolCall
	for {
		if !p.inCall {
			if i := strings.Index(p.buf, openToolCall); i >= 0 {
				co.WriteString(p.content(p.buf[:i]))
				p.buf, p.inCall = p.buf[i+len(openToolCall):], true
				continue
			}
			keep := heldTail(p.buf, openToolCall)
			co.WriteString(p.content(p.buf[:len(p.buf)-keep]))
			p.buf = p.buf[len(p.buf)-keep:]
			return co.String(), calls
		}
		j := strings.Index(p.buf, closeToolCall)
		if j < 0 {
			return co.String(), calls
		}
		body := p.buf[:j]
		p.buf, p.inCall = p.buf[j+len(closeToolCall):], false
		if c, ok := p.parse(body); ok {
			calls = append(calls, c)
			p.afterCall = true
		} else {
			co.WriteString(openToolCall + body + closeToolCall)
		}
	}
}

func (p *tagParser) flush() (string, []toolCall) {
	b := p.buf
	p.buf = ""
	if p.inCall {
		p.inCall = false
		if c, ok := p.parse(b); ok { // a call the end of generation closed
			return "", []toolCall{c}
		}
		return openToolCall + b, nil
	}
	return p.content(b), nil
}

func (p *tagParser) parse(body string) (toolCall, bool) {
	if p.xml {
		return p.ts.parseXMLCall(body)
	}
	var c struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &c) != nil {
		return toolCall{}, false
	}
	return p.ts.call(c.Name, c.Arguments)
}

// call checks a parsed call: a tool of the request, arguments a JSON
// object (or text holding one; none: {}).
func (ts *toolSet) call(name string, args json.RawMessage) (toolCall, bool) {
	if _, ok := ts.params[name]; !ok {
		return toolCall{}, false
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = json.RawMessage(strings.TrimSpace(s))
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil {
		return toolCall{}, false
	}
	var compact bytes.Buffer
	json.Compact(&compact, args)
	return toolCall{ID: newCallID(), Name: name, Args: compact.Bytes()}, true
}

// parseXMLCall reads Qwen3.5's call: <function=NAME> then
// <parameter=P>\nVALUE\n</parameter> blocks, then </function>. A value is
// text for a string parameter, else JSON when it parses as JSON (text
// otherwise), as llama.cpp types it.
func (ts *toolSet) parseXMLCall(body string) (toolCall, bool) {
	body = strings.TrimSpace(body)
	const fnOpen, fnClose = "<function=", "</function>"
	if !strings.HasPrefix(body, fnOpen) || !strings.HasSuffix(body, fnClose) {
		return toolCall{}, false
	}
	body = body[len(fnOpen) : len(body)-len(fnClose)]
	gt := strings.IndexByte(body, '>')
	if gt < 0 {
		return toolCall{}, false
	}
	name, rest := body[:gt], body[gt+1:]
	params, ok := ts.params[name]
	if !ok {
		return toolCall{}, false
	}
	var props struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	if params != nil {
		json.Unmarshal(params, &props)
	}
	var args bytes.Buffer
	args.WriteByte('{')
	for n := 0; ; n++ {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			break
		}
		const pOpen, pClose = "<parameter=", "</parameter>"
		if !strings.HasPrefix(rest, pOpen) {
			return toolCall{}, false
		}
		rest = rest[len(pOpen):]
		gt := strings.IndexByte(rest, '>')
		end := strings.Index(rest, pClose)
		if gt < 0 || end < gt {
			return toolCall{}, false
		}
		key, value := rest[:gt], rest[gt+1:end]
		rest = rest[end+len(pClose):]
		value = strings.TrimSuffix(strings.TrimPrefix(value, "\n"), "\n")
		if n > 0 {
			args.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		args.Write(k)
		args.WriteByte(':')
		var v json.RawMessage
		if string(props.Properties[key].Type) != `"string"` && json.Valid([]byte(value)) {
			v = json.RawMessage(value)
		} else {
			v, _ = json.Marshal(value)
		}
		json.Compact(&args, v)
	}
	args.WriteByte('}')
	return toolCall{ID: newCallID(), Name: name, Args: args.Bytes()}, true
}

// jsonReplyParser reads a reply that is all JSON: Llama 3's
// {"name", "parameters"} (after an optional <|python_tag|>; several
// separated by ";"), or the generic {"tool_call": ...}, {"tool_calls":
// [...]}, {"response": ...}. A reply that begins with "{" is held to its
// end; any other streams as it comes.
type jsonReplyParser struct {
	ts     *toolSet
	llama3 bool
	state  int // 0: undecided, 1: answer, 2: held JSON
	buf    string
}

const pythonTag = "<|python_tag|>"

func (p *jsonReplyParser) add(text string) (string, []toolCall) {
	if p.state == 1 {
		return text, nil
	}
	p.buf += text
	if p.state == 2 {
		return "", nil
	}
	t := strings.TrimLeftFunc(p.buf, unicode.IsSpace)
	if p.llama3 {
		if strings.HasPrefix(pythonTag, t) {
			return "", nil // undecided
		}
		t = strings.TrimLeftFunc(strings.TrimPrefix(t, pythonTag), unicode.IsSpace)
	}
	switch {
	case t == "":
		return "", nil
	case t[0] == '{':
		p.state = 2
		return "", nil
	}
	p.state = 1
	out := p.buf
	p.buf = ""
	return out, nil
}

func (p *jsonReplyParser) flush() (string, []toolCall) {
	b := p.buf
	p.buf = ""
	if p.state != 2 {
		return b, nil
	}
	t := strings.TrimSpace(b)
	if p.llama3 {
		t = strings.TrimSpace(strings.TrimPrefix(t, pythonTag))
		var calls []toolCall
		d := json.NewDecoder(strings.NewReader(t))
		for {
			var c struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
				Arguments  json.RawMessage `json:"arguments"`
			}
			if err := d.Decode(&c); err != nil {
				return b, nil
			}
			if c.Parameters == nil {
				c.Parameters = c.Arguments
			}
			call, ok := p.ts.call(c.Name, c.Parameters)
			if !ok {
				return b, nil
			}
			calls = append(calls, call)
			rest := strings.TrimLeftFunc(t[d.InputOffset():], unicode.IsSpace)
			rest = strings.TrimLeftFunc(strings.TrimPrefix(rest, ";"), unicode.IsSpace)
			if rest == "" {
				return "", calls
			}
			t = rest
			d = json.NewDecoder(strings.NewReader(t))
		}
	}
	type generic struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	var g struct {
		ToolCall  *generic        `json:"tool_call"`
		ToolCalls []generic       `json:"tool_calls"`
		Response  json.RawMessage `json:"response"`
	}
	if json.Unmarshal([]byte(t), &g) != nil {
		return b, nil
	}
	if g.ToolCall != nil {
		g.ToolCalls = append(g.ToolCalls, *g.ToolCall)
	}
	if len(g.ToolCalls) > 0 {
		var calls []toolCall
		for _, c := range g.ToolCalls {
			call, ok := p.ts.call(c.Name, c.Arguments)
			if !ok {
				return b, nil
			}
			calls = append(calls, call)
		}
		return "", calls
	}
	if g.Response != nil {
		var s string
		if json.Unmarshal(g.Response, &s) == nil {
			return s, nil
		}
		return string(g.Response), nil
	}
	return b, nil
}
