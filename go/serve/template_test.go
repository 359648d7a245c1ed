package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

// withTemplate copies a GGUF model to dir/name.gguf with its
// tokenizer.chat_template set to tmpl (the header rewritten, the tensor
// data copied as it is).
func withTemplate(t *testing.T, src, dir, name, tmpl string) string {
	t.Helper()
	g, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	var kvs []gguf.KV
	for _, kv := range g.KVs {
		if kv.Key != "tokenizer.chat_template" {
			kvs = append(kvs, kv)
		}
	}
	kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: tmpl})
	tensors := append([]gguf.TensorInfo(nil), g.Tensors...)
	path := filepath.Join(dir, name+".gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := gguf.WriteHeader(out, kvs, tensors, g.Alignment); err != nil {
		t.Fatal(err)
	}
	for i := range tensors {
		if tensors[i].Offset != g.Tensors[i].Offset {
			t.Fatalf("tensor %s moves from %d to %d: the data cannot be copied as it is", tensors[i].Name, g.Tensors[i].Offset, tensors[i].Offset)
		}
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Seek(int64(g.DataOffset), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBrokenTemplate: a model whose chat template does not parse does
// not keep the server from serving the others (nor itself loading): its
// chat requests get a 500 that names the template's error, its raw
// prompts are served, /api/show says it; the other model chats.
func TestBrokenTemplate(t *testing.T) {
	const good, bad = "qwen3-small-q8_0", "qwen3-broken"
	src := modelPath(t, good)
	broken := withTemplate(t, src, t.TempDir(), bad, "{% for m in messages %}{{ m.content }")
	s, url := newTestServer(t, Config{Parallel: 1, Context: 128}, src, broken)
	if err := s.Load(bad); err != nil {
		t.Fatalf("loading the model with the broken template: %v", err)
	}
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ path, body string }{
		{"/api/chat", fmt.Sprintf(`{"model":%q,%s}`, bad, msgs)},
		{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,%s}`, bad, msgs)},
		{"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"hi"}`, bad)},
	} {
		code, b := post(t, url+c.path, c.body)
		if code != 500 || !strings.Contains(string(b), "model "+bad+": its chat template does not parse") || !strings.Contains(string(b), "raw") {
			t.Errorf("%s: %d %s, want a 500 naming the template's error", c.path, code, b)
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"hi","raw":true,"stream":false,"options":{"num_predict":2}}`, bad)},
		{"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hi","max_tokens":2}`, bad)},
		{"/api/chat", fmt.Sprintf(`{"model":%q,%s,"stream":false,"options":{"num_predict":2}}`, good, msgs)},
		{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,%s,"max_tokens":2}`, good, msgs)},
	} {
		if code, b := post(t, url+c.path, c.body); code != 200 {
			t.Errorf("%s %.40s: %d %s", c.path, c.body, code, b)
		}
	}
	var show map[string]any
	code, b := post(t, url+"/api/show", fmt.Sprintf(`{"model":%q}`, bad))
	if code != 200 || json.Unmarshal(b, &show) != nil || !strings.Contains(fmt.Sprint(show["template_error"]), "does not parse") {
		t.Errorf("show %s: %d %.300s", bad, code, b)
	}
	code, b = post(t, url+"/api/show", fmt.Sprintf(`{"model":%q}`, good))
	if code != 200 || strings.Contains(string(b), "template_error") {
		t.Errorf("show %s: %d %.300s", good, code, b)
	}
	// A -chat-template that does not parse is the operator's mistake,
	// refused at the start.
	if _, err := New(Config{Open: openBackend, ChatTemplate: "{% if %}"}, []string{src}); err == nil || !strings.Contains(err.Error(), "-chat-template") {
		t.Errorf("a broken -chat-template: %v", err)
	}
}
