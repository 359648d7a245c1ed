// Package convert turns Hugging Face checkpoints into GGUF files with
// llama.cpp's conventions, so that llama.cpp and this module's models read
// them alike. BERT: model.safetensors, config.json, vocab.txt; optionally
// sentence-transformers' modules.json and 1_Pooling/config.json, and the
// tokenizer's special_tokens_map.json (package model/bert runs the result).
package convert

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/gguf/safetensors"
	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/wordpiece"
)

// BERTOptions adjusts BERT.
type BERTOptions struct {
	// Type of the matrices: gguf.TensorF32 (default) or gguf.TensorF16.
	// Vectors (norms, biases) are always F32, as llama.cpp writes them.
	Type gguf.TensorType
	// Name is general.name (default: the directory's name).
	Name string
	// Pooling overrides what 1_Pooling/config.json says (default mean
	// when there is no such file). Nil: no override.
	Pooling *bert.Pooling
}

// hfConfig is the part of config.json the conversion reads.
type hfConfig struct {
	ModelType             string   `json:"model_type"`
	Architectures         []string `json:"architectures"`
	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	IntermediateSize      int      `json:"intermediate_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	LayerNormEps          float64  `json:"layer_norm_eps"`
	TypeVocabSize         int      `json:"type_vocab_size"`
	VocabSize             int      `json:"vocab_size"`
	HiddenAct             string   `json:"hidden_act"`
	PositionEmbeddingType string   `json:"position_embedding_type"`
}

// BERT reads the BERT checkpoint in dir and returns the GGUF file to write.
func BERT(dir string, opts BERTOptions) (*gguf.Builder, error) {
	switch opts.Type {
	case gguf.TensorF32, gguf.TensorF16:
	default:
		return nil, fmt.Errorf("convert: unsupported output type %s (f32 or f16)", opts.Type)
	}
	var cfg hfConfig
	if err := readJSON(filepath.Join(dir, "config.json"), &cfg); err != nil {
		return nil, err
	}
	if err := checkConfig(&cfg); err != nil {
		return nil, fmt.Errorf("convert: %s: %w", filepath.Join(dir, "config.json"), err)
	}
	vocab, err := readVocab(filepath.Join(dir, "vocab.txt"))
	if err != nil {
		return nil, err
	}
	if err := checkLowercase(dir); err != nil {
		return nil, err
	}
	pooling, normalize, err := sentenceTransformers(dir)
	if err != nil {
		return nil, err
	}
	if opts.Pooling != nil {
		pooling = *opts.Pooling
	}
	name := opts.Name
	if name == "" {
		abs, _ := filepath.Abs(dir)
		name = filepath.Base(abs)
	}

	st, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// The vocabulary and the tensor table are sized from config.json:
	// its sizes must be those of the tensors there are.
	if err := checkSizes(&cfg, st); err != nil {
		return nil, err
	}

	b := gguf.NewBuilder()
	add := func(k string, v any) {
		if err == nil {
			err = b.Add(k, v)
		}
	}
	fileType := uint32(0) // llama.cpp's LLAMA_FTYPE_ALL_F32
	if opts.Type == gguf.TensorF16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}
	add("general.architecture", "bert")
	add("general.type", "model")
	add("general.name", name)
	add("general.file_type", fileType)
	add("general.quantization_version", uint32(2))
	add("bert.block_count", uint32(cfg.NumHiddenLayers))
	add("bert.context_length", uint32(cfg.MaxPositionEmbeddings))
	add("bert.embedding_length", uint32(cfg.HiddenSize))
	add("bert.feed_forward_length", uint32(cfg.IntermediateSize))
	add("bert.attention.head_count", uint32(cfg.NumAttentionHeads))
	add("bert.attention.layer_norm_epsilon", float32(cfg.LayerNormEps))
	add("bert.attention.causal", false)
	add("bert.pooling_type", uint32(pooling))
	if normalize != nil {
		add("bert."+bert.KeyNormalize, *normalize)
	}

	tokens, types, sp, err2 := ggufVocab(dir, vocab, cfg.VocabSize)
	if err2 != nil {
		return nil, err2
	}
	add("tokenizer.ggml.token_type_count", uint32(cfg.TypeVocabSize))
	add("tokenizer.ggml.model", "bert")
	add("tokenizer.ggml.tokens", tokens)
	add("tokenizer.ggml.token_type", types)
	// llama.cpp's converter: [CLS] is the BOS token and [SEP] the EOS and
	// separator token; both are added around a sequence.
	for _, s := range []struct {
		key string
		id  int32
	}{
		{"tokenizer.ggml.bos_token_id", sp.CLS},
		{"tokenizer.ggml.eos_token_id", sp.SEP},
		{"tokenizer.ggml.unknown_token_id", sp.UNK},
		{"tokenizer.ggml.seperator_token_id", sp.SEP}, // llama.cpp's spelling
		{"tokenizer.ggml.padding_token_id", sp.PAD},
		{"tokenizer.ggml.mask_token_id", sp.MASK},
	} {
		if s.id >= 0 {
			add(s.key, uint32(s.id))
		}
	}
	add("tokenizer.ggml.add_bos_token", true)
	add("tokenizer.ggml.add_eos_token", true)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}

	if err := addTensors(b, st, &cfg, opts.Type); err != nil {
		return nil, err
	}
	return b, nil
}

// Bounds on the files read whole: the JSON files (a few KiB in practice)
// and vocab.txt (under 1 MiB for BERT's vocabularies).
const (
	maxJSON  = 16 << 20
	maxVocab = 256 << 20
)

// readJSON decodes the JSON file at path (a regular file of at most
// maxJSON bytes) into v.
func readJSON(path string, v any) error {
	data, err := regfile.ReadFile(path, maxJSON)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("convert: %s: %w", path, err)
	}
	return nil
}

func checkConfig(c *hfConfig) error {
	if c.ModelType != "bert" {
		return fmt.Errorf("model_type is %q, not \"bert\"", c.ModelType)
	}
	if c.HiddenSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 || c.IntermediateSize <= 0 ||
		c.MaxPositionEmbeddings <= 0 || c.VocabSize <= 0 {
		return errors.New("hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, max_position_embeddings and vocab_size must all be positive")
	}
	// GGUF holds them as uint32 and token ids as int32.
	for _, k := range []struct {
		name string
		v    int
	}{
		{"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"intermediate_size", c.IntermediateSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings}, {"vocab_size", c.VocabSize},
		{"type_vocab_size", c.TypeVocabSize},
	} {
		if k.v > math.MaxInt32 {
			return fmt.Errorf("%s %d is more than %d", k.name, k.v, math.MaxInt32)
		}
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if c.HiddenAct != "" && c.HiddenAct != "gelu" {
		return fmt.Errorf("hidden_act %q is not supported (only \"gelu\")", c.HiddenAct)
	}
	if c.PositionEmbeddingType != "" && c.PositionEmbeddingType != "absolute" {
		return fmt.Errorf("position_embedding_type %q is not supported (only \"absolute\")", c.PositionEmbeddingType)
	}
	if c.LayerNormEps <= 0 {
		c.LayerNormEps = 1e-12 // BERT's default
	}
	if c.TypeVocabSize <= 0 {
		c.TypeVocabSize = 2
	}
	return nil
}

// readVocab reads vocab.txt (a regular file of at most maxVocab bytes):
// one token per line, id = line number.
func readVocab(path string) ([]string, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	} else if st.Size() > maxVocab {
		return nil, fmt.Errorf("convert: %s is larger than the %d bytes this reader accepts", path, maxVocab)
	}
	var tokens []string
	sc := bufio.NewScanner(io.LimitReader(f, maxVocab))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		tokens = append(tokens, strings.TrimSuffix(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("convert: %s: %w", path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("convert: %s is empty", path)
	}
	return tokens, nil
}

// checkLowercase refuses cased vocabularies (tokenizer_config.json's
// do_lower_case false): the tokenizer here, like llama.cpp's, lowercases.
func checkLowercase(dir string) error {
	var tc struct {
		DoLowerCase *bool `json:"do_lower_case"`
	}
	path := filepath.Join(dir, "tokenizer_config.json")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := readJSON(path, &tc); err != nil {
		return err
	}
	if tc.DoLowerCase != nil && !*tc.DoLowerCase {
		return fmt.Errorf("convert: %s: cased vocabularies (do_lower_case false) are not supported", path)
	}
	return nil
}

// sentenceTransformers reads the pooling mode from 1_Pooling/config.json
// (mean when absent) and whether modules.json has a Normalize module (nil
// when there is no modules.json).
func sentenceTransformers(dir string) (bert.Pooling, *bool, error) {
	pooling := bert.PoolingMean
	modules := filepath.Join(dir, "modules.json")
	var normalize *bool
	poolDir := "1_Pooling"
	if _, err := os.Stat(modules); err == nil {
		var ms []struct {
			Path string `json:"path"`
			Type string `json:"type"`
		}
		if err := readJSON(modules, &ms); err != nil {
			return 0, nil, err
		}
		n := false
		for _, m := range ms {
			switch {
			case strings.HasSuffix(m.Type, ".Normalize"):
				n = true
			case strings.HasSuffix(m.Type, ".Pooling") && m.Path != "":
				poolDir = m.Path
			case strings.HasSuffix(m.Type, ".Dense"):
				return 0, nil, fmt.Errorf("convert: %s: Dense modules after pooling are not supported", modules)
			}
		}
		normalize = &n
	}
	poolCfg := filepath.Join(dir, poolDir, "config.json")
	if _, err := os.Stat(poolCfg); err == nil {
		var pc map[string]any
		if err := readJSON(poolCfg, &pc); err != nil {
			return 0, nil, err
		}
		switch {
		case pc["pooling_mode_mean_tokens"] == true:
			pooling = bert.PoolingMean
		case pc["pooling_mode_cls_token"] == true:
			pooling = bert.PoolingCLS
		case pc["pooling_mode_lasttoken"] == true:
			pooling = bert.PoolingLast
		default:
			return 0, nil, fmt.Errorf("convert: %s: only mean, CLS and last-token pooling are supported", poolCfg)
		}
	}
	return pooling, normalize, nil
}

// ggufVocab spells the vocabulary as llama.cpp's converter does (control
// tokens unchanged, continuations without "##", word starts with a U+2581
// prefix), pads it to the embedding's row count with unused tokens, and
// finds the special tokens.
func ggufVocab(dir string, vocab []string, rows int) ([]string, []int32, wordpiece.Special, error) {
	sp := wordpiece.Special{CLS: -1, SEP: -1, UNK: -1, PAD: -1, MASK: -1}
	if len(vocab) > rows {
		return nil, nil, sp, fmt.Errorf("convert: vocab.txt has %d tokens, the model's vocab_size is %d", len(vocab), rows)
	}
	names := map[string]string{"cls": "[CLS]", "sep": "[SEP]", "unk": "[UNK]", "pad": "[PAD]", "mask": "[MASK]"}
	var stm map[string]any
	if _, err := os.Stat(filepath.Join(dir, "special_tokens_map.json")); err == nil {
		if err := readJSON(filepath.Join(dir, "special_tokens_map.json"), &stm); err != nil {
			return nil, nil, sp, err
		}
	}
	for k := range names {
		switch v := stm[k+"_token"].(type) {
		case string:
			names[k] = v
		case map[string]any: // {"content": "[CLS]", ...}
			if s, ok := v["content"].(string); ok {
				names[k] = s
			}
		}
	}
	ids := map[string]int32{}
	for i, t := range vocab {
		if _, dup := ids[t]; !dup {
			ids[t] = int32(i)
		}
	}
	find := func(k string) int32 {
		if id, ok := ids[names[k]]; ok {
			return id
		}
		return -1
	}
	sp = wordpiece.Special{CLS: find("cls"), SEP: find("sep"), UNK: find("unk"), PAD: find("pad"), MASK: find("mask")}
	if sp.UNK < 0 {
		return nil, nil, sp, fmt.Errorf("convert: vocab.txt has no unknown token %q", names["unk"])
	}
	control := map[int32]bool{}
	for _, id := range []int32{sp.CLS, sp.SEP, sp.UNK, sp.PAD, sp.MASK} {
		if id >= 0 {
			control[id] = true
		}
	}
	tokens := make([]string, rows)
	types := make([]int32, rows)
	for i := range tokens {
		switch {
		case i >= len(vocab):
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), wordpiece.TypeUnused
		case control[int32(i)]:
			tokens[i], types[i] = vocab[i], wordpiece.TypeControl
		case strings.HasPrefix(vocab[i], "##"):
			tokens[i], types[i] = vocab[i][2:], wordpiece.TypeNormal
		default:
			tokens[i], types[i] = "\u2581"+vocab[i], wordpiece.TypeNormal
		}
	}
	return tokens, types, sp, nil
}

// tensorNames maps Hugging Face BERT names (without a "bert." prefix) to
// llama.cpp's GGUF names; %d is the layer.
var tensorNames = []struct {
	hf   *regexp.Regexp
	gguf string
}{
	{regexp.MustCompile(`^embeddings\.word_embeddings\.weight$`), "token_embd.weight"},
	{regexp.MustCompile(`^embeddings\.token_type_embeddings\.weight$`), "token_types.weight"},
	{regexp.MustCompile(`^embeddings\.position_embeddings\.weight$`), "position_embd.weight"},
	{regexp.MustCompile(`^embeddings\.LayerNorm\.(weight|bias)$`), "token_embd_norm.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.attention\.self\.query\.(weight|bias)$`), "blk.%s.attn_q.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.attention\.self\.key\.(weight|bias)$`), "blk.%s.attn_k.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.attention\.self\.value\.(weight|bias)$`), "blk.%s.attn_v.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)$`), "blk.%s.attn_output.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.(weight|bias)$`), "blk.%s.attn_output_norm.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.intermediate\.dense\.(weight|bias)$`), "blk.%s.ffn_up.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.output\.dense\.(weight|bias)$`), "blk.%s.ffn_down.%s"},
	{regexp.MustCompile(`^encoder\.layer\.(\d+)\.output\.LayerNorm\.(weight|bias)$`), "blk.%s.layer_output_norm.%s"},
}

