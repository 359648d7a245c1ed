package quantize

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// Options of a quantization run.
type Options struct {
	FileType FileType
	// Pure: every quantizable tensor gets the file type's default type
	// (no mixes, no output/embedding rule); the fallback still applies.
	Pure bool
	// OutputType and TokenEmbeddingType, when set, are the types of
	// output.weight and token_embd.weight (llama.cpp's
	// output_tensor_type, token_embedding_type).
	OutputType, TokenEmbeddingType *gguf.TensorType
	// Imatrix: the importance matrix (LoadImatrix, filtered), nil for
	// none. The types of the IQ1/IQ2/IQ3_XXS and Q2_K_S file types need
	// one.
	Imatrix *Imatrix
	// TensorTypes: llama-quantize's --tensor-type overrides; the first
	// whose pattern is found in a tensor's name gives its type, in place
	// of the file type's mix (not of the fallback).
	TensorTypes []TensorTypeOverride
	// Threads quantizing each tensor's rows (<= 0: 1). The output does not
	// depend on it.
	Threads int
	// Progress, when set, gets a line per tensor.
	Progress io.Writer
}

// Alignment is the data alignment llama.cpp's quantizer writes
// (GGUF_DEFAULT_ALIGNMENT, whatever the input's general.alignment).
const Alignment = 32

// item: one tensor of the output, with where its data comes from.
type item struct {
	in  gguf.TensorInfo
	out gguf.TensorInfo
	// imatrix: the importance weights of its columns, per expert
	// (Shape[0] × experts values), or nil
	imatrix []float32
}

// TensorTypeOverride is one --tensor-type PATTERN=TYPE.
type TensorTypeOverride struct {
	Pattern string
	Type    gguf.TensorType
	re      *regexp.Regexp
}

// ParseTensorTypeOverride parses PATTERN=TYPE as llama-quantize's
// --tensor-type does: the pattern (lowercased) is a regular expression
// searched for in tensor names ("attn_v=q8_0", "blk\.[0-3]\.ffn_down=q6_k"),
// TYPE a ggml type name.
func ParseTensorTypeOverride(s string) (TensorTypeOverride, error) {
	pat, typ, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return TensorTypeOverride{}, fmt.Errorf("malformed tensor type %q (want PATTERN=TYPE)", s)
	case pat == "":
		return TensorTypeOverride{}, fmt.Errorf("tensor type %q: missing tensor name", s)
	case typ == "":
		return TensorTypeOverride{}, fmt.Errorf("tensor type %q: missing quantization type", s)
	}
	pat = strings.ToLower(pat)
	re, err := regexp.Compile(pat)
	if err != nil {
		return TensorTypeOverride{}, fmt.Errorf("tensor type %q: bad pattern: %v", s, err)
	}
	t, err := ParseTensorType(typ)
	if err != nil {
		return TensorTypeOverride{}, fmt.Errorf("tensor type %q: %v", s, err)
	}
	return TensorTypeOverride{Pattern: pat, Type: t, re: re}, nil
}

// requiresImatrix: tensor_requires_imatrix, the tensors llama.cpp will not
// quantize to typ without importance weights (garbage otherwise).
func requiresImatrix(name string, typ gguf.TensorType, ft FileType) bool {
	if isTokenEmbd(name) || name == "output.weight" {
		return false
	}
	switch typ {
	case gguf.TensorIQ3XXS, gguf.TensorIQ2XXS, gguf.TensorIQ2XS, gguf.TensorIQ2S, gguf.TensorIQ1M, gguf.TensorIQ1S:
		return true
	case gguf.TensorQ2K:
		return ft == MostlyQ2KS
	}
	return false
}

// imatrixKVs: the keys llama-quantize adds for an importance matrix, with
// its truncation of strings to 127 bytes.
func imatrixKVs(m *Imatrix) []gguf.KV {
	trunc := func(s string) string {
		if len(s) > 127 {
			return s[:127]
		}
		return s
	}
	kvs := []gguf.KV{{Key: "quantize.imatrix.file", Value: trunc(m.Path)}}
	if len(m.Datasets) > 0 {
		kvs = append(kvs, gguf.KV{Key: "quantize.imatrix.dataset", Value: trunc(m.Datasets[0])})
	}
	kvs = append(kvs, gguf.KV{Key: "quantize.imatrix.entries_count", Value: uint32(len(m.Entries))})
	if m.ChunkCount > 0 {
		kvs = append(kvs, gguf.KV{Key: "quantize.imatrix.chunks_count", Value: uint32(m.ChunkCount)})
	}
	return kvs
}

