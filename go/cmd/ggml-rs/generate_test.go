package main

import (
	"path/filepath"
	"strings"
	"testing"

	"ggmlrs/model/llama"
)

func TestGenerateAndBench(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []llama.Variant{llama.Llama, llama.Qwen3} {
		path := filepath.Join(dir, v.Arch+".gguf")
		if _, err := llama.WriteTiny(path, v, llama.DefaultTiny, 3); err != nil {
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
