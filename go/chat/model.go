package chat

import "github.com/ggml-rs/ggml-rs/go/fs"

// Encoder is the part of a tokenizer ModelOptions needs.
type Encoder interface {
	Encode(text string, special bool) []int32
}

// ModelOptions are the Options a model fixes: the texts of its BOS and EOS
// tokens (from the metadata c), and whether its tokenizer adds them itself
// (what tok gives for "" with its specials), so that a BOS or EOS the
// template writes is cut, as llama.cpp cuts it. The caller sets
// AddGenerationPrompt and the rest.
func ModelOptions(c fs.Config, tok Encoder) Options {
	tokens := c.Strings("tokenizer.ggml.tokens")
	id := func(key string) int32 {
		if v, ok := c.Value(key).(uint32); ok && int64(v) < int64(len(tokens)) {
			return int32(v)
		}
		return -1
	}
	bos, eos := id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id")
	empty := tok.Encode("", true)
	var o Options
	if bos >= 0 {
		o.BOS, o.AddBOS = tokens[bos], len(empty) > 0 && empty[0] == bos
	}
	if eos >= 0 {
		o.EOS, o.AddEOS = tokens[eos], len(empty) > 0 && empty[len(empty)-1] == eos
	}
	return o
}
