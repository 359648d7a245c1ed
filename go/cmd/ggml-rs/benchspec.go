package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/speculate"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// specRow is one line of bench-spec's table: a drafter, its acceptance,
// its decode speed and plain decoding's, measured in alternation.
type specRow struct {
	Draft     string  `json:"draft"`
	Rate      float64 `json:"rate,omitempty"` // the oracle's per-token rate
	Accepted  float64 `json:"accepted"`       // share of drafted tokens kept
	PerStep   float64 `json:"tokens_per_step"`
	Steps     int     `json:"steps"` // of the measured rounds, as Drafted and AcceptedN
	Drafted   int     `json:"drafted"`
	AcceptedN int     `json:"accepted_tokens"`
	TPS       float64 `json:"tps"`
	SD        float64 `json:"sd"`
	PlainTPS  float64 `json:"plain_tps"`
	PlainSD   float64 `json:"plain_sd"`
	Ratio     float64 `json:"ratio"`
	Identical bool    `json:"identical"` // every round's tokens equal plain decoding's
}

func runBenchSpec(args []string) error {
	fs := newFlags("bench-spec", "[flags] MODEL",
		"Measures speculative decoding against plain greedy decoding of the same -n tokens after a\n"+
			"-p-token prompt (token i: (7919·i + 13) mod vocab, as llama-ref spec): with an oracle drafter that proposes the target's own greedy tokens,\n"+
			"each right with probability -rates (the pipeline alone), and with the model's MTP head\n"+
			"(qwen35, qwen35moe). -r rounds alternate plain and speculative decoding; the table gives\n"+
			"the acceptance rate, tokens/s of both, their ratio, and whether the tokens were identical.")
	np := fs.Int("p", 32, "prompt tokens")
	ng := fs.Int("n", 256, "generated tokens")
	reps := fs.Int("r", 3, "rounds (after a warm-up)")
	draftMax := fs.Int("draft-max", 3, "tokens drafted a step")
	ratesFlag := fs.String("rates", "0,0.5,0.8,1", "the oracle's per-token rates of right drafts (empty: none)")
	withMTP := fs.Bool("mtp", true, "also draft with the model's MTP head, when it has one")
	asJSON := fs.Bool("json", false, "print JSON rows instead of the table")
	df := addDecoderFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("bench-spec needs one model")
	}
	if *reps < 1 || *np < 1 || *ng < 1 {
		return usagef("-r, -p and -n must be positive")
	}
	if *draftMax < 1 || *draftMax > 63 {
		return usagef("-draft-max must be 1 to 63")
	}
	var rates []float64
	for _, f := range strings.Split(*ratesFlag, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r < 0 || r > 1 {
			return usagef("-rates: %q is not a rate from 0 to 1", f)
		}
		rates = append(rates, r)
	}
	if need := *np + *ng + *draftMax + 1; *df.ctx < need {
		*df.ctx = need
	}
	b, m, _, err := openDecoderFor(pos[0], df, decoder.CacheOptions{Capacity: *df.ctx, MaxBatch: *df.batch, Rewind: *draftMax})
	if err != nil {
		return err
	}
	defer b.Close()
	defer m.ReleaseGraph()
	var head *decoder.Model
	var headCache *kvcache.Cache
	if *withMTP {
		if head, err = model.NewMTP(b); err == nil {
			if headCache, err = head.NewCache(decoder.CacheOptions{Capacity: *df.ctx, MaxBatch: *df.batch}); err != nil {
				return err
			}
			defer headCache.Close()
			defer head.ReleaseGraph()
		} else {
			head = nil
		}
	}
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: *df.ctx, MaxBatch: *df.batch, Rewind: *draftMax})
	if err != nil {
		return err
	}
	defer cache.Close()

	// The prompt llama-ref spec uses too (the same drafts and tokens).
	prompt := make([]int32, *np)
	for i := range prompt {
		prompt[i] = int32((i*7919 + 13) % m.Vocab)
	}
	gopts := decoder.GenerateOptions{MaxTokens: *ng, Batch: *df.batch, IgnoreEOG: true}
	plain := func() ([]int32, float64, error) {
		cache.Reset()
		o := gopts
		o.Sampler = sample.New(sample.Options{})
		var out []int32
		st, err := m.Generate(cache, prompt, o, func(t int32) bool { out = append(out, t); return true })
		return out, float64(st.Generated) / st.Decode.Seconds(), err
	}
	spec := func(d speculate.Drafter) ([]int32, speculate.Stats, float64, error) {
		cache.Reset()
		o := gopts
		o.Sampler = sample.New(sample.Options{})
		var out []int32
		st, err := speculate.Generate(m, cache, d, prompt, speculate.Options{GenerateOptions: o, Max: *draftMax},
			func(t int32) bool { out = append(out, t); return true })
		return out, st, float64(st.Generated) / st.Decode.Seconds(), err
	}
	want, _, err := plain() // also the warm-up
	if err != nil {
		return err
	}
	type drafter struct {
		name string
		rate float64
		make func(round int) speculate.Drafter
	}
	var ds []drafter
	for _, rate := range rates {
		ds = append(ds, drafter{fmt.Sprintf("oracle %.0f%%", 100*rate), rate, func(round int) speculate.Drafter {
			return &speculate.Oracle{Tokens: want, Rate: rate, Vocab: m.Vocab, Seed: uint64(round + 1)}
		}})
	}
	if head != nil {
		ds = append(ds, drafter{"mtp", 0, func(int) speculate.Drafter {
			headCache.Reset()
			return &speculate.MTP{Head: head, Cache: headCache}
		}})
	}
	var rows []specRow
	for _, d := range ds {
		row := specRow{Draft: d.name, Rate: d.rate, Identical: true}
		var tps, plainTPS []float64
		var drafted, accepted, steps, generated int
		for round := 0; round <= *reps; round++ {
			got, st, t, err := spec(d.make(round))
			if err != nil {
				return fmt.Errorf("%s: %w", d.name, err)
			}
			_, pt, err := plain()
			if err != nil {
				return err
			}
			if round == 0 { // warm-up
				continue
			}
			row.Identical = row.Identical && slices.Equal(got, want)
			tps, plainTPS = append(tps, t), append(plainTPS, pt)
			drafted, accepted, steps, generated = drafted+st.Drafted, accepted+st.Accepted, steps+st.Steps, generated+st.Generated
		}
		row.TPS, row.SD = meanStd(tps)
		row.PlainTPS, row.PlainSD = meanStd(plainTPS)
		row.Ratio = row.TPS / row.PlainTPS
		row.Steps, row.Drafted, row.AcceptedN = steps, drafted, accepted
		if drafted > 0 {
			row.Accepted = float64(accepted) / float64(drafted)
		}
		if steps > 0 {
			row.PerStep = float64(generated) / float64(steps)
		}
		rows = append(rows, row)
	}
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"model": pos[0], "draft_max": *draftMax, "n": *ng, "threads": b.Threads(), "rows": rows})
	}
	fmt.Printf("%s, -draft-max %d, %d tokens after %d, %d threads, %d rounds (%s)\n", m.Arch, *draftMax, *ng, *np, b.Threads(), *reps, time.Now().Format("2006-01-02"))
	fmt.Println("| draft | accepted | tokens/step | t/s | plain t/s | ratio | identical |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rows {
		fmt.Printf("| %s | %.1f%% | %.2f | %.2f ± %.2f | %.2f ± %.2f | %.2f | %v |\n", r.Draft, 100*r.Accepted, r.PerStep, r.TPS, r.SD, r.PlainTPS, r.PlainSD, r.Ratio, r.Identical)
	}
	return nil
}
