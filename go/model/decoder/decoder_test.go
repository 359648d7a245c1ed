package decoder_test

// Several sequences through one cache: decoded together (one ubatch per
// step, joining and leaving between steps) they get the logits they get
// alone; a removed sequence's slot serves a new one from zero; a prompt
// that diverges from the cached one is computed afresh (hybrid models) or
// from the common prefix (attention-only models), with the logits of a
// fresh run. On the generated models of make test ($GGML_RS_MODELS).

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

func open(t *testing.T, name string) *decoder.Model {
	t.Helper()
	dir, required := os.LookupEnv("GGML_RS_MODELS")
	if !required {
		dir = "../../../.cache/models"
	}
	path := filepath.Join(dir, name+".gguf")
	if _, err := os.Stat(path); err != nil {
		if required {
			t.Fatalf("%s is missing (make models writes it)", path)
		}
		t.Skipf("%s is not there (make models writes it; make test does)", path)
	}
	b, err := ml.NewBackend(path, ml.BackendParams{AllocMemory: true, NumThreads: 2, FlashAttention: ml.FlashAttentionEnabled})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	m, err := model.New(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.ReleaseGraph)
	return m
}

func prompt(seed, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(3 + (seed*7919+i*104729)%(vocab-6))
	}
	return p
}

func argmax(v []float32) int32 {
	best := 0
	for i := range v {
		if v[i] > v[best] {
			best = i
		}
	}
	return int32(best)
}

