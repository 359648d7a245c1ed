package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// logits: the raw output rows of a decoder for given token ids, as JSON.
// Its command line and output follow the contract scripts/parity.py holds
// llama.cpp's reference (tools/llama-ref) to, so the two can be compared.

func runLogits(args []string) error {
	fs := newFlags("logits", "[flags] MODEL TOKEN...",
		"Runs the token ids TOKEN... (also comma-separated lists) through the GGUF model MODEL,\n"+
			"prefilling in ubatches of -batch tokens (with -decode N, the last N tokens one at a\n"+
			"time, as generation does), and prints {\"model\",\"n_vocab\",\"tokens\",\"logits\"} as\n"+
			"JSON: the logits of the last position, or with -all one row per position.\n"+
			"With -seqs, each TOKEN argument is one sequence (comma-separated ids), all of them go\n"+
			"in one batch, and the output is {\"model\",\"n_vocab\",\"sequences\",\"logits\"} with\n"+
			"the last position's logits of each sequence.")
	all := fs.Bool("all", false, "print the logits of every position, one row each")
	decode := fs.Int("decode", 0, "run the last N tokens one at a time after the prefill")
	seqs := fs.Bool("seqs", false, "each TOKEN argument is a sequence; run them together in one batch")
	df := addDecoderFlags(fs)
	fs.IntVar(df.batch, "ubatch", 512, "the same as -batch: the most tokens computed in one graph")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("logits needs a model and at least one token id")
	}
	if *seqs {
		if *all || *decode != 0 {
			return usagef("-seqs takes neither -all nor -decode")
		}
		return runLogitsSeqs(pos[0], pos[1:], df)
	}
	tokens, err := parseTokens(pos[1:])
	if err != nil {
		return err
	}
	if *decode < 0 || *decode > len(tokens) {
		return usagef("-decode %d: 0 to the number of tokens (%d)", *decode, len(tokens))
	}
	if *df.ctx < 1 {
		return usagef("-ctx %d: the context must hold at least one token", *df.ctx)
	}
	if *df.ctx < len(tokens) {
		*df.ctx = len(tokens)
	}
	b, m, _, err := openDecoder(pos[0], df)
	if err != nil {
		return err
	}
	defer b.Close()
	rows, err := computeLogits(m, tokens, *all, *df.ctx, *df.batch, *decode)
	if err != nil {
		return err
	}
	return writeLogits(pos[0], m.Vocab, "tokens", [][]int32{tokens}, rows, *all)
}

// runLogitsSeqs runs several sequences in one batch (logits -seqs).
func runLogitsSeqs(path string, args []string, df *decoderFlags) error {
	var ids [][]int32
	ctx := *df.ctx
	for _, a := range args {
		t, err := parseTokens([]string{a})
		if err != nil {
			return err
		}
		ids = append(ids, t)
		ctx = max(ctx, len(t))
	}
	if ctx > maxContext/len(ids) {
		return usagef("-ctx %d × %d sequences: at most %d tokens in all", ctx, len(ids), maxContext)
	}
	b, m, _, err := openDecoderFor(path, df, decoder.CacheOptions{Capacity: ctx * len(ids), Sequences: len(ids), MaxBatch: *df.batch})
	if err != nil {
		return err
	}
	defer b.Close()
	rows, err := computeSeqLogits(m, ids, *df.ctx, *df.batch)
	if err != nil {
		return err
	}
	return writeLogits(path, m.Vocab, "sequences", ids, rows, true)
}

