package serve

import (
	"context"
	"github.com/ggml-rs/ggml-rs/go/internal/testmodel"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// modelPath is a generated model of make test.
func modelPath(t *testing.T, name string) string { return testmodel.Path(t, name) }

func openDecoder(t *testing.T, name string) *decoder.Model {
	t.Helper()
	b, err := ml.NewBackend(modelPath(t, name), ml.BackendParams{AllocMemory: true, NumThreads: 2, FlashAttention: ml.FlashAttentionEnabled})
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
	return m
}

func tokens(seed, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(3 + (seed*7919+i*104729)%(vocab-6))
	}
	return p
}

// alone decodes prompt greedily for n tokens, one sequence in a cache of
// its own: the reference for what the engine computes with others.
func alone(t *testing.T, m *decoder.Model, prompt []int32, n int) (toks []int32, rows [][]float32) {
	t.Helper()
	c, err := m.NewCache(decoder.CacheOptions{Capacity: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer m.ReleaseGraph()
	out, err := m.Forward(c, prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rows = append(rows, out[0])
		tok := sample.Greedy(out[0])
		toks = append(toks, tok)
		if len(toks) == n {
			return toks, rows
		}
		if out, err = m.Forward(c, []int32{tok}, false); err != nil {
			t.Fatal(err)
		}
	}
}

// noEOG lets every token through (the random models emit anything).
type noEOG struct{ decoder.TextDecoder }

func (noEOG) Encode(string, bool) []int32 { return nil }
func (noEOG) IsEOG(int32) bool            { return false }

type byteDecoder struct{}

func (byteDecoder) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = 'a' + byte(id%26)
	}
	return string(b)
}

// Same tolerance as the decoder's own several-sequences test: Q8_0 gives
// one row's numbers for several; what remains is summation order.
const engineTol = 1e-3

// TestEngineMatchesAlone runs requests through the engine the way a busy
// server does (more requests than slots, prompts longer than a step's
// budget prefilled in chunks beside decoding sequences, a client that
// goes away mid-generation, a follow-up prompt that extends an earlier
// conversation) and checks every row of logits each request sampled from
// against the same request decoded alone, for every architecture.
func TestEngineMatchesAlone(t *testing.T) {
	for _, name := range []string{"llama-small-q8_0", "qwen3-small-q8_0", "qwen3moe-small-q8_0", "gpt-oss-small-q8_0",
		"qwen3next-small-q8_0", "qwen35-small-q8_0", "qwen35moe-small-q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := openDecoder(t, name)
			type job struct {
				prompt []int32
				n      int
				cancel bool // the client leaves after a few tokens
			}
			jobs := []job{
				{prompt: tokens(1, 5, m.Vocab), n: 12},
				{prompt: tokens(2, 40, m.Vocab), n: 8}, // prefilled in 3 chunks
				{prompt: tokens(3, 9, m.Vocab), n: 10},
				{prompt: tokens(4, 3, m.Vocab), n: 20, cancel: true},
				{prompt: tokens(5, 17, m.Vocab), n: 6}, // waits for a slot
			}
			want := make([][]int32, len(jobs))
			wantRows := make([][][]float32, len(jobs))
			for i, j := range jobs {
				want[i], wantRows[i] = alone(t, m, j.prompt, j.n)
			}
			// A conversation's first turn, after the others, then its
			// next turn, which extends it.
			first := tokens(7, 6, m.Vocab)
			wantFirst, wantFirstRows := alone(t, m, first, 7)
			follow := append(append(append([]int32(nil), first...), wantFirst...), tokens(6, 4, m.Vocab)...)
			wantFollow, wantFollowRows := alone(t, m, follow, 5)

			e, err := newEngine(m, noEOG{byteDecoder{}}, engineConfig{Parallel: 3, Context: 96, Batch: 16, MaxQueue: 8})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			rows := map[*genRequest][][]float32{}
			// The client that leaves does so once 3 tokens were sampled:
			// cancelled from the engine's own loop, before it computes the
			// next step, so a fast machine cannot finish the job first.
			leaves := map[int]context.CancelFunc{} // by prompt length and first token
			key := func(p []int32) int { return len(p)<<20 | int(p[0]) }
			e.observe = func(r *genRequest, l []float32) {
				mu.Lock()
				rows[r] = append(rows[r], append([]float32(nil), l...))
				if cancel := leaves[key(r.prompt)]; cancel != nil && len(rows[r]) == 3 {
					cancel()
				}
				mu.Unlock()
			}
			e.start()
			defer e.close()

			greedy := sample.Options{}
			check := func(label string, r *genRequest, toks []int32, want []int32, wantRows [][]float32) {
				t.Helper()
				mu.Lock()
				got := rows[r]
				mu.Unlock()
				if len(got) < len(toks) {
					t.Fatalf("%s: %d rows observed for %d tokens", label, len(got), len(toks))
				}
				for k := range toks {
					var d float64
					for v := range got[k] {
						d = math.Max(d, math.Abs(float64(got[k][v]-wantRows[k][v])))
					}
					if d > engineTol || toks[k] != want[k] {
						t.Fatalf("%s: token %d: %d (max|d| %.3g from the run alone), want %d", label, k, toks[k], d, want[k])
					}
				}
			}
			run := func(ctx context.Context, prompt []int32, n int) (*genRequest, []int32, event) {
				r := newGenRequest(ctx, prompt, e.contextSize(), n, greedy, nil)
				if err := e.submit(r); err != nil {
					t.Fatal(err)
				}
				var last event
				for ev := range r.events {
					if ev.done {
						last = ev
						break
					}
				}
				return r, last.tokens, last
			}
			var wg sync.WaitGroup
			results := make([]struct {
				r    *genRequest
				toks []int32
				ev   event
			}, len(jobs))
			for i, j := range jobs {
				wg.Add(1)
				ctx, cancel := context.WithCancel(context.Background())
				if j.cancel {
					mu.Lock()
					leaves[key(j.prompt)] = cancel
					mu.Unlock()
				}
				go func() {
					defer wg.Done()
					defer cancel()
					results[i].r, results[i].toks, results[i].ev = run(ctx, j.prompt, j.n)
				}()
				time.Sleep(2 * time.Millisecond) // staggered arrivals
			}
			wg.Wait()
			for i, j := range jobs {
				res := results[i]
				if j.cancel {
					if res.ev.err == nil {
						t.Fatalf("job %d: cancelled, but ended with %q", i, res.ev.reason)
					}
					check("cancelled job", res.r, res.toks, want[i][:len(res.toks)], wantRows[i])
					continue
				}
				if res.ev.err != nil || res.ev.reason != "length" {
					t.Fatalf("job %d: ended with %q, %v", i, res.ev.reason, res.ev.err)
				}
				check("job", res.r, res.toks, want[i], wantRows[i])
			}
			// The next turn finds the first turn's tokens in its slot.
			r, toks, _ := run(context.Background(), first, 7)
			check("first turn", r, toks, wantFirst, wantFirstRows)
			r, toks, ev := run(context.Background(), follow, 5)
			check("next turn", r, toks, wantFollow, wantFollowRows)
			if reused := len(first) + len(wantFirst) - 1; ev.stats.CachedTokens != reused {
				t.Fatalf("next turn: %d prompt tokens reused from the cache, want %d (the first turn's)", ev.stats.CachedTokens, reused)
			}
		})
	}
}
