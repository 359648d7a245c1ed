// Package load reads an architecture's hyperparameters and weights for the
// model packages, recording the first problem as an error that names the
// key or tensor at fault (a model whose metadata contradicts its tensors
// is an error, never a crash in the graph).
package load

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/ml"
)

// Reader reads hyperparameters from a model's metadata. Integer keys of
// any GGUF integer type are accepted (converters differ), as are floats of
// either width. The first problem is kept; later reads return defaults.
type Reader struct {
	c    fs.Config
	arch string
	err  error
}

// NewReader reads the metadata of an arch model (it fails if the file is of
// another architecture).
func NewReader(c fs.Config, arch string) *Reader {
	r := &Reader{c: c, arch: arch}
	if a := c.Architecture(); a != arch {
		r.Fail("the model's architecture is %q", a)
	}
	return r
}

// Fail records a problem (the first one wins).
func (r *Reader) Fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(r.arch+": "+format, a...)
	}
}

// Err is the first problem, or nil.
func (r *Reader) Err() error { return r.err }

// Key is the full key of k: prefixed with the architecture unless it is a
// general. or tokenizer. key.
func (r *Reader) Key(k string) string {
	if strings.HasPrefix(k, "general.") || strings.HasPrefix(k, "tokenizer.") {
		return k
	}
	return r.arch + "." + k
}

// Has reports whether key k is present.
func (r *Reader) Has(k string) bool { return r.c.Value(r.Key(k)) != nil }

// maxValue bounds integer hyperparameters (larger ones are errors: no real
// model has a dimension anywhere near it, and it keeps products in range).
const maxValue = 1 << 24

// Int reads integer key k (default def when absent).
func (r *Reader) Int(k string, def int) int {
	v := r.c.Value(r.Key(k))
	if v == nil {
		return def
	}
	n, ok := gguf.Int(v)
	if !ok {
		r.Fail("%s is a %T, not an integer", r.Key(k), v)
		return def
	}
	if n < 0 || n > maxValue {
		r.Fail("%s = %d is out of range", r.Key(k), n)
		return def
	}
	return int(n)
}

// Need reads integer key k, which must be present and positive.
func (r *Reader) Need(k string) int {
	if !r.Has(k) {
		r.Fail("the model's metadata lacks %s", r.Key(k))
		return 0
	}
	n := r.Int(k, 0)
	r.Positive(k, n)
	return n
}

// Positive fails unless the value n of key k is positive.
func (r *Reader) Positive(k string, n int) {
	if n <= 0 {
		r.Fail("%s must be positive, got %d", r.Key(k), n)
	}
}

// PerLayer reads key k as llama.cpp's get_key_or_arr: one integer for
// every layer, or an array of n integers (one per layer); def when absent.
func (r *Reader) PerLayer(k string, n, def int) []int {
	out := make([]int, n)
	v := r.c.Value(r.Key(k))
	if v == nil {
		for i := range out {
			out[i] = def
		}
		return out
	}
	if x, ok := gguf.Int(v); ok {
		if x < 0 || x > maxValue {
			r.Fail("%s = %d is out of range", r.Key(k), x)
		}
		for i := range out {
			out[i] = int(x)
		}
		return out
	}
	var arr []int64
	switch a := v.(type) {
	case []uint32:
		for _, x := range a {
			arr = append(arr, int64(x))
		}
	case []int32:
		for _, x := range a {
			arr = append(arr, int64(x))
		}
	case []uint64:
		for _, x := range a {
			arr = append(arr, int64(min(x, maxValue+1)))
		}
	case []int64:
		arr = a
	default:
		r.Fail("%s is a %T, not an integer or an array of them", r.Key(k), v)
		return out
	}
	if len(arr) != n {
		r.Fail("%s has %d entries, the model has %d layers (%s)", r.Key(k), len(arr), n, r.Key("block_count"))
		return out
	}
	for i, x := range arr {
		if x < 0 || x > maxValue {
			r.Fail("%s[%d] = %d is out of range", r.Key(k), i, x)
		}
		out[i] = int(x)
	}
	return out
}

// Ints reads integer array key k (of any integer type, any length; nil
// when absent or not an integer array).
func (r *Reader) Ints(k string) []int {
	var out []int
	switch a := r.c.Value(r.Key(k)).(type) {
	case []uint32:
		for _, x := range a {
			out = append(out, int(min(x, maxValue)))
		}
	case []int32:
		for _, x := range a {
			out = append(out, int(x))
		}
	case []uint64:
		for _, x := range a {
			out = append(out, int(min(x, maxValue)))
		}
	case []int64:
		for _, x := range a {
			out = append(out, int(max(min(x, maxValue), -maxValue)))
		}
	}
	return out
}

