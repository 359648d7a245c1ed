package llama_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// reference is the decoder's forward pass in float64 (keys and values
// rounded to F16, as the cache stores them): the logits of every token.
func reference(v llama.Variant, c tinymodel.TinyConfig, w map[string][]float32, ids []int32) [][]float64 {
	W := func(name string) []float64 {
		f := make([]float64, len(w[name]))
		for i, x := range w[name] {
			f[i] = float64(x)
		}
		return f
	}
	d, hd, ff := c.Hidden, c.Hidden/c.Heads, c.FeedForward
	const eps = 1e-6
	rms := func(x, g []float64) []float64 {
		var s float64
		for _, a := range x {
			s += a * a
		}
		s = 1 / math.Sqrt(s/float64(len(x))+eps)
		y := make([]float64, len(x))
		for i := range x {
			y[i] = x[i] * s * g[i]
		}
		return y
	}
	mul := func(m []float64, x []float64, in, out int) []float64 {
		y := make([]float64, out)
		for o := range y {
			for i := 0; i < in; i++ {
				y[o] += m[o*in+i] * x[i]
			}
		}
		return y
	}
	ropeHead := func(x []float64, pos int) {
		half := hd / 2
		for i := 0; i < half; i++ {
			th := float64(pos) * math.Pow(10000, -2*float64(i)/float64(hd))
			a, b := 2*i, 2*i+1
			if v.NeoX {
				a, b = i, i+half
			}
			x0, x1 := x[a], x[b]
			x[a] = x0*math.Cos(th) - x1*math.Sin(th)
			x[b] = x0*math.Sin(th) + x1*math.Cos(th)
		}
	}
	f16 := func(x float64) float64 { return float64(gguf.Float16To32(gguf.Float16(float32(x)))) }
	n := len(ids)
	emb := W("token_embd.weight")
	x := make([][]float64, n)
	for t, id := range ids {
		x[t] = slices.Clone(emb[int(id)*d : int(id+1)*d])
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		q, k, vv := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for t := range x {
			h := rms(x[t], W(p+"attn_norm.weight"))
			q[t] = mul(W(p+"attn_q.weight"), h, d, hd*c.Heads)
			k[t] = mul(W(p+"attn_k.weight"), h, d, hd*c.KVHeads)
			vv[t] = mul(W(p+"attn_v.weight"), h, d, hd*c.KVHeads)
			for hh := 0; hh < c.Heads; hh++ {
				qh := q[t][hh*hd : (hh+1)*hd]
				if v.QKNorm {
					copy(qh, rms(qh, W(p+"attn_q_norm.weight")))
				}
				ropeHead(qh, t)
			}
			for hh := 0; hh < c.KVHeads; hh++ {
				kh := k[t][hh*hd : (hh+1)*hd]
				if v.QKNorm {
					copy(kh, rms(kh, W(p+"attn_k_norm.weight")))
				}
				ropeHead(kh, t)
			}
			for i := range k[t] {
				k[t][i], vv[t][i] = f16(k[t][i]), f16(vv[t][i])
			}
		}
		for t := range x {
			a := make([]float64, hd*c.Heads)
			for hh := 0; hh < c.Heads; hh++ {
				g := hh / (c.Heads / c.KVHeads)
				s := make([]float64, t+1)
				m := math.Inf(-1)
				for u := 0; u <= t; u++ {
					for j := 0; j < hd; j++ {
						s[u] += q[t][hh*hd+j] * k[u][g*hd+j]
					}
					s[u] /= math.Sqrt(float64(hd))
					m = math.Max(m, s[u])
				}
				var z float64
				for u := range s {
					s[u] = math.Exp(s[u] - m)
					z += s[u]
				}
				for u := range s {
					for j := 0; j < hd; j++ {
						a[hh*hd+j] += s[u] / z * vv[u][g*hd+j]
					}
				}
			}
			o := mul(W(p+"attn_output.weight"), a, hd*c.Heads, d)
			for i := range o {
				o[i] += x[t][i]
			}
			h := rms(o, W(p+"ffn_norm.weight"))
			gt, up := mul(W(p+"ffn_gate.weight"), h, d, ff), mul(W(p+"ffn_up.weight"), h, d, ff)
			for i := range gt {
				gt[i] = gt[i] / (1 + math.Exp(-gt[i])) * up[i]
			}
			y := mul(W(p+"ffn_down.weight"), gt, ff, d)
			for i := range y {
				y[i] += o[i]
			}
			x[t] = y
		}
	}
	out := "output.weight"
	if c.Tied {
		out = "token_embd.weight"
	}
	vocab := len(w["token_embd.weight"]) / d
	logits := make([][]float64, n)
	for t := range x {
		logits[t] = mul(W(out), rms(x[t], W("output_norm.weight")), d, vocab)
	}
	return logits
}

