package bench

import (
	"runtime"
	"time"
)

// Side is one side of a comparison: Build makes n ops into the current
// context, Reset recreates the context (never timed).
type Side struct {
	Build func(n int)
	Reset func()
}

// Result is one comparison: mean ns and heap allocations per op on each
// side, and the ratio ours/raw.
type Result struct {
	OursNs, RawNs         float64
	OursAllocs, RawAllocs float64
}

// Ratio is ours/raw.
func (r Result) Ratio() float64 { return r.OursNs / r.RawNs }

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// Compare builds n ops on each side, in chunks of Chunk ops that alternate
// between the sides (and alternate which side goes first), so that both see
// the same machine state. Each chunk starts with a fresh context; only the
// Build calls are timed. A warm-up chunk per side runs first, untimed.
func Compare(ours, raw Side, n int) Result {
	var r Result
	for _, s := range []Side{ours, raw} {
		s.Reset()
		s.Build(Chunk)
		s.Reset()
	}
	var oursT, rawT time.Duration
	var oursA, rawA uint64
	run := func(s Side, k int, t *time.Duration, a *uint64) {
		s.Reset()
		m0 := mallocs()
		t0 := time.Now()
		s.Build(k)
		*t += time.Since(t0)
		*a += mallocs() - m0
	}
	for done, i := 0, 0; done < n; i++ {
		k := min(Chunk, n-done)
		if i%2 == 0 {
			run(ours, k, &oursT, &oursA)
			run(raw, k, &rawT, &rawA)
		} else {
			run(raw, k, &rawT, &rawA)
			run(ours, k, &oursT, &oursA)
		}
		done += k
	}
	fn := float64(n)
	r.OursNs = float64(oursT.Nanoseconds()) / fn
	r.RawNs = float64(rawT.Nanoseconds()) / fn
	r.OursAllocs = float64(oursA) / fn
	r.RawAllocs = float64(rawA) / fn
	return r
}
