// Package sample picks the next token from a row of logits: greedily, or
// by temperature sampling restricted by top-k and top-p.
package sample

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
)

// Options configure a Sampler. Temperature <= 0 means greedy.
type Options struct {
	Temperature float32
	TopK        int     // keep the k most likely tokens (<= 0: all)
	TopP        float32 // keep the smallest set with this probability mass (<= 0 or >= 1: all)
	Seed        int64
}

// Sampler draws tokens; its random source is seeded once, so a sequence
// of draws is reproducible.
type Sampler struct {
	Options
	rng *rand.Rand
}

// Validate reports options that make no sense: a temperature that is not
// a finite number ≥ 0, a negative top-k, a top-p that is not a number in
// [0, 1]. (Sample itself reads 0 as "off" for each.)
func (o Options) Validate() error {
	t, p := float64(o.Temperature), float64(o.TopP)
	switch {
	case math.IsNaN(t) || math.IsInf(t, 0) || t < 0:
		return fmt.Errorf("temperature %v: a number ≥ 0 (0: greedy)", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("top-k %d: 0 (all tokens) or more", o.TopK)
	case math.IsNaN(p) || p < 0 || p > 1:
		return fmt.Errorf("top-p %v: a probability mass in [0, 1] (0 or 1: all tokens)", o.TopP)
	}
	return nil
}

// New makes a sampler.
func New(o Options) *Sampler {
	return &Sampler{Options: o, rng: rand.New(rand.NewSource(o.Seed))}
}

// Greedy is the index of the largest logit (the first on ties).
func Greedy(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

type cand struct {
	id int32
	p  float64
}

// Sample picks a token from logits.
func (s *Sampler) Sample(logits []float32) int32 {
	if s.Temperature <= 0 || len(logits) == 0 {
		return Greedy(logits)
	}
	cs := make([]cand, 0, len(logits))
	for i, v := range logits {
		if !math.IsInf(float64(v), -1) && !math.IsNaN(float64(v)) {
			cs = append(cs, cand{int32(i), float64(v) / float64(s.Temperature)})
		}
	}
	if len(cs) == 0 {
		return Greedy(logits)
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].p > cs[b].p })
	if s.TopK > 0 && s.TopK < len(cs) {
		cs = cs[:s.TopK]
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
	} else {
		z = 1
	}
	r := s.rng.Float64() * z
	for _, c := range cs {
		r -= c.p
		if r < 0 {
			return c.id
		}
	}
	return cs[len(cs)-1].id
}