func open(t *testing.T, v llama.Variant, c tinymodel.TinyConfig, flash bool) (*decoder.Model, map[string][]float32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	w, err := tinymodel.WriteTiny(path, v, c, 42)
	if err != nil {
		t.Fatal(err)
	}
	p := ml.BackendParams{AllocMemory: true, NumThreads: 2, FlashAttention: ml.FlashAttentionDisabled}
	if flash {
		p.FlashAttention = ml.FlashAttentionEnabled
	}
	b, err := ml.NewBackend(path, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := b.Load(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	m, err := llama.New(b, v)
	if err != nil {
		t.Fatal(err)
	}
	return m, w
}

func closeEnough(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	var scale, worst float64
	for _, x := range want {
		scale = math.Max(scale, math.Abs(x))
	}
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[i])-want[i]))
	}
	if len(got) != len(want) || worst > 1e-3*scale {
		t.Fatalf("%s: max error %.3g (scale %.3g), lengths %d, %d", what, worst, scale, len(got), len(want))
	}
}

func TestForwardMatchesReference(t *testing.T) {
	ids := []int32{298, 5, 77, 260, 261, 120, 33, 290, 8, 199, 42}
	for _, v := range []llama.Variant{llama.Llama, llama.Qwen3} {
		for _, c := range []tinymodel.TinyConfig{tinymodel.DefaultTiny, {Layers: 2, Hidden: 64, Heads: 4, KVHeads: 4, FeedForward: 96, Tied: true}} {
			for _, flash := range []bool{false, true} {
				name := fmt.Sprintf("%s/kv%d/tied=%v/flash=%v", v.Arch, c.KVHeads, c.Tied, flash)
				t.Run(name, func(t *testing.T) {
					m, w := open(t, v, c, flash)
					want := reference(v, c, w, ids)
					// Whole prompt in one batch, all logits.
					cache := newCache(t, m, 64)
					defer cache.Close()
					got, err := m.Forward(cache, ids, true)
					if err != nil {
						t.Fatal(err)
					}
					for i := range ids {
						closeEnough(t, fmt.Sprintf("prefill token %d", i), got[i], want[i])
					}
					// Token by token through the cache, then in uneven batches.
					for _, batch := range []int{1, 4} {
						cache.Reset()
						for i := 0; i < len(ids); i += batch {
							end := min(i+batch, len(ids))
							got, err := m.Forward(cache, ids[i:end], false)
							if err != nil {
								t.Fatal(err)
							}
							closeEnough(t, fmt.Sprintf("batch %d, token %d", batch, end-1), got[0], want[end-1])
						}
					}
				})
			}
		}
	}
}

func TestGenerate(t *testing.T) {
	m, _ := open(t, llama.Llama, tinymodel.DefaultTiny, false)
	tok, err := decoder.NewTokenizer(m.Backend().Config())
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode("hello world, the", true)
	if prompt[0] != 298 {
		t.Fatalf("no BOS: %v", prompt)
	}
	run := func(o sample.Options, batch int) []int32 {
		cache := newCache(t, m, 128)
		defer cache.Close()
		var out []int32
		st, err := m.Generate(cache, prompt, decoder.GenerateOptions{MaxTokens: 20, Batch: batch, Sampler: sample.New(o), IgnoreEOG: true},
			func(id int32) bool { out = append(out, id); return true })
		if err != nil {
			t.Fatal(err)
		}
		if st.Generated != 20 || len(out) != 20 || st.PromptTokens != len(prompt) {
			t.Fatalf("stats %+v, %d tokens", st, len(out))
		}
		return out
	}
	g1, g2 := run(sample.Options{}, 512), run(sample.Options{}, 3)
	if !slices.Equal(g1, g2) {
		t.Fatalf("greedy generation differs between runs/batch sizes:\n%v\n%v", g1, g2)
	}
	so := sample.Options{Temperature: 1.5, TopK: 40, TopP: 0.95, Seed: 7}
	s1, s2 := run(so, 512), run(so, 512)
	if !slices.Equal(s1, s2) {
		t.Fatalf("seeded sampling is not reproducible:\n%v\n%v", s1, s2)
	}
	so.Seed = 8
	if s3 := run(so, 512); slices.Equal(s1, s3) {
		t.Fatalf("different seeds gave the same tokens: %v", s1)
	}
	if s1Equal := slices.Equal(s1, g1); s1Equal {
		t.Logf("sampled equals greedy (possible but unlikely)")
	}
	_ = tok.Decode(g1)
}

