package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

func TestGenerateAndBench(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []llama.Variant{llama.Llama, llama.Qwen3} {
		path := filepath.Join(dir, v.Arch+".gguf")
		if _, err := tinymodel.WriteTiny(path, v, tinymodel.DefaultTiny, 3); err != nil {
			t.Fatal(err)
		}
		args := []string{"generate", path, "-p", "hello world", "-n", "12", "-temp", "0", "-threads", "2"}
		status, out1, errs := capture(t, args...)
		if status != 0 || !strings.HasPrefix(out1, "hello world") || !strings.Contains(errs, "decode:") {
			t.Fatalf("%s generate: status %d, stdout %q, stderr %q", v.Arch, status, out1, errs)
		}
		if _, out2, _ := capture(t, args...); out2 != out1 {
			t.Fatalf("%s: greedy output differs: %q vs %q", v.Arch, out1, out2)
		}
		seeded := []string{"generate", path, "-p", "the", "-n", "12", "-temp", "1", "-seed", "5", "-fa", "on"}
		_, s1, _ := capture(t, seeded...)
		if _, s2, _ := capture(t, seeded...); s1 != s2 {
			t.Fatalf("%s: seeded output differs: %q vs %q", v.Arch, s1, s2)
		}
		status, table, errs := capture(t, "bench", path, "-p", "32", "-n", "8", "-r", "2", "-batch", "16")
		if status != 0 || !strings.Contains(table, "| pp32 |") || !strings.Contains(table, "| tg8 |") ||
			!strings.HasPrefix(table, "| model | size | params | backend | threads | fa | test | t/s |") || !strings.Contains(table, "| on | pp32 |") {
			t.Fatalf("%s bench: status %d, stdout %q, stderr %q", v.Arch, status, table, errs)
		}
	}
}

// generate -draft mtp gives plain generate's text; bad drafting options
// and a model without an MTP head are clear errors.
func TestGenerateWithDrafts(t *testing.T) {
	path := modelPath(t, "qwen35-small-q8_0")
	plain := []string{"generate", path, "-p", "hello world", "-n", "40", "-temp", "0", "-threads", "2"}
	status, want, errs := capture(t, plain...)
	if status != 0 {
		t.Fatalf("plain generate: status %d, stderr %q", status, errs)
	}
	for _, max := range []string{"1", "3", "6"} {
		status, got, errs := capture(t, append(plain, "-draft", "mtp", "-draft-max", max)...)
		if status != 0 || got != want || !strings.Contains(errs, "draft:") {
			t.Errorf("-draft mtp -draft-max %s: status %d, stdout %q (plain %q), stderr %q", max, status, got, want, errs)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-draft", "mtp", "-draft-max", "0"}, "-draft-max must be at least 1"},
		{[]string{"-draft", "mtp", "-draft-max", "-2"}, "-draft-max must be at least 1"},
		{[]string{"-draft", "mtp", "-draft-max", "512", "-ctx", "512"}, "does not fit the 512-token context"},
		{[]string{"-draft", "eagle"}, `-draft "eagle": the only drafter is mtp`},
	} {
		status, _, errs := capture(t, append(plain, c.args...)...)
		if status == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: status %d, stderr %q, want an error containing %q", c.args, status, errs, c.want)
		}
	}
	for name, arch := range map[string]string{"qwen3next-small-f16": "qwen3next", "qwen3moe-small-q8_0": "qwen3moe"} {
		status, _, errs := capture(t, "generate", modelPath(t, name), "-p", "hi", "-n", "4", "-draft", "mtp")
		if want := `architecture "` + arch + `" has no MTP head`; status == 0 || !strings.Contains(errs, want) {
			t.Errorf("%s -draft mtp: status %d, stderr %q, want an error containing %q", name, status, errs, want)
		}
	}
}

// bench-spec's table: oracle rows and, for a model with an MTP head, the
// head's row, each with output identical to plain decoding.
func TestBenchSpec(t *testing.T) {
	for name, mtp := range map[string]bool{"qwen35moe-small-q4_0": true, "qwen3-small-q8_0": false} {
		status, table, errs := capture(t, "bench-spec", modelPath(t, name), "-n", "24", "-p", "8", "-r", "1", "-rates", "0.5,1")
		if status != 0 {
			t.Fatalf("%s: status %d, stderr %q", name, status, errs)
		}
		if strings.Contains(table, "Inf") || strings.Contains(table, "NaN") {
			t.Errorf("%s: a rate is not a number:\n%s", name, table)
		}
		rows := 0
		for _, l := range strings.Split(table, "\n") {
			if strings.HasPrefix(l, "| oracle") || strings.HasPrefix(l, "| mtp") {
				rows++
				if !strings.HasSuffix(l, "| true |") {
					t.Errorf("%s: not identical to plain decoding: %s", name, l)
				}
			}
		}
		if want := map[bool]int{true: 3, false: 2}[mtp]; rows != want || !strings.Contains(table, "| oracle 100% | 100.0% | 4.00 |") {
			t.Errorf("%s: %d rows, want %d (with a full-acceptance oracle row):\n%s", name, rows, want, table)
		}
	}
	if status, _, errs := capture(t, "bench-spec", modelPath(t, "qwen3-small-q8_0"), "-rates", "1.5"); status == 0 || !strings.Contains(errs, "not a rate from 0 to 1") {
		t.Errorf("-rates 1.5: status %d, stderr %q", status, errs)
	}
}

