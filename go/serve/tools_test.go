package serve

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/grammar"
)

// weatherTool has a finite argument language (an enum, a bounded
// integer), so that a grammar-forced call ends on any model.
const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Get the weather",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Tokyo"]},` +
	`"days":{"type":"integer","minimum":1,"maximum":3}},"required":["city","days"],"additionalProperties":false}}}`

const timeTool = `{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{` +
	`"zone":{"type":"string","enum":["UTC","CET"]}},"required":["zone"],"additionalProperties":false}}}`

func testTools(t *testing.T) *toolSet {
	t.Helper()
	ts, err := parseTools([]json.RawMessage{json.RawMessage(weatherTool), json.RawMessage(timeTool)})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// checkWeather checks a call of get_weather or get_time against its
// schema.
func checkCall(t *testing.T, what, name string, args json.RawMessage) {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		t.Fatalf("%s: arguments %s: %v", what, args, err)
	}
	switch name {
	case "get_weather":
		c, _ := a["city"].(string)
		d, _ := a["days"].(float64)
		if len(a) != 2 || (c != "Paris" && c != "Tokyo") || d < 1 || d > 3 || d != float64(int(d)) {
			t.Fatalf("%s: get_weather(%s) does not follow the schema", what, args)
		}
	case "get_time":
		if z, _ := a["zone"].(string); len(a) != 1 || (z != "UTC" && z != "CET") {
			t.Fatalf("%s: get_time(%s) does not follow the schema", what, args)
		}
	default:
		t.Fatalf("%s: a call of %q", what, name)
	}
}

// The parsers read each family's calls, streamed in pieces of every
// size; text that is no call is answer.
func TestParseToolCalls(t *testing.T) {
	ts := testTools(t)
	cases := []struct {
		f       toolFormat
		out     string
		content string
		calls   []string // name(args)
	}{
		{formatHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>",
			"", []string{`get_weather({"city":"Paris","days":2})`, `get_time({"zone":"UTC"})`}},
		{formatHermes, "Let me check. <tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\": \\\"CET\\\"}\"}</tool_call>",
			"Let me check. ", []string{`get_time({"zone":"CET"})`}},
		{formatHermes, "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call> a < b", "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call> a < b", nil},
		{formatHermes, "plain <tool text", "plain <tool text", nil},
		{formatQwenXML, "<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
			"", []string{`get_weather({"city":"Tokyo","days":3})`}},
		{formatLlama3, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}", "", []string{`get_time({"zone":"UTC"})`}},
		{formatLlama3, "{not json", "{not json", nil},
		{formatLlama3, "Hello {there}", "Hello {there}", nil},
		{formatGeneric, `{"tool_call": {"name": "get_time", "arguments": {"zone": "CET"}}}`, "", []string{`get_time({"zone":"CET"})`}},
		{formatGeneric, `{"response": "hi"}`, "hi", nil},
	}
	for i, c := range cases {
		for _, size := range []int{1, 3, 1000} {
			p := newToolParser(c.f, ts)
			var co strings.Builder
			var calls []string
			take := func(s string, cs []toolCall) {
				co.WriteString(s)
				for _, k := range cs {
					if !strings.HasPrefix(k.ID, "call_") || len(k.ID) != 29 {
						t.Errorf("case %d: call id %q", i, k.ID)
					}
					calls = append(calls, k.Name+"("+string(k.Args)+")")
				}
			}
			for j := 0; j < len(c.out); j += size {
				take(p.add(c.out[j:min(j+size, len(c.out))]))
			}
			take(p.flush())
			if co.String() != c.content || fmt.Sprint(calls) != fmt.Sprint(c.calls) {
				t.Errorf("case %d by %d: content %q calls %v, want %q %v", i, size, co.String(), calls, c.content, c.calls)
			}
		}
	}
	// gpt-oss: the recipient in the channel header or in the role header
	for _, out := range []string{
		"<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"zone\": \"UTC\"}",
		"<|channel|>analysis<|message|>thinking<|end|><|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{\"zone\":\"UTC\"}<|call|>",
	} {
		sp := newSplitter(thinkHarmony, nil, "", ts).(*harmonySplitter)
		th, co := sp.add(out)
		th2, co2 := sp.flush()
		calls := sp.takeCalls()
		if th+th2 != "thinking" || co+co2 != "" || len(calls) != 1 || calls[0].Name != "get_time" || string(calls[0].Args) != `{"zone":"UTC"}` {
			t.Errorf("harmony %q: thinking %q content %q calls %+v", out, th+th2, co+co2, calls)
		}
	}
}

// The grammar of a forced call, per format, compiles and accepts the
// call its template writes (and nothing else after).
func TestCallGrammar(t *testing.T) {
	ts := testTools(t)
	ts.choice = choiceRequired
	for f, call := range map[toolFormat]string{
		formatHermes:  "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>",
		formatQwenXML: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>",
		formatHarmony: "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"zone\": \"UTC\"}",
		formatLlama3:  "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"CET\"}}",
		formatGeneric: "{\"tool_call\": {\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}}",
	} {
		text, err := ts.callGrammar(f)
		if err != nil {
			t.Fatalf("format %d: %v", f, err)
		}
		g, err := grammar.Compile(text, callRoot, nil)
		if err != nil {
			t.Fatalf("format %d: %v\n%s", f, err, text)
		}
		st := grammar.NewState(g, nil)
		if err := st.AcceptBytes([]byte(call)); err != nil || !st.CanEnd() {
			t.Errorf("format %d: the grammar does not take %q (%v)\n%s", f, call, err, text)
		}
		p := newToolParser(f, ts)
		if p != nil {
			co, calls := p.add(call)
			co2, calls2 := p.flush()
			if co+co2 != "" || len(calls)+len(calls2) != 1 {
				t.Errorf("format %d: the parser reads %q as %q %v", f, call, co+co2, append(calls, calls2...))
			}
		}
	}
	ts.choice, ts.named = choiceNamed, "get_time"
	text, _ := ts.callGrammar(formatHermes)
	if strings.Contains(text, "get_weather") {
		t.Errorf("a named choice's grammar has the other tool:\n%s", text)
	}
}

// renameRules leaves literals, classes and repetition counts alone.
func TestRenameRules(t *testing.T) {
	got := renameRules(`root ::= "a-b" [a-z]{1,3} space x-y # c d`+"\n"+`space ::= " "?`, "t0-")
	want := `t0-root ::= "a-b" [a-z]{1,3} t0-space t0-x-y # c d` + "\n" + `t0-space ::= " "?` + "\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// templateModel is a generated model with a real family's chat template
