package serve

import (
	"fmt"
	"net/http"

	"github.com/ggml-rs/ggml-rs/go/chat"
	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// message is one turn of a conversation.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// an assistant turn's tool calls; a tool turn's function and call id
	ToolCalls            []chat.ToolCall `json:"-"`
	ToolName, ToolCallID string          `json:"-"`
}

// promptMaker turns a conversation into a model's prompt text with the
// model's chat template (tokenizer.chat_template, rendered as llama.cpp
// renders it: package chat) or, for a model without one, ChatML (llama.cpp's
// fallback).
type promptMaker struct {
	t     *chat.Template
	style thinkStyle   // how the template marks reasoning
	tools toolFormat   // how the model writes tool calls
	model chat.Options // BOS and EOS, and whether the tokenizer adds them
}

// newPromptMaker makes the prompts of a model, with its own template or
// override.
func newPromptMaker(f *modelFile, override string, c fs.Config, tok decoder.Tokenizer) (*promptMaker, error) {
	src := f.template
	if override != "" {
		src = override
	}
	t, err := chat.Parse(src)
	if err != nil {
		return nil, err
	}
	return &promptMaker{t: t, style: styleOf(src), tools: toolFormatOf(t.Source()), model: chat.ModelOptions(c, tok)}, nil
}

// templateError is the error of a model whose chat template does not
// parse: a 500 (the request is not at fault) that says what still works.
func templateError(model string, err error) error {
	return httpError{http.StatusInternalServerError, fmt.Errorf("model %s: its chat template does not parse (%v): "+
		"its raw prompts (/api/generate with raw: true, /v1/completions) still work, and serve's -chat-template FILE replaces it", model, err)}
}

// checkTemplate parses the chat template a model's requests would use
// (override, or its own), for /api/show and the start's warnings.
func checkTemplate(f *modelFile, override string) error {
	if isEmbedding(f.arch) {
		return nil
	}
	src := f.template
	if override != "" {
		src = override
	}
	if _, err := chat.Parse(src); err != nil {
		return templateError(f.name, err)
	}
	return nil
}

// chat renders a conversation for the model to answer, with the tools
// it may call. A conversation that ends with an assistant message (without
// tool calls) is continued from it (as llama-server's assistant prefill):
// the turns before it are rendered with the generation prompt, and its
// text follows.
func (p *promptMaker) chat(msgs []message, think *bool, tools []chat.Tool) (string, error) {
	prefill := ""
	if n := len(msgs); n > 1 && msgs[n-1].Role == "assistant" && len(msgs[n-1].ToolCalls) == 0 {
		prefill, msgs = msgs[n-1].Content, msgs[:n-1]
	}
	cm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chat.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolName: m.ToolName, ToolCallID: m.ToolCallID}
	}
	o := p.model
	o.AddGenerationPrompt, o.EnableThinking, o.Tools = true, think, tools
	text, err := p.t.Render(cm, o)
	if err != nil {
		return "", err
	}
	return text + prefill, nil
}

// checkTools refuses tools for a model whose template does not render
// them (Ollama's 400 "does not support tools"; llama.cpp's capability
// probe).
func (p *promptMaker) checkTools(model string, ts *toolSet) error {
	if ts != nil && !p.t.ToolCaps().Tools {
		return badRequest("%q does not support tools: its chat template does not render them (serve's -chat-template FILE can give it one that does)", model)
	}
	return nil
}

// forTools adjusts a request for its tools: a call forced by tool_choice
// is the grammar of the model's call format (and a template's thinking
// is turned off, the call coming first); otherwise the reply is parsed
// for calls. It returns the think setting to render with.
func (p *promptMaker) forTools(ts *toolSet, think *bool, opts *genOptions) (*bool, error) {
	if !ts.forced() {
		return think, nil
	}
	if opts.format != "" {
		return nil, badRequest("a format (response_format) cannot be combined with a tool_choice that forces a call")
	}
	g, err := ts.callGrammar(p.tools)
	if err != nil {
		return nil, err
	}
	opts.format, opts.grammarRoot = g, callRoot
	if p.style == thinkTags {
		off := false
		think = &off
	}
	return think, nil
}

// checkThink refuses think: true for a model whose template has no
// reasoning (Ollama's 400 "does not support thinking").
func (p *promptMaker) checkThink(model string, think *bool) error {
	if think != nil && *think && p.style == noThinking {
		return badRequest("%q does not support thinking", model)
	}
	return nil
}