// smolLM2 is the real SmolLM2-135M-Instruct (make fetch-smollm2; the
// Makefile passes its path as GGML_RS_SMOLLM2, and a missing file is then
// a failure).
func smolLM2(t *testing.T) string {
	path := os.Getenv("GGML_RS_SMOLLM2")
	if path == "" {
		t.Skip("GGML_RS_SMOLLM2 is not set (make test sets it)")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("GGML_RS_SMOLLM2: %v", err)
	}
	return path
}

// generate -chat renders the message with the model's own template: on
// SmolLM2 (ChatML with a default system message) it gives the tokens of
// the prompt written out by hand, stops at the end of the assistant's turn
// (<|im_end|>) well before -n, and prints only the answer; -system
// replaces the default system message.
func TestGenerateChat(t *testing.T) {
	path := smolLM2(t)
	const q = "Give me three tips for a good night's sleep."
	for _, c := range []struct{ system, sysText string }{
		{"", "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
		{"You answer in one line.", "You answer in one line."},
	} {
		args := []string{"generate", "-chat", "-temp", "0", "-n", "200", path, q}
		if c.system != "" {
			args = append(args, "-system", c.system)
		}
		status, got, errs := capture(t, args...)
		if status != 0 {
			t.Fatalf("%v: status %d, stderr %q", args, status, errs)
		}
		prompt := "<|im_start|>system\n" + c.sysText + "<|im_end|>\n<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"
		status, raw, errs := capture(t, "generate", "-temp", "0", "-n", "200", path, "-p", prompt)
		if status != 0 {
			t.Fatalf("raw prompt: status %d, stderr %q", status, errs)
		}
		if want := strings.TrimPrefix(raw, prompt); got != want {
			t.Errorf("-system %q: -chat gives %q, the hand-written prompt %q", c.system, got, want)
		}
		if n := decodeCount(t, errs); n >= 200 || n < 5 {
			t.Errorf("-system %q: %d tokens generated: expected an answer that ends its turn before -n 200", c.system, n)
		}
	}
	if status, _, errs := capture(t, "generate", "-system", "x", path, "-p", "hi"); status == 0 || !strings.Contains(errs, "-system needs -chat") {
		t.Errorf("-system without -chat: status %d, stderr %q", status, errs)
	}
}

// decodeCount reads the generated-token count of generate's stderr.
func decodeCount(t *testing.T, stderr string) int {
	var n int
	i := strings.Index(stderr, "decode:")
	if i < 0 {
		t.Fatalf("no decode line in %q", stderr)
	}
	if _, err := fmt.Sscanf(stderr[i:], "decode: %d tokens", &n); err != nil {
		t.Fatalf("decode line %q: %v", stderr[i:], err)
	}
	return n
}

// generate -json-schema, -json and -grammar hold the output to them (on the
// real SmolLM2 the greedy answer ends inside the language and parses);
// conflicting or bad ones are usage errors before the model loads.
func TestGenerateWithGrammar(t *testing.T) {
	path := smolLM2(t)
	schema := `{"type":"object","properties":{"color":{"type":"string","enum":["red","green","blue"]},` +
		`"count":{"type":"integer","minimum":1,"maximum":9}},"required":["color","count"]}`
	status, out, errs := capture(t, "generate", "-chat", "-temp", "0", "-n", "100", "-json-schema", schema, path, "Pick a color and a number.")
	var v struct {
		Color string
		Count int
	}
	if status != 0 || json.Unmarshal([]byte(out), &v) != nil || (v.Color != "red" && v.Color != "green" && v.Color != "blue") || v.Count < 1 || v.Count > 9 {
		t.Fatalf("-json-schema: status %d, %q, %q", status, out, errs)
	}
	status, out, errs = capture(t, "generate", "-chat", "-temp", "0.7", "-seed", "3", "-n", "200", "-json", path, "Describe a cat as JSON.")
	var anyv any
	if status != 0 || (decodeCount(t, errs) < 200 && json.Unmarshal([]byte(out), &anyv) != nil) {
		t.Fatalf("-json: status %d, %q, %q", status, out, errs)
	}
	gf := filepath.Join(t.TempDir(), "yesno.gbnf")
	os.WriteFile(gf, []byte(`root ::= ("yes" | "no") "."`), 0o644)
	status, out, errs = capture(t, "generate", "-chat", "-temp", "0", "-n", "20", "-grammar", gf, path, "Is the sky blue?")
	if status != 0 || (out != "yes.\n" && out != "no.\n") {
		t.Fatalf("-grammar: status %d, %q, %q", status, out, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-json", "-grammar", gf}, "exclude each other"},
		{[]string{"-json-schema", `{"type":5}`}, "-json-schema"},
		{[]string{"-json", "-draft", "mtp"}, "does not combine"},
		{[]string{"-grammar", gf + ".missing"}, "-grammar"},
	} {
		status, _, errs := capture(t, append([]string{"generate", path, "-p", "hi"}, c.args...)...)
		if status == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: status %d, stderr %q", c.args, status, errs)
		}
	}
}
