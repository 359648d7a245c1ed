package kvcache

import "fmt"

// Ubatch is one physical batch of tokens, as a decoder computes it in one
// graph: the tokens of one or more sequences, sequence-major (all of the
// first sequence's tokens, then the second's, ...), each sequence's tokens
// at consecutive positions following what the cache holds for it.
//
// When Equal is set, every sequence contributes the same number of tokens
// (SeqTokens), so the batch can be viewed as [SeqTokens, len(Seqs)]: the
// layout recurrent layers need (llama.cpp's split_equal).
type Ubatch struct {
	Tokens    []int32 // token ids
	Seqs      []int   // the sequences, in the order their tokens appear
	Counts    []int   // tokens of each sequence (len(Seqs) entries)
	SeqTokens int     // tokens per sequence when Equal
	Equal     bool
	// RowWise asks attention to see, for each token, the history a
	// one-token batch of its sequence would have seen at its position
	// (Cache.RowHistory, GetRow), so that its result is bit for bit that
	// of one-token decoding (with ml.RowWise contexts; speculative
	// decoding's verification).
	RowWise bool
}

// Len is the number of tokens.
func (u *Ubatch) Len() int { return len(u.Tokens) }

// SeqOf returns, for every token, the index into Seqs of its sequence.
func (u *Ubatch) SeqOf() []int {
	out := make([]int, 0, len(u.Tokens))
	for i, n := range u.Counts {
		for j := 0; j < n; j++ {
			out = append(out, i)
		}
	}
	return out
}

// Validate checks that the ubatch is consistent.
func (u *Ubatch) Validate() error {
	if len(u.Tokens) == 0 {
		return fmt.Errorf("kvcache: empty batch")
	}
	if len(u.Seqs) == 0 || len(u.Seqs) != len(u.Counts) {
		return fmt.Errorf("kvcache: batch has %d sequences and %d counts", len(u.Seqs), len(u.Counts))
	}
	total := 0
	seen := map[int]bool{}
	for i, s := range u.Seqs {
		if s < 0 {
			return fmt.Errorf("kvcache: negative sequence id %d", s)
		}
		if seen[s] {
			return fmt.Errorf("kvcache: sequence %d appears twice in one batch", s)
		}
		seen[s] = true
		if u.Counts[i] <= 0 {
			return fmt.Errorf("kvcache: sequence %d has no tokens in the batch", s)
		}
		if u.Equal && u.Counts[i] != u.SeqTokens {
			return fmt.Errorf("kvcache: equal batch with %d tokens of sequence %d, want %d", u.Counts[i], s, u.SeqTokens)
		}
		total += u.Counts[i]
	}
	if total != len(u.Tokens) {
		return fmt.Errorf("kvcache: counts add up to %d, batch has %d tokens", total, len(u.Tokens))
	}
	return nil
}

// Sequence is the tokens of one sequence in a logical batch.
type Sequence struct {
	Seq    int
	Tokens []int32
}

// Split cuts a logical batch into ubatches of at most maxTokens tokens.
// With equal (models with recurrent layers), every ubatch takes the same
// number of tokens from each sequence it holds, as llama.cpp's
// split_equal: the sequences with tokens left, min(remaining) tokens each
// (fewer if maxTokens caps it); otherwise (split_simple) tokens are taken
// in order, whole sequences first, cutting where the cap falls.
func Split(batch []Sequence, maxTokens int, equal bool) []Ubatch {
	if maxTokens < 1 {
		maxTokens = 1
	}
	rest := make([][]int32, len(batch))
	for i, s := range batch {
		rest[i] = s.Tokens
	}
	var out []Ubatch
	if !equal {
		var cur Ubatch
		flush := func() {
			if len(cur.Tokens) > 0 {
				out = append(out, cur)
			}
			cur = Ubatch{}
		}
		for i, s := range batch {
			for len(rest[i]) > 0 {
				room := maxTokens - len(cur.Tokens)
				if room == 0 {
					flush()
					room = maxTokens
				}
				n := min(room, len(rest[i]))
				cur.Tokens = append(cur.Tokens, rest[i][:n]...)
				cur.Seqs = append(cur.Seqs, s.Seq)
				cur.Counts = append(cur.Counts, n)
				rest[i] = rest[i][n:]
			}
		}
		flush()
		for i := range out {
			if len(out[i].Seqs) == 1 {
				out[i].Equal, out[i].SeqTokens = true, out[i].Counts[0]
			}
		}
		return out
	}
	for {
		var active []int
		least := 0
		for i := range batch {
			if n := len(rest[i]); n > 0 {
				if len(active) == 0 || n < least {
					least = n
				}
				active = append(active, i)
			}
		}
		if len(active) == 0 {
			return out
		}
		// At least one token of every sequence with tokens left, even when
		// they exceed maxTokens (as llama.cpp's split_equal).
		t := max(1, min(least, maxTokens/len(active)))
		u := Ubatch{Equal: true, SeqTokens: t}
		for _, i := range active {
			u.Tokens = append(u.Tokens, rest[i][:t]...)
			u.Seqs = append(u.Seqs, batch[i].Seq)
			u.Counts = append(u.Counts, t)
			rest[i] = rest[i][t:]
		}
		out = append(out, u)
	}
}