// Bools reads a boolean array key of n entries (nil when absent).
func (r *Reader) Bools(k string, n int) []bool {
	v := r.c.Value(r.Key(k))
	if v == nil {
		return nil
	}
	a, ok := v.([]bool)
	if !ok {
		r.Fail("%s is a %T, not an array of booleans", r.Key(k), v)
		return nil
	}
	if len(a) != n {
		r.Fail("%s has %d entries, the model has %d layers (%s)", r.Key(k), len(a), n, r.Key("block_count"))
		return nil
	}
	return a
}

// Floats reads a float array key of n entries, one per layer (nil when
// absent); NaNs and infinities are errors.
func (r *Reader) Floats(k string, n int) []float32 {
	v := r.c.Value(r.Key(k))
	if v == nil {
		return nil
	}
	var a []float32
	switch x := v.(type) {
	case []float32:
		a = x
	case []float64:
		for _, f := range x {
			a = append(a, float32(f))
		}
	default:
		r.Fail("%s is a %T, not an array of numbers", r.Key(k), v)
		return nil
	}
	if len(a) != n {
		r.Fail("%s has %d entries, the model has %d layers (%s)", r.Key(k), len(a), n, r.Key("block_count"))
		return nil
	}
	for _, f := range a {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			r.Fail("%s holds %v", r.Key(k), f)
			return nil
		}
	}
	return a
}

// Float reads float key k (default def).
func (r *Reader) Float(k string, def float32) float32 {
	switch x := r.c.Value(r.Key(k)).(type) {
	case nil:
		return def
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			r.Fail("%s is %v", r.Key(k), x)
			return def
		}
		return x
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			r.Fail("%s is %v", r.Key(k), x)
			return def
		}
		return float32(x)
	default:
		if n, ok := gguf.Int(x); ok {
			return float32(n)
		}
		r.Fail("%s is a %T, not a number", r.Key(k), x)
		return def
	}
}

// Bool reads boolean key k (default def).
func (r *Reader) Bool(k string, def bool) bool {
	switch x := r.c.Value(r.Key(k)).(type) {
	case nil:
		return def
	case bool:
		return x
	default:
		r.Fail("%s is a %T, not a boolean", r.Key(k), x)
		return def
	}
}

// String reads string key k (default def).
func (r *Reader) String(k string, def string) string {
	switch x := r.c.Value(r.Key(k)).(type) {
	case nil:
		return def
	case string:
		return x
	default:
		r.Fail("%s is a %T, not a string", r.Key(k), x)
		return def
	}
}

// Vocab is the vocabulary size: the number of tokenizer.ggml.tokens (or
// vocab_size).
func (r *Reader) Vocab() int {
	n := len(r.c.Strings("tokenizer.ggml.tokens"))
	if n == 0 {
		n = r.Int("vocab_size", 0)
	}
	if n == 0 {
		r.Fail("the model's metadata lacks tokenizer.ggml.tokens (and vocab_size)")
	}
	return n
}

// RopeScale is the frequency scale of linear or YaRN RoPE scaling (1/factor), 1 without.
func (r *Reader) RopeScale() float32 {
	f := r.Float("rope.scaling.factor", 0)
	if f < 0 {
		r.Fail("%s = %v must not be negative", r.Key("rope.scaling.factor"), f)
	}
	switch t := r.String("rope.scaling.type", "linear"); t {
	case "none":
		return 1
	case "linear", "yarn":
		if f > 0 {
			return 1 / f
		}
		return 1
	default:
		r.Fail("%s %q is not supported (linear, yarn, none)", r.Key("rope.scaling.type"), t)
		return 1
	}
}

// HeadDim is attention.key_length (default head_dim, else hidden/heads),
// which must equal attention.value_length when that is given.
func (r *Reader) HeadDim(hidden, heads int) int {
	def := 0
	if heads > 0 {
		def = hidden / heads
	}
	// Ollama's converter writes the head size of some architectures
	// (Gemma 3n) as head_dim alone.
	def = r.Int("head_dim", def)
	k := r.Int("attention.key_length", def)
	if v := r.Int("attention.value_length", k); v != k {
		r.Fail("%s = %d differs from %s = %d", r.Key("attention.key_length"), k, r.Key("attention.value_length"), v)
	}
	r.Positive("attention.key_length", k)
	return k
}

// Heads checks that heads is a positive multiple of kvHeads.
func (r *Reader) Heads(heads, kvHeads int) {
	if heads <= 0 || kvHeads <= 0 || heads%kvHeads != 0 {
		r.Fail("%d heads (%s) are not a positive multiple of %d key/value heads (%s)",
			heads, r.Key("attention.head_count"), kvHeads, r.Key("attention.head_count_kv"))
	}
}

