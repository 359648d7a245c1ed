package speculate_test

// Exactness of speculative decoding: on every generated Qwen3.5 model
// (qwen35, qwen35moe; F32, F16, Q8_0, Q4_0) the tokens generated with drafts
// are those plain decoding generates, token for token, greedy and with a
// seeded sampler (temperature 0.8, top-k 40, top-p 0.95), with the
// model's own MTP head drafting (which the target rejects almost always on
// random weights: the rewind path) and with an oracle drafting the
// target's own tokens at per-token rates 100%, 80% and 50% (full and
// partial acceptance). 300 tokens after a 12-token prompt: past position
// 256, where a one-token step's attention history grows to 512 cells and
// the CPU's flash attention splits it over threads.
//
// What makes it exact: the verification batch is computed row-wise
// (decoder.RunOptions.RowWise: one-row matrix products wherever a batch
// could change a row's bits, as for float weights on the CPU, each token's
// attention over the history a one-token step has), so each position's
// logits are bit for bit a one-token step's; the rejected drafts are
// rewound (kvcache.Cache.Rewind), never recomputed; and the caller's
// sampler draws once per emitted token, in order, from the target's
// logits for that position (see the package comment).

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/speculate"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

const genTokens = 300

func open(t *testing.T, name string) (ml.Backend, *decoder.Model) {
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
	return b, m
}

func sampler(greedy bool) *sample.Sampler {
	if greedy {
		return sample.New(sample.Options{})
	}
	return sample.New(sample.Options{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 42})
}

var promptTokens = []int32{1, 17, 42, 99, 250, 7, 311, 5, 123, 64, 400, 33}

