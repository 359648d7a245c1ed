package speculate

import (
	"ggmlrs/kvcache"
	"ggmlrs/model/decoder"
	"ggmlrs/sample"
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

	drafted int // draft entries in the cache since the last Accept
}

// Draft runs n head steps from tok (at the next position) and hPrev.
func (m *MTP) Draft(tok int32, hPrev []float32, n int) ([]int32, error) {
	var out []int32
	x, h := tok, hPrev
	for i := 0; i < n; i++ {
		r, err := m.Head.Run(m.Cache, []decoder.Input{{Sequence: kvcache.Sequence{Seq: m.Seq, Tokens: []int32{x}}, Hidden: [][]float32{h}}},
			decoder.RunOptions{Hidden: true})
		if err != nil {
			return nil, err
		}
		m.drafted++
		x, h = sample.Greedy(r[0].Logits[0]), r[0].Hidden[0]
		out = append(out, x)
	}
	return out, nil
}

// Accept forgets the draft entries and runs the head over tok and the kept
// tokens, each paired with the target's hidden state of the token before
// it (hPrev, then hidden), so that its cache holds what llama.cpp's
// process() gives it.
func (m *MTP) Accept(tok int32, kept []int32, hPrev []float32, hidden [][]float32) error {
	if m.drafted > 0 {
		if err := m.Cache.Truncate(m.Seq, m.Cache.Len(m.Seq)-m.drafted); err != nil {
			return err
		}
		m.drafted = 0
	}
	h := append([][]float32{hPrev}, hidden[:len(kept)]...)
	_, err := m.Head.Run(m.Cache, []decoder.Input{{Sequence: kvcache.Sequence{Seq: m.Seq, Tokens: append([]int32{tok}, kept...)}, Hidden: h}},
		decoder.RunOptions{})
	return err
}
