package main

import (
	"math"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

var testConfig = config{dModel: 64, heads: 4, kvHeads: 2, headDim: 16, seq: 8, dFF: 128, eps: 1e-5, ropeBase: 10000}

// The block through the backend matches the reference on both attention
// paths (a smaller block than the demo's, so the test is quick).
func TestBlockMatchesReference(t *testing.T) {
	w := newWeights(testConfig, 7)
	ref, refAttn := reference(w, testConfig)
	for _, p := range []struct {
		name string
		fa   ml.FlashAttentionType
	}{{"softmax", ml.FlashAttentionDisabled}, {"flash", ml.FlashAttentionEnabled}} {
		r, err := run(p.name, p.fa, 1, w, testConfig, ref, refAttn, 2)
		if err != nil {
			t.Fatal(err)
		}
		if !r.ok {
			t.Errorf("%s: max abs error %.3g (attention %.3g), tolerance %g", p.name, r.maxErr, r.attnErr, r.tol)
		}
	}
}

// The reference's pieces behave as their definitions say.
func TestReferencePieces(t *testing.T) {
	// RoPE at position 0 is the identity; at position 1 it keeps each
	// pair's norm.
	x := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	y := append([]float64(nil), x...)
	ropeNeoX(y, 8, 1, 1, []int32{0}, 10000)
	for i := range x {
		if y[i] != x[i] {
			t.Fatalf("rope at position 0 changed %v to %v", x, y)
		}
	}
	ropeNeoX(y, 8, 1, 1, []int32{1}, 10000)
	for i := 0; i < 4; i++ {
		a, b := math.Hypot(x[i], x[i+4]), math.Hypot(y[i], y[i+4])
		if math.Abs(a-b) > 1e-12 {
			t.Fatalf("rope changed the norm of pair %d: %g vs %g", i, a, b)
		}
	}
	// The first query attends only to the first key, so it returns the
	// first value (per KV head) whatever the scores.
	q := []float64{1, 0, 0, 1, 2, 2, 3, 3}   // hd 2, heads 2, n 2
	k := []float64{1, 1, 5, 5}               // hd 2, kvHeads 1, n 2
	v := []float64{0.5, -1, 9, 9}            // hd 2, kvHeads 1, n 2
	out := attention(q, k, v, 2, 2, 1, 2, 1) // [2, 2, 2]
	for h := 0; h < 2; h++ {
		if out[h*2] != 0.5 || out[h*2+1] != -1 {
			t.Fatalf("causal attention of the first query: got %v", out[:4])
		}
	}
}
