package serve

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// A schema whose language is finite (an enum, a bounded integer, bounded
// white space): any model, random weights included, must end its output
// inside it, so the reply is JSON that validates.
const colorSchema = `{"type":"object","properties":{"color":{"type":"string","enum":["red","green","blue"]},` +
	`"count":{"type":"integer","minimum":1,"maximum":9}},"required":["color","count"],"additionalProperties":false}`

// checkColor validates a reply against colorSchema by hand.
func checkColor(t *testing.T, what, text string) {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", what, text, err)
	}
	c, _ := v["color"].(string)
	n, _ := v["count"].(float64)
	if len(v) != 2 || (c != "red" && c != "green" && c != "blue") || n < 1 || n > 9 || n != float64(int(n)) {
		t.Fatalf("%s: %q does not follow the schema", what, text)
	}
}

// Ollama's format (a schema) and OpenAI's response_format (json_schema)
// hold the output to the schema: greedy and sampled, streamed and not,
// several sequences batched together with and without a format; the
// generation ends with the schema's last character ("stop").
func TestFormatSchema(t *testing.T) {
	_, url := newTestServer(t, Config{Parallel: 4, Context: 512}, modelPath(t, "qwen3-small-q8_0"))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			opts := `"temperature":0`
			if i%2 == 1 {
				opts = fmt.Sprintf(`"temperature":1.2,"seed":%d`, i)
			}
			format := `,"format":` + colorSchema
			if i == 6 {
				format = "" // free text beside the constrained ones
			}
			code, b := post(t, url+"/api/generate", `{"model":"qwen3-small-q8_0","prompt":"Pick a color","raw":true,"stream":false`+
				format+`,"options":{`+opts+`,"num_predict":200}}`)
			var r map[string]any
			json.Unmarshal(b, &r)
			if code != 200 {
				errs <- fmt.Errorf("request %d: %d %s", i, code, b)
				return
			}
			if format == "" {
				return
			}
			if r["done_reason"] != "stop" {
				errs <- fmt.Errorf("request %d: done_reason %v (%q)", i, r["done_reason"], r["response"])
				return
			}
			t.Logf("request %d: %q", i, r["response"])
			checkColor(t, fmt.Sprintf("request %d", i), r["response"].(string))
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	rf := `"response_format":{"type":"json_schema","json_schema":{"name":"color","strict":true,"schema":` + colorSchema + `}}`
	for _, stream := range []bool{false, true} {
		code, b := post(t, url+"/v1/chat/completions", fmt.Sprintf(`{"model":"qwen3-small-q8_0","stream":%v,"temperature":0,"max_tokens":200,`+
			`"messages":[{"role":"user","content":"Pick a color"}],%s}`, stream, rf))
		if code != 200 {
			t.Fatalf("response_format (stream %v): %d %s", stream, code, b)
		}
		text, reason := "", ""
		if !stream {
			var r struct {
				Choices []struct {
					Message      struct{ Content string }
					FinishReason string `json:"finish_reason"`
				}
			}
			json.Unmarshal(b, &r)
			text, reason = r.Choices[0].Message.Content, r.Choices[0].FinishReason
		} else {
			for _, l := range strings.Split(string(b), "\n") {
				l = strings.TrimPrefix(l, "data: ")
				var c struct {
					Choices []struct {
						Delta        struct{ Content string }
						FinishReason *string `json:"finish_reason"`
					}
				}
				if json.Unmarshal([]byte(l), &c) == nil && len(c.Choices) > 0 {
					text += c.Choices[0].Delta.Content
					if c.Choices[0].FinishReason != nil {
						reason = *c.Choices[0].FinishReason
					}
				}
			}
		}
		if reason != "stop" {
			t.Fatalf("response_format (stream %v): finish_reason %q (%q)", stream, reason, text)
		}
		t.Logf("response_format (stream %v): %q", stream, text)
		checkColor(t, fmt.Sprintf("response_format (stream %v)", stream), text)
	}
}

