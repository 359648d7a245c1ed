package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime"
	"time"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

func nowSeed() int64 { return time.Now().UnixNano() }

func runBench(args []string) error {
	fs := newFlags("bench", "[flags] MODEL",
		"Measures prompt processing (-p tokens in batches of -batch) and generation (-n tokens,\n"+
			"one at a time) of the GGUF model MODEL, -r times each, and prints llama-bench's table.\n"+
			"As llama-bench, the cache holds -p + -n tokens unless -ctx asks for more.")
	np := fs.Int("p", 512, "prompt tokens (0: skip)")
	ng := fs.Int("n", 128, "generated tokens (0: skip)")
	reps := fs.Int("r", 3, "repetitions")
	df := addDecoderFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("bench needs one model")
	}
	if *reps < 1 || *np < 0 || *ng < 0 {
		return usagef("-r must be positive, -p and -n not negative")
	}
	if *df.ctx < 1 {
		return usagef("-ctx %d: the context must hold at least one token", *df.ctx)
	}
	path := pos[0]
	// As llama-bench: a context of the prompt and the generated tokens
	// unless -ctx asks for more (a 4096-token cache's pages would count
	// in a peak memory that llama-bench's does not hold).
	ctxSet := false
	fs.Visit(func(f *flag.Flag) { ctxSet = ctxSet || f.Name == "ctx" })
	if !ctxSet || *df.ctx < *np+*ng {
		*df.ctx = max(*np+*ng, 1)
	}
	b, m, _, err := openDecoder(path, df)
	if err != nil {
		return err
	}
	defer b.Close()
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: *df.ctx, MaxBatch: *df.batch})
	if err != nil {
		return err
	}
	defer cache.Close()
	defer m.ReleaseGraph()
	// As llama.Model.Generate: keep ggml's calling thread on one OS thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := rand.New(rand.NewSource(1))
	tokens := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(r.Intn(m.Vocab))
		}
		return t
	}

	size, params := modelSize(path)
	backendName := "CPU"
	if p, _ := df.params(path, false); len(p.GPULayers) > 0 {
		backendName = "GPU"
		for _, d := range b.BackendDevices() {
			backendName = d.Library
			break
		}
	}
	fa := onOff(b.FlashAttention() == ml.FlashAttentionEnabled)
	// As llama-bench, the n_cpu_moe column only when experts are kept on
	// the CPU: the number of layers whose experts are.
	moeHead, moeAlign, moeCol := "", "", ""
	if df.cpuMoESet() {
		blocks, err := blockCount(path)
		if err != nil {
			return err
		}
		moeHead, moeAlign, moeCol = " n_cpu_moe |", " ---: |", fmt.Sprintf(" %d |", len(df.cpuExpertLayers(blocks)))
	}
	fmt.Printf("| model | size | params | backend | threads |%s fa | test | t/s |\n", moeHead)
	fmt.Printf("| --- | ---: | ---: | --- | ---: |%s ---: | ---: | ---: |\n", moeAlign)
	row := func(test string, rates []float64) {
		mean, sd := meanStd(rates)
		fmt.Printf("| %s %s | %s | %s | %s | %d |%s %s | %s | %.2f ± %.2f |\n", m.Arch, humanParams(params), humanSize(size),
			humanParams(params), backendName, b.Threads(), moeCol, fa, test, mean, sd)
	}
	if *np > 0 {
		// Warm-up, then the measured runs.
		var rates []float64
		for i := 0; i <= *reps; i++ {
			cache.Reset()
			prompt := tokens(*np)
			start := time.Now()
			if _, err := m.ForwardBatch(cache, []kvcache.Sequence{{Tokens: prompt}}, false, *df.batch); err != nil {
				return err
			}
			if i > 0 {
				rates = append(rates, float64(*np)/time.Since(start).Seconds())
			}
		}
		row(fmt.Sprintf("pp%d", *np), rates)
	}
	if *ng > 0 {
		// As llama-bench and the reference drivers: each step decodes a
		// random token and its logits are read back, not sampled (greedy
		// sampling of a 262,144-token vocabulary would add ~1% a token;
		// `generate` measures generation with its sampler).
		var rates []float64
		for i := 0; i <= *reps; i++ {
			cache.Reset()
			toks := tokens(*ng)
			start := time.Now()
			for _, tok := range toks {
				if _, err := m.Forward(cache, []int32{tok}, false); err != nil {
					return err
				}
			}
			if i > 0 {
				rates = append(rates, float64(*ng)/time.Since(start).Seconds())
			}
		}
		row(fmt.Sprintf("tg%d", *ng), rates)
	}
	return nil
}

func meanStd(x []float64) (float64, float64) {
	var s float64
	for _, v := range x {
		s += v
	}
	mean := s / float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	var q float64
	for _, v := range x {
		q += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(q / float64(len(x)-1))
}

// modelSize is the size of the tensor data and the number of weights.
func modelSize(path string) (bytes, params uint64) {
	g, err := gguf.Open(path)
	if err != nil {
		if st, err := os.Stat(path); err == nil {
			return uint64(st.Size()), 0
		}
		return 0, 0
	}
	for _, t := range g.Tensors {
		bytes += t.Size()
		params += t.Elements()
	}
	return bytes, params
}

func humanSize(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
}

func humanParams(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f K", float64(n)/1e3)
}
