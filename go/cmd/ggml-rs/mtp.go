package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

func runMTP(args []string) error {
	fs := newFlags("mtp", "[flags] MODEL TOKEN...",
		"Runs the multi-token-prediction (MTP) head of a Qwen3.5 model (qwen35, qwen35moe) as\n"+
			"llama.cpp's draft-mtp does: the main model over the tokens, then the head over each token\n"+
			"paired with the main model's hidden state of the token before it (zeros for the first),\n"+
			"and prints {\"model\",\"n_vocab\",\"n_embd\",\"tokens\",\"mtp_logits\"} as JSON: the head's\n"+
			"logits at every position (row p predicts token p+1). With -draft N, also the main model's\n"+
			"greedy next token (\"target_next\") and N greedy draft steps of the head from it\n"+
			"(\"draft\", \"draft_logits\"), each step fed the head's own hidden state.")
	df := addDecoderFlags(fs)
	draft := fs.Int("draft", 0, "greedy draft steps after the tokens (0: none)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("mtp takes a model and at least one token id")
	}
	tokens, err := parseTokens(pos[1:])
	if err != nil {
		return err
	}
	if *draft < 0 {
		return usagef("-draft must be 0 or more")
	}
	b, m, _, err := openDecoder(pos[0], df)
	if err != nil {
		return err
	}
	defer b.Close()
	head, err := model.NewMTP(b)
	if err != nil {
		return err
	}
	r, err := computeMTP(m, head, tokens, *draft, *df.ctx)
	if err != nil {
		return err
	}
	out := map[string]any{"model": pos[0], "n_vocab": m.Vocab, "n_embd": m.Hidden, "tokens": tokens, "mtp_logits": r.logits}
	if *draft > 0 {
		out["target_next"], out["draft"], out["draft_logits"] = r.next, r.draft, r.draftLogits
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// mtpResult is what computeMTP finds.
type mtpResult struct {
	logits      [][]float32 // the head's, at every position of the tokens
	next        int32       // the main model's greedy token after them
	draft       []int32     // the head's greedy draft from next
	draftLogits [][]float32
}

// computeMTP runs the main model m over tokens, then the MTP head over
// each token paired with the main model's hidden state of the one before
// it (zeros for the first: llama.cpp's initial carry-over), and drafts
// steps greedy tokens from the main model's next token, each step taking
// the head's own hidden state of the step before.
func computeMTP(m, head *decoder.Model, tokens []int32, steps, ctx int) (mtpResult, error) {
	var r mtpResult
	if len(tokens)+steps+1 > ctx {
		return r, fmt.Errorf("%d tokens and %d draft steps do not fit the %d-token context (-ctx)", len(tokens), steps, ctx)
	}
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: ctx})
	if err != nil {
		return r, err
	}
	defer cache.Close()
	defer m.ReleaseGraph()
	hcache, err := head.NewCache(decoder.CacheOptions{Capacity: ctx})
	if err != nil {
		return r, err
	}
	defer hcache.Close()
	defer head.ReleaseGraph()

	main, err := m.Run(cache, []decoder.Input{{Sequence: seq(tokens)}}, decoder.RunOptions{Hidden: true})
	if err != nil {
		return r, err
	}
	h := main[0].Hidden
	in := decoder.Input{Sequence: seq(tokens), Hidden: append([][]float32{make([]float32, m.Hidden)}, h[:len(h)-1]...)}
	out, err := head.Run(hcache, []decoder.Input{in}, decoder.RunOptions{All: true, Hidden: true})
	if err != nil {
		return r, err
	}
	r.logits = out[0].Logits
	if steps == 0 {
		return r, nil
	}
	r.next = (sample.Greedy(main[0].Logits[0]))
	x, prev := r.next, h[len(h)-1]
	for i := 0; i < steps; i++ {
		out, err := head.Run(hcache, []decoder.Input{{Sequence: seq([]int32{x}), Hidden: [][]float32{prev}}}, decoder.RunOptions{Hidden: true})
		if err != nil {
			return r, err
		}
		x, prev = (sample.Greedy(out[0].Logits[0])), out[0].Hidden[0]
		r.draft = append(r.draft, x)
		r.draftLogits = append(r.draftLogits, out[0].Logits[0])
	}
	return r, nil
}

// seq is sequence 0 holding tokens.
func seq(tokens []int32) kvcache.Sequence { return kvcache.Sequence{Seq: 0, Tokens: tokens} }
