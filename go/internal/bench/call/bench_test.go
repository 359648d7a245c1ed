package bench

import "testing"

func report(b *testing.B, r Result) {
	b.ReportMetric(r.OursNs, "ns/op")
	b.ReportMetric(r.RawNs, "raw-ns/op")
	b.ReportMetric(r.Ratio(), "ours/raw")
	b.ReportMetric(r.OursAllocs, "ours-allocs/op")
	b.ReportMetric(r.RawAllocs, "raw-allocs/op")
}

func runCases(b *testing.B, cases []Case) {
	for _, c := range cases {
		b.Run(c.Op, func(b *testing.B) {
			report(b, Compare(c.Ours, c.Raw, b.N))
		})
	}
}

// BenchmarkC compares one bare cgo call: C.ggml_rs_<op> against C.ggml_<op>.
// ns/op and allocs/op are ours; raw-ns/op and raw-allocs/op the anchor's.
func BenchmarkC(b *testing.B) {
	cases, done, err := CCases()
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	runCases(b, cases)
}

// BenchmarkAPI compares ml.Tensor methods of the backend against the
// Ollama-style raw wrapper. ns/op and allocs/op are ours.
func BenchmarkAPI(b *testing.B) {
	cases, done, err := APICases()
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	runCases(b, cases)
}
