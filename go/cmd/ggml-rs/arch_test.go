package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

// TestUnsupportedArchitectureFirst: generate, logits and bench on a model
// of an architecture the runner does not implement say so before reading
// a weight (they once loaded all of them first), in one line.
func TestUnsupportedArchitectureFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "falcon.gguf")
	b := gguf.NewBuilder()
	b.Add("general.architecture", "falcon")
	b.Add("falcon.block_count", uint32(1))
	b.Add("falcon.embedding_length", uint32(64))
	b.AddTensor("token_embd.weight", gguf.TensorF32, []uint64{64, 512}, make([]byte, 4*64*512))
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"generate", "-n", "1", path, "hello"},
		{"logits", path, "1,2"},
		{"bench", "-p", "8", "-n", "2", path},
	} {
		r := runChild(t, args...)
		if r.status == 0 || !strings.Contains(r.stderr, `architecture "falcon" is not supported`) {
			t.Errorf("%v: status %d, stderr %q", args, r.status, r.stderr)
		}
		t.Logf("%v: status %d, %q", args[0], r.status, r.stderr)
		if strings.Contains(r.stderr, "loading") {
			t.Errorf("%v: loaded weights before refusing: %q", args, r.stderr)
		}
	}
}

// TestThreadsFlagSpellings: -t is -threads everywhere, as in llama.cpp's
// tools.
func TestThreadsFlagSpellings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := tinymodel.WriteTiny(path, llama.Qwen3, tinymodel.TinyConfig{Layers: 1, Hidden: 64, Heads: 2, KVHeads: 1, FeedForward: 32}, 3); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"generate", "-t", "1", "-n", "2", "-temp", "0", path, "-p", "hello"},
		{"bench", "-t", "1", "-p", "8", "-n", "2", "-r", "1", path},
		{"logits", "-t", "1", path, "1,2"},
		{"inspect", "-t", "1", path},
	} {
		if r := runChild(t, args...); r.status != 0 {
			t.Errorf("%v: status %d, stderr %q", args, r.status, r.stderr)
		}
	}
}