// blockIndex parses the layer of a "blk.N...." name as sscanf("blk.%d.")
// does (what follows the number is not checked).
func blockIndex(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	i, neg := 0, false
	if rest != "" && (rest[0] == '-' || rest[0] == '+') {
		neg, rest = rest[0] == '-', rest[1:]
	}
	n, digits := 0, 0
	for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9'; i++ {
		n = n*10 + int(rest[i]-'0')
		digits++
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// sortTensors orders tensors as llama.cpp's weights_map: by layer (names
// not of a layer first, as layer -1), then by name.
func sortTensors(ts []gguf.TensorInfo) {
	layer := func(name string) int {
		if l, ok := blockIndex(name); ok {
			return l
		}
		return -1
	}
	sort.SliceStable(ts, func(i, j int) bool {
		li, lj := layer(ts[i].Name), layer(ts[j].Name)
		if li != lj {
			return li < lj
		}
		return ts[i].Name < ts[j].Name
	})
}

// firstOf: a scalar key's value, or an array's first element.
func firstOf(v any) (int64, bool) {
	if n, ok := gguf.Int(v); ok {
		return n, true
	}
	switch a := v.(type) {
	case []uint32:
		if len(a) > 0 {
			return int64(a[0]), true
		}
	case []int32:
		if len(a) > 0 {
			return int64(a[0]), true
		}
	}
	return 0, false
}

// readHparams reads what the rules need, as llama.cpp's load_hparams.
func readHparams(f *gguf.File) (hparams, error) {
	var hp hparams
	v, ok := f.Get("general.architecture")
	arch, _ := v.(string)
	if !ok || arch == "" {
		return hp, fmt.Errorf("no general.architecture: not a model file")
	}
	hp.arch = arch
	v, ok = f.Get(arch + ".block_count")
	n, isInt := gguf.Int(v)
	if !ok || !isInt || n <= 0 {
		return hp, fmt.Errorf("missing or bad %s.block_count", arch)
	}
	hp.nLayer = int(n)
	if v, ok := f.Get(arch + ".expert_count"); ok {
		n, _ := gguf.Int(v)
		hp.nExpert = int(n)
	}
	var head, headKV int64
	if v, ok := f.Get(arch + ".attention.head_count"); ok {
		head, _ = firstOf(v)
	}
	headKV = head
	if v, ok := f.Get(arch + ".attention.head_count_kv"); ok {
		headKV, _ = firstOf(v)
	}
	if headKV != 0 {
		hp.nGQA = int(head / headKV)
	}
	// llama.cpp's LLM_TYPE_70B (an 80-layer llama with grouped KV heads)
	hp.is70B = arch == "llama" && hp.nLayer == 80 && head != headKV
	return hp, nil
}

// plan decides the output: its key/values and each tensor's type, in
// llama.cpp's order.
func plan(f *gguf.File, opts Options) ([]gguf.KV, []item, *chooser, error) {
	def, ok := opts.FileType.DefaultType()
	if !ok {
		return nil, nil, nil, fmt.Errorf("unsupported file type %s", opts.FileType)
	}
	if f.Alignment != Alignment {
		return nil, nil, nil, fmt.Errorf("general.alignment %d is not supported (llama.cpp writes %d)", f.Alignment, Alignment)
	}
	hp, err := readHparams(f)
	if err != nil {
		return nil, nil, nil, err
	}

	im := opts.Imatrix
	if im != nil && len(im.Entries) == 0 {
		im = nil // llama-quantize passes none when filtering left nothing
	}

	// key/values: the input's, less the split keys, then the
	// quantization version, the file type and the imatrix's keys (moved
	// to the end as gguf_set_val_* does).
	added := []gguf.KV{
		{Key: "general.quantization_version", Value: backend.QuantizationVersion()},
		{Key: "general.file_type", Value: uint32(opts.FileType)},
	}
	if im != nil {
		added = append(added, imatrixKVs(im)...)
	}
	var kvs []gguf.KV
	for _, kv := range f.KVs {
		switch kv.Key {
		case "split.no", "split.count", "split.tensors.count":
			continue
		}
		if slices.ContainsFunc(added, func(a gguf.KV) bool { return a.Key == kv.Key }) {
			continue
		}
		kvs = append(kvs, kv)
	}
	kvs = append(kvs, added...)

	ts := append([]gguf.TensorInfo(nil), f.Tensors...)
	sortTensors(ts)
	c := &chooser{hp: hp, ftype: opts.FileType, opts: opts, tied: true, hasImatrix: im != nil}
	for _, t := range ts {
		cat := categoryOf(t.Name)
		if cat.isAttnV() {
			c.nAttnV++
		}
		if cat == catOutput {
			c.tied = false
		}
	}
	items := make([]item, len(ts))
	for i, t := range ts {
		typ := t.Type
		if allowsQuantization(hp.arch, t) {
			if typ, err = c.typeFor(t, categoryOf(t.Name), def); err != nil {
				return nil, nil, nil, err
			}
		}
		out := gguf.TensorInfo{Name: t.Name, Shape: append([]uint64(nil), t.Shape[:nDims(t.Shape)]...), Type: typ}
		if _, err := typ.RowSize(t.Shape[0]); err != nil {
			return nil, nil, nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if typ != t.Type && isQuantized(t.Type) {
			return nil, nil, nil, fmt.Errorf("tensor %s is %s: requantizing a quantized tensor is not supported (quantize from F32, F16 or BF16)", t.Name, t.Type)
		}
		it := item{in: t, out: out}
		needs := allowsQuantization(hp.arch, t) && requiresImatrix(t.Name, typ, opts.FileType)
		if im == nil && needs {
			return nil, nil, nil, fmt.Errorf("%s needs an importance matrix (-imatrix): tensor %s would be %s, which is garbage without one", opts.FileType, t.Name, typ)
		}
		if im != nil && typ != t.Type {
			if it.imatrix, err = im.forTensor(t); err != nil {
				return nil, nil, nil, err
			}
			if it.imatrix == nil && needs {
				return nil, nil, nil, fmt.Errorf("the importance matrix has no entry for %s, which %s quantizes to %s (garbage without one)", t.Name, opts.FileType, typ)
			}
		}
		items[i] = it
	}
	return kvs, items, c, nil
}
