package chat

import (
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat/jinja"
)

var timeNow = time.Now

// caps are what llama.cpp finds out about a template by rendering probes
// (common/jinja/caps.cpp), for the two that change the messages of a
// tool-free conversation.
type caps struct {
	systemRole bool // a system message's content reaches the output
	onlyTyped  bool // content must be a list of {type, text} parts
	tools      ToolCaps
}

// probeLimits keep a probe cheap whatever the template.
var probeLimits = jinja.Limits{Steps: 1_000_000, CallDepth: 50, StringSize: 1 << 20, TotalBytes: 16 << 20}

// probe renders messages as the capability check does (empty BOS/EOS, a
// generation prompt, an empty tools list).
func (t *Template) probe(msgs *jinja.Array) (string, error) {
	vars := jinja.NewObject()
	vars.SetString("messages", msgs)
	vars.SetString("tools", &jinja.Array{})
	vars.SetString("bos_token", jinja.String(""))
	vars.SetString("eos_token", jinja.String(""))
	vars.SetString("add_generation_prompt", jinja.Bool(true))
	return t.tmpl.Execute(vars, timeNow(), probeLimits)
}

func probeMessage(role string, content jinja.Value) *jinja.Object {
	m := jinja.NewObject()
	m.SetString("role", jinja.String(role))
	m.SetString("content", content)
	return m
}

// probeCaps: llama.cpp judges system-role support by whether the template
// reads the system message's content; this judges it by whether the
// content reaches the output (the same for every template we know of: one
// that rejects system messages raises before reading them). Typed-only
// content: string content fails while a list of text parts renders.
func probeCaps(t *Template) caps {
	c := caps{systemRole: true}
	const marker = "STRING_MARKER"
	_, strErr := t.probe(&jinja.Array{Items: []jinja.Value{probeMessage("user", jinja.String(marker))}})
	if strErr != nil {
		part := jinja.NewObject()
		part.SetString("type", jinja.String("text"))
		part.SetString("text", jinja.String(marker))
		out, err := t.probe(&jinja.Array{Items: []jinja.Value{
			probeMessage("user", &jinja.Array{Items: []jinja.Value{part}})}})
		c.onlyTyped = err == nil && strings.Contains(out, marker)
	}
	sys := "System message"
	var sysContent jinja.Value = jinja.String(sys)
	userContent := jinja.Value(jinja.String("User message"))
	if c.onlyTyped {
		sysContent = textParts(sys)
		userContent = textParts("User message")
	}
	out, _ := t.probe(&jinja.Array{Items: []jinja.Value{
		probeMessage("system", sysContent), probeMessage("user", userContent)}})
	c.systemRole = strings.Contains(out, sys)
	c.tools = probeToolCaps(t)
	return c
}

func textParts(s string) *jinja.Array {
	part := jinja.NewObject()
	part.SetString("type", jinja.String("text"))
	part.SetString("text", jinja.String(s))
	return &jinja.Array{Items: []jinja.Value{part}}
}
