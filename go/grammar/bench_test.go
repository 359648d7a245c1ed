package grammar

import (
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkGrammar times one mask (Allowed over the whole vocabulary)
// along the tokens of the "text" sequences of the golden file of SmolLM2's
// 49k vocabulary, for the grammars marked "bench" in corpus.json: the
// same steps llama-ref grammar-bench times llama.cpp's apply on. Reported
// as ns/mask.
func BenchmarkGrammar(b *testing.B) {
	v, res := loadVocab(b, vocabPath(b, "smollm2"))
	raw, err := os.ReadFile("testdata/golden-smollm2.json")
	if err != nil {
		b.Fatal(err)
	}
	var gd golden
	if err := json.Unmarshal(raw, &gd); err != nil {
		b.Fatal(err)
	}
	corpus := map[string]corpusEntry{}
	for _, c := range loadCorpus(b) {
		corpus[c.Name] = c
	}
	for _, gg := range gd.Grammars {
		c := corpus[gg.Name]
		if !c.Bench || gg.Error {
			continue
		}
		g, err := Compile(c.Text, "root", res)
		if err != nil {
			b.Fatal(err)
		}
		var seqs [][]int32
		for _, sq := range gg.Sequences {
			if sq.Kind == "text" {
				seqs = append(seqs, sq.Tokens)
			}
		}
		b.Run(gg.Name, func(b *testing.B) {
			var m Mask
			steps := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, toks := range seqs {
					st := NewState(g, v)
					for _, tok := range toks {
						if v.IsEOG(tok) {
							break // llama-ref's bench tokenizes the texts only
						}
						b.StartTimer()
						m, err = st.Allowed(m)
						b.StopTimer()
						steps++
						if err != nil {
							b.Fatal(err)
						}
						if !m.Has(tok) {
							break
						}
						if err := st.Accept(tok); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/mask")
			b.ReportMetric(float64(steps)/float64(b.N), "masks/op")
		})
	}
}