// Formats that are not JSON schemas, or not formats at all, are 400s that
// say what is wrong, before any generation.
func TestFormatErrors(t *testing.T) {
	_, url := newTestServer(t, Config{Parallel: 1, Context: 256}, modelPath(t, "qwen3-small-q8_0"))
	for _, c := range []struct{ path, body, want string }{
		{"/api/generate", `{"model":"qwen3-small-q8_0","prompt":"hi","format":"xml"}`, "invalid format"},
		{"/api/generate", `{"model":"qwen3-small-q8_0","prompt":"hi","format":{"type":5}}`, "invalid JSON schema"},
		{"/api/generate", `{"model":"qwen3-small-q8_0","prompt":"hi","format":{"$ref":"https://example.com/s.json"}}`, "invalid JSON schema"},
		{"/api/chat", `{"model":"qwen3-small-q8_0","messages":[{"role":"user","content":"x"}],"format":[1]}`, "invalid format"},
		{"/v1/chat/completions", `{"model":"qwen3-small-q8_0","messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}}`, "response_format type"},
		{"/v1/chat/completions", `{"model":"qwen3-small-q8_0","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}}`, "json_schema.schema"},
		{"/v1/completions", `{"model":"qwen3-small-q8_0","prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":{"a":{"type":"integer","minimum":"x"}}}}}}`, "invalid JSON schema"},
	} {
		code, b := post(t, url+c.path, c.body)
		if code != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("%s %s: %d %s, want 400 with %q", c.path, c.body, code, b, c.want)
		}
	}
}

// On the real SmolLM2-135M-Instruct, format "json" (Ollama's JSON object)
// and response_format json_object (any JSON value) give JSON that parses,
// and a schema JSON that validates, ending with end of text.
func TestFormatRealModel(t *testing.T) {
	path := os.Getenv("GGML_RS_SMOLLM2")
	if path == "" {
		t.Skip("GGML_RS_SMOLLM2 is not set (make test sets it)")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("GGML_RS_SMOLLM2: %v", err)
	}
	_, url := newTestServer(t, Config{Parallel: 2, Context: 1024}, path)
	name := ModelName(path)
	ask := `"messages":[{"role":"user","content":"Describe a cat as JSON with the keys name and age."}]`
	code, b := post(t, url+"/api/chat", `{"model":"`+name+`","stream":false,"format":"json","options":{"temperature":0,"num_predict":300},`+ask+`}`)
	var r struct {
		Message    struct{ Content string }
		DoneReason string `json:"done_reason"`
	}
	json.Unmarshal(b, &r)
	var obj map[string]any
	if code != 200 || r.DoneReason != "stop" || json.Unmarshal([]byte(r.Message.Content), &obj) != nil {
		t.Fatalf("format json: %d %s", code, b)
	}
	code, b = post(t, url+"/v1/chat/completions", `{"model":"`+name+`","temperature":0,"max_tokens":300,"response_format":{"type":"json_object"},`+ask+`}`)
	var o struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	json.Unmarshal(b, &o)
	var any1 any
	if code != 200 || len(o.Choices) != 1 || o.Choices[0].FinishReason != "stop" || json.Unmarshal([]byte(o.Choices[0].Message.Content), &any1) != nil {
		t.Fatalf("json_object: %d %s", code, b)
	}
	code, b = post(t, url+"/api/chat", `{"model":"`+name+`","stream":false,"format":`+colorSchema+`,"options":{"temperature":0,"num_predict":200},`+
		`"messages":[{"role":"user","content":"Name a color and a number."}]}`)
	json.Unmarshal(b, &r)
	if code != 200 || r.DoneReason != "stop" {
		t.Fatalf("schema: %d %s", code, b)
	}
	t.Logf("SmolLM2: json %q, json_object %q, schema %q", obj, o.Choices[0].Message.Content, r.Message.Content)
	checkColor(t, "SmolLM2 schema", r.Message.Content)
}