// RopeDim checks the rotated dimensions: even, positive, at most the head.
func (r *Reader) RopeDim(ropeDim, headDim int) {
	if ropeDim <= 0 || ropeDim%2 != 0 || ropeDim > headDim {
		r.Fail("%s = %d must be even, positive and at most the head size %d", r.Key("rope.dimension_count"), ropeDim, headDim)
	}
}

// Experts checks the expert counts.
func (r *Reader) Experts(n, used int) {
	if n <= 0 || used <= 0 || used > n {
		r.Fail("%s = %d must be between 1 and %s = %d", r.Key("expert_used_count"), used, r.Key("expert_count"), n)
	}
}

// Sections reads the sections of multi-section RoPE: rope.dimension_sections
// (llama.cpp), or Ollama's mrope_sections or rope.mrope_section; 3 or 4
// non-negative entries (padded to 4) counting rotated pairs, so adding up
// to between 1 and ropeDim/2. Nil (and a failure) when absent.
func (r *Reader) Sections(ropeDim int) []int {
	for _, k := range []string{"rope.dimension_sections", "mrope_sections", "rope.mrope_section"} {
		if !r.Has(k) {
			continue
		}
		s := r.Ints(k)
		if len(s) != 3 && len(s) != 4 {
			r.Fail("%s must be an integer array of 3 or 4 entries", r.Key(k))
			return nil
		}
		sum := 0
		for _, x := range s {
			if x < 0 {
				r.Fail("%s %v has a negative section", r.Key(k), s)
			}
			sum += x
		}
		if sum <= 0 || 2*sum > ropeDim {
			r.Fail("%s %v: the sections must add up to between 1 and half the rotated dimensions (%s = %d)",
				r.Key(k), s, r.Key("rope.dimension_count"), ropeDim)
		}
		return append(s, make([]int, 4-len(s))...)
	}
	r.Fail("the model's metadata lacks %s", r.Key("rope.dimension_sections"))
	return nil
}

// DeltaNet checks the sizes of a gated delta-net (ssm.* keys): vHeads
// value heads (ssm.time_step_rank) a multiple of kHeads key heads
// (ssm.group_count), ssm.inner_size = vHeads × ssm.state_size, and a
// causal convolution (ssm.conv_kernel) at least 2 wide.
func (r *Reader) DeltaNet(convKernel, inner, stateSize, vHeads, kHeads int) {
	if kHeads > 0 && vHeads%kHeads != 0 {
		r.Fail("%s = %d value heads are not a multiple of %s = %d key heads", r.Key("ssm.time_step_rank"), vHeads, r.Key("ssm.group_count"), kHeads)
	}
	if inner != vHeads*stateSize {
		r.Fail("%s = %d is not %s × %s = %d × %d", r.Key("ssm.inner_size"), inner, r.Key("ssm.time_step_rank"), r.Key("ssm.state_size"), vHeads, stateSize)
	}
	if convKernel < 2 {
		r.Fail("%s = %d must be at least 2", r.Key("ssm.conv_kernel"), convKernel)
	}
}

// Weights fetches a model's weights, checking each against the shape its
// hyperparameters imply and the element types the ops that use it take.
type Weights struct {
	b       ml.Backend
	arch    string
	missing []string
	err     error
	// Hint names the keys the shapes of the following Gets come from, for
	// the error message.
	Hint string
	// OutputNorm is the output norm's name when it is not
	// output_norm.weight (LFM2's files: token_embd_norm.weight).
	OutputNorm string
}

// NewWeights reads the weights of backend b.
func NewWeights(b ml.Backend, arch string) *Weights { return &Weights{b: b, arch: arch} }

// Use is how a model uses a weight, which decides the element types it
// may have.
type Use int

const (
	// Matrix weights are multiplied (mul_mat, mul_mat_id) or looked up
	// (get_rows): any float or quantized type.
	Matrix Use = iota
	// F32 weights are operands of element-wise ops that take f32 only:
	// norm weights, convolution kernels, ssm_a, attention sinks, expert
	// biases (add_id).
	F32
	// Bias weights are added: f32 or f16.
	Bias
)

// Get returns the required matrix name, which must have the given shape
// (ggml order).
func (w *Weights) Get(name string, shape ...int) ml.Tensor { return w.GetAs(Matrix, name, shape...) }

// Opt returns the optional matrix name (nil when absent), which must have
// the given shape when present.
func (w *Weights) Opt(name string, shape ...int) ml.Tensor { return w.OptAs(Matrix, name, shape...) }

