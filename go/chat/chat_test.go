package chat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat/jinja"
)

var fixedNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// A model without a template renders with llama.cpp's ChatML fallback
// (the golden "chatml" renderings check it against llama.cpp; this pins
// the documented text).
func TestFallbackIsChatML(t *testing.T) {
	tmpl, err := Parse("")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}},
		Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// AddBOS cuts exactly the BOS the template wrote (llama.cpp does it when
// the model's tokenizer adds one): the rest is the golden rendering.
func TestAddBOSStripsTemplateBOS(t *testing.T) {
	src := templateSource(t, "meta-llama-Llama-3.1-8B-Instruct.jinja")
	tmpl, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "Hi"}}
	o := Options{AddGenerationPrompt: true, BOS: "<|begin_of_text|>", EOS: "<|eot_id|>", Now: fixedNow}
	full, err := tmpl.Render(msgs, o)
	if err != nil {
		t.Fatal(err)
	}
	o.AddBOS = true
	stripped, err := tmpl.Render(msgs, o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(full, o.BOS) || stripped != full[len(o.BOS):] {
		t.Fatalf("AddBOS: %q from %q", stripped, full)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name, src string
		kind, msg string
	}{
		{"raise", "{{ raise_exception('no system messages, please') }}", "raised", "no system messages, please"},
		{"unclosed block", "{% if messages %}x", "parser", ""},
		{"unclosed expression", "{{ messages ", "parser", ""},
		{"bad character", "{{ messages ; }}", "lexer", "unexpected character: ;"},
		{"unterminated string", "{{ 'abc }}", "lexer", ""},
		{"unknown filter", "{{ messages|frobnicate }}", "runtime", "Unknown (built-in) filter 'frobnicate' for type Array"},
		{"undefined arithmetic", "{{ nothing - 1 }}", "runtime", ""},
		{"unknown statement", "{% frob %}", "parser", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl, err := Parse(c.src)
			if err == nil {
				_, err = tmpl.Render([]Message{{Role: "user", Content: "x"}}, Options{Now: fixedNow})
			}
			var je *jinja.Error
			if !errors.As(err, &je) {
				t.Fatalf("want a *jinja.Error, got %v", err)
			}
			if je.Kind != c.kind || (c.msg != "" && je.Msg != c.msg) {
				t.Fatalf("got %s error %q (%v), want %s %q", je.Kind, je.Msg, err, c.kind, c.msg)
			}
		})
	}
	if _, err := (&Template{}).Render(nil, Options{}); !errors.Is(err, ErrNoMessages) {
		t.Fatalf("no messages: %v", err)
	}
}

// Hostile templates end with an error, quickly, within bounded memory:
// infinite-ish loops, runaway recursion, exponential string growth, deep
// nesting.
func TestHostileTemplatesAreBounded(t *testing.T) {
	deep := strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)
	cases := map[string]string{
		"big range":       "{% for i in range(1000000000) %}x{% endfor %}",
		"nested loops":    "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
		"recursion":       "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"doubling string": "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
		"repeat":          "{{ 'x' * 100000000000 }}",
		"deep parens":     "{{ " + deep + " }}",
		"deep ifs":        strings.Repeat("{% if true %}", 5000) + strings.Repeat("{% endif %}", 5000),
		"append doubling": "{% set l = [1] %}{% for i in range(100) %}{% for x in l %}{% set _ = l.append(x) %}{% endfor %}{% endfor %}",
		"indent bomb":     "{{ 'a\\nb'|indent(100000000000) }}",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			tmpl, err := Parse(src)
			if err == nil {
				_, err = tmpl.Render([]Message{{Role: "user", Content: "x"}},
					Options{Now: fixedNow, Limits: jinja.Limits{Steps: 300_000, CallDepth: 100, StringSize: 1 << 20, TotalBytes: 64 << 20}})
			}
			var je *jinja.Error
			if !errors.As(err, &je) {
				t.Fatalf("want a *jinja.Error, got %v", err)
			}
			// About a second of CPU at most here (300k steps); the bound is
			// wall time on a shared CI machine, so it is wide: what it
			// catches is a limit that does not stop the work at all.
			if d := time.Since(start); d > 60*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}
