package decoder

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/sample"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/bpe"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/spm"
)

// Tokenizer is what generation needs of a tokenizer.
type Tokenizer interface {
	Encode(text string, special bool) []int32
	Decode(ids []int32) string
	IsEOG(id int32) bool
}

// NewTokenizer builds the tokenizer of a model's metadata:
// tokenizer.ggml.model "gpt2" (byte-level BPE) or "llama" (SentencePiece).
func NewTokenizer(c fs.Config) (Tokenizer, error) {
	tokens := c.Strings("tokenizer.ggml.tokens")
	types := c.Ints("tokenizer.ggml.token_type")
	id := func(key string) int32 {
		if v, ok := c.Value(key).(uint32); ok {
			return int32(v)
		}
		return -1
	}
	switch m := c.String("tokenizer.ggml.model"); m {
	case "gpt2":
		pre := c.String("tokenizer.ggml.pre", "default")
		t, err := bpe.New(tokens, types, c.Strings("tokenizer.ggml.merges"), pre)
		if err != nil {
			return nil, err
		}
		t.BOS, t.EOS = id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id")
		if bpe.NoBOS(pre) {
			t.BOS = -1
		}
		// Defaults as llama.cpp's: BOS for the llama3 family of
		// pre-tokenizers only, never EOS.
		t.AddBOS = c.Bool("tokenizer.ggml.add_bos_token", t.AddBOS)
		t.AddEOS = c.Bool("tokenizer.ggml.add_eos_token", false)
		return t, nil
	case "llama":
		types, eog := spmEOG(tokens, types)
		t, err := spm.New(tokens, c.Floats("tokenizer.ggml.scores"), types)
		if err != nil {
			return nil, err
		}
		t.BOS, t.EOS = id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id")
		if u := id("tokenizer.ggml.unknown_token_id"); u >= 0 {
			t.UNK = u
		}
		t.AddBOS = c.Bool("tokenizer.ggml.add_bos_token", true)
		t.AddEOS = c.Bool("tokenizer.ggml.add_eos_token", false)
		t.AddSpacePrefix = c.Bool("tokenizer.ggml.add_space_prefix", true)
		if len(eog) > 0 {
			return &spmTokenizer{t, eog}, nil
		}
		return t, nil
	default:
		return nil, fmt.Errorf("tokenizer model %q is not supported (gpt2 or llama)", m)
	}
}

// spmEOGNames are the texts llama.cpp's vocabulary loader takes for
// end-of-generation tokens, whatever the vocabulary's kind (package bpe
// has the same list for byte-level BPE).
var spmEOGNames = map[string]bool{
	"<|eot_id|>": true, "<|im_end|>": true, "<|end|>": true, "<|return|>": true, "<|call|>": true,
	"<|flush|>": true, "<|calls|>": true, "<end_of_turn>": true, "<|endoftext|>": true, "</s>": true,
	"<|eom_id|>": true, "<EOT>": true, "_<EOT>": true, "[EOT]": true, "[EOS]": true, "<|end_of_text|>": true,
	"<end_of_utterance>": true, "<eos>": true, "<turn|>": true, "<|tool_response>": true,
	"<｜end▁of▁sentence｜>": true, "[e~[": true,
}

// spmEOG applies llama.cpp's loader to a SentencePiece vocabulary's
// types: a token named as an end of generation (spmEOGNames) that is not
// a control token becomes one, so that it is split out of a text only
// with special tokens parsed, and never rendered. Gemma 3's </s> is
// user-defined in the file and control in llama.cpp. It returns the
// types (a copy when changed) and those tokens.
func spmEOG(tokens []string, types []int32) ([]int32, map[int32]bool) {
	eog := map[int32]bool{}
	copied := false
	for i, s := range tokens {
		if !spmEOGNames[s] {
			continue
		}
		eog[int32(i)] = true
		if i < len(types) && types[i] != spm.TypeControl {
			if !copied {
				types, copied = slices.Clone(types), true
			}
			types[i] = spm.TypeControl
		}
	}
	return types, eog
}

// spmTokenizer is a SentencePiece tokenizer that ends generation at
// every token llama.cpp takes for an end of generation.
type spmTokenizer struct {
	*spm.Tokenizer
	eog map[int32]bool
}

func (t *spmTokenizer) IsEOG(id int32) bool { return t.eog[id] || t.Tokenizer.IsEOG(id) }

// Stats are a generation's token counts and times.
type Stats struct {
	PromptTokens, Generated int
	Prefill, Decode         time.Duration
}

// GenerateOptions configure Generate.
type GenerateOptions struct {
	MaxTokens int // tokens to generate (<= 0: until EOG or the cache is full)
	Batch     int // prefill batch size (default 512)
	Sampler   *sample.Sampler
	// IgnoreEOG keeps generating past end-of-generation tokens (benchmarks).
	IgnoreEOG bool
	IsEOG     func(int32) bool
}

// Generate prefills prompt into cache (in batches), then decodes one token
// at a time, calling emit with each new token; emit returning false stops.
func (m *Model) Generate(cache *kvcache.Cache, prompt []int32, o GenerateOptions, emit func(int32) bool) (Stats, error) {
	var st Stats
	if len(prompt) == 0 {
		return st, errors.New(m.Arch + ": empty prompt")
	}
	// One OS thread for the whole loop: ggml's compute runs on the calling
	// thread, and a goroutine that hops between threads (and cores) at
	// every cgo call costs a decode step about 5% on a 2-core machine.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer m.ReleaseGraph()
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.Sampler == nil {
		o.Sampler = sample.New(sample.Options{})
	}
	start := time.Now()
	out, err := m.ForwardBatch(cache, []kvcache.Sequence{{Tokens: prompt}}, false, o.Batch)
	if err != nil {
		return st, err
	}
	logits := out[0][0]
	st.PromptTokens = len(prompt)
	st.Prefill = time.Since(start)
	start = time.Now()
	defer func() { st.Decode = time.Since(start) }()
	for o.MaxTokens <= 0 || st.Generated < o.MaxTokens {
		tok := o.Sampler.Sample(logits)
		if tok < 0 { // the sampler's grammar failed
			return st, o.Sampler.Err()
		}
		st.Generated++
		if !o.IgnoreEOG && o.IsEOG != nil && o.IsEOG(tok) {
			break
		}
		if emit != nil && !emit(tok) {
			break
		}
		if o.MaxTokens > 0 && st.Generated >= o.MaxTokens || cache.Len(0) >= cache.Capacity() {
			break
		}
		out, err := m.Forward(cache, []int32{tok}, false)
		if err != nil {
			st.Decode = time.Since(start)
			return st, err
		}
		logits = out[0]
	}
	st.Decode = time.Since(start)
	return st, nil
}
