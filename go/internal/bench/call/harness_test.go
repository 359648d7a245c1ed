package bench

import "testing"

// Every case builds on both sides without failing (so `go test ./...`
// catches a case broken by an API change; the timing is the benchmarks').
func TestCasesBuild(t *testing.T) {
	for _, get := range []func() ([]Case, func(), error){CCases, APICases} {
		cases, done, err := get()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			r := Compare(c.Ours, c.Raw, 2*Chunk+1)
			if !(r.OursNs > 0 && r.RawNs > 0) {
				t.Errorf("%s %s: no time measured: %+v", c.Level, c.Op, r)
			}
		}
		done()
	}
}
