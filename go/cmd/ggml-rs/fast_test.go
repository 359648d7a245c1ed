package main

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// The fast CPU kernels (-fast-kernels, backend.WithFastKernels) do not keep
// ggml's rounding, so they are held to the golden files within bounds
// measured on them (all 22 Q8_0 and 22 F16 parity models, flash attention
// on, the fused delta net; docs/notes/cpu-speed.md has the table). Their
// arithmetic is checked exactly, against an f64 product of the values
// they multiply, by tests/ops_fast_kernels.rs; this holds whole models.
const (
	// fastQ8Spreads: Q8_0 (Q5_0, Q4_1) with each block's sum converted
	// once is only another order of f32 sums, like another CPU: measured
	// 0.4 to 2.4 times the reference's own spread on the Q8_0 parity
	// models (qwen35-small-q8_0 the worst). Twice otherCPUSpreads, as
	// another CPU's order may add its own.
	fastQ8Spreads = 2 * otherCPUSpreads
	// fastF16Spreads: F16 weights and their activations rounded to bf16
	// lose three bits each, which these random-weight models amplify as
	// they amplify any rounding: measured 3.7 to 70 spreads (1.74 on
	// qwen35moe-small-f16, whose spread is 2.5e-2). Twice the worst.
	fastF16Spreads = 140
	// fastMinGreedy: the teacher-forced greedy continuations agree on
	// 60 to 64 of 64 tokens (the random models' continuations hold near
	// ties the golden files do not record).
	fastMinGreedy = 0.9
)

// fastTolerance is parityCase's max|d| bound for a model on the fast
// kernels, from the reference's spread.
func fastTolerance(name string, spread float64) float64 {
	n := float64(fastQ8Spreads)
	if strings.HasSuffix(name, "-f16") {
		n = fastF16Spreads
	}
	return math.Max(parityMaxAbs, n*spread)
}

// TestFastKernels runs every parity model in Q8_0 and F16 (the types the
// fast kernels change among theirs) and the real weights of Gemma 3 270M
// (Q5_0 and Q8_0 among its products) and SmolLM2-135M (Q4_1) on the fast
// kernels against their golden files. Where the CPU
// lacks the instructions the kernels need, the option changes nothing and
// the same bounds hold.
func TestFastKernels(t *testing.T) {
	for _, name := range parityModels(t) {
		if !strings.HasSuffix(name, "-q8_0") && !strings.HasSuffix(name, "-f16") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			var doc goldenDoc
			readGolden(t, "ref_"+name+".json", &doc)
			path := modelPath(t, name)
			checkSHA(t, path, doc.ModelSHA256)
			parityCase(t, path, name, "fused", "on", &doc, true)
			checkFastInUse(t, path, doc.Sequences[0].Tokens)
		})
	}
	for _, c := range realModels {
		t.Run(c.name, func(t *testing.T) {
			path, doc := realGolden(t, c.name, c.env, c.fetch)
			tol := math.Max(parityMaxAbs, fastQ8Spreads*doc.spread())
			t.Logf("fast kernels: tolerance %.3g (reference spread %.3g)", tol, doc.spread())
			realLogits(t, path, "on", doc, tol, tol, true)
			checkFastInUse(t, path, doc.Prompts[len(doc.Prompts)-1].Tokens)
		})
	}
}

// checkFastInUse makes sure the option reaches the kernels: where a weight
// of a type they take (Q8_0, Q5_0, Q4_1, F16, BF16) sits in the repacking
// buffer with the flag on a CPU with AVX-512 VNNI (on x86 ggml's own
// repacking takes none of these types, so there it is ours), one
// sequence's logits with and without -fast-kernels differ; elsewhere (no
// VNNI; no BF16 for F16; AMX's buffer, which comes first and takes Q8_0
// and Q4_1) the option changes nothing and they are the same floats.
func checkFastInUse(t *testing.T, path string, tokens []int32) {
	t.Helper()
	vnni := slices.Contains(backend.CPUFeatures(), "AVX512_VNNI")
	active := false
	var rows [2][]float32
	for i, fast := range []bool{false, true} {
		df := addDecoderFlags(newFlags("parity", "", ""))
		*df.fa, *df.ngl, *df.fast = "on", 0, fast
		b, m, _, err := openDecoder(path, df)
		if err != nil {
			t.Fatal(err)
		}
		if fast {
			for _, w := range b.WeightPlacements() {
				taken := slices.Contains([]string{"q8_0", "q5_0", "q4_1", "f16", "bf16"}, w.Type) && w.BufferType == "CPU_REPACK"
				active = active || (vnni && taken)
			}
		}
		out, err := computeLogits(m, tokens, false, len(tokens), 512, 0)
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = out[0]
	}
	if same := slices.Equal(rows[0], rows[1]); same == active {
		t.Errorf("CPU features %q: logits with and without -fast-kernels identical: %v (want %v: the fast kernels hold a weight: %v)",
			backend.CPUFeatures(), same, !active, active)
	}
}
