package chat

import (
	"strings"
	"testing"
	"time"
)

// The tool capabilities of the test templates, as llama.cpp's probes find
// them: the tool-calling families render tools and calls (with object
// arguments); ChatML and Gemma 2 render neither.
func TestToolCaps(t *testing.T) {
	want := map[string]ToolCaps{
		"Qwen-Qwen3-0.6B.jinja":                  {true, true, true},
		"Qwen3.5-4B.jinja":                       {true, true, true},
		"openai-gpt-oss-120b.jinja":              {true, true, true},
		"meta-llama-Llama-3.1-8B-Instruct.jinja": {true, true, true},
		"Qwen-Qwen2.5-7B-Instruct.jinja":         {true, true, true},
		"google-gemma-2-2b-it.jinja":             {},
		"chatml":                                 {},
	}
	for _, info := range loadTemplates(t) {
		w, ok := want[info.File]
		if !ok {
			continue
		}
		tmpl, err := Parse(templateSource(t, info.File))
		if err != nil {
			t.Fatal(err)
		}
		if got := tmpl.ToolCaps(); got != w {
			t.Errorf("%s: %+v, want %+v", info.File, got, w)
		}
	}
}

// Tools reach the template as llama.cpp gives them: {"type": "function",
// "function": {"name", "description", "parameters"}}, the schema's keys in
// their order, and no tools variable when there are none.
func TestRenderTools(t *testing.T) {
	tmpl, err := Parse(templateSource(t, "Qwen-Qwen3-0.6B.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "Weather?"}}
	o := Options{AddGenerationPrompt: true, Now: time.Unix(0, 0), Tools: []Tool{
		{Name: "get_weather", Description: "Get the weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`)},
		{Name: "noargs"},
	}}
	out, err := tmpl.Render(msgs, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`<tools>` + "\n" + `{"type": "function", "function": {"name": "get_weather", "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}`,
		`{"type": "function", "function": {"name": "noargs", "description": "", "parameters": {}}}` + "\n</tools>",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the prompt lacks %s:\n%s", s, out)
		}
	}
	o.Tools = nil
	if out, _ := tmpl.Render(msgs, o); strings.Contains(out, "<tools>") {
		t.Errorf("no tools, yet:\n%s", out)
	}
	o.Tools = []Tool{{Name: "bad", Parameters: []byte(`{"type":`)}}
	if _, err := tmpl.Render(msgs, o); err == nil {
		t.Error("parameters that are not JSON render")
	}
}
