package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"ggmlrs/model/llama"
)

// logits: the raw output rows of a decoder for given token ids, as JSON.
// Its command line and output follow the contract scripts/parity.py holds
// llama.cpp's reference (tools/llama-ref) to, so the two can be compared.

func runLogits(args []string) error {
	fs := newFlags("logits", "[flags] MODEL TOKEN...",
		"Runs the token ids TOKEN... (also comma-separated lists) through the GGUF model MODEL\n"+
			"(architecture llama or qwen3), prefilling in batches of -batch (with -decode N, the\n"+
			"last N tokens one at a time, as generation does), and prints\n"+
			`{"model","n_vocab","tokens","logits"} as JSON: the logits of the last position,`+"\n"+
			"or with -all one row per position.")
	all := fs.Bool("all", false, "print the logits of every position, one row each")
	decode := fs.Int("decode", 0, "run the last N tokens one at a time after the prefill")
	df := addDecoderFlags(fs)
	fs.IntVar(df.threads, "t", 0, "the same as -threads")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("logits needs a model and at least one token id")
	}
	tokens, err := parseTokens(pos[1:])
	if err != nil {
		return err
	}
	if *decode < 0 || *decode > len(tokens) {
		return usagef("-decode %d: 0 to the number of tokens (%d)", *decode, len(tokens))
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
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	buf := []byte(`{"model":`)
	buf = strconv.AppendQuote(buf, pos[0])
	buf = append(buf, `,"n_vocab":`...)
	buf = strconv.AppendInt(buf, int64(m.Vocab), 10)
	buf = append(buf, `,"tokens":[`...)
	for i, t := range tokens {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, int64(t), 10)
	}
	buf = append(buf, `],"logits":`...)
	if *all {
		buf = append(buf, '[')
	}
	for i, row := range rows {
		if i > 0 {
			buf = append(buf, ",\n"...)
		}
		buf = append(buf, '[')
		for j, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("the logit of token %d at position %d is %v", j, i, v)
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
	if *all {
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
func computeLogits(m *llama.Model, tokens []int32, all bool, ctx, batch, decode int) ([][]float32, error) {
	if len(tokens) > ctx {
		return nil, fmt.Errorf("%d tokens do not fit the %d-token context (-ctx)", len(tokens), ctx)
	}
	cache := m.NewCache(ctx)
	defer cache.Close()
	defer m.ReleaseGraph()
	var rows [][]float32
	prefill := len(tokens) - decode
	for i := 0; i < len(tokens); {
		end := min(i+batch, prefill)
		if i >= prefill {
			end = i + 1
		}
		out, err := m.Forward(cache, tokens[i:end], all)
		if err != nil {
			return nil, err
		}
		if all {
			rows = append(rows, out...)
		} else if end == len(tokens) {
			rows = out
		}
		i = end
	}
	return rows, nil
}
