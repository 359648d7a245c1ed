package sample

import (
	"math"
	"math/rand"
	"sort"
	"testing"
)

// naiveDistribution is the sampling distribution written out plainly: the
// penalties, then every finite token scaled by the temperature and sorted
// (stable, so ties keep the lower id first), cut to top-k, softmax, cut to
// top-p, cut by min-p, renormalized.
func naiveDistribution(o Options, history []int32, logits []float32) map[int32]float64 {
	l := append([]float32(nil), logits...)
	seen := history
	if o.RepeatLastN > 0 && len(seen) > o.RepeatLastN {
		seen = seen[len(seen)-o.RepeatLastN:]
	}
	if o.RepeatLastN == 0 {
		seen = nil
	}
	n := map[int32]int{}
	for _, id := range seen {
		n[id]++
	}
	for id, c := range n {
		if o.RepeatPenalty != 0 {
			if l[id] <= 0 {
				l[id] *= o.RepeatPenalty
			} else {
				l[id] /= o.RepeatPenalty
			}
		}
		l[id] -= float32(c)*o.FrequencyPenalty + o.PresencePenalty
	}
	type c struct {
		id int32
		v  float64
	}
	var cs []c
	for i, v := range l {
		if !math.IsInf(float64(v), -1) && !math.IsNaN(float64(v)) {
			cs = append(cs, c{int32(i), float64(v) / float64(o.Temperature)})
		}
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].v > cs[b].v })
	if o.TopK > 0 && o.TopK < len(cs) {
		cs = cs[:o.TopK]
	}
	p := make([]float64, len(cs))
	var z float64
	for i := range cs {
		p[i] = math.Exp(cs[i].v - cs[0].v)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	keep := len(cs)
	if o.TopP > 0 && o.TopP < 1 {
		acc := 0.0
		for i := range p {
			acc += p[i]
			if acc >= float64(o.TopP) {
				keep = i + 1
				break
			}
		}
	}
	for i := 0; i < keep; i++ {
		if p[i] < p[0]*float64(o.MinP) {
			keep = i
			break
		}
	}
	out := map[int32]float64{}
	z = 0
	for i := 0; i < keep; i++ {
		z += p[i]
	}
	for i := 0; i < keep; i++ {
		out[cs[i].id] = p[i] / z
	}
	return out
}

// TestSampleMatchesNaive draws many tokens with each option set and checks
// the frequencies against the naive distribution: every drawn token is in
// its support, and each token's frequency is within 5 standard errors.
func TestSampleMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	logits := make([]float32, 300)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 2)
	}
	logits[7] = float32(math.Inf(-1))
	logits[8] = logits[9] // a tie
	history := []int32{3, 5, 5, 9, 200, 201, 5}
	cases := []Options{
		{Temperature: 0.8, TopK: 40, TopP: 0.95},
		{Temperature: 1.5},
		{Temperature: 0.7, TopK: 10},
		{Temperature: 1, TopP: 0.5},
		{Temperature: 1, MinP: 0.1},
		{Temperature: 1, TopK: 50, MinP: 0.05, RepeatPenalty: 1.3, RepeatLastN: 4},
		{Temperature: 1.2, RepeatPenalty: 0.8, RepeatLastN: -1, FrequencyPenalty: 0.5, PresencePenalty: -0.3},
	}
	const draws = 20000
	for ci, o := range cases {
		if err := o.Validate(); err != nil {
			t.Fatalf("case %d: %v", ci, err)
		}
		o.Seed = int64(ci)
		s := New(o)
		s.Accept(history...)
		want := naiveDistribution(o, s.history, logits)
		got := map[int32]int{}
		for i := 0; i < draws; i++ {
			got[s.Sample(logits)]++
		}
		for id, n := range got {
			if want[id] == 0 {
				t.Fatalf("case %d (%+v): drew token %d (%d times), outside the distribution", ci, o, id, n)
			}
		}
		for id, p := range want {
			f := float64(got[id]) / draws
			se := math.Sqrt(p * (1 - p) / draws)
			if math.Abs(f-p) > 5*se+1e-4 {
				t.Errorf("case %d (%+v): token %d drawn %.4f of the time, want %.4f", ci, o, id, f, p)
			}
		}
	}
}

// TestGreedyPenalized: greedy decoding takes the penalties into account,
// as llama.cpp's chain (penalties before the greedy pick) does.
func TestGreedyPenalized(t *testing.T) {
	logits := []float32{1, 3, 2.9, -1}
	s := New(Options{RepeatPenalty: 1.1, RepeatLastN: 64})
	if got := s.Sample(logits); got != 1 {
		t.Fatalf("no history: got %d, want 1", got)
	}
	s.Accept(1)
	if got := s.Sample(logits); got != 2 {
		t.Fatalf("token 1 seen: got %d, want 2 (3/1.1 < 2.9)", got)
	}
	if logits[1] != 3 {
		t.Fatal("Sample changed the caller's logits")
	}
}

func TestValidate(t *testing.T) {
	bad := []Options{
		{Temperature: -1}, {Temperature: float32(math.NaN())}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1},
		{RepeatPenalty: -1}, {RepeatLastN: -2}, {FrequencyPenalty: 3}, {PresencePenalty: float32(math.NaN())},
	}
	for _, o := range bad {
		if o.Validate() == nil {
			t.Errorf("%+v: accepted", o)
		}
	}
	if err := (Options{Temperature: 0.8, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64}).Validate(); err != nil {
		t.Errorf("Ollama's defaults refused: %v", err)
	}
}

// TestGreedyIsTheFirstMaximum: Greedy against one pass in order (the first
// index of the largest value; NaNs never win, a NaN first wins) on random
// logits with ties, NaNs, infinities and signed zeros, of every length to 40
// and a vocabulary's.
func TestGreedyIsTheFirstMaximum(t *testing.T) {
	naive := func(l []float32) int32 {
		best := 0
		for i, v := range l {
			if v > l[best] {
				best = i
			}
		}
		return int32(best)
	}
	rng := rand.New(rand.NewSource(5))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 3, 3}
	for trial := 0; trial < 20000; trial++ {
		n := trial % 41
		if trial%1000 == 999 {
			n = 262144
		}
		l := make([]float32, n)
		for i := range l {
			switch rng.Intn(8) {
			case 0:
				l[i] = special[rng.Intn(len(special))]
			case 1, 2:
				l[i] = float32(rng.Intn(4)) // ties
			default:
				l[i] = float32(rng.NormFloat64())
			}
		}
		if got, want := Greedy(l), naive(l); got != want {
			t.Fatalf("%v: got %d, want %d", l, got, want)
		}
	}
}
