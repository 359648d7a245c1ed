package qwen3_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
	"github.com/ggml-rs/ggml-rs/go/model/qwen3"
)

// The numerics are checked against a reference in package llama; this
// checks that qwen3 files load here and llama files are refused.
func TestNew(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []llama.Variant{llama.Qwen3, llama.Llama} {
		path := filepath.Join(dir, v.Arch+".gguf")
		if _, err := tinymodel.WriteTiny(path, v, tinymodel.DefaultTiny, 1); err != nil {
			t.Fatal(err)
		}
		b, err := ml.NewBackend(path, ml.BackendParams{AllocMemory: true, NumThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Load(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		m, err := qwen3.New(b)
		if v.Arch == "qwen3" {
			if err != nil {
				t.Fatalf("qwen3: %v", err)
			}
			if a := m.Blocks[0].Mixer.(*nn.Attention); a.QNorm == nil || a.KNorm == nil || len(a.RoPE.Options) == 0 {
				t.Fatalf("qwen3: %v", err)
			}
		} else if err == nil {
			t.Fatal("a llama model was accepted as qwen3")
		}
	}
}
