package convert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf/safetensors"
)

// checkSizes compares config.json's sizes with the tensors of the
// checkpoint before anything is sized from them (the vocabulary is padded
// to vocab_size; the tensor table has num_hidden_layers layers), so that an
// absurd value is an error rather than an allocation: the layers must be
// 0 to num_hidden_layers-1, every one present, and the embeddings and the
// first feed-forward matrix must have the shapes the sizes imply.
func checkSizes(cfg *hfConfig, st *safetensors.File) error {
	type tensor struct {
		hf    string
		shape []int64
	}
	byName := map[string]tensor{}
	layers := map[int]bool{}
	for _, t := range st.Tensors {
		name, skip, err := GGUFName(t.Name)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		byName[name] = tensor{t.Name, t.Shape}
		if rest, ok := strings.CutPrefix(name, "blk."); ok {
			num, _, _ := strings.Cut(rest, ".")
			l, err := strconv.Atoi(num)
			if err != nil || l < 0 {
				return fmt.Errorf("convert: tensor %q: layer number %s out of range", t.Name, num)
			}
			layers[l] = true
		}
	}
	last := -1
	for l := range layers {
		last = max(last, l)
	}
	if len(layers) != last+1 {
		return fmt.Errorf("convert: model.safetensors has layers up to %d but only %d of them", last, len(layers))
	}
	if cfg.NumHiddenLayers != len(layers) {
		return fmt.Errorf("convert: config.json's num_hidden_layers is %d, model.safetensors has %d layers", cfg.NumHiddenLayers, len(layers))
	}
	h := int64(cfg.HiddenSize)
	for _, w := range []struct {
		name, sizes string
		shape       []int64
	}{
		{"token_embd.weight", "vocab_size and hidden_size", []int64{int64(cfg.VocabSize), h}},
		{"position_embd.weight", "max_position_embeddings and hidden_size", []int64{int64(cfg.MaxPositionEmbeddings), h}},
		{"token_types.weight", "type_vocab_size and hidden_size", []int64{int64(cfg.TypeVocabSize), h}},
		{"blk.0.ffn_up.weight", "intermediate_size and hidden_size", []int64{int64(cfg.IntermediateSize), h}},
	} {
		t, ok := byName[w.name]
		if !ok {
			return fmt.Errorf("convert: model.safetensors lacks the tensor %s (in llama.cpp's names)", w.name)
		}
		if !slices.Equal(t.shape, w.shape) {
			return fmt.Errorf("convert: tensor %q has shape %v, config.json's %s imply %v", t.hf, t.shape, w.sizes, w.shape)
		}
	}
	return nil
}
