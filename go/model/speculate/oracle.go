package speculate

import "math/rand"

// Oracle drafts the target's own continuation (Tokens: what plain decoding
// emits after the prompt), each draft token right with probability Rate
// and otherwise replaced by another token: a drafter whose acceptance rate
// is chosen, to measure and test the pipeline apart from any draft model.
type Oracle struct {
	Tokens []int32
	Rate   float64
	Vocab  int
	Rand   *rand.Rand

	next    int // index in Tokens of the token after tok
	started bool
}

// Draft proposes Tokens[next:next+n], some replaced.
func (o *Oracle) Draft(tok int32, _ []float32, n int) ([]int32, error) {
	var out []int32
	for i := 0; i < n && o.next+i < len(o.Tokens); i++ {
		t := o.Tokens[o.next+i]
		if o.Rand.Float64() >= o.Rate {
			t = (t + 1) % int32(o.Vocab)
		}
		out = append(out, t)
	}
	return out, nil
}

// Accept advances past tok and the kept tokens (the prompt's call only
// starts it).
func (o *Oracle) Accept(_ int32, kept []int32, _ []float32, _ [][]float32) error {
	if !o.started {
		o.started, o.next = true, 1
		return nil
	}
	o.next += 1 + len(kept)
	return nil
}
