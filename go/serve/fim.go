package serve

import (
	"fmt"
	"sync"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

// Fill in the middle (`suffix` on /api/generate and /v1/completions): the
// prompt becomes prefix marker, the prompt, suffix marker, the suffix,
// middle marker, as the templates Ollama ships for code models write it
// (`<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}<|fim_middle|>`)
// and llama.cpp's infill orders it (prefix-suffix-middle). The markers are
// the vocabulary's FIM tokens, found as llama.cpp's loader finds them: the
// GGUF's token ids, else the texts it knows.

// fimKeys are the GGUF keys of the prefix, suffix and middle tokens
// (llama.cpp reads both spellings).
var fimKeys = [3][2]string{
	{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
	{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
	{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
}

// fimTexts are the token texts llama.cpp takes for them when the GGUF
// names none (llama-vocab.cpp, in its order).
var fimTexts = [3][]string{
	{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
	{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
	{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
}

// fimMarkers is a model's three FIM token texts, read once.
type fimMarkers struct {
	once  sync.Once
	texts [3]string
	err   error
}

// fimPrompt is the fill-in-the-middle prompt of prefix and suffix, or a
// 400 naming why the model cannot fill in (as Ollama refuses a suffix for
// a model without the insert capability).
func (l *loaded) fimPrompt(prefix, suffix string) (string, error) {
	m := &l.fim
	m.once.Do(func() { m.texts, m.err = readFIM(l.file.path) })
	if m.err != nil {
		return "", badRequest("model %s does not support insert (suffix): %v", l.file.name, m.err)
	}
	return m.texts[0] + prefix + m.texts[1] + suffix + m.texts[2], nil
}

func readFIM(path string) ([3]string, error) {
	var out [3]string
	f, err := gguf.Open(path)
	if err != nil {
		return out, err
	}
	v, _ := f.Get("tokenizer.ggml.tokens")
	tokens, _ := v.([]string)
	for i := range 3 {
		id := int64(-1)
		for _, k := range fimKeys[i] {
			if x, ok := f.Get(k); ok && id < 0 {
				if n, ok := gguf.Int(x); ok && n >= 0 && n < int64(len(tokens)) {
					id = n
				}
			}
		}
		if id < 0 {
			for _, name := range fimTexts[i] {
				for j, t := range tokens {
					if t == name && id < 0 {
						id = int64(j)
					}
				}
			}
		}
		if id < 0 {
			return out, fmt.Errorf("its vocabulary has no fill-in-the-middle %s token", [3]string{"prefix", "suffix", "middle"}[i])
		}
		out[i] = tokens[id]
	}
	return out, nil
}