// GetAs returns the required tensor name, used as u, which must have the
// given shape.
func (w *Weights) GetAs(u Use, name string, shape ...int) ml.Tensor {
	t := w.b.Get(name)
	if t == nil {
		w.missing = append(w.missing, name)
		return nil
	}
	w.check(name, t, u, shape)
	return t
}

// OptAs returns the optional tensor name (nil when absent), used as u,
// which must have the given shape when present.
func (w *Weights) OptAs(u Use, name string, shape ...int) ml.Tensor {
	t := w.b.Get(name)
	if t == nil {
		return nil
	}
	w.check(name, t, u, shape)
	return t
}

// typeNamer is a tensor that knows ggml's name of its element type
// (package backend's does): DType folds most types into DTypeOther.
type typeNamer interface{ TypeName() string }

func typeName(t ml.Tensor) string {
	if n, ok := t.(typeNamer); ok {
		return n.TypeName()
	}
	switch t.DType() {
	case ml.DTypeF32:
		return "f32"
	case ml.DTypeF16:
		return "f16"
	case ml.DTypeQ80:
		return "q8_0"
	case ml.DTypeQ40:
		return "q4_0"
	case ml.DTypeI32:
		return "i32"
	case ml.DTypeMXFP4:
		return "mxfp4"
	}
	return "other"
}

// allowed reports whether a tensor of type typ can be used as u, and
// otherwise what it should be.
func allowed(u Use, typ string) (ok bool, want string) {
	switch u {
	case F32:
		return typ == "f32", "f32"
	case Bias:
		return typ == "f32" || typ == "f16", "f32 or f16"
	}
	// Matrix: not an integer type, f64 (ggml has no matrix product for
	// them), or a type the backend does not know.
	bad := slices.Contains([]string{"i8", "i16", "i32", "i64", "f64"}, typ) || strings.HasPrefix(typ, "type")
	return !bad, "a float or quantized type"
}

func (w *Weights) check(name string, t ml.Tensor, u Use, shape []int) {
	if w.err != nil {
		return
	}
	got := t.Shape()
	// Trailing 1s are the same shape (a [n] vector stored as [n, 1]).
	trim := func(s []int) []int {
		for len(s) > 1 && s[len(s)-1] == 1 {
			s = s[:len(s)-1]
		}
		return s
	}
	if !slices.Equal(trim(slices.Clone(got)), trim(slices.Clone(shape))) {
		hint := ""
		if w.Hint != "" {
			hint = " (from " + w.Hint + ")"
		}
		w.err = fmt.Errorf("%s: tensor %s has shape %v, the metadata implies %v%s", w.arch, name, got, shape, hint)
		return
	}
	typ := typeName(t)
	if ok, want := allowed(u, typ); !ok {
		w.err = fmt.Errorf("%s: tensor %s has type %s, which must be %s", w.arch, name, typ, want)
	}
}

// Blocks checks that the model has the n layers its block_count gives
// (those it reads, or all of them, MTP blocks included), by looking for
// blk.<n-1>.<probe>, a tensor every layer has. Models call it before
// fetching the layers' weights, so that a huge block_count is one error
// naming the key, not a list of every tensor of the missing layers.
func (w *Weights) Blocks(n int, probe string) error {
	if n <= 0 || w.b.Get(fmt.Sprintf("blk.%d.%s", n-1, probe)) != nil {
		return nil
	}
	have := 0
	for have < n && w.b.Get(fmt.Sprintf("blk.%d.%s", have, probe)) != nil {
		have++
	}
	return fmt.Errorf("%s: %s.block_count gives %d layers, but the model's tensors have %d (there is no blk.%d.%s)",
		w.arch, w.arch, n, have, have, probe)
}

// Embeddings returns the token embeddings [d, vocab], the output norm [d]
// and the output head [d, vocab] (the embeddings when the model ties
// them).
func (w *Weights) Embeddings(d, vocab int) (tok, norm, output ml.Tensor) {
	tok = w.Get("token_embd.weight", d, vocab)
	name := "output_norm.weight"
	if w.OutputNorm != "" {
		name = w.OutputNorm
	}
	norm = w.GetAs(F32, name, d)
	output = w.Opt("output.weight", d, vocab)
	if output == nil {
		output = tok
	}
	return tok, norm, output
}

// Err reports the first problem: missing tensors, or a shape or type
// mismatch.
func (w *Weights) Err() error {
	if len(w.missing) > 0 {
		m := w.missing
		if len(m) > 4 {
			m = append(slices.Clone(m[:4]), fmt.Sprintf("… (%d in all)", len(w.missing)))
		}
		return fmt.Errorf("%s: the model lacks tensors: %v", w.arch, m)
	}
	return w.err
}
