package speculate

import (
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// MTP drafts with a model's MTP head (model.NewMTP), as llama.cpp's
// draft-mtp: each token is paired with the target's hidden state of the
// token before it, and a draft step feeds the head its own hidden state of
// the step before; the drafts are the head's greedy tokens. Its cache
// (Head.NewCache; sequence Seq, so that drafters of several sequences can
// share one) holds the head's attention cells of the accepted tokens.
type MTP struct {
	Head  *decoder.Model
	Cache *kvcache.Cache
	Seq   int

	fed     bool // Draft's first step put tok's own entry in the cache
	drafted int  // draft entries after it
}

// Draft runs n head steps from tok (at the next position) and hPrev. The
// first step's entry, tok paired with the target's hidden state before
// it, is what Accept would compute for tok: it stays.
func (m *MTP) Draft(tok int32, hPrev []float32, n int) ([]int32, error) {
	var out []int32
	x, h := tok, hPrev
	for i := 0; i < n; i++ {
		r, err := m.Head.Run(m.Cache, []decoder.Input{{Sequence: kvcache.Sequence{Seq: m.Seq, Tokens: []int32{x}}, Hidden: [][]float32{h}}},
			decoder.RunOptions{Hidden: true})
		if err != nil {
			return nil, err
		}
		if i == 0 {
			m.fed = true
		} else {
			m.drafted++
		}
		x, h = sample.Greedy(r[0].Logits[0]), r[0].Hidden[0]
		out = append(out, x)
	}
	return out, nil
}

// Accept forgets the draft entries and runs the head over tok (unless
// Draft's first step did) and the kept tokens, each paired with the
// target's hidden state of the token before it (hPrev, then hidden), so
// that its cache holds what llama.cpp's process() gives it. tok is the
// one the last Draft started from, if any.
func (m *MTP) Accept(tok int32, kept []int32, hPrev []float32, hidden [][]float32) error {
	// Rewind, not Truncate: the cache's layout stays, so the next step
	// may reuse the last graph.
	if m.drafted > 0 {
		if err := m.Cache.Rewind(m.Seq, m.drafted); err != nil {
			return err
		}
	}
	toks, hs := kept, hidden[:len(kept)]
	if !m.fed {
		toks, hs = append([]int32{tok}, kept...), append([][]float32{hPrev}, hs...)
	}
	m.fed, m.drafted = false, 0
	if len(toks) == 0 {
		return nil
	}
	// One token: as a draft step, whose graph it then reuses.
	_, err := m.Head.Run(m.Cache, []decoder.Input{{Sequence: kvcache.Sequence{Seq: m.Seq, Tokens: toks}, Hidden: hs}},
		decoder.RunOptions{Hidden: len(toks) == 1})
	return err
}