// computeSeqLogits runs sequences together in one batch, each with a KV
// stream of at least ctx tokens (as llama.cpp sizes n_ctx_seq), in
// ubatches of at most batch tokens, and returns each one's last logits.
func computeSeqLogits(m *decoder.Model, seqs [][]int32, ctx, batch int) ([][]float32, error) {
	batchSeqs := make([]kvcache.Sequence, len(seqs))
	for i, t := range seqs {
		batchSeqs[i] = kvcache.Sequence{Seq: i, Tokens: t}
		ctx = max(ctx, len(t))
	}
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: ctx * len(seqs), Sequences: len(seqs), MaxBatch: batch})
	if err != nil {
		return nil, err
	}
	defer cache.Close()
	out, err := m.ForwardBatch(cache, batchSeqs, false, batch)
	if err != nil {
		return nil, err
	}
	rows := make([][]float32, len(out))
	for i := range out {
		rows[i] = out[i][0]
	}
	return rows, nil
}

// writeLogits prints the logits document: the token ids (one list, or
// one per sequence) under key, and the rows (a list of rows when many).
func writeLogits(model string, vocab int, key string, ids [][]int32, rows [][]float32, many bool) error {
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	buf := []byte(`{"model":`)
	buf = strconv.AppendQuote(buf, model)
	buf = append(buf, `,"n_vocab":`...)
	buf = strconv.AppendInt(buf, int64(vocab), 10)
	buf = append(buf, `,"`+key+`":`...)
	appendIDs := func(t []int32) {
		buf = append(buf, '[')
		for i, v := range t {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, int64(v), 10)
		}
		buf = append(buf, ']')
	}
	if key == "sequences" {
		buf = append(buf, '[')
		for i, t := range ids {
			if i > 0 {
				buf = append(buf, ',')
			}
			appendIDs(t)
		}
		buf = append(buf, ']')
	} else {
		appendIDs(ids[0])
	}
	buf = append(buf, `,"logits":`...)
	if many {
		buf = append(buf, '[')
	}
	for i, row := range rows {
		if i > 0 {
			buf = append(buf, ",\n"...)
		}
		buf = append(buf, '[')
		for j, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("the logit of token %d at row %d is %v", j, i, v)
			}
			if j > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendFloat(buf, float64(v), 'g', -1, 32)
		}
		buf = append(buf, ']')
		w.Write(buf)
		buf = buf[:0]
	}
	if many {
		buf = append(buf, ']')
	}
	buf = append(buf, "}\n"...)
	w.Write(buf)
	return w.Flush()
}

// parseTokens reads token ids from arguments that are ids or
// comma-separated lists of ids.
func parseTokens(args []string) ([]int32, error) {
	var ids []int32
	for _, a := range args {
		for _, f := range strings.Split(a, ",") {
			if f == "" {
				continue
			}
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				return nil, usagef("not a token id: %q", f)
			}
			ids = append(ids, int32(v))
		}
	}
	if len(ids) == 0 {
		return nil, usagef("no token ids")
	}
	return ids, nil
}

// computeLogits runs tokens through m from an empty cache of ctx tokens:
// all but the last decode tokens in batches of at most batch (a prefill),
// then those one at a time (as generation does). It returns the logits of
// every position (all) or of the last one only.
func computeLogits(m *decoder.Model, tokens []int32, all bool, ctx, batch, decode int) ([][]float32, error) {
	if len(tokens) > ctx {
		return nil, fmt.Errorf("%d tokens do not fit the %d-token context (-ctx)", len(tokens), ctx)
	}
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: ctx, MaxBatch: batch})
	if err != nil {
		return nil, err
	}
	defer cache.Close()
	defer m.ReleaseGraph()
	var rows [][]float32
	prefill := len(tokens) - decode
	run := func(toks []int32) error {
		out, err := m.ForwardBatch(cache, []kvcache.Sequence{{Tokens: toks}}, all, batch)
		if err != nil {
			return err
		}
		if all {
			rows = append(rows, out[0]...)
		} else {
			rows = out[0]
		}
		return nil
	}
	if prefill > 0 {
		if err := run(tokens[:prefill]); err != nil {
			return nil, err
		}
	}
	for i := prefill; i < len(tokens); i++ {
		if err := run(tokens[i : i+1]); err != nil {
			return nil, err
		}
	}
	return rows, nil
}