// A one-token step reuses the previous step's graph when the cache window
// allows it; the logits must be exactly those of a freshly built graph,
// across a window boundary (the cache pads to 256), a Reset, a second
// cache used in between, and a closed cache.
func TestDecodeGraphReuse(t *testing.T) {
	for _, flash := range []bool{false, true} {
		t.Run(fmt.Sprintf("flash=%v", flash), func(t *testing.T) {
			m, _ := open(t, llama.Qwen3, tinymodel.DefaultTiny, flash)
			ids := make([]int32, 300)
			for i := range ids {
				ids[i] = int32((i*37 + 11) % m.Vocab)
			}
			steps := func(reuse bool, cache *kvcache.Cache, other *kvcache.Cache, from, to int) [][]float32 {
				m.NoGraphReuse = !reuse
				var rows [][]float32
				for i := from; i < to; i++ {
					out, err := m.Forward(cache, ids[i:i+1], false)
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, out[0])
					if other != nil && i%50 == 7 {
						// Another sequence in between: the kept graph is not its.
						if _, err := m.Forward(other, ids[i:i+1], false); err != nil {
							t.Fatal(err)
						}
					}
				}
				return rows
			}
			a := newCache(t, m, 512)
			defer a.Close()
			other := newCache(t, m, 512)
			defer other.Close()
			want := steps(false, a, nil, 0, len(ids))
			a.Reset()
			got := steps(true, a, other, 0, len(ids))
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("step %d: reused graph gives different logits", i)
				}
			}
			// After a Reset the kept graph is not reused blindly.
			a.Reset()
			again := steps(true, a, nil, 0, 3)
			for i := range again {
				if !slices.Equal(again[i], want[i]) {
					t.Fatalf("after Reset, step %d differs", i)
				}
			}
			// A closed cache: the next step on a new cache builds afresh.
			a.Close()
			b := newCache(t, m, 512)
			defer b.Close()
			fresh := steps(true, b, nil, 0, 3)
			for i := range fresh {
				if !slices.Equal(fresh[i], want[i]) {
					t.Fatalf("new cache, step %d differs", i)
				}
			}
			m.ReleaseGraph()
		})
	}
}

// Forward on different caches from several goroutines gives each sequence
// the logits it gets alone (the kept decode graph is shared state).
func TestConcurrentDecode(t *testing.T) {
	m, _ := open(t, llama.Llama, tinymodel.DefaultTiny, true)
	seq := func(k int) []int32 {
		ids := make([]int32, 40)
		for i := range ids {
			ids[i] = int32((i*13 + k*7 + 3) % m.Vocab)
		}
		return ids
	}
	run := func(ids []int32) [][]float32 {
		cache := newCache(t, m, 64)
		defer cache.Close()
		rows, err := decodeEach(m, cache, ids)
		if err != nil {
			t.Error(err) // may run in a goroutine: no Fatal
		}
		return rows
	}
	const n = 3
	want := make([][][]float32, n)
	for k := range want {
		want[k] = run(seq(k))
	}
	got := make([][][]float32, n)
	var wg sync.WaitGroup
	for k := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[k] = run(seq(k))
		}()
	}
	wg.Wait()
	m.ReleaseGraph()
	for k := range want {
		for i := range want[k] {
			if i >= len(got[k]) || !slices.Equal(got[k][i], want[k][i]) {
				t.Fatalf("sequence %d, step %d: concurrent logits differ", k, i)
			}
		}
	}
}

// decodeEach feeds ids one at a time through cache, as generation does,
// and returns each step's logits.
func decodeEach(m *decoder.Model, cache *kvcache.Cache, ids []int32) ([][]float32, error) {
	var rows [][]float32
	for i := range ids {
		out, err := m.Forward(cache, ids[i:i+1], false)
		if err != nil {
			return rows, err
		}
		rows = append(rows, out[0])
	}
	return rows, nil
}

// newCache makes a one-sequence cache of n tokens, closed with the test.
func newCache(t testing.TB, m *decoder.Model, n int) *kvcache.Cache {
	t.Helper()
	c, err := m.NewCache(decoder.CacheOptions{Capacity: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
