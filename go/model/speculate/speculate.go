// Package speculate is speculative decoding with an MTP (NextN) draft
// head: the head drafts up to Max tokens, the target model verifies them
// in one batched forward, the longest agreeing prefix is kept, and the
// caches are rolled back past the first rejected token (the target's
// attention cells by position, its recurrent states to those the
// verification kept of its last tokens: kvcache.Config.Rewind). Several
// sequences decode at once (GenerateMany): each step verifies all of them
// in one batch, each keeping its own agreeing prefix.
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

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/sample"
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

// Request is one sequence of GenerateMany.
type Request struct {
	Prompt  []int32
	Drafter Drafter
	Sampler *sample.Sampler // nil: greedy
	// Emit receives each generated token; returning false ends the
	// sequence.
	Emit func(int32) bool
}

// Generate decodes after prompt (sequence 0 of cache, which must be made
// with Rewind ≥ Max when the target has recurrent layers) with drafts from
// d, calling emit with each token; emit returning false stops.
func Generate(target *decoder.Model, cache *kvcache.Cache, d Drafter, prompt []int32, o Options, emit func(int32) bool) (Stats, error) {
	st, err := GenerateMany(target, cache, []Request{{Prompt: prompt, Drafter: d, Sampler: o.Sampler, Emit: emit}}, o)
	if len(st) == 0 {
		return Stats{}, err
	}
	return st[0], err
}

// seqState is one sequence's progress in GenerateMany.
type seqState struct {
	Request
	tok   int32     // the last token emitted, not yet in the cache
	hPrev []float32 // the target's hidden state of the token before tok
	st    Stats
	done  bool
}