// (go/chat/testdata/templates).
func templateModel(t *testing.T, model, template, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "templates", template))
	if err != nil {
		t.Fatal(err)
	}
	return withTemplate(t, modelPath(t, model), t.TempDir(), name, string(src))
}

// Tool calling through both APIs on the generated models (random
// weights) with Qwen3's, Qwen3.5's and gpt-oss's templates: a forced
// call (tool_choice required or named) is a well-formed call of a tool
// of the request, whose arguments follow its schema, streamed and not;
// tools reach the prompt; a tool reply continues the conversation.
func TestToolCalling(t *testing.T) {
	models := []struct{ model, template, name string }{
		{"qwen3-small-q8_0", "Qwen-Qwen3-0.6B.jinja", "qwen3-tools"},
		{"qwen35-small-q8_0", "Qwen3.5-4B.jinja", "qwen35-tools"},
		{"gpt-oss-small-q8_0", "openai-gpt-oss-120b.jinja", "gpt-oss-tools"},
	}
	var paths []string
	for _, m := range models {
		paths = append(paths, templateModel(t, m.model, m.template, m.name))
	}
	_, url := newTestServer(t, Config{Parallel: 2, Context: 2048}, paths...)
	tools := `"tools":[` + weatherTool + `,` + timeTool + `]`
	for _, m := range models {
		for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"get_time"}}`} {
			for _, stream := range []bool{false, true} {
				what := fmt.Sprintf("%s %s stream %v", m.name, choice, stream)
				body := fmt.Sprintf(`{"model":%q,"stream":%v,"temperature":0,"max_tokens":300,%s,"tool_choice":%s,`+
					`"messages":[{"role":"user","content":"Weather in Paris?"}]}`, m.name, stream, tools, choice)
				code, b := post(t, url+"/v1/chat/completions", body)
				if code != 200 {
					t.Fatalf("%s: %d %s", what, code, b)
				}
				type call struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				}
				var calls []call
				var finish string
				if !stream {
					var r struct {
						Choices []struct {
							Message struct {
								ToolCalls []call `json:"tool_calls"`
							} `json:"message"`
							FinishReason string `json:"finish_reason"`
						} `json:"choices"`
					}
					if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
						t.Fatalf("%s: %s", what, b)
					}
					calls, finish = r.Choices[0].Message.ToolCalls, r.Choices[0].FinishReason
				} else {
					for _, ev := range strings.Split(string(b), "\n\n") {
						data, ok := strings.CutPrefix(ev, "data: ")
						if !ok || data == "[DONE]" {
							continue
						}
						var c struct {
							Choices []struct {
								Delta struct {
									ToolCalls []call `json:"tool_calls"`
								} `json:"delta"`
								FinishReason *string `json:"finish_reason"`
							} `json:"choices"`
						}
						if err := json.Unmarshal([]byte(data), &c); err != nil {
							t.Fatalf("%s: %q: %v", what, data, err)
						}
						for _, ch := range c.Choices {
							for _, tc := range ch.Delta.ToolCalls {
								for len(calls) <= tc.Index {
									calls = append(calls, call{})
								}
								k := &calls[tc.Index]
								if tc.ID != "" {
									k.ID, k.Type, k.Function.Name = tc.ID, tc.Type, tc.Function.Name
								}
								k.Function.Arguments += tc.Function.Arguments
							}
							if ch.FinishReason != nil {
								finish = *ch.FinishReason
							}
						}
					}
				}
				if len(calls) != 1 || finish != "tool_calls" {
					t.Fatalf("%s: calls %+v, finish %q: %s", what, calls, finish, b)
				}
				c := calls[0]
				if !strings.HasPrefix(c.ID, "call_") || c.Type != "function" {
					t.Errorf("%s: call %+v", what, c)
				}
				if strings.Contains(choice, "get_time") && c.Function.Name != "get_time" {
					t.Errorf("%s: called %s", what, c.Function.Name)
				}
				checkCall(t, what, c.Function.Name, json.RawMessage(c.Function.Arguments))
				t.Logf("%s: %s(%s)", what, c.Function.Name, c.Function.Arguments)
			}
		}
		// Ollama's chat: tools (auto) and a tool reply continued; the
		// prompt held the tool's description (prompt tokens grow).
		history := `{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris","days":1}}}]},` +
			`{"role":"tool","content":"sunny","tool_name":"get_weather"}`
		for _, withTools := range []bool{false, true} {
			tl := ""
			if withTools {
				tl = "," + tools
			}
			code, b := post(t, url+"/api/chat", fmt.Sprintf(`{"model":%q,"stream":false,"options":{"temperature":0,"num_predict":8},"messages":[%s]%s}`, m.name, history, tl))
			if code != 200 {
				t.Fatalf("%s ollama tool reply: %d %s", m.name, code, b)
			}
		}
	}
}

