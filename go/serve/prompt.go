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
}

// promptMaker turns a conversation into a model's prompt text with the
// model's chat template (tokenizer.chat_template, rendered as llama.cpp
// renders it: package chat) or, for a model without one, ChatML (llama.cpp's
// fallback).
type promptMaker struct {
	t              *chat.Template
	style          thinkStyle // how the template marks reasoning
	bos, eos       string
	addBOS, addEOS bool // the tokenizer adds them (so a template's own are cut)
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
	tokens := c.Strings("tokenizer.ggml.tokens")
	id := func(key string) int32 {
		if v, ok := c.Value(key).(uint32); ok && int(v) < len(tokens) {
			return int32(v)
		}
		return -1
	}
	p := &promptMaker{t: t, style: styleOf(src)}
	bos, eos := id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id")
	if bos >= 0 {
		p.bos = tokens[bos]
	}
	if eos >= 0 {
		p.eos = tokens[eos]
	}
	// What the tokenizer adds to a text on its own.
	empty := tok.Encode("", true)
	p.addBOS = bos >= 0 && len(empty) > 0 && empty[0] == bos
	p.addEOS = eos >= 0 && len(empty) > 0 && empty[len(empty)-1] == eos
	return p, nil
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

// chat renders a conversation for the model to answer. A conversation
// that ends with an assistant message is continued from it (as
// llama-server's assistant prefill): the turns before it are rendered
// with the generation prompt, and its text follows.
func (p *promptMaker) chat(msgs []message, think *bool) (string, error) {
	prefill := ""
	if n := len(msgs); n > 1 && msgs[n-1].Role == "assistant" {
		prefill, msgs = msgs[n-1].Content, msgs[:n-1]
	}
	cm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	text, err := p.t.Render(cm, chat.Options{AddGenerationPrompt: true, BOS: p.bos, EOS: p.eos,
		AddBOS: p.addBOS, AddEOS: p.addEOS, EnableThinking: think})
	if err != nil {
		return "", err
	}
	return text + prefill, nil
}

// checkThink refuses think: true for a model whose template has no
// reasoning (Ollama's 400 "does not support thinking").
func (p *promptMaker) checkThink(model string, think *bool) error {
	if think != nil && *think && p.style == noThinking {
		return badRequest("%q does not support thinking", model)
	}
	return nil
}