// GenerateMany decodes after each request's prompt, request i as sequence
// i of cache (made for len(reqs) sequences, with Rewind ≥ Max when the
// target has recurrent layers), all of them verified together each step.
// Each prompt is prefilled alone, so that every sequence's tokens are
// those it would get decoded alone. o.Sampler and o.MaxTokens, IsEOG,
// IgnoreEOG apply to every request without a sampler of its own; the
// stats are per request (the decode time is the whole run's).
func GenerateMany(target *decoder.Model, cache *kvcache.Cache, reqs []Request, o Options) ([]Stats, error) {
	switch {
	case len(reqs) == 0:
		return nil, errors.New(target.Arch + ": no requests")
	case len(reqs) > cache.Sequences():
		return nil, fmt.Errorf("%s: %d requests, the cache holds %d sequences", target.Arch, len(reqs), cache.Sequences())
	case o.Max < 1:
		return nil, fmt.Errorf("%s: draft at least one token a step (-draft-max %d)", target.Arch, o.Max)
	case cache.Recurrent() && cache.MaxRewind() < o.Max:
		return nil, fmt.Errorf("%s: the cache can rewind %d token(s), not the %d drafted a step (decoder.CacheOptions.Rewind)", target.Arch, cache.MaxRewind(), o.Max)
	case o.Max >= cache.Capacity():
		return nil, fmt.Errorf("%s: %d draft tokens a step do not fit the %d-token context", target.Arch, o.Max, cache.Capacity())
	}
	seqs := make([]*seqState, len(reqs))
	for i, r := range reqs {
		switch {
		case len(r.Prompt) == 0:
			return nil, fmt.Errorf("%s: request %d has an empty prompt", target.Arch, i)
		case r.Drafter == nil:
			return nil, fmt.Errorf("%s: request %d has no drafter", target.Arch, i)
		case len(r.Prompt) >= cache.Capacity():
			return nil, fmt.Errorf("%s: request %d's %d prompt tokens fill the %d-token context", target.Arch, i, len(r.Prompt), cache.Capacity())
		}
		if r.Sampler == nil {
			r.Sampler = o.Sampler
		}
		if r.Sampler == nil {
			r.Sampler = sample.New(sample.Options{})
		}
		seqs[i] = &seqState{Request: r}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer target.ReleaseGraph()
	if o.Batch <= 0 {
		o.Batch = 512
	}
	var start time.Time // of decoding, after the prefills
	stats := func() []Stats {
		out := make([]Stats, len(seqs))
		for i, s := range seqs {
			out[i] = s.st
			if !start.IsZero() {
				out[i].Decode = time.Since(start)
			}
		}
		return out
	}
	// emitted records t for s; true when s is done.
	emitted := func(s *seqState, t int32) bool {
		s.st.Generated++
		switch {
		case !o.IgnoreEOG && o.IsEOG != nil && o.IsEOG(t),
			s.Emit != nil && !s.Emit(t),
			o.MaxTokens > 0 && s.st.Generated >= o.MaxTokens:
			s.done = true
		}
		return s.done
	}

	for i, s := range seqs {
		t0 := time.Now()
		out, err := target.Run(cache, []decoder.Input{{Sequence: kvcache.Sequence{Seq: i, Tokens: s.Prompt}}},
			decoder.RunOptions{Hidden: true, MaxBatch: o.Batch})
		if err != nil {
			return stats(), err
		}
		if err := s.Drafter.Accept(s.Prompt[0], s.Prompt[1:], make([]float32, target.Hidden), out[0].Hidden); err != nil {
			return stats(), err
		}
		s.st.PromptTokens = len(s.Prompt)
		s.st.Prefill = time.Since(t0)
		s.tok, s.hPrev = s.Sampler.Sample(out[0].Logits[0]), out[0].Hidden[len(out[0].Hidden)-1]
		emitted(s, s.tok)
	}
	start = time.Now()
	for {
		var active []int
		for i, s := range seqs {
			if !s.done && cache.Len(i) < cache.Capacity() {
				active = append(active, i)
			}
		}
		if len(active) == 0 {
			return stats(), nil
		}
		// As many drafts for every sequence (a recurrent model's batches
		// are equal): room for the step's tok and drafts, and no more
		// than the tokens still wanted.
		n := o.Max
		for _, i := range active {
			n = min(n, cache.Capacity()-cache.Len(i)-1)
			if o.MaxTokens > 0 {
				n = min(n, o.MaxTokens-seqs[i].st.Generated)
			}
		}
		drafts := make([][]int32, len(active))
		for k, i := range active {
			s := seqs[i]
			if n > 0 {
				d, err := s.Drafter.Draft(s.tok, s.hPrev, n)
				if err != nil {
					return stats(), err
				}
				drafts[k] = d
			}
		}
		n = 0
		if len(drafts[0]) > 0 {
			n = len(drafts[0])
			for _, d := range drafts {
				n = min(n, len(d))
			}
		}
		batch := make([]decoder.Input, len(active))
		for k, i := range active {
			drafts[k] = drafts[k][:n]
			batch[k] = decoder.Input{Sequence: kvcache.Sequence{Seq: i, Tokens: append([]int32{seqs[i].tok}, drafts[k]...)}}
		}
		out, err := target.Run(cache, batch, decoder.RunOptions{All: true, Hidden: true, MaxBatch: o.Batch, RowWise: true})
		if err != nil {
			return stats(), err
		}
		for k, i := range active {
			s := seqs[i]
			s.st.Steps++
			s.st.Drafted += n
			// Sample each position in order; stop at the first that
			// disagrees with the draft (its sample is the step's last
			// token).
			var kept []int32
			next := int32(-1)
			for j := 0; j <= n && !s.done; j++ {
				t := s.Sampler.Sample(out[k].Logits[j])
				emitted(s, t)
				if j == n || t != drafts[k][j] {
					next = t
					break
				}
				kept = append(kept, t)
			}
			s.st.Accepted += len(kept)
			// Roll back past the rejected drafts: their attention cells,
			// and the recurrent states to those after the last kept token.
			if err := cache.Rewind(i, n-len(kept)); err != nil {
				return stats(), err
			}
			if s.done {
				continue
			}
			hidden := out[k].Hidden[:len(kept)+1]
			if err := s.Drafter.Accept(s.tok, kept, s.hPrev, hidden); err != nil {
				return stats(), err
			}
			s.tok, s.hPrev = next, hidden[len(hidden)-1]
		}
	}
}
