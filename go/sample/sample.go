// Package sample picks the next token from a row of logits: greedily, or
// by temperature sampling restricted by top-k, top-p and min-p, after
// llama.cpp's repetition penalties.
package sample

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"sort"

	"github.com/ggml-rs/ggml-rs/go/grammar"
)

// Options configure a Sampler. Temperature <= 0 means greedy.
type Options struct {
	Temperature float32
	TopK        int     // keep the k most likely tokens (<= 0: all)
	TopP        float32 // keep the smallest set with this probability mass (<= 0 or >= 1: all)
	MinP        float32 // drop tokens less likely than MinP times the most likely (<= 0: none)
	Seed        int64

	// Penalties over the last RepeatLastN accepted tokens (Accept), as
	// llama.cpp's penalties sampler: a seen token's logit is divided by
	// RepeatPenalty when positive and multiplied by it otherwise, then
	// lowered by FrequencyPenalty per occurrence and PresencePenalty once.
	// RepeatPenalty 0 or 1 and zero penalties change nothing.
	RepeatPenalty    float32
	RepeatLastN      int // tokens looked back at (0: none; -1: all accepted)
	FrequencyPenalty float32
	PresencePenalty  float32
}

// Sampler draws tokens; its random source is seeded once, so a sequence
// of draws is reproducible.
type Sampler struct {
	Options
	// Grammar, when set, constrains the tokens drawn (structured output):
	// Sample never picks a token it refuses, and advances it over each
	// pick. As llama.cpp's common sampler, the unconstrained pick is
	// checked first, and only when the grammar refuses it are the refused
	// tokens' logits set to -Inf and the pick made again (the same tokens
	// for greedy decoding; a full mask costs more than one check). After a
	// grammar error (its limits, or no token able to continue) Sample
	// returns -1 and Err says why.
	Grammar *grammar.State
	err     error
	rng     *rand.Rand
	history []int32 // accepted tokens, for the penalties
}

// Err is the grammar's error that made Sample return -1, or nil.
func (s *Sampler) Err() error { return s.err }

