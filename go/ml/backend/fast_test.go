package backend

import (
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// TestFastKernelsOption: WithFastKernels, and GGML_RS_FAST_KERNELS for
// New, put a layer's F16 matmul weight (16 rows of 32) in the repacking
// buffer where this CPU has the bf16 kernels (AVX-512 VNNI and BF16),
// leave it in the plain CPU buffer elsewhere and without the option, and
// an unreadable value of the variable is an error. The kernels' numbers
// are tests/ops_fast_kernels.rs's and TestFastKernels's (cmd/ggml-rs).
func TestFastKernelsOption(t *testing.T) {
	f := &ggufFile{}
	f.kv("general.architecture", "llama").
		kv("llama.block_count", uint32(1)).
		kv("llama.embedding_length", uint32(32)).
		kv("tokenizer.ggml.model", "gpt2")
	vals := make([]float32, 32*16)
	for i := range vals {
		vals[i] = float32(i%7) - 3
	}
	f.tensor("token_embd.weight", ggmlF16, []uint64{32, 16}, f16Bytes(vals))
	f.tensor("blk.0.attn_q.weight", ggmlF16, []uint64{32, 16}, f16Bytes(vals))
	path := f.write(t)

	features := CPUFeatures()
	kernels := slices.Contains(features, "AVX512_VNNI") && slices.Contains(features, "AVX512_BF16")
	bufferOf := func(b *Backend) string {
		for _, w := range b.WeightPlacements() {
			if w.Name == "blk.0.attn_q.weight" {
				return w.BufferType
			}
		}
		t.Fatal("blk.0.attn_q.weight not placed")
		return ""
	}
	want := func(fast bool) string {
		if fast && kernels {
			return "CPU_REPACK"
		}
		return "CPU"
	}
	params := ml.BackendParams{AllocMemory: true}
	for _, fast := range []bool{false, true} {
		var opts []Option
		if fast {
			opts = append(opts, WithFastKernels())
		}
		if got := bufferOf(openModelT(t, path, params, opts...)); got != want(fast) {
			t.Errorf("WithFastKernels %v, CPU features %q: buffer type %s, want %s", fast, features, got, want(fast))
		}
	}
	for _, c := range []struct {
		value string
		fast  bool
	}{{"1", true}, {"true", true}, {"0", false}, {"", false}} {
		t.Setenv(FastKernelsEnv, c.value)
		mb, err := New(path, params)
		if err != nil {
			t.Fatalf("%s=%q: %v", FastKernelsEnv, c.value, err)
		}
		b := mb.(*Backend)
		if got := bufferOf(b); got != want(c.fast) {
			t.Errorf("%s=%q: buffer type %s, want %s", FastKernelsEnv, c.value, got, want(c.fast))
		}
		b.Close()
	}
	t.Setenv(FastKernelsEnv, "fast")
	if _, err := New(path, params); err == nil {
		t.Errorf("%s=fast: no error", FastKernelsEnv)
	}
}
