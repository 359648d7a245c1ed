package speculate

import (
	"math"
	"testing"
)

// The oracle's acceptance rate is the one asked for: simulated against a
// target that agrees with exactly its Tokens, over many steps.
func TestOracleAcceptanceRate(t *testing.T) {
	tokens := make([]int32, 200000)
	for i := range tokens {
		tokens[i] = int32(i % 97)
	}
	for _, n := range []int{1, 3, 5} {
		for _, rate := range []float64{0, 0.5, 0.8, 1} {
			o := &Oracle{Tokens: tokens, Rate: rate, Vocab: 97, Seed: 1}
			o.Accept(tokens[0], nil, nil, nil)
			drafted, accepted := 0, 0
			for o.next+n < len(tokens) {
				d, _ := o.Draft(tokens[o.next-1], nil, n)
				k := 0
				for k < len(d) && d[k] == tokens[o.next+k] {
					k++
				}
				drafted, accepted = drafted+len(d), accepted+k
				o.Accept(0, d[:k], nil, nil)
			}
			if got := float64(accepted) / float64(drafted); math.Abs(got-rate) > 0.01 {
				t.Errorf("n %d, rate %.2f: acceptance %.4f", n, rate, got)
			}
		}
	}
}