// Bad tool requests are 400s that say what is wrong.
func TestToolErrors(t *testing.T) {
	qwen := templateModel(t, "qwen3-small-q8_0", "Qwen-Qwen3-0.6B.jinja", "qwen3-tools")
	gptoss := templateModel(t, "gpt-oss-small-q8_0", "openai-gpt-oss-120b.jinja", "gpt-oss-tools")
	_, url := newTestServer(t, Config{Parallel: 1, Context: 512}, modelPath(t, "qwen3-small-q8_0"), qwen, gptoss)
	for model, want := range map[string]bool{"qwen3-tools": true, "gpt-oss-tools": true, "qwen3-small-q8_0": false} {
		_, b := post(t, url+"/api/show", fmt.Sprintf(`{"model":%q}`, model))
		if got := strings.Contains(string(b), `"tools"`); got != want {
			t.Errorf("show %s: the tools capability %v, want %v", model, got, want)
		}
	}
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"qwen3-tools",` + msgs + `,"tools":[{"type":"function","function":{"description":"x"}}]}`, "function.name"},
		{"/api/chat", `{"model":"qwen3-tools",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}}}]}`, "invalid JSON schema"},
		{"/api/chat", `{"model":"qwen3-tools",` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, "JSON schema object"},
		{"/v1/chat/completions", `{"model":"qwen3-tools",` + msgs + `,"tools":[` + weatherTool + `],"tool_choice":{"type":"function","function":{"name":"nope"}}}`, "not among the tools"},
		{"/v1/chat/completions", `{"model":"qwen3-tools",` + msgs + `,"tool_choice":"required"}`, "needs tools"},
		{"/v1/chat/completions", `{"model":"qwen3-tools",` + msgs + `,"tools":[` + weatherTool + `],"tool_choice":"sometimes"}`, "tool_choice"},
		{"/v1/chat/completions", `{"model":"qwen3-tools",` + msgs + `,"tools":[` + weatherTool + `],"tool_choice":"required","response_format":{"type":"json_object"}}`, "cannot be combined"},
		{"/api/chat", `{"model":"qwen3-small-q8_0",` + msgs + `,"tools":[` + weatherTool + `]}`, "does not support tools"},
		{"/v1/chat/completions", `{"model":"qwen3-small-q8_0",` + msgs + `,"tools":[` + weatherTool + `]}`, "does not support tools"},
		{"/api/chat", `{"model":"gpt-oss-tools","messages":[{"role":"user","content":"hi"},{"role":"tool","content":"42"}]}`, "no previous assistant message with a tool call"},
		{"/api/chat", `{"model":"qwen3-tools","messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"arguments":{}}}]}]}`, "function.name"},
		{"/v1/chat/completions", `{"model":"qwen3-tools","messages":[{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":"[1"}}]}]}`, "JSON object"},
	} {
		code, b := post(t, url+c.path, c.body)
		if code != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s: %d %s, want a 400 with %q", c.path, c.body, code, b, c.want)
		}
	}
}
