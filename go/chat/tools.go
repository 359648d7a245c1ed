package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/chat/jinja"
)

// Tool is a function the model may call, as OpenAI's API describes one.
// Templates get it as llama.cpp hands it to them
// (common_chat_tools_to_json_oaicompat): {"type": "function", "function":
// {"name", "description", "parameters"}}, description "" when absent and
// parameters {} when absent, the schema's keys in their order.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments (JSON text; empty: {}).
	Parameters json.RawMessage
}

// ToolCall is a call an assistant turn made.
type ToolCall struct {
	ID        string // optional
	Name      string
	Arguments string // a JSON object, as text
}

// ToolCaps are what a template does with tools, found by rendering probes
// as llama.cpp's capability check does (common/jinja/caps.cpp), judged by
// what reaches the output rather than by which values were read.
type ToolCaps struct {
	// Tools: a tool's name, given in tools, reaches the prompt (Ollama's
	// and llama.cpp's test of a template with tool support).
	Tools bool
	// ToolCalls: an assistant message's tool call reaches the prompt.
	ToolCalls bool
	// ObjectArguments: the template renders a call's arguments given as a
	// JSON object (not as text); llama.cpp then parses string arguments
	// into objects before rendering (func_args_not_string).
	ObjectArguments bool
}

// ToolCaps reports the template's tool capabilities.
func (t *Template) ToolCaps() ToolCaps { return t.caps.tools }

const (
	probeToolName = "tool_probe_fn1" // the tool described
	probeCallName = "tool_probe_fn2" // the tool called
	probeArgValue = "probe_arg_value1"
)

// probeTools renders llama.cpp's tool probe: a user turn, an assistant
// call of another tool with arguments {"arg": value} (args), its tool reply, an
// answer and a user turn, with one tool described.
func (t *Template) probeTools(args jinja.Value) (string, error) {
	call := jinja.NewObject()
	call.SetString("id", jinja.String("call00001"))
	call.SetString("type", jinja.String("function"))
	fn := jinja.NewObject()
	fn.SetString("name", jinja.String(probeCallName))
	fn.SetString("arguments", args)
	call.SetString("function", fn)
	asst := probeMessage("assistant", jinja.String(""))
	asst.SetString("tool_calls", &jinja.Array{Items: []jinja.Value{call}})
	tool := probeMessage("tool", jinja.String("Tool response"))
	tool.SetString("tool_call_id", jinja.String("call00001"))
	msgs := &jinja.Array{Items: []jinja.Value{
		probeMessage("user", jinja.String("User message")), asst, tool,
		probeMessage("assistant", jinja.String("The tool response was 'tool response'")),
		probeMessage("user", jinja.String("User message")),
	}}
	tools, _ := jsonValue([]byte(`[{"type":"function","function":{"name":"` + probeToolName +
		`","description":"Tool description","parameters":{"type":"object","properties":{"arg":{"type":"string","description":"Arg description"}},"required":["arg"]}}}]`))
	vars := jinja.NewObject()
	vars.SetString("messages", msgs)
	vars.SetString("tools", tools)
	vars.SetString("bos_token", jinja.String(""))
	vars.SetString("eos_token", jinja.String(""))
	vars.SetString("add_generation_prompt", jinja.Bool(true))
	return t.tmpl.Execute(vars, timeNow(), probeLimits)
}

func probeToolCaps(t *Template) ToolCaps {
	var c ToolCaps
	obj := jinja.NewObject()
	obj.SetString("arg", jinja.String(probeArgValue))
	out, err := t.probeTools(obj)
	if err == nil {
		c.Tools = strings.Contains(out, probeToolName)
		c.ToolCalls = strings.Contains(out, probeArgValue)
		// an object printed as it is (Python's repr) is a template that
		// wants text
		c.ObjectArguments = c.ToolCalls && !strings.Contains(out, "{'arg': '"+probeArgValue)
	}
	if !c.ObjectArguments {
		out, err = t.probeTools(jinja.String(`{"arg": "` + probeArgValue + `"}`))
		if err != nil {
			return ToolCaps{}
		}
		c.Tools = c.Tools || strings.Contains(out, probeToolName)
		c.ToolCalls = strings.Contains(out, probeArgValue)
	}
	return c
}

// jsonValue decodes JSON text into template values, the keys of objects
// in their order (llama.cpp's ordered_json), integers as integers.
func jsonValue(b []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("chat: trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (jinja.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			o := jinja.NewObject()
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				o.SetString(k.(string), v)
			}
			_, err := d.Token()
			return o, err
		case '[':
			a := &jinja.Array{}
			for d.More() {
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				a.Items = append(a.Items, v)
			}
			_, err := d.Token()
			return a, err
		}
		return nil, fmt.Errorf("chat: unexpected %v in JSON", x)
	case json.Number:
		if i, err := x.Int64(); err == nil && !strings.ContainsAny(x.String(), ".eE") {
			return jinja.Int(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, err
		}
		return jinja.Float(f), nil
	case string:
		return jinja.String(x), nil
	case bool:
		return jinja.Bool(x), nil
	case nil:
		return jinja.None{}, nil
	}
	return nil, fmt.Errorf("chat: unexpected JSON token %v", tok)
}

// toolsValue is the tools variable.
func toolsValue(tools []Tool) (jinja.Value, error) {
	arr := &jinja.Array{}
	for _, tl := range tools {
		fn := jinja.NewObject()
		fn.SetString("name", jinja.String(tl.Name))
		fn.SetString("description", jinja.String(tl.Description))
		var params jinja.Value = jinja.NewObject()
		if p := bytes.TrimSpace(tl.Parameters); len(p) > 0 && string(p) != "null" {
			v, err := jsonValue(p)
			if err != nil {
				return nil, fmt.Errorf("chat: tool %s: parameters: %v", tl.Name, err)
			}
			params = v
		}
		fn.SetString("parameters", params)
		o := jinja.NewObject()
		o.SetString("type", jinja.String("function"))
		o.SetString("function", fn)
		arr.Items = append(arr.Items, o)
	}
	return arr, nil
}

// toolCallsValue is a message's tool_calls as llama.cpp renders them
// (to_json_oaicompat): {"type": "function", "function": {"name",
// "arguments"}, "id"}; arguments as text, or parsed into an object for a
// template that takes objects.
func toolCallsValue(calls []ToolCall, objectArgs bool) (jinja.Value, error) {
	arr := &jinja.Array{}
	for _, c := range calls {
		fn := jinja.NewObject()
		fn.SetString("name", jinja.String(c.Name))
		var args jinja.Value = jinja.String(c.Arguments)
		if objectArgs {
			v, err := jsonValue([]byte(c.Arguments))
			if err != nil {
				return nil, fmt.Errorf("chat: tool call %s: arguments are not JSON: %v", c.Name, err)
			}
			args = v
		}
		fn.SetString("arguments", args)
		o := jinja.NewObject()
		o.SetString("type", jinja.String("function"))
		o.SetString("function", fn)
		if c.ID != "" {
			o.SetString("id", jinja.String(c.ID))
		}
		arr.Items = append(arr.Items, o)
	}
	return arr, nil
}
