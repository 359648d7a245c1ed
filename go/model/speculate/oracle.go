package speculate

// Oracle drafts the target's own continuation (Tokens: what plain decoding
// emits after the prompt) with a chosen acceptance rate: a drafter to
// measure and test the pipeline apart from any draft model. Each draft
// token is right with a probability p, and otherwise replaced by another
// token, p chosen for the draft's length n so that the expected share of
// the n drafts the target accepts (those before the first wrong one) is
// Rate: (p + p² + … + pⁿ)/n = Rate. Its random numbers are splitmix64's
// from Seed (uniform: the top 53 bits), so that llama-ref spec -oracle
// draws the same drafts.
type Oracle struct {
	Tokens []int32
	Rate   float64
	Vocab  int
	Seed   uint64

	next    int // index in Tokens of the token after tok
	started bool
	p       map[int]float64 // per draft length
}

// Draft proposes Tokens[next:next+n], some replaced.
func (o *Oracle) Draft(tok int32, _ []float32, n int) ([]int32, error) {
	p := o.perToken(n)
	var out []int32
	for i := 0; i < n && o.next+i < len(o.Tokens); i++ {
		t := o.Tokens[o.next+i]
		if o.uniform() >= p {
			t = (t + 1) % int32(o.Vocab)
		}
		out = append(out, t)
	}
	return out, nil
}

// uniform is splitmix64's next number as a float64 in [0, 1).
func (o *Oracle) uniform() float64 {
	o.Seed += 0x9e3779b97f4a7c15
	z := o.Seed
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) * (1.0 / (1 << 53))
}

// perToken solves (p + … + pⁿ)/n = Rate for p by bisection (the left side
// grows with p from 0 to 1).
func (o *Oracle) perToken(n int) float64 {
	if o.Rate <= 0 || o.Rate >= 1 {
		return max(0, min(1, o.Rate))
	}
	if p, ok := o.p[n]; ok {
		return p
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		p := (lo + hi) / 2
		s, q := 0.0, 1.0
		for range n {
			q *= p
			s += q
		}
		if s/float64(n) < o.Rate {
			lo = p
		} else {
			hi = p
		}
	}
	if o.p == nil {
		o.p = map[int]float64{}
	}
	o.p[n] = (lo + hi) / 2
	return o.p[n]
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