// Validate reports options that make no sense: a temperature that is not
// a finite number ≥ 0, a negative top-k, a top-p or min-p that is not a
// number in [0, 1], a negative or non-finite repeat penalty, penalties
// that are not finite numbers in [-2, 2] (OpenAI's range), a look-back
// below -1. (Sample itself reads 0 as "off" for each.)
func (o Options) Validate() error {
	t, p, mp, rp := float64(o.Temperature), float64(o.TopP), float64(o.MinP), float64(o.RepeatPenalty)
	switch {
	case math.IsNaN(t) || math.IsInf(t, 0) || t < 0:
		return fmt.Errorf("temperature %v: a number ≥ 0 (0: greedy)", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("top-k %d: 0 (all tokens) or more", o.TopK)
	case math.IsNaN(p) || p < 0 || p > 1:
		return fmt.Errorf("top-p %v: a probability mass in [0, 1] (0 or 1: all tokens)", o.TopP)
	case math.IsNaN(mp) || mp < 0 || mp > 1:
		return fmt.Errorf("min-p %v: a fraction in [0, 1] (0: off)", o.MinP)
	case math.IsNaN(rp) || math.IsInf(rp, 0) || rp < 0:
		return fmt.Errorf("repeat penalty %v: a number ≥ 0 (1: off)", o.RepeatPenalty)
	case o.RepeatLastN < -1:
		return fmt.Errorf("repeat look-back %d: -1 (all tokens), 0 (off) or more", o.RepeatLastN)
	}
	for _, pen := range []struct {
		name string
		v    float32
	}{{"frequency penalty", o.FrequencyPenalty}, {"presence penalty", o.PresencePenalty}} {
		if v := float64(pen.v); math.IsNaN(v) || v < -2 || v > 2 {
			return fmt.Errorf("%s %v: a number in [-2, 2]", pen.name, pen.v)
		}
	}
	return nil
}

// New makes a sampler.
func New(o Options) *Sampler {
	return &Sampler{Options: o, rng: rand.New(rand.NewSource(o.Seed))}
}

// Accept records a token of the sequence (prompt or generated) for the
// repetition penalties; without penalties it keeps nothing.
func (s *Sampler) Accept(ids ...int32) {
	if !s.penalizes() {
		return
	}
	s.history = append(s.history, ids...)
	// Keep the look-back window (and some slack, to copy seldom).
	if n := s.RepeatLastN; n > 0 && len(s.history) > 4*n+256 {
		s.history = append(s.history[:0], s.history[len(s.history)-n:]...)
	}
}

func (s *Sampler) penalizes() bool {
	return s.RepeatLastN != 0 && (s.RepeatPenalty != 0 && s.RepeatPenalty != 1 || s.FrequencyPenalty != 0 || s.PresencePenalty != 0)
}

// penalize returns logits with the penalties applied (a copy, when any
// applies).
func (s *Sampler) penalize(logits []float32) []float32 {
	if !s.penalizes() || len(s.history) == 0 {
		return logits
	}
	seen := s.history
	if n := s.RepeatLastN; n > 0 && len(seen) > n {
		seen = seen[len(seen)-n:]
	}
	count := map[int32]int{}
	for _, id := range seen {
		if id >= 0 && int(id) < len(logits) {
			count[id]++
		}
	}
	out := append([]float32(nil), logits...)
	for id, c := range count {
		v := out[id]
		if s.RepeatPenalty != 0 && s.RepeatPenalty != 1 {
			if v <= 0 {
				v *= s.RepeatPenalty
			} else {
				v /= s.RepeatPenalty
			}
		}
		out[id] = v - float32(c)*s.FrequencyPenalty - s.PresencePenalty
	}
	return out
}

// Greedy is the index of the largest logit (the first on ties).
func Greedy(logits []float32) int32 {
	if len(logits) == 0 || logits[0] != logits[0] {
		return 0 // a NaN first is never beaten: nothing compares greater
	}
	// Four running maxima (a vocabulary of 262,144 took 1% of a decode
	// step in one dependent chain), each starting at logits[0]; NaNs never
	// win; ties go to the lowest index, as one pass in order would.
	v0, v1, v2, v3 := logits[0], logits[0], logits[0], logits[0]
	i0, i1, i2, i3 := 0, 0, 0, 0
	i := 1
	for ; i+4 <= len(logits); i += 4 {
		x := logits[i : i+4 : i+4]
		if x[0] > v0 {
			v0, i0 = x[0], i
		}
		if x[1] > v1 {
			v1, i1 = x[1], i+1
		}
		if x[2] > v2 {
			v2, i2 = x[2], i+2
		}
		if x[3] > v3 {
			v3, i3 = x[3], i+3
		}
	}
	for ; i < len(logits); i++ {
		if logits[i] > v0 {
			v0, i0 = logits[i], i
		}
	}
	best, v := i0, v0
	for _, c := range [3]struct {
		v float32
		i int
	}{{v1, i1}, {v2, i2}, {v3, i3}} {
		if c.v > v || c.v == v && c.i < best {
			best, v = c.i, c.v
		}
	}
	return int32(best)
}

type cand struct {
	id int32
	p  float64
}

// before orders candidates: more likely first, then lower id.
func before(a, b cand) bool { return a.p > b.p || a.p == b.p && a.id < b.id }

// Sample picks a token from logits (which it does not modify).
func (s *Sampler) Sample(logits []float32) int32 {
	if s.err != nil {
		return -1
	}
	logits = s.penalize(logits)
	if s.Grammar == nil {
		return s.pick(logits)
	}
	id := s.pick(logits)
	ok, err := s.Grammar.Allows(id)
	if err == nil && !ok {
		var m grammar.Mask
		if m, err = s.Grammar.Allowed(nil); err == nil {
			if m.Count() == 0 {
				err = errors.New("grammar: no token of the vocabulary can continue the text here")
			} else {
				masked := make([]float32, len(logits))
				ninf := float32(math.Inf(-1))
				for i, v := range logits {
					if m.Has(int32(i)) {
						masked[i] = v
					} else {
						masked[i] = ninf
					}
				}
				id = s.pick(masked)
			}
		}
	}
	if err == nil {
		err = s.Grammar.Accept(id)
	}
	if err != nil {
		s.err = err
		return -1
	}
	return id
}

// pick draws from logits as the options say.
func (s *Sampler) pick(logits []float32) int32 {
	if s.Temperature <= 0 || len(logits) == 0 {
		return Greedy(logits)
	}
	cs := s.candidates(logits)
	if len(cs) == 0 {
		return Greedy(logits)
	}
	// Softmax over the survivors.
	m := cs[0].p
	var z float64
	for i := range cs {
		cs[i].p = math.Exp(cs[i].p - m)
		z += cs[i].p
	}
	for i := range cs {
		cs[i].p /= z
	}
	z = 1 // the mass left
	if s.TopP > 0 && s.TopP < 1 {
		var acc float64
		for i := range cs {
			acc += cs[i].p
			if acc >= float64(s.TopP) {
				cs = cs[:i+1]
				z = acc
				break
			}
		}
	}
	if s.MinP > 0 {
		// cs[0] is the most likely; keep those at least MinP of it.
		floor := cs[0].p * float64(s.MinP)
		for i := range cs {
			if cs[i].p < floor {
				cs = cs[:i]
				z = 0
				for _, c := range cs {
					z += c.p
				}
				break
			}
		}
	}
	r := s.rng.Float64() * z
	for _, c := range cs {
		r -= c.p
		if r < 0 {
			return c.id
		}
	}
	// Rounding left some mass: the least likely candidate that has any
	// (never a -Inf logit: a grammar's refused token).
	for i := len(cs) - 1; i > 0; i-- {
		if cs[i].p > 0 {
			return cs[i].id
		}
	}
	return cs[0].id
}

// candidates returns the finite logits scaled by the temperature, most
// likely first (ties: lower id first), cut to the top k: with a top-k
// below the vocabulary size by a heap selection, which does not sort the
// whole vocabulary.
func (s *Sampler) candidates(logits []float32) []cand {
	k := len(logits)
	if s.TopK > 0 && s.TopK < k {
		k = s.TopK
	}
	t := float64(s.Temperature)
	keep := func(v float32) bool { return !math.IsInf(float64(v), -1) && !math.IsNaN(float64(v)) }
	if k < len(logits) {
		h := make(minHeap, 0, k)
		for i, v := range logits {
			if !keep(v) {
				continue
			}
			c := cand{int32(i), float64(v) / t}
			if len(h) < k {
				heap.Push(&h, c)
			} else if before(c, h[0]) {
				h[0] = c
				heap.Fix(&h, 0)
			}
		}
		cs := []cand(h)
		sort.Slice(cs, func(a, b int) bool { return before(cs[a], cs[b]) })
		return cs
	}
	cs := make([]cand, 0, len(logits))
	for i, v := range logits {
		if keep(v) {
			cs = append(cs, cand{int32(i), float64(v) / t})
		}
	}
	sort.Slice(cs, func(a, b int) bool { return before(cs[a], cs[b]) })
	return cs
}

// minHeap keeps the k best candidates with the worst on top.
type minHeap []cand

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(a, b int) bool { return before(h[b], h[a]) }
func (h minHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *minHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
