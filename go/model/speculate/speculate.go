// Package speculate is speculative decoding with an MTP (NextN) draft
// head: the head drafts up to Max tokens, the target model verifies them
// in one batched forward, the longest agreeing prefix is kept, and the
// caches are rolled back past the first rejected token (the target's
// attention cells by position, its recurrent states to those the
// verification kept of its last tokens: kvcache.Config.Rewind).
//
// Exactness: every emitted token is sampled by the caller's sampler from
// the target's logits at its position, given the tokens emitted before it,
// one sampler call per token in order, exactly as plain decoding samples
// (llama.cpp's sample-and-match verification). Drafts only decide how many
// positions one verification computes. So the output is the target
// model's, greedy or seeded, whatever the head proposes. It is plain
// decoding's token for token (on the CPU) because the verification is
// computed row-wise (decoder.RunOptions.RowWise): each position's logits
// are bit for bit those of a one-token step, and rejected drafts are
// rewound, never recomputed.
package speculate

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"ggmlrs/kvcache"
	"ggmlrs/model/decoder"
	"ggmlrs/sample"
)

// Drafter proposes draft tokens: Draft returns up to n tokens to follow
// tok at position pos, given hPrev, the target's hidden state at pos-1.
// Accept tells it which of them the target kept (with the target's hidden
// states of tok and the kept tokens), so it can roll its own state back.
type Drafter interface {
	Draft(tok int32, hPrev []float32, n int) ([]int32, error)
	Accept(tok int32, kept []int32, hPrev []float32, hidden [][]float32) error
}

// Options configure Generate.
type Options struct {
	decoder.GenerateOptions
	Max int // draft tokens per step (at least 1)
}

// Stats add the drafting counts to decoder.Stats.
type Stats struct {
	decoder.Stats
	Steps, Drafted, Accepted int
}

// AcceptanceRate is the share of drafted tokens the target kept.
func (s Stats) AcceptanceRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// Generate decodes after prompt (sequence 0 of cache, which must be made
// with Rewind ≥ Max when the target has recurrent layers) with drafts from
// d, calling emit with each token; emit returning false stops.
func Generate(target *decoder.Model, cache *kvcache.Cache, d Drafter, prompt []int32, o Options, emit func(int32) bool) (st Stats, err error) {
	if len(prompt) == 0 {
		return st, errors.New(target.Arch + ": empty prompt")
	}
	if o.Max < 1 {
		return st, fmt.Errorf("%s: draft at least one token a step (-draft-max %d)", target.Arch, o.Max)
	}
	if cache.Recurrent() && cache.MaxRewind() < o.Max {
		return st, fmt.Errorf("%s: the cache can rewind %d token(s), not the %d drafted a step (decoder.CacheOptions.Rewind)", target.Arch, cache.MaxRewind(), o.Max)
	}
	if o.Max >= cache.Capacity() {
		return st, fmt.Errorf("%s: %d draft tokens a step do not fit the %d-token context", target.Arch, o.Max, cache.Capacity())
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer target.ReleaseGraph()
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.Sampler == nil {
		o.Sampler = sample.New(sample.Options{})
	}
	run := func(tokens []int32, all bool) (decoder.Output, error) {
		out, err := target.Run(cache, []decoder.Input{{Sequence: kvcache.Sequence{Tokens: tokens}}},
			decoder.RunOptions{All: all, Hidden: true, MaxBatch: o.Batch, RowWise: all})
		if err != nil {
			return decoder.Output{}, err
		}
		return out[0], nil
	}

	start := time.Now()
	out, err := run(prompt, false)
	if err != nil {
		return st, err
	}
	if err = d.Accept(prompt[0], prompt[1:], make([]float32, target.Hidden), out.Hidden); err != nil {
		return st, err
	}
	st.PromptTokens = len(prompt)
	st.Prefill = time.Since(start)
	start = time.Now()
	defer func() { st.Decode = time.Since(start) }()

	logits, hPrev := out.Logits[0], out.Hidden[len(out.Hidden)-1]
	tok := o.Sampler.Sample(logits)
	done := func(t int32) bool { // emits t; true when generation ends
		st.Generated++
		if !o.IgnoreEOG && o.IsEOG != nil && o.IsEOG(t) {
			return true
		}
		if emit != nil && !emit(t) {
			return true
		}
		return o.MaxTokens > 0 && st.Generated >= o.MaxTokens
	}
	if done(tok) {
		return st, nil
	}
	for {
		// Room: the step writes tok and up to Max drafts.
		n := min(o.Max, cache.Capacity()-cache.Len(0)-1)
		if o.MaxTokens > 0 {
			n = min(n, o.MaxTokens-st.Generated)
		}
		if n < 0 {
			return st, nil
		}
		var drafts []int32
		if n > 0 {
			if drafts, err = d.Draft(tok, hPrev, n); err != nil {
				return st, err
			}
		}
		st.Steps++
		st.Drafted += len(drafts)
		out, err := run(append([]int32{tok}, drafts...), true)
		if err != nil {
			return st, err
		}
		// Sample each position in order; stop at the first that disagrees
		// with the draft (its sample is the step's last token).
		var emitted []int32
		stop := false
		for i := 0; i <= len(drafts) && !stop; i++ {
			t := o.Sampler.Sample(out.Logits[i])
			emitted = append(emitted, t)
			stop = done(t)
			if i == len(drafts) || t != drafts[i] {
				break
			}
		}
		kept := emitted[:len(emitted)-1] // the drafts the target agreed with
		st.Accepted += len(kept)
		// Roll back past the rejected drafts: their attention cells, and
		// the recurrent states to those after the last kept token.
		if err := cache.Rewind(0, len(drafts)-len(kept)); err != nil {
			return st, err
		}
		hidden := out.Hidden[:len(kept)+1]
		if stop {
			return st, nil
		}
		if err := d.Accept(tok, kept, hPrev, hidden); err != nil {
			return st, err
		}
		tok, hPrev = emitted[len(emitted)-1], hidden[len(hidden)-1]
		if cache.Len(0) >= cache.Capacity() {
			return st, nil
		}
	}
}
