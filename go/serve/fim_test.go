package serve

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

// TestSuffixFillsInTheMiddle: `suffix` on /api/generate and
// /v1/completions gives the prompt Ollama's code-model templates write,
// prefix marker + prompt + suffix marker + suffix + middle marker, with
// the vocabulary's FIM tokens found as llama.cpp finds them (by the GGUF's
// ids, else by their texts). The reference is the same text sent raw: the
// same prompt tokens (the response's context) and the same greedy text.
// A model without FIM tokens, and suffix with raw, are clear 400s.
func TestSuffixFillsInTheMiddle(t *testing.T) {
	dir := t.TempDir()
	base, _, _ := tinymodel.TinyVocab()
	n := len(base) // the first control token added
	models := []struct {
		name    string
		cfg     tinymodel.TinyConfig
		markers [3]string
	}{
		{"by-text", tinymodel.TinyConfig{Control: []string{"<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"}},
			[3]string{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}},
		// Ids in the GGUF win over texts llama.cpp would also take.
		{"by-id", tinymodel.TinyConfig{Control: []string{"<PRE>", "<p>", "<s>", "<m>"}, KV: map[string]any{
			"tokenizer.ggml.fim_pre_token_id": uint32(n + 1), "tokenizer.ggml.suffix_token_id": uint32(n + 2),
			"tokenizer.ggml.fim_mid_token_id": uint32(n + 3)}},
			[3]string{"<p>", "<s>", "<m>"}},
		{"none", tinymodel.TinyConfig{}, [3]string{}},
	}
	var paths []string
	for _, m := range models {
		c := tinymodel.DefaultTiny
		c.Control, c.KV = m.cfg.Control, m.cfg.KV
		p := filepath.Join(dir, m.name+".gguf")
		if _, err := tinymodel.WriteTiny(p, llama.Llama, c, 5); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	_, url := newTestServer(t, Config{}, paths...)
	gen := func(body map[string]any) (int, map[string]any) {
		b, _ := json.Marshal(body)
		code, out := post(t, url+"/api/generate", string(b))
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s: %s", b, out)
		}
		return code, m
	}
	opts := map[string]any{"temperature": 0, "num_predict": 8}
	prefix, suffix := "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"
	for _, m := range models[:2] {
		code, fim := gen(map[string]any{"model": m.name, "prompt": prefix, "suffix": suffix, "stream": false, "options": opts})
		if code != 200 {
			t.Fatalf("%s: %d %v", m.name, code, fim)
		}
		raw := m.markers[0] + prefix + m.markers[1] + suffix + m.markers[2]
		code, want := gen(map[string]any{"model": m.name, "prompt": raw, "raw": true, "stream": false, "options": opts})
		if code != 200 || fim["response"] != want["response"] || fmt.Sprint(fim["context"]) != fmt.Sprint(want["context"]) {
			t.Errorf("%s: suffix gives %q %v; raw FIM text %q %v", m.name, fim["response"], fim["context"], want["response"], want["context"])
		}
		// The markers are single tokens, in order, around the two texts.
		var ids []int
		for _, v := range fim["context"].([]any) {
			ids = append(ids, int(v.(float64)))
		}
		at := func(marker string) int { return slices.Index(ids, n+slices.Index(m.cfg.Control, marker)) }
		if p, s, mid := at(m.markers[0]), at(m.markers[1]), at(m.markers[2]); p < 0 || !(p < s && s < mid) {
			t.Errorf("%s: markers at %d, %d, %d in %v", m.name, p, s, mid, ids)
		}

		// OpenAI's completions take the suffix too (their sampling defaults
		// differ from Ollama's: compared with the FIM text sent as prompt).
		complete := func(body map[string]any) string {
			b, _ := json.Marshal(body)
			code, out := post(t, url+"/v1/completions", string(b))
			var c struct {
				Choices []struct{ Text string }
			}
			if code != 200 || json.Unmarshal(out, &c) != nil || len(c.Choices) != 1 {
				t.Fatalf("%s: /v1/completions %s: %d %s", m.name, b, code, out)
			}
			return c.Choices[0].Text
		}
		got := complete(map[string]any{"model": m.name, "prompt": prefix, "suffix": suffix, "max_tokens": 8, "temperature": 0})
		if w := complete(map[string]any{"model": m.name, "prompt": raw, "max_tokens": 8, "temperature": 0}); got != w {
			t.Errorf("%s: /v1/completions with suffix %q, the FIM text as prompt %q", m.name, got, w)
		}
	}

	code, e := gen(map[string]any{"model": "none", "prompt": prefix, "suffix": suffix, "stream": false})
	if msg, _ := e["error"].(string); code != 400 || !strings.Contains(msg, "does not support insert") ||
		!strings.Contains(msg, "no fill-in-the-middle prefix token") {
		t.Errorf("a model without FIM tokens: %d %v", code, e)
	}
	code, e = gen(map[string]any{"model": "by-text", "prompt": prefix, "suffix": suffix, "raw": true, "stream": false})
	if msg, _ := e["error"].(string); code != 400 || !strings.Contains(msg, "raw mode does not support suffix") {
		t.Errorf("suffix with raw: %d %v", code, e)
	}
}
