// Command table prints the benchmark's figures as a Markdown table for the
// README: for each op, the cost of one graph-building call through ggml-rs
// and through raw cgo into the same ggml, at the C level and at the Go API
// level, and the ratio ours/raw. Each figure is the median of several
// trials (each trial interleaves the two sides chunk by chunk).
//
//	cd go && go run ./internal/bench/call/table [-n 200000] [-trials 5] [-run API/]
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"

	"github.com/ggml-rs/ggml-rs/go/internal/bench/call"
)

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func main() {
	n := flag.Int("n", 200000, "ops per side per trial")
	trials := flag.Int("trials", 5, "trials per op (the median is printed)")
	notes := flag.Bool("notes", true, "print what each row compares")
	only := flag.String("run", "", "only the rows whose \"level/op\" matches this regular expression")
	flag.Parse()
	filter, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	cc, closeC, err := bench.CCases()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer closeC()
	ac, closeAPI, err := bench.APICases()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer closeAPI()

	fmt.Printf("One graph-building call, ns/op (median of %d trials of %d ops; %s/%s, GOMAXPROCS %d)\n\n",
		*trials, *n, runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	fmt.Println("| level | op | ggml-rs | raw cgo | ggml-rs / raw |")
	fmt.Println("|---|---|---:|---:|---:|")
	var rows []bench.Case
	for _, c := range append(cc, ac...) {
		if !filter.MatchString(c.Level + "/" + c.Op) {
			continue
		}
		var ours, raw, ratio []float64
		for i := 0; i < *trials; i++ {
			r := bench.Compare(c.Ours, c.Raw, *n)
			ours, raw, ratio = append(ours, r.OursNs), append(raw, r.RawNs), append(ratio, r.Ratio())
		}
		fmt.Printf("| %s | %s | %.1f | %.1f | %.2fx |\n", c.Level, c.Op, median(ours), median(raw), median(ratio))
		rows = append(rows, c)
	}
	if *notes {
		fmt.Println()
		for _, c := range rows {
			fmt.Printf("- %s %s: %s\n", c.Level, c.Op, c.Note)
		}
	}
}