// GGUFName is the GGUF name of a Hugging Face BERT tensor; skip is true for
// tensors an embedding model does not use (position ids, the pooler, the
// pre-training heads).
func GGUFName(hf string) (name string, skip bool, err error) {
	n := strings.TrimPrefix(hf, "bert.")
	if strings.HasSuffix(n, ".gamma") {
		n = strings.TrimSuffix(n, ".gamma") + ".weight"
	} else if strings.HasSuffix(n, ".beta") {
		n = strings.TrimSuffix(n, ".beta") + ".bias"
	}
	if n == "embeddings.position_ids" || strings.HasPrefix(n, "pooler.") || strings.HasPrefix(n, "cls.") {
		return "", true, nil
	}
	for _, m := range tensorNames {
		if sub := m.hf.FindStringSubmatch(n); sub != nil {
			args := make([]any, len(sub)-1)
			for i, s := range sub[1:] {
				args[i] = s
			}
			return fmt.Sprintf(m.gguf, args...), false, nil
		}
	}
	return "", false, fmt.Errorf("convert: tensor %q has no GGUF name in the bert conventions", hf)
}

// addTensors converts every used tensor of st, checking it against the
// configuration's shapes, in llama.cpp's order (embeddings, then layers).
func addTensors(b *gguf.Builder, st *safetensors.File, cfg *hfConfig, typ gguf.TensorType) error {
	h, ff := int64(cfg.HiddenSize), int64(cfg.IntermediateSize)
	want := map[string][]int64{
		"token_embd.weight":      {int64(cfg.VocabSize), h},
		"token_types.weight":     {int64(cfg.TypeVocabSize), h},
		"position_embd.weight":   {int64(cfg.MaxPositionEmbeddings), h},
		"token_embd_norm.weight": {h}, "token_embd_norm.bias": {h},
	}
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			want[p+n+".weight"], want[p+n+".bias"] = []int64{h, h}, []int64{h}
		}
		want[p+"ffn_up.weight"], want[p+"ffn_up.bias"] = []int64{ff, h}, []int64{ff}
		want[p+"ffn_down.weight"], want[p+"ffn_down.bias"] = []int64{h, ff}, []int64{h}
		for _, n := range []string{"attn_output_norm", "layer_output_norm"} {
			want[p+n+".weight"], want[p+n+".bias"] = []int64{h}, []int64{h}
		}
	}

	type item struct {
		name string
		t    safetensors.Tensor
	}
	var items []item
	for _, t := range st.Tensors {
		name, skip, err := GGUFName(t.Name)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		shape, ok := want[name]
		if !ok {
			return fmt.Errorf("convert: tensor %q (%s) is not part of a %d-layer bert model", t.Name, name, cfg.NumHiddenLayers)
		}
		if fmt.Sprint(shape) != fmt.Sprint(t.Shape) {
			return fmt.Errorf("convert: tensor %q has shape %v, config.json implies %v", t.Name, t.Shape, shape)
		}
		delete(want, name)
		items = append(items, item{name, t})
	}
	if len(want) > 0 {
		var missing []string
		for n := range want {
			missing = append(missing, n)
		}
		return fmt.Errorf("convert: model.safetensors lacks %d tensors, e.g. %s", len(missing), missing[0])
	}
	// Non-layer tensors first, then layer by layer (file order within).
	layer := func(n string) int {
		l := -1
		fmt.Sscanf(n, "blk.%d.", &l)
		return l
	}
	slices.SortStableFunc(items, func(a, b item) int { return cmp.Compare(layer(a.name), layer(b.name)) })
	for _, it := range items {
		vals, err := st.Float32s(it.t)
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		shape := make([]uint64, len(it.t.Shape)) // ggml order: reversed
		for i, d := range it.t.Shape {
			shape[len(shape)-1-i] = uint64(d)
		}
		ty := typ
		if len(shape) < 2 {
			ty = gguf.TensorF32
		}
		if err := b.AddTensor(it.name, ty, shape, encode(vals, ty)); err != nil {
			return fmt.Errorf("convert: %w", err)
		}
	}
	return nil
}

func encode(vals []float32, ty gguf.TensorType) []byte {
	if ty == gguf.TensorF16 {
		out := make([]byte, 2*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint16(out[2*i:], gguf.Float16(v))
		}
		return out
	}
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}
