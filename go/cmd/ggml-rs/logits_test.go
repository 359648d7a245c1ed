package main

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

func TestLogitsAndTokenize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if _, err := tinymodel.WriteTiny(path, llama.Qwen3, tinymodel.DefaultTiny, 7); err != nil {
		t.Fatal(err)
	}
	type result struct {
		NVocab int `json:"n_vocab"`
		Tokens []int32
		Logits json.RawMessage
	}
	logits := func(args ...string) (result, [][]float32) {
		t.Helper()
		status, out, errs := capture(t, append([]string{"logits"}, args...)...)
		if status != 0 {
			t.Fatalf("logits %v: status %d: %s", args, status, errs)
		}
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("logits %v: %v: %.200s", args, err, out)
		}
		var rows [][]float32
		if err := json.Unmarshal(r.Logits, &rows); err != nil {
			var row []float32
			if err := json.Unmarshal(r.Logits, &row); err != nil {
				t.Fatalf("logits %v: %v", args, err)
			}
			rows = [][]float32{row}
		}
		return r, rows
	}

	r, last := logits("-t", "1", path, "5,6", "7", "299")
	if r.NVocab != 300 || !slices.Equal(r.Tokens, []int32{5, 6, 7, 299}) || len(last) != 1 || len(last[0]) != 300 {
		t.Fatalf("n_vocab %d, tokens %v, %d rows of %d", r.NVocab, r.Tokens, len(last), len(last[0]))
	}
	// Every position, prefilled in batches of 3, then the last two decoded
	// one at a time: the same logits (different kernels, so not bit for bit).
	_, all := logits(path, "-all", "-batch", "3", "-decode", "2", "-fa", "on", "5,6,7,299")
	if len(all) != 4 {
		t.Fatalf("-all: %d rows", len(all))
	}
	for i, v := range all[3] {
		if d := math.Abs(float64(v - last[0][i])); d > 1e-3 {
			t.Fatalf("logit %d: %g with -all, %g without", i, v, last[0][i])
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"logits", path}, "at least one token"},
		{[]string{"logits", path, "1,x"}, `not a token id: "x"`},
		{[]string{"logits", path, "302"}, "outside the 300-token vocabulary"},
		{[]string{"logits", "-decode", "3", path, "1,2"}, "-decode 3"},
		{[]string{"tokenize", path}, "needs a model and one text"},
	} {
		if status, _, errs := capture(t, c.args...); status == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: status %d, stderr %q; want %q", c.args, status, errs, c.want)
		}
	}

	// tokenize: one text, and a batch of hex lines.
	status, out, errs := capture(t, "tokenize", "-special", path, "hello world<|end_of_text|>")
	var one struct{ Tokens []int32 }
	if status != 0 || json.Unmarshal([]byte(out), &one) != nil {
		t.Fatalf("tokenize: status %d, %q, %q", status, out, errs)
	}
	tokens, _, _ := tinymodel.TinyVocab()
	// qwen2's pre-tokenizer adds no BOS by default; the EOS text is parsed.
	if n := len(one.Tokens); n < 3 || one.Tokens[n-1] != int32(len(tokens)-1) || tokens[one.Tokens[0]] != "hello" {
		t.Fatalf("tokenize: %v", one.Tokens)
	}
	batch := filepath.Join(dir, "texts")
	lines := hex.EncodeToString([]byte("hello world<|end_of_text|>")) + "\n\n" + hex.EncodeToString([]byte{0xff})
	if err := os.WriteFile(batch, []byte(lines+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errs = capture(t, "tokenize", "-batch", batch, path)
	var many struct {
		Results []struct{ Plain, Special []int32 }
	}
	if status != 0 || json.Unmarshal([]byte(out), &many) != nil || len(many.Results) != 3 {
		t.Fatalf("tokenize -batch: status %d, %q, %q", status, out, errs)
	}
	if !slices.Equal(many.Results[0].Special, one.Tokens) || len(many.Results[0].Plain) <= len(one.Tokens) ||
		len(many.Results[1].Plain) != 0 || len(many.Results[2].Plain) != 3 {
		t.Fatalf("tokenize -batch: %+v", many.Results)
	}
}
