package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat/jinja"
)

// The differential test: every template of testdata/templates.json over
// every conversation of testdata/conversations.json, against llama.cpp's
// renderings (testdata/golden, written by scripts/chat-golden.py with
// llama-ref chat: `make chat-golden`), byte for byte. A conversation
// llama.cpp refuses must fail here too, with the same raise_exception
// message when that is what failed.

type conversation struct {
	Name                string         `json:"name"`
	Messages            []jsonMessage  `json:"messages"`
	AddGenerationPrompt *bool          `json:"add_generation_prompt"`
	EnableThinking      *bool          `json:"enable_thinking"`
	Kwargs              map[string]any `json:"chat_template_kwargs"`
}

type jsonMessage struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	ReasoningContent string `json:"reasoning_content"`
	Name             string `json:"name"`
	ToolCallID       string `json:"tool_call_id"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// message is the Message llama.cpp's common_chat_msgs_parse_oaicompat
// reads: arguments given as an object are taken as their JSON text.
func (m jsonMessage) message() Message {
	out := Message{Role: m.Role, Content: m.Content, ReasoningContent: m.ReasoningContent, ToolName: m.Name, ToolCallID: m.ToolCallID}
	for _, c := range m.ToolCalls {
		var args string
		if json.Unmarshal(c.Function.Arguments, &args) != nil {
			args = compactJSON(c.Function.Arguments)
		}
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out
}

// compactJSON is nlohmann's dump() of a JSON value: no white space.
func compactJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

type templateInfo struct {
	File   string `json:"file"`
	BOS    string `json:"bos"`
	EOS    string `json:"eos"`
	AddBOS bool   `json:"add_bos"`
}

type golden struct {
	Template string `json:"template"`
	Now      string `json:"now"`
	Results  []struct {
		Name   string  `json:"name"`
		Prompt *string `json:"prompt"`
		Error  *string `json:"error"`
	} `json:"results"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadTemplates(t *testing.T) []templateInfo {
	var ts struct {
		Templates []templateInfo `json:"templates"`
	}
	readJSON(t, "testdata/templates.json", &ts)
	return ts.Templates
}

func loadConversations(t *testing.T) []conversation {
	var cs struct {
		Conversations []conversation `json:"conversations"`
	}
	readJSON(t, "testdata/conversations.json", &cs)
	return cs.Conversations
}

func templateSource(t *testing.T, file string) string {
	if file == "chatml" {
		return "" // no template: the fallback
	}
	b, err := os.ReadFile(filepath.Join("testdata", "templates", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (c conversation) render(tmpl *Template, info templateInfo, now time.Time) (string, error) {
	msgs := make([]Message, len(c.Messages))
	for i, m := range c.Messages {
		msgs[i] = m.message()
	}
	o := Options{AddGenerationPrompt: true, BOS: info.BOS, EOS: info.EOS, EnableThinking: c.EnableThinking,
		Kwargs: c.Kwargs, Now: now}
	if c.AddGenerationPrompt != nil {
		o.AddGenerationPrompt = *c.AddGenerationPrompt
	}
	if v, ok := c.Kwargs["enable_thinking"].(bool); ok {
		o.EnableThinking = &v
	}
	return tmpl.Render(msgs, o)
}

func TestGoldenRenderings(t *testing.T) {
	convs := loadConversations(t)
	for _, info := range loadTemplates(t) {
		info := info
		t.Run(strings.TrimSuffix(info.File, ".jinja"), func(t *testing.T) {
			var g golden
			readJSON(t, filepath.Join("testdata", "golden", strings.TrimSuffix(info.File, ".jinja")+".json"), &g)
			now, err := time.Parse("2006-01-02 15:04:05 MST", g.Now)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Results) != len(convs) {
				t.Fatalf("golden has %d results for %d conversations: make chat-golden", len(g.Results), len(convs))
			}
			tmpl, err := Parse(templateSource(t, info.File))
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range convs {
				want := g.Results[i]
				if want.Name != c.Name {
					t.Fatalf("golden result %d is %q, conversation is %q: make chat-golden", i, want.Name, c.Name)
				}
				got, err := c.render(tmpl, info, now.UTC())
				switch {
				case want.Error != nil:
					if err == nil {
						t.Errorf("%s: llama.cpp fails (%s), we render %q", c.Name, firstLine(*want.Error), got)
						continue
					}
					checkRaised(t, c.Name, *want.Error, err)
				case err != nil:
					t.Errorf("%s: %v; llama.cpp renders %q", c.Name, err, *want.Prompt)
				case got != *want.Prompt:
					t.Errorf("%s: prompt differs from llama.cpp's\n got: %q\nwant: %q", c.Name, got, *want.Prompt)
				}
			}
		})
	}
}

// checkRaised: when llama.cpp failed in raise_exception, so must we, with
// the same message.
func checkRaised(t *testing.T, name, want string, err error) {
	const prefix = "Jinja Exception: "
	i := strings.Index(want, prefix)
	if i < 0 {
		return
	}
	msg := strings.TrimSpace(want[i+len(prefix):])
	var je *jinja.Error
	if !errors.As(err, &je) || je.Kind != "raised" || je.Msg != msg {
		t.Errorf("%s: llama.cpp raises %q, we fail with %v", name, msg, err)
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