// alone runs one sequence: its prompt, then greedy decode steps; the
// logits after the prompt and after each step.
func alone(t *testing.T, m *decoder.Model, p []int32, steps int) [][]float32 {
	t.Helper()
	c, err := m.NewCache(decoder.CacheOptions{Capacity: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err := m.Forward(c, p, false)
	if err != nil {
		t.Fatal(err)
	}
	rows := [][]float32{out[0]}
	for i := 0; i < steps; i++ {
		out, err = m.Forward(c, []int32{argmax(rows[len(rows)-1])}, false)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, out[0])
	}
	return rows
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// The Q8_0 matmuls of these models give the same numbers for one row as
// for several (README: llama.cpp's batch drift); attention runs per
// sequence. What remains is summation order inside a few kernels.
const togetherTol = 1e-3

func TestSequencesTogether(t *testing.T) {
	for _, name := range []string{"qwen35moe-small-q8_0", "qwen3next-small-q8_0", "gpt-oss-small-q8_0", "qwen3moe-small-q8_0", "lfm2-small-q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := open(t, name)
			const steps = 6
			lens := []int{5, 9, 13}
			var want [][][]float32
			for i, n := range lens {
				want = append(want, alone(t, m, prompt(i, n, m.Vocab), steps))
			}
			fresh := alone(t, m, prompt(9, 7, m.Vocab), steps)

			c, err := m.NewCache(decoder.CacheOptions{Capacity: 3 * 256, Sequences: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var batch []kvcache.Sequence
			for i, n := range lens {
				batch = append(batch, kvcache.Sequence{Seq: i, Tokens: prompt(i, n, m.Vocab)})
			}
			out, err := m.ForwardBatch(c, batch, false, 512)
			if err != nil {
				t.Fatal(err)
			}
			last := map[int][]float32{}
			check := func(seq, step int, got []float32, want []float32) {
				t.Helper()
				if d := maxDiff(got, want); d > togetherTol || argmax(got) != argmax(want) {
					t.Fatalf("sequence %d, step %d: max|d| %.3g from its run alone", seq, step, d)
				}
			}
			for i := range lens {
				check(i, 0, out[i][0], want[i][0])
				last[i] = out[i][0]
			}
			// Decode all three together; after step 2, sequence 1 leaves and
			// a new sequence (9) takes its slot with a prompt of its own.
			expect := map[int][][]float32{0: want[0], 1: want[1], 2: want[2], 9: fresh}
			step := map[int]int{0: 0, 1: 0, 2: 0}
			for s := 1; s <= steps; s++ {
				batch = batch[:0]
				for _, seq := range c.Seqs() {
					batch = append(batch, kvcache.Sequence{Seq: seq, Tokens: []int32{argmax(last[seq])}})
				}
				if s == 3 {
					c.Remove(1)
					delete(step, 1)
					batch = slices.DeleteFunc(batch, func(x kvcache.Sequence) bool { return x.Seq == 1 })
					batch = append(batch, kvcache.Sequence{Seq: 9, Tokens: prompt(9, 7, m.Vocab)})
					step[9] = -1
				}
				out, err := m.ForwardBatch(c, batch, false, 512)
				if err != nil {
					t.Fatal(err)
				}
				for i, b := range batch {
					step[b.Seq]++
					check(b.Seq, step[b.Seq], out[i][0], expect[b.Seq][step[b.Seq]])
					last[b.Seq] = out[i][0]
				}
			}
		})
	}
}

// KeepPrefix's rule, end to end: the logits after a new prompt equal a
// fresh run's, whatever the cache kept.
func TestDivergentPrompt(t *testing.T) {
	for _, name := range []string{"qwen35-small-q8_0", "qwen3-small-q8_0", "lfm2-small-q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := open(t, name)
			c, err := m.NewCache(decoder.CacheOptions{Capacity: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			held := prompt(1, 20, m.Vocab)
			if _, err := m.Forward(c, held, false); err != nil {
				t.Fatal(err)
			}
			for _, next := range [][]int32{
				append(slices.Clone(held[:12]), prompt(2, 5, m.Vocab)...), // diverges at 12
				append(slices.Clone(held[:12]), prompt(2, 9, m.Vocab)...), // continues the cached one
				slices.Clone(held[:12]),                                   // a prefix of it
			} {
				kept := c.KeepPrefix(0, held, next)
				if c.CanTruncate() != (name == "qwen3-small-q8_0") {
					t.Fatalf("%s: CanTruncate %v", name, c.CanTruncate())
				}
				got, err := m.Forward(c, next[kept:], false)
				if err != nil {
					t.Fatal(err)
				}
				want := alone(t, m, next, 0)[0]
				if d := maxDiff(got[0], want); d > togetherTol {
					t.Fatalf("after keeping %d of %d tokens: max|d| %.3g from a fresh run", kept, len(next), d)
				}
				t.Logf("%d cached, a prompt of %d: kept %d", len(held), len(next), kept)
				held = next
			}
		})
	}
}

// RunOptions.Scratch: the same logits, bit for bit, read into memory the
// model reuses, so that a decode step no longer allocates a vocabulary-
// sized row per sequence; a Run of several ubatches keeps each one's rows.
func TestScratchLogits(t *testing.T) {
	m := open(t, "qwen3-small-q8_0")
	run := func(scratch bool) (rows [][]float32, perStep uint64) {
		c, err := m.NewCache(decoder.CacheOptions{Capacity: 256, Sequences: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// A prompt in three ubatches of 8, every row's logits.
		in := []decoder.Input{{Sequence: kvcache.Sequence{Seq: 0, Tokens: prompt(1, 20, m.Vocab)}}}
		out, err := m.Run(c, in, decoder.RunOptions{All: true, MaxBatch: 8, Scratch: scratch})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range out[0].Logits {
			rows = append(rows, slices.Clone(r))
		}
		// Two sequences decoding together.
		in = append(in, decoder.Input{Sequence: kvcache.Sequence{Seq: 1, Tokens: prompt(2, 3, m.Vocab)}})
		const steps = 40
		var before, after runtime.MemStats
		for s := 0; s < steps+2; s++ {
			if s == 2 { // after the graph and the buffers exist
				runtime.ReadMemStats(&before)
			}
			out, err := m.Run(c, in, decoder.RunOptions{Scratch: scratch})
			if err != nil {
				t.Fatal(err)
			}
			for i := range in {
				l := out[i].Logits[len(out[i].Logits)-1]
				rows = append(rows, slices.Clone(l))
				in[i].Tokens = []int32{argmax(l)}
			}
		}
		runtime.ReadMemStats(&after)
		return rows, (after.TotalAlloc - before.TotalAlloc) / steps
	}
	plain, plainBytes := run(false)
	scratch, scratchBytes := run(true)
	if len(plain) != len(scratch) {
		t.Fatalf("%d rows with Scratch, %d without", len(scratch), len(plain))
	}
	for i := range plain {
		if !slices.Equal(plain[i], scratch[i]) {
			t.Fatalf("row %d differs with Scratch (max|d| %.3g)", i, maxDiff(plain[i], scratch[i]))
		}
	}
	row := uint64(4 * m.Vocab)
	t.Logf("bytes allocated per two-sequence decode step: %d without Scratch, %d with (a row of logits: %d)", plainBytes, scratchBytes, row)
	// Two rows a step fewer (the rest is the step's own bookkeeping).
	if scratchBytes > plainBytes || plainBytes-scratchBytes < 3*row/2 {
		t.Fatalf("allocated per step: %d bytes without Scratch, %d with; a row is %d", plainBytes, scratchBytes, row)
	}
}
