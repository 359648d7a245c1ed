package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ggml-rs/ggml-rs/go/model/bert"
)

func runEmbed(args []string) error {
	fs := newFlags("embed", "[flags] MODEL TEXT...",
		"Computes the sentence embedding of each TEXT with the GGUF model MODEL (architecture bert,\n"+
			"nomic-bert or nomic-bert-moe), pooled and normalised as the model's metadata says, and prints\n"+
			"a cosine-similarity table (or, with -json, the embeddings).")
	asJSON := fs.Bool("json", false, "print the embeddings as JSON instead of the similarity table")
	file := fs.String("f", "", "read further texts from this file, one per line (- for stdin)")
	normalize := fs.String("normalize", "model", "L2-normalise the embeddings: model (as its metadata says), on or off")
	mf := addModelFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 {
		return usagef("embed needs a model and at least one text")
	}
	path, texts := pos[0], pos[1:]
	if *file != "" {
		more, err := readLines(*file)
		if err != nil {
			return err
		}
		texts = append(texts, more...)
	}
	if len(texts) == 0 {
		return usagef("embed needs at least one text after the model")
	}

	t0 := time.Now()
	b, err := openModel(path, mf, true)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := bert.New(b)
	if err != nil {
		return err
	}
	switch *normalize {
	case "model":
	case "on":
		m.Normalize = true
	case "off":
		m.Normalize = false
	default:
		return usagef("-normalize %q: model, on or off", *normalize)
	}
	tLoad := time.Since(t0)

	t1 := time.Now()
	seqs := make([][]int32, len(texts))
	ntok := 0
	for i, t := range texts {
		var cut bool
		seqs[i], cut = m.Tokenize(t)
		if cut {
			fmt.Fprintf(os.Stderr, "warning: text %d is longer than the model's %d-token context; cut\n", i+1, m.Context)
		}
		ntok += len(seqs[i])
	}
	tTok := time.Since(t1)

	t2 := time.Now()
	embs, err := m.Embed(seqs)
	if err != nil {
		return err
	}
	tEmbed := time.Since(t2)

	name := b.Config().String("general.name", path)
	if *asJSON {
		return printJSON(os.Stdout, name, m, texts, seqs, embs)
	}
	fmt.Printf("%s: %s, %d layers, %d dimensions, %s pooling%s; %d threads\n\n", name, b.Config().Architecture(),
		m.Layers, m.Hidden, m.Pooling, map[bool]string{true: ", L2-normalised", false: ""}[m.Normalize], b.Threads())
	printTable(os.Stdout, texts, seqs, embs)
	fmt.Printf("\nload %s, tokenize %s, embed %s (%d texts, %d tokens, %.0f tokens/s)\n",
		ms(tLoad), ms(tTok), ms(tEmbed), len(texts), ntok, float64(ntok)/tEmbed.Seconds())
	return nil
}

func readLines(path string) ([]string, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 16<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

type jsonEmbedding struct {
	Index     int       `json:"index"`
	Text      string    `json:"text"`
	Tokens    int       `json:"tokens"`
	Embedding []float32 `json:"embedding"`
}

func printJSON(w io.Writer, name string, m *bert.Model, texts []string, seqs [][]int32, embs [][]float32) error {
	out := struct {
		Model      string          `json:"model"`
		Dimensions int             `json:"dimensions"`
		Pooling    string          `json:"pooling"`
		Normalized bool            `json:"normalized"`
		Data       []jsonEmbedding `json:"data"`
	}{Model: name, Dimensions: m.Hidden, Pooling: m.Pooling.String(), Normalized: m.Normalize}
	for i, e := range embs {
		out.Data = append(out.Data, jsonEmbedding{Index: i, Text: texts[i], Tokens: len(seqs[i]), Embedding: e})
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// cosine is the cosine similarity of a and b (0 if either is zero).
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// printTable prints the texts, their pairwise cosine similarities, and
// each text's nearest neighbour.
func printTable(w io.Writer, texts []string, seqs [][]int32, embs [][]float32) {
	n := len(texts)
	sim := make([][]float64, n)
	for i := range sim {
		sim[i] = make([]float64, n)
		for j := range sim[i] {
			sim[i][j] = cosine(embs[i], embs[j])
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\ttokens\ttext")
	for i, t := range texts {
		fmt.Fprintf(tw, "%d\t%d\t%s\n", i+1, len(seqs[i]), clip(t, 70))
	}
	tw.Flush()

	fmt.Fprintln(w, "\ncosine similarity")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for j := range texts {
		fmt.Fprintf(tw, "%d\t", j+1)
	}
	fmt.Fprintln(tw)
	for i := range texts {
		fmt.Fprintf(tw, "%d\t", i+1)
		for j := range texts {
			if i == j {
				fmt.Fprint(tw, "-\t")
			} else {
				fmt.Fprintf(tw, "%.3f\t", sim[i][j])
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	if n < 2 {
		return
	}
	fmt.Fprintln(w, "\nmost similar pairs")
	type pair struct {
		i, j int
		s    float64
	}
	var pairs []pair
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			pairs = append(pairs, pair{i, j, sim[i][j]})
		}
	}
	sort.SliceStable(pairs, func(a, b int) bool { return pairs[a].s > pairs[b].s })
	for _, p := range pairs[:min(len(pairs), max(3, n/2))] {
		fmt.Fprintf(w, "  %.3f  %d ~ %d  %q ~ %q\n", p.s, p.i+1, p.j+1, clip(texts[p.i], 40), clip(texts[p.j], 40))
	}
}
