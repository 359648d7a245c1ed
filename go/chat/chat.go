// Package chat renders a conversation into a model's prompt text with the
// model's own chat template (a GGUF's tokenizer.chat_template, Jinja),
// giving byte for byte the prompt llama.cpp's llama-server renders for the
// same request (common/chat.cpp's common_chat_templates_apply on its own
// Jinja engine, tools included): the template is run by github.com/ggml-rs/ggml-rs/go/chat/jinja, a
// renderer with llama.cpp's semantics, and the inputs are built as
// llama.cpp builds them (message normalisation, the context variables,
// the per-template adjustments). See docs/notes/chat-templates.md.
package chat

import (
	"errors"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat/jinja"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant" ("developer" counts as "system")
	Content string
	// ReasoningContent is an assistant turn's reasoning (thinking) text,
	// which templates such as Qwen3's and gpt-oss's render their own way.
	ReasoningContent string
	// ToolCalls are an assistant turn's calls.
	ToolCalls []ToolCall
	// ToolName and ToolCallID are a "tool" turn's (the result's) function
	// name and the id of the call it answers (the name and tool_call_id
	// fields), when known.
	ToolName, ToolCallID string
}

// Options are a render's inputs beside the messages, as llama-server
// takes them from the model and the request.
type Options struct {
	// AddGenerationPrompt ends the prompt with the opening of the
	// assistant's turn (llama-server: the request's add_generation_prompt,
	// default true).
	AddGenerationPrompt bool
	// BOS and EOS are the bos_token and eos_token variables: the text of
	// the model's BOS and EOS tokens.
	BOS, EOS string
	// AddBOS and AddEOS are the model's tokenizer.ggml.add_bos_token and
	// add_eos_token: when set, a BOS the template wrote at the start (an
	// EOS at the end) is cut from the prompt, as the tokenizer adds it.
	AddBOS, AddEOS bool
	// EnableThinking is the enable_thinking variable (nil: true, as
	// llama-server's default); a "enable_thinking" kwarg overrides it.
	EnableThinking *bool
	// Kwargs are extra variables (llama-server's chat_template_kwargs),
	// e.g. {"reasoning_effort": "high"}; they override the defaults.
	Kwargs map[string]any
	// Now is the date the template sees (date_string, datetime,
	// strftime_now), in its location; zero: the current local time.
	Now time.Time
	// Tools are the functions the model may call (the tools variable,
	// set only when there are some, as llama.cpp does).
	Tools []Tool
	// Limits bound the render (zero: jinja.DefaultLimits).
	Limits jinja.Limits
}

// Template is a parsed chat template; safe for concurrent use.
type Template struct {
	src  string
	tmpl *jinja.Template
	caps caps
}

// ChatML is the template llama.cpp uses for a model without one (or for
// the name "chatml"): <|im_start|>role\ncontent<|im_end|>\n per message.
const ChatML = "{%- for message in messages -%}\n" +
	"  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n" +
	"{%- endfor -%}\n" +
	"{%- if add_generation_prompt -%}\n" +
	"  {{- '<|im_start|>assistant\\n' -}}\n" +
	"{%- endif -%}"

// Parse parses a chat template. An empty source (a model without
// tokenizer.chat_template) or "chatml" gives the ChatML fallback, as in
// llama.cpp. A template that does not parse is an error (*jinja.Error).
func Parse(src string) (*Template, error) {
	if src == "" || src == "chatml" {
		src = ChatML
	}
	src = patchSource(src)
	t, err := jinja.Parse(src)
	if err != nil {
		return nil, err
	}
	ct := &Template{src: t.Source(), tmpl: t}
	ct.caps = probeCaps(ct)
	return ct, nil
}

// Source is the template text that is rendered (after llama.cpp's
// patches and line-ending normalisation).
func (t *Template) Source() string { return t.src }

// patchSource applies llama.cpp's workarounds to known template texts
// (common_chat_templates_init): gpt-oss's check that an assistant message
// holds no channel markers, and a Mistral check for empty content, are
// turned off.
func patchSource(src string) string {
	if strings.Contains(src, "<|channel|>") && strings.Contains(src, "in message.content or") {
		src = strings.ReplaceAll(src,
			`{%- if "<|channel|>analysis<|message|>" in message.content or "<|channel|>final<|message|>" in message.content %}`,
			"{%- if false %}")
	}
	if strings.Contains(src, "[TOOL_CALLS]") && strings.Contains(src, "if (message['content'] is none or") {
		src = strings.ReplaceAll(src,
			"{%- if (message['content'] is none or message['content'] == '' or message['content']|length == 0) and (message['tool_calls'] is not defined or message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
			"{%- if false %}")
	}
	return src
}

// ErrNoMessages is returned for an empty conversation.
var ErrNoMessages = errors.New("chat: no messages")

// Render renders a conversation. Errors: a template that fails (its
// raise_exception message, or where it went wrong) or that passes the
// limits, as *jinja.Error.
func (t *Template) Render(msgs []Message, o Options) (string, error) {
	if len(msgs) == 0 {
		return "", ErrNoMessages
	}
	vars, err := t.context(msgs, o)
	if err != nil {
		return "", err
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	limits := o.Limits
	if limits == (jinja.Limits{}) {
		limits = jinja.DefaultLimits
	}
	out, err := t.tmpl.Execute(vars, now, limits)
	if err != nil {
		return "", err
	}
	// gpt-oss: a finished assistant turn ends with <|end|> in a prompt
	// (llama.cpp's inference rendering of the harmony format)
	if t.isHarmony() && !o.AddGenerationPrompt {
		if i := strings.LastIndex(out, "<|return|>"); i >= 0 {
			out = out[:i] + "<|end|>" + out[i+len("<|return|>"):]
		}
	}
	if o.AddBOS && strings.HasPrefix(out, o.BOS) {
		out = out[len(o.BOS):]
	}
	if o.AddEOS && strings.HasSuffix(out, o.EOS) {
		out = out[:len(out)-len(o.EOS)]
	}
	return out, nil
}

// isHarmony: llama.cpp's gpt-oss handler takes templates with channel
// markers (after the Ministral 3 and LLM-jp checks that come first).
func (t *Template) isHarmony() bool {
	s := t.src
	if strings.Contains(s, "[SYSTEM_PROMPT]") && strings.Contains(s, "[TOOL_CALLS]") &&
		strings.Contains(s, "[ARGS]") && !strings.Contains(s, "[CALL_ID]") {
		return false
	}
	if strings.Contains(s, "chat_format=llm-jp-harmony-v1") {
		return false
	}
	return strings.Contains(s, "<|channel|>")
}
