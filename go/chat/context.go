package chat

import (
	"sort"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/chat/jinja"
)

// context builds the template's variables as llama.cpp does
// (common_chat_templates_apply_jinja, common_chat_template_direct_apply):
// messages, bos_token, eos_token, enable_thinking, datetime and
// date_string, the kwargs, add_generation_prompt only when true, and
// tools only when there are some.
func (t *Template) context(msgs []Message, o Options) (*jinja.Object, error) {
	now := o.Now
	if now.IsZero() {
		now = timeNow()
	}
	vars := jinja.NewObject()
	ms, err := t.messages(msgs)
	if err != nil {
		return nil, err
	}
	vars.SetString("messages", ms)
	if len(o.Tools) > 0 {
		tools, err := toolsValue(o.Tools)
		if err != nil {
			return nil, err
		}
		vars.SetString("tools", tools)
	}
	vars.SetString("bos_token", jinja.String(o.BOS))
	vars.SetString("eos_token", jinja.String(o.EOS))
	thinking := true
	if o.EnableThinking != nil {
		thinking = *o.EnableThinking
	}
	vars.SetString("enable_thinking", jinja.Bool(thinking))
	datetime, _ := jinja.Strftime("%b %d %Y", now)
	date, _ := jinja.Strftime("%d %b %Y", now)
	vars.SetString("datetime", jinja.String(datetime))
	vars.SetString("date_string", jinja.String(date))
	keys := make([]string, 0, len(o.Kwargs))
	for k := range o.Kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vars.SetString(k, jinja.FromGo(o.Kwargs[k]))
	}
	if o.AddGenerationPrompt {
		vars.SetString("add_generation_prompt", jinja.Bool(true))
	}
	if v, ok := vars.GetString("preserve_reasoning"); ok {
		if b, isBool := v.(jinja.Bool); isBool {
			vars.SetString("preserve_thinking", b)
			vars.SetString("clear_thinking", !b)
			vars.SetString("truncate_history_thinking", !b)
			vars.SetString("drop_thinking", !b)
		}
	}
	if v, ok := vars.GetString("reasoning_effort"); ok {
		if s, isStr := v.(jinja.String); isStr && s != "" {
			vars.SetString("reasoning_strength", s)
		}
	}
	return vars, nil
}

// messages is the messages list llama.cpp hands the template: each
// message {role, content[, reasoning_content]} (content "" when empty),
// with its workarounds: "developer" is "system" (not for gpt-oss, which
// has its own developer role), a system message is merged into the next
// message for a template that ignores system messages, content becomes a
// list of text parts for a template that only takes those, and gpt-oss
// gets the reasoning as "thinking" (and no content beside it in a turn
// with tool calls). Tool calls, a tool turn's name and tool_call_id are
// given as llama.cpp gives them (content "" beside calls for a template
// that renders calls; arguments as objects for one that takes those).
func (t *Template) messages(msgs []Message) (*jinja.Array, error) {
	harmony := t.isHarmony()
	ms := append([]Message{}, msgs...)
	if strings.Contains(t.src, "You have access to the following functions in JSONSchema format") {
		for i := range ms {
			ms[i].Content = trimSpace(ms[i].Content)
			ms[i].ReasoningContent = trimSpace(ms[i].ReasoningContent)
		}
	}
	if !strings.Contains(t.src, "<|channel|>") {
		for i := range ms {
			if ms[i].Role == "developer" {
				ms[i].Role = "system"
			}
		}
	}
	if !t.caps.systemRole && len(ms) > 0 && ms[0].Role == "system" {
		if len(ms) > 1 {
			ms[1].Content = ms[0].Content + "\n" + ms[1].Content
		}
		ms = ms[1:]
	}
	arr := &jinja.Array{}
	for _, m := range ms {
		o := jinja.NewObject()
		o.SetString("role", jinja.String(m.Role))
		if harmony && m.ReasoningContent != "" && len(m.ToolCalls) > 0 {
			// llama.cpp's gpt-oss handler: the analysis goes as thinking alone
		} else if t.caps.onlyTyped {
			part := jinja.NewObject()
			part.SetString("type", jinja.String("text"))
			part.SetString("text", jinja.String(m.Content))
			o.SetString("content", &jinja.Array{Items: []jinja.Value{part}})
		} else {
			o.SetString("content", jinja.String(m.Content))
		}
		if m.ReasoningContent != "" {
			o.SetString("reasoning_content", jinja.String(m.ReasoningContent))
			if harmony {
				o.SetString("thinking", jinja.String(m.ReasoningContent))
			}
		}
		if m.ToolName != "" {
			o.SetString("name", jinja.String(m.ToolName))
		}
		if m.ToolCallID != "" {
			o.SetString("tool_call_id", jinja.String(m.ToolCallID))
		}
		if len(m.ToolCalls) > 0 {
			calls, err := toolCallsValue(m.ToolCalls, t.caps.tools.ObjectArguments)
			if err != nil {
				return nil, err
			}
			o.SetString("tool_calls", calls)
		}
		arr.Items = append(arr.Items, o)
	}
	return arr, nil
}

// trimSpace is llama.cpp's trim_whitespace (C isspace).
func trimSpace(s string) string { return strings.Trim(s, " \t\n\v\f\r") }
