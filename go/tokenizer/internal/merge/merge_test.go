package merge

import (
	"hash/fnv"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/tokenizer/internal/testvocab"
)

// naive is the rescanning loop Merger replaces: after every merge it
// looks at every adjacent pair for the lowest key (leftmost on ties; a
// FirstOnly pair wins only as the first candidate and never replaces one).
func naive(s string, lookup Lookup) []string {
	var syms []string
	for i := 0; i < len(s); {
		n := min(SymbolLen(s[i]), len(s)-i)
		syms = append(syms, s[i:i+n])
		i += n
	}
	for len(syms) > 1 {
		at, first := -1, false
		var best uint32
		for i := 0; i+1 < len(syms); i++ {
			key, kind := lookup(syms[i]+syms[i+1], len(syms[i]))
			switch {
			case kind == None:
			case at < 0:
				at, best, first = i, key, kind == FirstOnly
			case !first && kind == Ranked && key < best:
				at, best = i, key
			}
		}
		if at < 0 {
			break
		}
		syms[at] += syms[at+1]
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// table is a random merge table: a pair merges with probability p, with
// a key from a few values (so ties are common), FirstOnly with
// probability pFirst.
func table(seed uint64, p, pFirst float64, keys int) Lookup {
	return func(pair string, mid int) (uint32, Kind) {
		h := fnv.New64a()
		h.Write([]byte{byte(seed), byte(seed >> 8), byte(mid)})
		h.Write([]byte(pair))
		x := h.Sum64()
		u := float64(x>>11) / (1 << 53)
		switch {
		case len(pair) > 12 || u >= p:
			return 0, None
		case u < pFirst:
			return 0, FirstOnly
		}
		return uint32((x >> 3) % uint64(keys)), Ranked
	}
}

func symbols(m interface{ Each(func(string)) }) []string {
	var out []string
	m.Each(func(s string) { out = append(out, s) })
	return out
}

func TestMatchesNaive(t *testing.T) {
	for _, from := range []int{sortFrom, 0} {
		defer func(old int) { sortFrom = old }(sortFrom)
		sortFrom = from
		matchesNaive(t)
	}
}

func matchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabets := []string{"ab", "abc", "abcdefgh", "aé日😀\xff\xc3", "a"}
	var m Merger
	var big merger[int]
	for iter := 0; iter < 3000; iter++ {
		a := []rune(alphabets[rng.Intn(len(alphabets))])
		var b strings.Builder
		for n := rng.Intn(80); n > 0; n-- {
			b.WriteString(string(a[rng.Intn(len(a))]))
		}
		s := b.String()
		first := iter%3 == 0
		pFirst := 0.0
		if first {
			pFirst = 0.1
		}
		lookup := table(uint64(iter), 0.2+0.7*rng.Float64(), pFirst, 1+rng.Intn(5))
		want := naive(s, lookup)
		m.FirstOnly = first
		m.Run(s, lookup)
		if got := symbols(&m); !slices.Equal(got, want) {
			t.Fatalf("%q (FirstOnly %v):\n got %q\nwant %q", s, first, got, want)
		}
		big.firstOnly = first
		big.run(s, lookup)
		if got := symbols(bigEach{&big}); !slices.Equal(got, want) {
			t.Fatalf("%q (int index, FirstOnly %v):\n got %q\nwant %q", s, first, got, want)
		}
	}
}

type bigEach struct{ m *merger[int] }

func (b bigEach) Each(f func(string)) { b.m.each(f) }

// TestLinear: a long run of one letter where every pair merges into a
// token of any length (keyed by length, so merges sweep left to right
// many times) costs CPU time about linear in its length
// (testvocab.Scaling).
func TestLinear(t *testing.T) {
	lookup := func(pair string, mid int) (uint32, Kind) { return uint32(len(pair)), Ranked }
	var m Merger
	run := func(s string) { m.Run(s, lookup) }
	testvocab.Scaling(t, "one letter", run, strings.Repeat("a", 1e5), strings.Repeat("a", 1e6))
}
