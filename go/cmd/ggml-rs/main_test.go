package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"strings"
	"testing"
)

// capture runs the command line in-process and returns its exit status,
// stdout and stderr.
func capture(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	oldOut, oldErr := os.Stdout, os.Stderr
	rOut, wOut, _ := os.Pipe()
	rErr, wErr, _ := os.Pipe()
	os.Stdout, os.Stderr = wOut, wErr
	var out, errb bytes.Buffer
	done := make(chan struct{}, 2)
	go func() { io.Copy(&out, rOut); done <- struct{}{} }()
	go func() { io.Copy(&errb, rErr); done <- struct{}{} }()
	status := run(args)
	wOut.Close()
	wErr.Close()
	<-done
	<-done
	os.Stdout, os.Stderr = oldOut, oldErr
	return status, out.String(), errb.String()
}

func TestErrorsAreOneLine(t *testing.T) {
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"frob"}, 2, `unknown command "frob"`},
		{[]string{"generate", "m.gguf", "hi"}, 1, "model file m.gguf does not exist"},
		{[]string{"bench", "m.gguf"}, 1, "model file m.gguf does not exist"},
		{[]string{"embed"}, 2, "needs a model"},
		{[]string{"embed", "-nope", "m", "x"}, 2, "flag provided but not defined"},
		{[]string{"embed", "does-not-exist.gguf", "hi"}, 1, "model file does-not-exist.gguf does not exist"},
		{[]string{"embed", "main.go", "hi"}, 1, "bad magic"},
		{[]string{"inspect", "main.go"}, 1, "bad magic"},
		{[]string{"convert", "."}, 1, "config.json"},
		{[]string{"convert", "-type", "q4", "."}, 2, "f32 or f16"},
		{[]string{"devices", "x"}, 2, "no arguments"},
		// Options that make no sense, refused before the model is opened.
		{[]string{"generate", "m.gguf", "hi", "-temp", "NaN"}, 2, "temperature NaN"},
		{[]string{"generate", "m.gguf", "hi", "-temp", "-1"}, 2, "temperature -1"},
		{[]string{"generate", "m.gguf", "hi", "-temp", "1e300"}, 2, "temperature +Inf"},
		{[]string{"generate", "m.gguf", "hi", "-top-p", "2"}, 2, "top-p 2"},
		{[]string{"generate", "m.gguf", "hi", "-top-p", "NaN"}, 2, "top-p NaN"},
		{[]string{"generate", "m.gguf", "hi", "-top-k", "-5"}, 2, "top-k -5"},
		{[]string{"generate", "m.gguf", "hi", "-n", "-3"}, 2, "-n -3"},
		{[]string{"generate", "m.gguf", "hi", "-threads", "2048"}, 2, "-threads 2048"},
		{[]string{"generate", "m.gguf", "hi", "-ngl", "-2"}, 2, "-ngl -2"},
		{[]string{"logits", "m.gguf", "1", "-ctx", "-5"}, 2, "-ctx -5"},
		{[]string{"bench", "m.gguf", "-ctx", "-5"}, 2, "-ctx -5"},
		{[]string{"embed", "-threads", "513", "m.gguf", "hi"}, 2, "-threads 513"},
	} {
		status, _, stderr := capture(t, c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if status != c.status || !strings.Contains(first, c.want) || !strings.HasPrefix(first, "ggml-rs") {
			t.Errorf("%v: status %d, stderr %q; want status %d and a first line with %q", c.args, status, stderr, c.status, c.want)
		}
		if n := strings.Count(stderr, "\n"); n > 2 || strings.Contains(stderr, "goroutine") {
			t.Errorf("%v: %d lines on stderr:\n%s", c.args, n, stderr)
		}
	}
}

func TestParseIntersperse(t *testing.T) {
	fs := newFlags("x", "", "")
	j := fs.Bool("json", false, "")
	pos, err := parse(fs, []string{"model", "-json", "a", "--", "-b", "c"})
	if err != nil || !*j || strings.Join(pos, "|") != "model|a|-b|c" {
		t.Fatalf("pos %q, json %v, err %v", pos, *j, err)
	}
}

func TestDevices(t *testing.T) {
	status, out, stderr := capture(t, "devices")
	if status != 0 || !strings.Contains(out, "CPU") {
		t.Fatalf("status %d, stdout %q, stderr %q", status, out, stderr)
	}
}

// TestEmbedAndInspect runs embed (JSON and table) and inspect on the real
// model ($GGML_RS_MINILM, which make test sets after converting it: a
// missing file fails there).
func TestEmbedAndInspect(t *testing.T) {
	model, required := os.LookupEnv("GGML_RS_MINILM")
	if !required {
		model = "../../.cache/all-minilm-l6-v2.gguf"
	}
	if _, err := os.Stat(model); err != nil {
		if required {
			t.Fatalf("%s is missing (make run converts it)", model)
		}
		t.Skipf("%s is not there (make run converts it)", model)
	}
	status, out, stderr := capture(t, "embed", "-json", model, "A man is playing a guitar.", "Someone plays an instrument.")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var res struct {
		Dimensions int
		Normalized bool
		Data       []struct {
			Tokens    int
			Embedding []float64
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Dimensions != 384 || !res.Normalized || len(res.Data) != 2 || len(res.Data[0].Embedding) != 384 {
		t.Fatalf("unexpected JSON: %+v", res)
	}
	var n float64
	for _, v := range res.Data[1].Embedding {
		n += v * v
	}
	if math.Abs(n-1) > 1e-4 {
		t.Errorf("|e|² = %g", n)
	}
	if !strings.Contains(stderr, "100%") {
		t.Errorf("no load progress on stderr: %q", stderr)
	}

	status, out, stderr = capture(t, "embed", model, "a", "b", "c")
	if status != 0 || !strings.Contains(out, "cosine similarity") || !strings.Contains(out, "most similar pairs") {
		t.Fatalf("status %d, stdout %q, stderr %q", status, out, stderr)
	}

	status, out, stderr = capture(t, "inspect", model)
	for _, want := range []string{"architecture  bert", "bert.block_count", "blk.5.ffn_down.weight", "memory per device"} {
		if status != 0 || !strings.Contains(out, want) {
			t.Fatalf("inspect: status %d, no %q in:\n%s\n%s", status, want, out, stderr)
		}
	}
}