func plain(t *testing.T, m *decoder.Model, greedy bool) []int32 {
	t.Helper()
	c, err := m.NewCache(decoder.CacheOptions{Capacity: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []int32
	if _, err := m.Generate(c, promptTokens, decoder.GenerateOptions{MaxTokens: genTokens, Sampler: sampler(greedy), IgnoreEOG: true},
		func(id int32) bool { out = append(out, id); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

func speculative(t *testing.T, m *decoder.Model, d speculate.Drafter, greedy bool, max int) ([]int32, speculate.Stats) {
	t.Helper()
	c, err := m.NewCache(decoder.CacheOptions{Capacity: 1024, Rewind: max})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []int32
	st, err := speculate.Generate(m, c, d, promptTokens,
		speculate.Options{GenerateOptions: decoder.GenerateOptions{MaxTokens: genTokens, Sampler: sampler(greedy), IgnoreEOG: true}, Max: max},
		func(id int32) bool { out = append(out, id); return true })
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestSpeculativeIsExact(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		for _, typ := range []string{"f32", "f16", "q8_0", "q4_0"} {
			name := arch + "-small-" + typ
			t.Run(name, func(t *testing.T) {
				b, m := open(t, name)
				head, err := model.NewMTP(b)
				if err != nil {
					t.Fatal(err)
				}
				for _, greedy := range []bool{true, false} {
					mode := "greedy"
					if !greedy {
						mode = "seeded"
					}
					want := plain(t, m, greedy)
					if len(want) != genTokens {
						t.Fatalf("plain decoding gave %d tokens", len(want))
					}
					hc, err := head.NewCache(decoder.CacheOptions{Capacity: 1024})
					if err != nil {
						t.Fatal(err)
					}
					got, st := speculative(t, m, &speculate.MTP{Head: head, Cache: hc}, greedy, 3)
					hc.Close()
					t.Logf("%s, MTP head: %d steps, acceptance %.1f%%", mode, st.Steps, 100*st.AcceptanceRate())
					if !slices.Equal(got, want) {
						t.Errorf("%s, MTP drafts: differs from plain decoding at token %d of %d", mode, firstDiff(got, want), len(want))
					}
					for _, rate := range []float64{1, 0.8, 0.5} {
						o := &speculate.Oracle{Tokens: want, Rate: rate, Vocab: m.Vocab, Seed: 7}
						got, st := speculative(t, m, o, greedy, 3)
						t.Logf("%s, oracle %.0f%%: %d steps, acceptance %.1f%%", mode, 100*rate, st.Steps, 100*st.AcceptanceRate())
						if !slices.Equal(got, want) {
							t.Errorf("%s, oracle at %.0f%%: differs from plain decoding at token %d of %d", mode, 100*rate, firstDiff(got, want), len(want))
						}
						if rate == 1 && st.AcceptanceRate() < 0.95 {
							t.Errorf("oracle at 100%%: %d of %d drafts accepted", st.Accepted, st.Drafted)
						}
					}
				}
			})
		}
	}
}

// With the delta rule from primitives (the path of backends without the
// fused kernel), the states kept for rewinding come from token-wise steps:
// still plain decoding's tokens.
func TestSpeculativeIsExactWithPrimitiveDeltaNet(t *testing.T) {
	_, m := open(t, "qwen35-small-q8_0")
	n := 0
	for _, bl := range m.Blocks {
		if dn, ok := bl.Mixer.(*nn.DeltaNet); ok {
			dn.Primitive = true
			n++
		}
	}
	if n == 0 {
		t.Fatal("no delta-net layers")
	}
	want := plain(t, m, true)
	for _, rate := range []float64{0.8, 0.3} {
		o := &speculate.Oracle{Tokens: want, Rate: rate, Vocab: m.Vocab, Seed: 3}
		got, st := speculative(t, m, o, true, 4)
		if !slices.Equal(got, want) {
			t.Errorf("oracle at %.0f%%: differs from plain decoding at token %d of %d", 100*rate, firstDiff(got, want), len(want))
		}
		if st.Accepted == 0 || st.Accepted == st.Drafted {
			t.Errorf("oracle at %.0f%%: %d of %d accepted: both paths (rewind and not) should be taken", 100*rate, st.Accepted, st.Drafted)
		}
	}
}

// A Mamba-2 hybrid (Nemotron-H) keeps its scan's states for rewinding by
// scanning a verified batch's last tokens one at a time: still plain
// decoding's tokens, drafts accepted in part and in whole.
func TestSpeculativeIsExactOnMamba2(t *testing.T) {
	for _, name := range []string{"nemotron_h-small-q8_0", "nemotron_h-small-f16", "nemotron_h_moe-small-q8_0"} {
		t.Run(name, func(t *testing.T) {
			_, m := open(t, name)
			want := plain(t, m, true)
			for _, rate := range []float64{1, 0.8, 0.3} {
				o := &speculate.Oracle{Tokens: want, Rate: rate, Vocab: m.Vocab, Seed: 5}
				got, st := speculative(t, m, o, true, 4)
				t.Logf("oracle %.0f%%: %d steps, acceptance %.1f%%", 100*rate, st.Steps, 100*st.AcceptanceRate())
				if !slices.Equal(got, want) {
					t.Errorf("oracle at %.0f%%: differs from plain decoding at token %d of %d", 100*rate, firstDiff(got, want), len(want))
				}
				if rate < 1 && (st.Accepted == 0 || st.Accepted == st.Drafted) {
					t.Errorf("oracle at %.0f%%: %d of %d accepted: both paths (rewind and not) should be taken", 100*rate, st.Accepted, st.Drafted)
				}
			}
		})
	}
}

// Several sequences at once: each keeps its own agreeing prefix and rewinds
// on its own, one ends early, and every sequence's tokens are those it
// gets decoded alone (greedy, or seeded with its own sampler).
func TestSpeculativeManySequences(t *testing.T) {
	for _, name := range []string{"qwen35moe-small-q8_0", "qwen35-small-f16"} {
		t.Run(name, func(t *testing.T) {
			b, m := open(t, name)
			prompts := [][]int32{promptTokens, {5, 9, 500, 3}, append(slices.Clone(promptTokens), 77, 78, 79, 80, 81)}
			const n, stopAt = 270, 90
			alone := func(p []int32, s *sample.Sampler) []int32 {
				c, err := m.NewCache(decoder.CacheOptions{Capacity: 1024})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				var out []int32
				if _, err := m.Generate(c, p, decoder.GenerateOptions{MaxTokens: n, Sampler: s, IgnoreEOG: true},
					func(id int32) bool { out = append(out, id); return true }); err != nil {
					t.Fatal(err)
				}
				return out
			}
			// Sequence 1 ends first: then sequences 0 and 2 (slots 0 and 2)
			// are verified together, their states gathered and scattered.
			want := [][]int32{alone(prompts[0], sampler(true)), alone(prompts[1], sampler(false))[:stopAt], alone(prompts[2], sampler(true))}

			head, err := model.NewMTP(b)
			if err != nil {
				t.Fatal(err)
			}
			hc, err := head.NewCache(decoder.CacheOptions{Capacity: 3 * 1024, Sequences: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer hc.Close()
			c, err := m.NewCache(decoder.CacheOptions{Capacity: 3 * 1024, Sequences: 3, Rewind: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got := make([][]int32, 3)
			emit := func(i int) func(int32) bool {
				return func(id int32) bool {
					got[i] = append(got[i], id)
					return i != 1 || len(got[i]) < stopAt
				}
			}
			reqs := []speculate.Request{
				{Prompt: prompts[0], Drafter: &speculate.MTP{Head: head, Cache: hc, Seq: 0}, Emit: emit(0)},
				{Prompt: prompts[1], Drafter: &speculate.Oracle{Tokens: want[1], Rate: 0.8, Vocab: m.Vocab, Seed: 5},
					Sampler: sampler(false), Emit: emit(1)},
				{Prompt: prompts[2], Drafter: &speculate.Oracle{Tokens: want[2], Rate: 0.5, Vocab: m.Vocab, Seed: 6},
					Emit: emit(2)},
			}
			st, err := speculate.GenerateMany(m, c, reqs, speculate.Options{GenerateOptions: decoder.GenerateOptions{MaxTokens: n, IgnoreEOG: true}, Max: 3})
			if err != nil {
				t.Fatal(err)
			}
			for i := range reqs {
				t.Logf("sequence %d: %d steps, acceptance %.1f%%", i, st[i].Steps, 100*st[i].AcceptanceRate())
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("sequence %d: differs from decoding it alone at token %d of %d (got %d)", i, firstDiff(got[i], want[i]), len(want[i]), len(got[i]))
				}
			}
			if st[1].Accepted == 0 || st[2].Accepted == 0 {
				t.Errorf("the oracles' drafts were never accepted: %+v", st)
			}
		})
	}
}

// A prefill that also returns every row's hidden state (speculative
// decoding's, for the MTP head) gives the last row's logits bit for bit as
// a plain prefill does, whose last feed-forward runs on that row alone.
func TestPrefillWithHiddenStatesIsExact(t *testing.T) {
	for _, name := range []string{"qwen3-small-f16", "llama-small-f16", "qwen35-small-f16", "qwen35moe-small-f16", "qwen35moe-small-q8_0"} {
		_, m := open(t, name)
		prompt := make([]int32, 100)
		for i := range prompt {
			prompt[i] = int32((i*37 + 11) % m.Vocab)
		}
		run := func(hidden bool) []float32 {
			c, err := m.NewCache(decoder.CacheOptions{Capacity: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			out, err := m.Run(c, []decoder.Input{{Sequence: kvcache.Sequence{Tokens: prompt}}}, decoder.RunOptions{Hidden: hidden})
			if err != nil {
				t.Fatal(err)
			}
			if hidden && len(out[0].Hidden) != len(prompt) {
				t.Fatalf("%d hidden states for %d tokens", len(out[0].Hidden), len(prompt))
			}
			return out[0].Logits[0]
		}
		if plain, with := run(false), run(true); !slices.Equal(plain, with) {
			t.Errorf("%s: the last row's logits differ with hidden states wanted", name)
		}
	}
}

// Any decoder verifies drafts exactly, here with an oracle: llama and qwen3
// (F16, whose several-row matmuls take llamafile's kernels; Q8_0), and
// LFM2, whose short convolutions keep the states of the last tokens to
// rewind past rejected drafts, after a 100-token prompt, greedy and
// seeded.
func TestSpeculativeIsExactOnDenseModels(t *testing.T) {
	for _, name := range []string{"qwen3-small-f16", "llama-small-f16", "llama-small-q8_0", "lfm2-small-f16", "lfm2-small-q8_0", "gemma3n-small-f16", "gemma3n-small-q8_0"} {
		_, m := open(t, name)
		prompt := make([]int32, 100)
		for i := range prompt {
			prompt[i] = int32((i*37 + 11) % m.Vocab)
		}
		rewind := 0
		if m.Recurrent() {
			rewind = 4
		}
		for _, greedy := range []bool{true, false} {
			c, err := m.NewCache(decoder.CacheOptions{Capacity: 512, Rewind: rewind})
			if err != nil {
				t.Fatal(err)
			}
			var want []int32
			if _, err := m.Generate(c, prompt, decoder.GenerateOptions{MaxTokens: 200, Sampler: sampler(greedy), IgnoreEOG: true},
				func(id int32) bool { want = append(want, id); return true }); err != nil {
				t.Fatal(err)
			}
			c.Reset()
			var got []int32
			o := &speculate.Oracle{Tokens: want, Rate: 0.8, Vocab: m.Vocab, Seed: 9}
			st, err := speculate.Generate(m, c, o, prompt, speculate.Options{GenerateOptions: decoder.GenerateOptions{MaxTokens: 200, Sampler: sampler(greedy), IgnoreEOG: true}, Max: 4},
				func(id int32) bool { got = append(got, id); return true })
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (greedy %v): differs from plain decoding at token %d of %d", name, greedy, firstDiff(got, want), len(want))
			}
			if st.Accepted == 0 || st.Accepted == st.Drafted {
				t.Errorf("%s: %d of %d drafts accepted", name, st.Accepted, st.Drafted)
			}
		}
	}
}
