// Package tinymodel writes tiny random-weight models of llama's variants
// (llama, qwen3) for tests, with the weights it wrote, so a test can hold
// a forward pass to a plain-Go reference.
package tinymodel

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"slices"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/bpe"
)

// TinyConfig is the shape of a test model made by WriteTiny.
type TinyConfig struct {
	Layers, Hidden, Heads, KVHeads, FeedForward int
	Tied                                        bool
	// Control are control tokens appended to the vocabulary (after BOS
	// and EOS), such as fill-in-the-middle markers; KV, metadata added.
	Control []string
	KV      map[string]any
}

// DefaultTiny is 2 layers, d 64, 4 heads, 2 key/value heads, ff 128.
var DefaultTiny = TinyConfig{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FeedForward: 128}

// TinyVocab is WriteTiny's byte-level BPE vocabulary: the 256 bytes, a
// few merges, and <|begin_of_text|>, <|end_of_text|> (BOS, EOS). It
// returns the tokens, their types and the merges.
func TinyVocab() (tokens []string, types []int32, merges []string) {
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(bpe.ByteRune(byte(b))))
		types = append(types, bpe.TypeNormal)
	}
	merges = []string{"Ġ t", "h e", "Ġt he", "i n", "a n", "e r", "o n", "Ġ a", "r e", "a t", "o r", "e n", "Ġ s", "e d",
		"Ġ w", "i s", "Ġ o", "l l", "i t", "a r", "Ġ c", "Ġ b", "e s", "o u", "Ġ f", "Ġ m", "Ġ p", "in g", "Ġ h", "l e",
		"Ġo f", "Ġa n", "Ġan d", "Ġ i", "Ġi n", "o w", "he ll", "hell o", "Ġw or", "Ġwor ld", "Ġ l", "l o"}
	for _, m := range merges {
		var s []rune
		for _, r := range m {
			if r != ' ' {
				s = append(s, r)
			}
		}
		tokens = append(tokens, string(s))
		types = append(types, bpe.TypeNormal)
	}
	tokens = append(tokens, "<|begin_of_text|>", "<|end_of_text|>")
	types = append(types, bpe.TypeControl, bpe.TypeControl)
	return tokens, types, merges
}

// WriteTiny writes a deterministic random-weight model of variant v (F32
// weights) to path and returns its weights by tensor name (ggml order:
// fastest dimension first).
func WriteTiny(path string, v llama.Variant, c TinyConfig, seed int64) (map[string][]float32, error) {
	r := rand.New(rand.NewSource(seed))
	tokens, types, merges := TinyVocab()
	bos, eos := len(tokens)-2, len(tokens)-1
	for _, t := range c.Control {
		tokens = append(tokens, t)
		types = append(types, bpe.TypeControl)
	}
	hd := c.Hidden / c.Heads
	b := gguf.NewBuilder()
	a := v.Arch
	kv := []struct {
		k string
		v any
	}{
		{"general.architecture", a}, {"general.name", "tiny-" + a},
		{a + ".block_count", uint32(c.Layers)}, {a + ".context_length", uint32(2048)},
		{a + ".embedding_length", uint32(c.Hidden)}, {a + ".feed_forward_length", uint32(c.FeedForward)},
		{a + ".attention.head_count", uint32(c.Heads)}, {a + ".attention.head_count_kv", uint32(c.KVHeads)},
		{a + ".rope.freq_base", float32(10000)}, {a + ".attention.layer_norm_rms_epsilon", float32(1e-6)},
		{a + ".rope.dimension_count", uint32(hd)},
		{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", map[bool]string{true: "qwen2", false: "llama-bpe"}[v.Arch == "qwen3"]},
		{"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.token_type", types}, {"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(bos)}, {"tokenizer.ggml.eos_token_id", uint32(eos)},
	}
	for _, k := range slices.Sorted(maps.Keys(c.KV)) {
		kv = append(kv, struct {
			k string
			v any
		}{k, c.KV[k]})
	}
	if v.QKNorm {
		kv = append(kv, struct {
			k string
			v any
		}{a + ".attention.key_length", uint32(hd)})
	}
	for _, x := range kv {
		if err := b.Add(x.k, x.v); err != nil {
			return nil, err
		}
	}
	w := map[string][]float32{}
	var err error
	add := func(name string, scale, offset float64, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]float32, n)
		raw := make([]byte, 0, 4*n)
		for i := range data {
			data[i] = float32(offset + r.NormFloat64()*scale)
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(data[i]))
		}
		dims := make([]uint64, len(shape))
		for i, d := range shape {
			dims[i] = uint64(d)
		}
		if e := b.AddTensor(name, gguf.TensorF32, dims, raw); e != nil && err == nil {
			err = e
		}
		w[name] = data
	}
	d, ff, vocab := c.Hidden, c.FeedForward, len(tokens)
	lin := func(in float64) float64 { return 1 / math.Sqrt(in) }
	add("token_embd.weight", 1, 0, d, vocab)
	add("output_norm.weight", 0.1, 1, d)
	if !c.Tied {
		add("output.weight", lin(float64(d)), 0, d, vocab)
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", 0.1, 1, d)
		add(p+"attn_q.weight", lin(float64(d)), 0, d, hd*c.Heads)
		add(p+"attn_k.weight", lin(float64(d)), 0, d, hd*c.KVHeads)
		add(p+"attn_v.weight", lin(float64(d)), 0, d, hd*c.KVHeads)
		add(p+"attn_output.weight", lin(float64(hd*c.Heads)), 0, hd*c.Heads, d)
		if v.QKNorm {
			add(p+"attn_q_norm.weight", 0.1, 1, hd)
			add(p+"attn_k_norm.weight", 0.1, 1, hd)
		}
		add(p+"ffn_norm.weight", 0.1, 1, d)
		add(p+"ffn_gate.weight", lin(float64(d)), 0, d, ff)
		add(p+"ffn_up.weight", lin(float64(d)), 0, d, ff)
		add(p+"ffn_down.weight", lin(float64(ff)), 0, ff, d)
	}
	if err != nil {
		return nil, err
	}
	return w, b.WriteFile(path)
}
