package model_test

// Bad input: a model whose hyperparameters contradict its tensors (head
// counts, expert counts, the conv kernel, the delta-net and RoPE section
// sizes, the block count), or whose tensors have the wrong shape or type
// or are missing, must be a clear error that names the key or tensor at
// fault, never an abort or a hang. Each case writes a mutated copy of a
// small generated model (scripts/gen-models.py) and opens it the way the
// runner does: backend, load, model.New, a cache and one forward pass.
//
// The models live in $GGML_RS_MODELS (make test sets it and generates them
// first; a missing one is then a failure) or, without it, in .cache/models,
// where a missing file skips the test.

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/testmodel"
	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// modelPath is where the generated small model name lives (see
// go/cmd/ggml-rs/parity_test.go).
func modelPath(t *testing.T, name string) string { return testmodel.Path(t, name) }

// ggufFile is a model read whole into memory, to be edited and written.
type ggufFile struct {
	arch    string
	kvs     []gguf.KV
	tensors []gguf.TensorInfo
	data    map[string][]byte
}

func readGGUF(t *testing.T, path string) *ggufFile {
	t.Helper()
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := &ggufFile{kvs: slices.Clone(g.KVs), tensors: slices.Clone(g.Tensors), data: map[string][]byte{}}
	a, _ := g.Get("general.architecture")
	m.arch, _ = a.(string)
	for _, ti := range g.Tensors {
		b := make([]byte, ti.Size())
		if _, err := f.ReadAt(b, int64(g.DataOffset+ti.Offset)); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		m.data[ti.Name] = b
	}
	return m
}

func (m *ggufFile) clone() *ggufFile {
	c := &ggufFile{arch: m.arch, kvs: slices.Clone(m.kvs), tensors: slices.Clone(m.tensors), data: map[string][]byte{}}
	for k, v := range m.data {
		c.data[k] = v // never written to: edits replace the slice
	}
	return c
}

// key is k's full name: prefixed with the architecture unless general. or
// tokenizer.
func (m *ggufFile) key(k string) string {
	if strings.HasPrefix(k, "general.") || strings.HasPrefix(k, "tokenizer.") {
		return k
	}
	return m.arch + "." + k
}

func (m *ggufFile) get(k string) any {
	for _, kv := range m.kvs {
		if kv.Key == m.key(k) {
			return kv.Value
		}
	}
	return nil
}

// u is integer key k (0 when absent).
func (m *ggufFile) u(k string) int {
	switch v := m.get(k).(type) {
	case uint32:
		return int(v)
	case int32:
		return int(v)
	case uint64:
		return int(v)
	}
	return 0
}

// set sets key k (nil deletes it).
func (m *ggufFile) set(k string, v any) {
	k = m.key(k)
	i := slices.IndexFunc(m.kvs, func(kv gguf.KV) bool { return kv.Key == k })
	switch {
	case v == nil && i >= 0:
		m.kvs = slices.Delete(m.kvs, i, i+1)
	case v == nil:
	case i >= 0:
		m.kvs[i].Value = v
	default:
		m.kvs = append(m.kvs, gguf.KV{Key: k, Value: v})
	}
}

func (m *ggufFile) tensor(name string) *gguf.TensorInfo {
	for i := range m.tensors {
		if m.tensors[i].Name == name {
			return &m.tensors[i]
		}
	}
	return nil
}

func (m *ggufFile) shape(t *testing.T, name string) []int {
	t.Helper()
	ti := m.tensor(name)
	if ti == nil {
		t.Fatalf("%s has no tensor %s", m.arch, name)
	}
	var s []int
	for _, d := range ti.Shape {
		s = append(s, int(d))
	}
	return s
}

// retensor gives tensor name a new type and shape, with zero data.
func (m *ggufFile) retensor(t *testing.T, name string, typ gguf.TensorType, shape ...int) {
	t.Helper()
	ti := m.tensor(name)
	if ti == nil {
		t.Fatalf("%s has no tensor %s", m.arch, name)
	}
	ti.Type, ti.Shape = typ, nil
	for _, d := range shape {
		ti.Shape = append(ti.Shape, uint64(d))
	}
	m.data[name] = make([]byte, ti.Size())
}

// reshape gives tensor name a new shape (same type, zero data).
func (m *ggufFile) reshape(t *testing.T, name string, shape ...int) {
	t.Helper()
	m.retensor(t, name, m.tensor(name).Type, shape...)
}

// retype gives tensor name a new type (same shape, zero data).
func (m *ggufFile) retype(t *testing.T, name string, typ gguf.TensorType) {
	t.Helper()
	m.retensor(t, name, typ, m.shape(t, name)...)
}

// add appends a tensor of zeros.
func (m *ggufFile) add(name string, typ gguf.TensorType, shape ...int) {
	ti := gguf.TensorInfo{Name: name, Type: typ}
	for _, d := range shape {
		ti.Shape = append(ti.Shape, uint64(d))
	}
	m.tensors = append(m.tensors, ti)
	m.data[name] = make([]byte, ti.Size())
}

func (m *ggufFile) drop(name string) {
	m.tensors = slices.DeleteFunc(m.tensors, func(ti gguf.TensorInfo) bool { return ti.Name == name })
}

func (m *ggufFile) write(t *testing.T, path string) {
	t.Helper()
	b := gguf.NewBuilder()
	for _, kv := range m.kvs {
		if err := b.Add(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range m.tensors {
		if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, m.data[ti.Name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// run opens the model at path as the runner does and computes a few
// tokens; it returns the first error and the stage that gave it.
func run(path string) (stage string, err error) {
	stage = "open"
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("PANIC in %s: %v", stage, p)
		}
	}()
	b, err := ml.NewBackend(path, ml.BackendParams{AllocMemory: true, NumThreads: 2})
	if err != nil {
		return stage, err
	}
	defer b.Close()
	stage = "load"
	if err := b.Load(context.Background(), nil); err != nil {
		return stage, err
	}
	stage = "model.New"
	m, err := model.New(b)
	if err != nil {
		return stage, err
	}
	stage = "NewCache"
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: 64, MaxBatch: 8})
	if err != nil {
		return stage, err
	}
	defer cache.Close()
	stage = "forward"
	if _, err := m.Forward(cache, []int32{1, 2, 3, 4, 5}, false); err != nil {
		return stage, err
	}
	_, err = m.Forward(cache, []int32{6}, false)
	m.ReleaseGraph()
	return stage, err
}

// badCase is one mutation; the error must contain every string of want
// (a key is given without the architecture prefix, %s for blk.N).
type badCase struct {
	name string
	edit func(t *testing.T, m *ggufFile)
	want []string
}

// The architectures' small models.
var badArchs = []string{"qwen2", "qwen3moe", "gpt-oss", "qwen3next", "qwen35", "qwen35moe", "gemma3", "gemma2", "olmo2", "olmo3", "mistral3", "lfm2", "lfm2moe",
	"deepseek2", "deepseek2mha", "glm4moelite", "llama4", "nemotron_h", "nemotron_h_moe", "gemma3n"}

func TestBadModels(t *testing.T) {
	for _, arch := range badArchs {
		t.Run(arch, func(t *testing.T) {
			orig := readGGUF(t, modelPath(t, arch+"-small-f16"))
			// The unmodified model opens and runs.
			if stage, err := run(modelPath(t, arch+"-small-f16")); err != nil {
				t.Fatalf("the unmodified model: %s: %v", stage, err)
			}
			dir := t.TempDir()
			for i, c := range badCases(t, orig) {
				t.Run(c.name, func(t *testing.T) {
					m := orig.clone()
					c.edit(t, m)
					path := filepath.Join(dir, fmt.Sprintf("case%03d.gguf", i))
					m.write(t, path)
					defer os.Remove(path)
					stage, err := run(path)
					if err == nil {
						t.Fatalf("no error (the model opened and ran)")
					}
					msg := err.Error()
					if strings.Contains(msg, "PANIC") {
						t.Fatalf("%s", msg)
					}
					for _, w := range c.want {
						if !strings.Contains(msg, w) {
							t.Errorf("%s: error %q does not name %q", stage, msg, w)
						}
					}
					t.Logf("%s: %v", stage, msg)
				})
			}
		})
	}
}

// nonDivisor is the smallest n > 1 that does not divide x.
func nonDivisor(x int) int {
	n := 2
	for x%n == 0 {
		n++
	}
	return n
}

func badCases(t *testing.T, m *ggufFile) []badCase {
	a := m.arch
	k := func(s string) string { return a + "." + s }
	set := func(key string, v any) func(*testing.T, *ggufFile) {
		return func(_ *testing.T, m *ggufFile) { m.set(key, v) }
	}
	u32 := func(n int) uint32 { return uint32(n) }
	heads, kv, layers := m.u("attention.head_count"), m.u("attention.head_count_kv"), m.u("block_count")
	hd := m.u("attention.key_length")
	hybrid := m.get("full_attention_interval") != nil // the delta-net hybrids (Nemotron-H has its own cases)
	moe := m.get("expert_count") != nil
	// An attention layer and (hybrids) a recurrent one.
	attn, rec := 0, -1
	if hybrid {
		attn, rec = m.u("full_attention_interval")-1, 0
	}
	shortConv := m.get("shortconv.l_cache") != nil // LFM2: per-layer head_count_kv, 0 on its convolution layers
	if shortConv {
		var kvs []int
		switch a := m.get("attention.head_count_kv").(type) {
		case []uint32:
			for _, x := range a {
				kvs = append(kvs, int(x))
			}
		case []int32:
			for _, x := range a {
				kvs = append(kvs, int(x))
			}
		}
		attn = slices.IndexFunc(kvs, func(x int) bool { return x != 0 })
		kv, rec = kvs[attn], 0
	}
	blk := func(i int, s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
	otherKV := heads // a head_count_kv that divides head_count but is not the tensors'
	if kv == heads {
		otherKV = 1
	}
	// A norm every block has (OLMo's blocks have no pre-norms), and what
	// head sizes that contradict the tensors are caught by (OLMo's heads
	// must be embedding_length/head_count: the key is named first).
	norm := "attn_norm.weight"
	headsWrong, dWrong := []string{blk(attn, "attn_q.weight")}, []string{"token_embd.weight"}
	// What a scalar head_count_kv of 0, or one for every layer, is caught
	// by: the key, or (LFM2, whose zeros mark its convolution layers) the
	// tensors the layers it makes then lack.
	kv0, kvOther := []string{k("attention.head_count_kv")}, []string{blk(attn, "attn_k.weight")}
	outNorm := "output_norm.weight"
	if shortConv {
		kv0, kvOther = []string{blk(attn, "shortconv.in_proj.weight")}, []string{blk(0, "attn_q.weight")}
		outNorm = "token_embd_norm.weight"
	}
	if strings.HasPrefix(a, "olmo") {
		norm = "post_attention_norm.weight"
		headsWrong = []string{k("attention.key_length"), k("attention.head_count")}
		dWrong = []string{k("embedding_length")}
	}

	cs := []badCase{
		// Heads.
		{"head_count not a multiple of head_count_kv", set("attention.head_count_kv", u32(nonDivisor(heads))),
			[]string{k("attention.head_count_kv")}},
		{"head_count_kv 0", set("attention.head_count_kv", u32(0)), kv0},
		{"head_count_kv larger than head_count", set("attention.head_count_kv", u32(2*heads)), []string{k("attention.head_count_kv")}},
		{"head_count_kv array of the wrong length", set("attention.head_count_kv", make([]int32, layers+1)),
			[]string{k("attention.head_count_kv")}},
		{"head_count_kv a string", set("attention.head_count_kv", "two"), []string{k("attention.head_count_kv")}},
		{"head_count 0", set("attention.head_count", u32(0)), []string{k("attention.head_count")}},
		{"head_count missing", set("attention.head_count", nil), []string{k("attention.head_count")}},
		// Consistent keys, contradicting the tensors.
		{"head_count doubled", set("attention.head_count", u32(2*heads)), headsWrong},
		{"head_count_kv dividing head_count but contradicting attn_k", set("attention.head_count_kv", u32(otherKV)), kvOther},
		{"key_length differs from value_length", set("attention.key_length", u32(hd/2)),
			[]string{k("attention.key_length"), k("attention.value_length")}},
		{"key and value length halved", func(_ *testing.T, m *ggufFile) {
			m.set("attention.key_length", u32(hd/2))
			m.set("attention.value_length", u32(hd/2))
			m.set("rope.dimension_count", u32(min(hd/2, m.u("rope.dimension_count"))))
		}, headsWrong},
		{"embedding_length wrong", set("embedding_length", u32(m.u("embedding_length")+32)), dWrong},
		// RoPE.
		{"rope.dimension_count odd", set("rope.dimension_count", u32(hd-1)), []string{k("rope.dimension_count")}},
		{"rope.dimension_count larger than the head", set("rope.dimension_count", u32(2*hd)), []string{k("rope.dimension_count")}},
		{"rope.dimension_count 0", set("rope.dimension_count", u32(0)), []string{k("rope.dimension_count")}},
		// Layers.
		{"block_count larger than the layers present", set("block_count", u32(layers+1)), []string{k("block_count")}},
		{"block_count huge", set("block_count", u32(hugeBlocks)), []string{k("block_count")}},
		{"block_count 0", set("block_count", u32(0)), []string{k("block_count")}},
		// Tensors.
		{"missing attention tensor", func(_ *testing.T, m *ggufFile) { m.drop(blk(attn, "attn_k.weight")) }, []string{blk(attn, "attn_k.weight")}},
		{"missing output norm", func(_ *testing.T, m *ggufFile) { m.drop(outNorm) }, []string{outNorm}},
		{"attention tensor 1-D", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, blk(attn, "attn_v.weight"))
			m.reshape(t, blk(attn, "attn_v.weight"), s[0]*s[1])
		}, []string{blk(attn, "attn_v.weight")}},
		{"norm 2-D", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, blk(attn, norm))
			m.reshape(t, blk(attn, norm), s[0]/2, 2)
		}, []string{blk(attn, norm)}},
		{"norm of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(attn, norm), gguf.TensorI32) },
			[]string{blk(attn, norm)}},
		{"norm of type q8_0", func(t *testing.T, m *ggufFile) { m.retype(t, outNorm, gguf.TensorQ8_0) },
			[]string{outNorm}},
		{"embeddings of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, "token_embd.weight", gguf.TensorI32) },
			[]string{"token_embd.weight"}},
		{"attention weight of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(attn, "attn_q.weight"), gguf.TensorI32) },
			[]string{blk(attn, "attn_q.weight")}},
		{"attention weight of type f64", func(t *testing.T, m *ggufFile) { m.retype(t, blk(attn, "attn_output.weight"), gguf.TensorF64) },
			[]string{blk(attn, "attn_output.weight")}},
	}

	if a == "deepseek2" {
		// Latent attention has no attn_k/attn_v and keys of another size
		// than its values: its own cases replace the attention ones.
		cs = mlaCases(m)
	}
	nemotron := strings.HasPrefix(a, "nemotron_h")
	if nemotron {
		// One kind per layer, by per-layer keys: its own cases.
		cs = nemotronCases(m)
	}

	if a == "lfm2moe" {
		E, lead := m.u("expert_count"), m.u("leading_dense_block_count")
		cs = append(cs, []badCase{
			{"selection bias missing", func(_ *testing.T, m *ggufFile) { m.drop(blk(lead, "exp_probs_b.bias")) },
				[]string{blk(lead, "exp_probs_b.bias")}},
			{"selection bias of the wrong length", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(lead, "exp_probs_b.bias"), E+1) },
				[]string{blk(lead, "exp_probs_b.bias")}},
			{"leading_dense_block_count past the layers", set("leading_dense_block_count", u32(layers+1)),
				[]string{k("leading_dense_block_count")}},
			{"leading_dense_block_count one short", set("leading_dense_block_count", u32(lead-1)), []string{blk(lead-1, "ffn_gate_inp.weight")}},
			{"expert_gating_func 3", set("expert_gating_func", u32(3)), []string{k("expert_gating_func")}},
			{"expert_gating_func missing", set("expert_gating_func", nil), []string{k("expert_gating_func")}},
		}...)
	}

	if a == "qwen3moe" {
		// llama.cpp's optional RoPE frequency factors: rope.dimension_count/2 f32s.
		rd := m.u("rope.dimension_count")
		cs = append(cs, []badCase{
			{"rope_freqs of the wrong length", func(_ *testing.T, m *ggufFile) { m.add("rope_freqs.weight", gguf.TensorF32, rd) },
				[]string{"rope_freqs.weight"}},
			{"rope_freqs of type f16", func(_ *testing.T, m *ggufFile) { m.add("rope_freqs.weight", gguf.TensorF16, rd/2) },
				[]string{"rope_freqs.weight"}},
		}...)
	}

	if a == "llama4" {
		rd := m.u("rope.dimension_count")
		cs = append(cs, []badCase{
			{"sliding_window 0 (no chunks)", set("attention.sliding_window", u32(0)), []string{k("attention.sliding_window")}},
			{"interleave_moe_layer_step negative", set("interleave_moe_layer_step", int32(-2)), []string{k("interleave_moe_layer_step")}},
			{"interleave_moe_layer_step 1 over dense layers", set("interleave_moe_layer_step", u32(1)), []string{blk(0, "ffn_gate_inp.weight")}},
			{"interleave_moe_layer_step 0 over MoE layers", set("interleave_moe_layer_step", u32(0)), []string{blk(1, "ffn_gate.weight")}},
			{"missing shared expert", func(_ *testing.T, m *ggufFile) { m.drop(blk(3, "ffn_up_shexp.weight")) }, []string{blk(3, "ffn_up_shexp.weight")}},
			{"shared expert of another width", func(t *testing.T, m *ggufFile) {
				s := m.shape(t, blk(1, "ffn_gate_shexp.weight"))
				m.reshape(t, blk(1, "ffn_gate_shexp.weight"), s[0], s[1]*2)
			}, []string{blk(1, "ffn_gate_shexp.weight")}},
			{"rope_freqs of the wrong length", func(t *testing.T, m *ggufFile) { m.reshape(t, "rope_freqs.weight", rd) },
				[]string{"rope_freqs.weight"}},
			{"sliding_window_pattern of the wrong length", set("attention.sliding_window_pattern", make([]bool, layers+1)),
				[]string{k("attention.sliding_window_pattern")}},
			{"feed_forward_length missing", set("feed_forward_length", nil), []string{k("feed_forward_length")}},
		}...)
	}

	if a == "qwen2" {
		cs = append(cs, []badCase{
			{"missing key bias", func(_ *testing.T, m *ggufFile) { m.drop(blk(1, "attn_k.bias")) }, []string{blk(1, "attn_k.bias")}},
			{"query bias of the wrong length", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(0, "attn_q.bias"), hd+1) },
				[]string{blk(0, "attn_q.bias")}},
			{"value bias of type q8_0", func(t *testing.T, m *ggufFile) { m.retype(t, blk(2, "attn_v.bias"), gguf.TensorQ8_0) },
				[]string{blk(2, "attn_v.bias")}},
		}...)
	}

	if a == "mistral3" {
		cs = append(cs, []badCase{
			{"temperature over an original context of 0", set("rope.scaling.original_context_length", u32(0)),
				[]string{k("rope.scaling.original_context_length")}},
			{"temperature_scale NaN", set("attention.temperature_scale", float32(math.NaN())), []string{k("attention.temperature_scale")}},
			{"yarn_log_multiplier a string", set("rope.scaling.yarn_log_multiplier", "one"), []string{k("rope.scaling.yarn_log_multiplier")}},
			{"output bias of the wrong length", func(_ *testing.T, m *ggufFile) { m.add(blk(1, "attn_output.bias"), gguf.TensorF32, 7) },
				[]string{blk(1, "attn_output.bias")}},
		}...)
	}

	if a == "olmo2" || a == "olmo3" {
		cs = append(cs, []badCase{
			{"missing post-FFN norm", func(_ *testing.T, m *ggufFile) { m.drop(blk(2, "post_ffw_norm.weight")) },
				[]string{blk(2, "post_ffw_norm.weight")}},
			{"q norm per head, not over the projection", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(1, "attn_q_norm.weight"), hd) },
				[]string{blk(1, "attn_q_norm.weight")}},
			{"k norm of the query's width", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(0, "attn_k_norm.weight"), hd*heads+hd) },
				[]string{blk(0, "attn_k_norm.weight")}},
			{"sliding_window negative", set("attention.sliding_window", int32(-16)), []string{k("attention.sliding_window")}},
		}...)
	}

	if a == "gemma2" {
		cs = append(cs, []badCase{
			{"missing post-FFN norm", func(_ *testing.T, m *ggufFile) { m.drop(blk(3, "post_ffw_norm.weight")) },
				[]string{blk(3, "post_ffw_norm.weight")}},
			{"attn_logit_softcapping negative", set("attn_logit_softcapping", float32(-50)), []string{k("attn_logit_softcapping")}},
			{"attn_logit_softcapping NaN", set("attn_logit_softcapping", float32(math.NaN())), []string{k("attn_logit_softcapping")}},
			{"attn_logit_softcapping a string", set("attn_logit_softcapping", "fifty"), []string{k("attn_logit_softcapping")}},
			{"final_logit_softcapping infinite", set("final_logit_softcapping", float32(math.Inf(1))), []string{k("final_logit_softcapping")}},
			{"sliding_window negative", set("attention.sliding_window", int32(-16)), []string{k("attention.sliding_window")}},
		}...)
	}

	if a == "gemma3" {
		cs = append(cs, []badCase{
			{"missing post-attention norm", func(_ *testing.T, m *ggufFile) { m.drop(blk(1, "post_attention_norm.weight")) },
				[]string{blk(1, "post_attention_norm.weight")}},
			{"post-FFN norm of type q8_0", func(t *testing.T, m *ggufFile) { m.retype(t, blk(2, "post_ffw_norm.weight"), gguf.TensorQ8_0) },
				[]string{blk(2, "post_ffw_norm.weight")}},
			{"q norm of the wrong length", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(0, "attn_q_norm.weight"), hd+1) },
				[]string{blk(0, "attn_q_norm.weight")}},
			{"feed_forward_length wrong", set("feed_forward_length", u32(m.u("feed_forward_length")*2)), []string{blk(0, "ffn_")}},
			{"feed_forward_length missing", set("feed_forward_length", nil), []string{k("feed_forward_length")}},
			{"sliding_window_pattern of the wrong length", set("attention.sliding_window_pattern", make([]bool, layers+1)),
				[]string{k("attention.sliding_window_pattern")}},
			{"final_logit_softcapping negative", set("final_logit_softcapping", float32(-30)), []string{k("final_logit_softcapping")}},
		}...)
	}

	if a == "gemma3n" {
		ffs := make([]uint32, layers)
		for i := range ffs {
			ffs[i] = uint32(m.shape(t, blk(i, "ffn_up.weight"))[1])
		}
		ffs[3] *= 2
		cs = append(cs, []badCase{
			{"altup.num_inputs 1", set("altup.num_inputs", u32(1)), []string{k("altup.num_inputs")}},
			{"altup.num_inputs 3 (the tensors have 4)", set("altup.num_inputs", u32(3)), []string{"altup_proj.weight"}},
			{"altup.active_idx past the states", set("altup.active_idx", u32(4)), []string{k("altup.active_idx")}},
			{"embedding_length_per_layer_input halved", set("embedding_length_per_layer_input", u32(128)),
				[]string{"per_layer_token_embd.weight"}},
			{"embedding_length_per_layer_input 0", set("embedding_length_per_layer_input", u32(0)),
				[]string{k("embedding_length_per_layer_input")}},
			{"shared_kv_layers past the layers", set("attention.shared_kv_layers", u32(layers+1)), []string{k("attention.shared_kv_layers")}},
			{"shared_kv_layers leaving no global layer to share", set("attention.shared_kv_layers", u32(layers-1)),
				[]string{k("attention.shared_kv_layers")}},
			{"activation_sparsity_scale of the wrong length", set("activation_sparsity_scale", make([]float32, layers-1)),
				[]string{k("activation_sparsity_scale")}},
			{"activation_sparsity_scale negative", set("activation_sparsity_scale", slices.Repeat([]float32{-1}, layers)),
				[]string{k("activation_sparsity_scale")}},
			{"activation_sparsity_scale NaN", set("activation_sparsity_scale", slices.Repeat([]float32{float32(math.NaN())}, layers)),
				[]string{k("activation_sparsity_scale")}},
			{"activation_sparsity_scale a string", set("activation_sparsity_scale", "sparse"), []string{k("activation_sparsity_scale")}},
			{"feed_forward_length of one layer wrong", set("feed_forward_length", ffs), []string{blk(3, "ffn_")}},
			{"missing laurel", func(_ *testing.T, m *ggufFile) { m.drop(blk(5, "laurel_l.weight")) }, []string{blk(5, "laurel_l.weight")}},
			{"laurel of another rank", func(t *testing.T, m *ggufFile) {
				s := m.shape(t, blk(2, "laurel_r.weight"))
				m.reshape(t, blk(2, "laurel_r.weight"), s[0]/2, s[1]*2)
			}, []string{blk(2, "laurel_r.weight")}},
			{"missing per-layer projection norm", func(_ *testing.T, m *ggufFile) { m.drop("per_layer_proj_norm.weight") },
				[]string{"per_layer_proj_norm.weight"}},
			{"missing correction scale", func(_ *testing.T, m *ggufFile) { m.drop(blk(7, "altup_correct_scale.weight")) },
				[]string{blk(7, "altup_correct_scale.weight")}},
			{"router of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(1, "altup_router.weight"), gguf.TensorI32) },
				[]string{blk(1, "altup_router.weight")}},
			{"per-layer gate transposed", func(t *testing.T, m *ggufFile) {
				s := m.shape(t, blk(4, "inp_gate.weight"))
				m.reshape(t, blk(4, "inp_gate.weight"), s[1], s[0])
			}, []string{blk(4, "inp_gate.weight")}},
		}...)
	}

	if moe && !nemotron {
		E, used := m.u("expert_count"), m.u("expert_used_count")
		d := m.u("embedding_length")
		// The first layers with experts (LFM2-MoE's first ones are dense).
		e0 := 0
		for m.tensor(blk(e0, "ffn_gate_inp.weight")) == nil {
			e0++
		}
		// The next two (Llama 4's alternate with dense ones).
		next := func(i int) int {
			for i++; m.tensor(blk(i, "ffn_gate_inp.weight")) == nil; i++ {
			}
			return i
		}
		e1 := next(e0)
		e2 := next(e1)
		// Below expert_used_count: both keys named, or with one expert
		// used (Llama 4) expert_count 0.
		belowUsed := []string{k("expert_used_count"), k("expert_count")}
		if used == 1 {
			belowUsed = []string{k("expert_count")}
		}
		cs = append(cs, []badCase{
			{"expert_count larger than the tensors'", set("expert_count", u32(2*E)), []string{blk(e0, "ffn_gate_inp.weight")}},
			{"expert_count smaller than the tensors'", set("expert_count", u32(used)), []string{blk(e0, "ffn_gate_inp.weight")}},
			{"expert_count below expert_used_count", set("expert_count", u32(used-1)), belowUsed},
			{"expert_count 0", set("expert_count", u32(0)), []string{k("expert_count")}},
			{"expert_count missing", set("expert_count", nil), []string{k("expert_count")}},
			{"expert_used_count 0", set("expert_used_count", u32(0)), []string{k("expert_used_count")}},
			{"expert_used_count above expert_count", set("expert_used_count", u32(E+1)), []string{k("expert_used_count")}},
			{"expert_feed_forward_length wrong", set("expert_feed_forward_length", u32(m.u("expert_feed_forward_length")*2)),
				[]string{blk(e0, "ffn_")}},
			{"expert tensor 2-D", func(t *testing.T, m *ggufFile) {
				s := m.shape(t, blk(e0, "ffn_gate_exps.weight"))
				m.reshape(t, blk(e0, "ffn_gate_exps.weight"), s[0], s[1]*s[2])
			}, []string{blk(e0, "ffn_gate_exps.weight")}},
			{"expert tensor of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(e1, "ffn_up_exps.weight"), gguf.TensorI32) },
				[]string{blk(e1, "ffn_up_exps.weight")}},
			{"router of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(e1, "ffn_gate_inp.weight"), gguf.TensorI32) },
				[]string{blk(e1, "ffn_gate_inp.weight")}},
			// More router logits than experts: the router ranks experts
			// the expert tensors do not hold.
			{"router with more experts than the expert tensors", func(t *testing.T, m *ggufFile) {
				m.reshape(t, blk(e1, "ffn_gate_inp.weight"), d, 2*E)
			}, []string{blk(e1, "ffn_gate_inp.weight")}},
			{"expert tensors with fewer experts than the router", func(t *testing.T, m *ggufFile) {
				for _, n := range []string{"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"} {
					s := m.shape(t, blk(e1, n))
					m.reshape(t, blk(e1, n), s[0], s[1], E/2)
				}
			}, []string{blk(e1, "ffn_")}},
			{"missing expert tensor", func(_ *testing.T, m *ggufFile) { m.drop(blk(e2, "ffn_down_exps.weight")) }, []string{blk(e2, "ffn_down_exps.weight")}},
		}...)
		if a == "gpt-oss" {
			cs = append(cs, []badCase{
				{"router bias with more experts", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(0, "ffn_gate_inp.bias"), 2*E) },
					[]string{blk(0, "ffn_gate_inp.bias")}},
				{"expert bias with fewer experts than the router", func(t *testing.T, m *ggufFile) {
					s := m.shape(t, blk(0, "ffn_down_exps.bias"))
					m.reshape(t, blk(0, "ffn_down_exps.bias"), s[0], E/2)
				}, []string{blk(0, "ffn_down_exps.bias")}},
				{"expert bias 1-D", func(t *testing.T, m *ggufFile) {
					s := m.shape(t, blk(0, "ffn_up_exps.bias"))
					m.reshape(t, blk(0, "ffn_up_exps.bias"), s[0]*s[1])
				}, []string{blk(0, "ffn_up_exps.bias")}},
				{"expert bias of type f16", func(t *testing.T, m *ggufFile) { m.retype(t, blk(0, "ffn_down_exps.bias"), gguf.TensorF16) },
					[]string{blk(0, "ffn_down_exps.bias")}},
				{"attention sinks of type f16", func(t *testing.T, m *ggufFile) { m.retype(t, blk(0, "attn_sinks.weight"), gguf.TensorF16) },
					[]string{blk(0, "attn_sinks.weight")}},
				{"attention sinks of the wrong length", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(0, "attn_sinks.weight"), heads+1) },
					[]string{blk(0, "attn_sinks.weight")}},
				{"attention bias of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(0, "attn_q.bias"), gguf.TensorI32) },
					[]string{blk(0, "attn_q.bias")}},
				{"sliding_window 0", set("attention.sliding_window", u32(0)), []string{k("attention.sliding_window")}},
				{"sliding_window missing", set("attention.sliding_window", nil), []string{k("attention.sliding_window")}},
				{"sliding_window_pattern of the wrong length", set("attention.sliding_window_pattern", make([]bool, layers+1)),
					[]string{k("attention.sliding_window_pattern")}},
			}...)
		}
		if m.get("expert_shared_feed_forward_length") != nil {
			cs = append(cs, badCase{"expert_shared_feed_forward_length wrong",
				set("expert_shared_feed_forward_length", u32(m.u("expert_shared_feed_forward_length")*2)), []string{blk(0, "ffn_up_shexp.weight")}})
			cs = append(cs, badCase{"shared expert gate of type i32", func(t *testing.T, m *ggufFile) {
				m.retype(t, blk(0, "ffn_gate_inp_shexp.weight"), gguf.TensorI32)
			}, []string{blk(0, "ffn_gate_inp_shexp.weight")}})
		}
	}

	if hybrid {
		conv, S := m.u("ssm.conv_kernel"), m.u("ssm.state_size")
		nk, nv, inner := m.u("ssm.group_count"), m.u("ssm.time_step_rank"), m.u("ssm.inner_size")
		cs = append(cs, []badCase{
			{"ssm.conv_kernel not matching ssm_conv1d", set("ssm.conv_kernel", u32(conv+1)), []string{blk(rec, "ssm_conv1d.weight")}},
			{"ssm.conv_kernel 1", set("ssm.conv_kernel", u32(1)), []string{k("ssm.conv_kernel")}},
			{"ssm.conv_kernel 0", set("ssm.conv_kernel", u32(0)), []string{k("ssm.conv_kernel")}},
			{"ssm.conv_kernel missing", set("ssm.conv_kernel", nil), []string{k("ssm.conv_kernel")}},
			{"ssm.group_count not dividing time_step_rank", set("ssm.group_count", u32(nonDivisor(nv))), []string{k("ssm.group_count")}},
			{"ssm.group_count above time_step_rank", set("ssm.group_count", u32(2*nv)), []string{k("ssm.group_count")}},
			{"ssm.group_count 0", set("ssm.group_count", u32(0)), []string{k("ssm.group_count")}},
			{"ssm.group_count contradicting the tensors", set("ssm.group_count", u32(nv)), []string{blk(rec, "")}},
			{"ssm.time_step_rank not matching inner_size", set("ssm.time_step_rank", u32(2*nv)), []string{k("ssm.inner_size")}},
			{"ssm.time_step_rank and inner_size contradicting the tensors", func(_ *testing.T, m *ggufFile) {
				m.set("ssm.time_step_rank", u32(2*nv))
				m.set("ssm.inner_size", u32(2*inner))
			}, []string{blk(rec, "")}},
			{"ssm.state_size not matching inner_size", set("ssm.state_size", u32(S/2)), []string{k("ssm.inner_size")}},
			{"ssm.state_size and inner_size contradicting the tensors", func(_ *testing.T, m *ggufFile) {
				m.set("ssm.state_size", u32(S/2))
				m.set("ssm.inner_size", u32(inner/2))
			}, []string{blk(rec, "")}},
			{"ssm.inner_size off by one", set("ssm.inner_size", u32(inner+1)), []string{k("ssm.inner_size")}},
			{"ssm.state_size 0", set("ssm.state_size", u32(0)), []string{k("ssm.state_size")}},
			{"full_attention_interval 0", set("full_attention_interval", u32(0)), []string{k("full_attention_interval")}},
			{"full_attention_interval 1", set("full_attention_interval", u32(1)), []string{blk(0, "attn_q.weight")}},
			{"full_attention_interval past the layers", set("full_attention_interval", u32(100)), []string{blk(attn, "ssm_")}},
			{"recurrent_layers of the wrong length", set("attention.recurrent_layers", make([]int32, 2)), []string{k("attention.recurrent_layers")}},
			{"head_count_kv array with unequal attention layers", func(_ *testing.T, m *ggufFile) {
				a := make([]int32, layers)
				for i := range a {
					if (i+1)%4 == 0 {
						a[i] = int32(kv + i/4*kv)
					}
				}
				m.set("attention.head_count_kv", a)
			}, []string{k("attention.head_count_kv")}},
			{"head_count_kv array of zeros", set("attention.head_count_kv", make([]int32, layers)), []string{blk(attn, "ssm_")}},
			{"nextn_predict_layers as many as the blocks", set("nextn_predict_layers", u32(layers)), []string{k("nextn_predict_layers")}},
			{"ssm_conv1d of the wrong shape", func(t *testing.T, m *ggufFile) {
				s := m.shape(t, blk(rec, "ssm_conv1d.weight"))
				m.reshape(t, blk(rec, "ssm_conv1d.weight"), s[0], s[1]-1)
			}, []string{blk(rec, "ssm_conv1d.weight")}},
			{"ssm_conv1d of type f16", func(t *testing.T, m *ggufFile) { m.retype(t, blk(rec, "ssm_conv1d.weight"), gguf.TensorF16) },
				[]string{blk(rec, "ssm_conv1d.weight")}},
			{"ssm_a of type f16", func(t *testing.T, m *ggufFile) { m.retype(t, blk(rec, "ssm_a"), gguf.TensorF16) },
				[]string{blk(rec, "ssm_a")}},
			{"ssm_dt.bias of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(rec, "ssm_dt.bias"), gguf.TensorI32) },
				[]string{blk(rec, "ssm_dt.bias")}},
			{"ssm_norm of type q8_0", func(t *testing.T, m *ggufFile) { m.retype(t, blk(rec, "ssm_norm.weight"), gguf.TensorQ8_0) },
				[]string{blk(rec, "ssm_norm.weight")}},
			{"ssm_a 2-D", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(rec, "ssm_a"), nv, 2) }, []string{blk(rec, "ssm_a")}},
			{"missing ssm_out", func(_ *testing.T, m *ggufFile) { m.drop(blk(rec, "ssm_out.weight")) }, []string{blk(rec, "ssm_out.weight")}},
			{"missing attn_qkv", func(_ *testing.T, m *ggufFile) { m.drop(blk(rec, "attn_qkv.weight")) }, []string{blk(rec, "")}},
		}...)
		_ = nk
	}

	if m.get("rope.dimension_sections") != nil {
		cs = append(cs, []badCase{
			{"rope.dimension_sections summing past the head", set("rope.dimension_sections", []int32{int32(hd), 0, 0, 0}),
				[]string{k("rope.dimension_sections")}},
			{"rope.dimension_sections summing past the rotated dimensions", set("rope.dimension_sections", []int32{int32(hd / 2), 0, 0, 0}),
				[]string{k("rope.dimension_sections")}},
			{"rope.dimension_sections of 2", set("rope.dimension_sections", []int32{3, 3}), []string{k("rope.dimension_sections")}},
			{"rope.dimension_sections of 5", set("rope.dimension_sections", []int32{3, 3, 2, 0, 1}), []string{k("rope.dimension_sections")}},
			{"rope.dimension_sections negative", set("rope.dimension_sections", []int32{3, -3, 2, 6}), []string{k("rope.dimension_sections")}},
			{"rope.dimension_sections all 0", set("rope.dimension_sections", []int32{0, 0, 0, 0}), []string{k("rope.dimension_sections")}},
			{"rope.dimension_sections of floats", set("rope.dimension_sections", []float32{3, 3, 2, 0}), []string{k("rope.dimension_sections")}},
			{"rope.dimension_sections missing", set("rope.dimension_sections", nil), []string{k("rope.dimension_sections")}},
		}...)
	}
	return cs
}

var hugeBlocks = 1 << 16

// mlaCases are DeepSeek 2's (and GLM-4.7-Flash's, architecture deepseek2
// in llama.cpp's files) heads, latent sizes and attention tensors, for
// files with a latent cache (attn_k_b, attn_v_b) and older ones (attn_kv_b).
// nemotronCases are the bad Nemotron-H files: layer 0 is Mamba-2, 1 a
// feed-forward (experts in nemotron_h_moe), 3 attention (gen-models.py's
// patterns M-M*-M*- and MEM*EM*E).
func nemotronCases(m *ggufFile) []badCase {
	k := func(s string) string { return m.arch + "." + s }
	set := func(key string, v any) func(*testing.T, *ggufFile) {
		return func(_ *testing.T, m *ggufFile) { m.set(key, v) }
	}
	u32 := func(n int) uint32 { return uint32(n) }
	blk := func(i int, s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
	layers, inner, hd := m.u("block_count"), m.u("ssm.inner_size"), m.u("attention.key_length")
	var kvs []uint32 // per layer, whatever integer type the file has
	switch a := m.get("attention.head_count_kv").(type) {
	case []uint32:
		kvs = a
	case []int32:
		for _, x := range a {
			kvs = append(kvs, uint32(x))
		}
	}
	cs := []badCase{
		{"ssm.conv_kernel 1", set("ssm.conv_kernel", u32(1)), []string{k("ssm.conv_kernel")}},
		{"ssm.state_size missing", set("ssm.state_size", nil), []string{k("ssm.state_size")}},
		{"ssm.time_step_rank 0", set("ssm.time_step_rank", u32(0)), []string{k("ssm.time_step_rank")}},
		{"ssm.inner_size not a multiple of the heads", set("ssm.inner_size", u32(inner+1)), []string{k("ssm.inner_size")}},
		{"ssm.group_count not dividing the heads", set("ssm.group_count", u32(3)), []string{k("ssm.group_count")}},
		{"ssm.inner_size doubled", set("ssm.inner_size", u32(2*inner)), []string{blk(0, "ssm_")}},
		{"missing ssm_out", func(_ *testing.T, m *ggufFile) { m.drop(blk(0, "ssm_out.weight")) }, []string{blk(0, "ssm_out.weight")}},
		{"ssm_a per state element", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, blk(2, "ssm_a"))
			m.reshape(t, blk(2, "ssm_a"), 2, s[1])
		}, []string{blk(2, "ssm_a")}},
		{"ssm_norm not grouped", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(0, "ssm_norm.weight"), inner) },
			[]string{blk(0, "ssm_norm.weight")}},
		{"ssm_conv1d of type f16", func(t *testing.T, m *ggufFile) { m.retype(t, blk(0, "ssm_conv1d.weight"), gguf.TensorF16) },
			[]string{blk(0, "ssm_conv1d.weight")}},
		{"head_count_kv array of the wrong length", set("attention.head_count_kv", make([]uint32, layers+1)),
			[]string{k("attention.head_count_kv")}},
		{"feed_forward_length all 0 (feed-forwards read as Mamba-2)", set("feed_forward_length", make([]uint32, layers)),
			[]string{blk(1, "ssm_in.weight")}},
		{"head_count_kv 0 on the attention layer", func(_ *testing.T, m *ggufFile) {
			kv := slices.Clone(kvs)
			kv[3] = 0
			m.set("attention.head_count_kv", kv)
		}, []string{blk(3, "ssm_in.weight")}},
		{"head_count_kv not dividing head_count", func(_ *testing.T, m *ggufFile) {
			kv := slices.Clone(kvs)
			kv[3] = uint32(nonDivisor(m.u("attention.head_count")))
			m.set("attention.head_count_kv", kv)
		}, []string{k("attention.head_count_kv")}},
		{"missing attention key", func(_ *testing.T, m *ggufFile) { m.drop(blk(3, "attn_k.weight")) }, []string{blk(3, "attn_k.weight")}},
		{"key_length halved", func(_ *testing.T, m *ggufFile) {
			m.set("attention.key_length", u32(hd/2))
			m.set("attention.value_length", u32(hd/2))
		}, []string{blk(3, "attn_q.weight")}},
		{"block_count huge", set("block_count", u32(hugeBlocks)), []string{k("block_count")}},
		{"missing output norm", func(_ *testing.T, m *ggufFile) { m.drop("output_norm.weight") }, []string{"output_norm.weight"}},
	}
	if m.get("expert_count") == nil {
		return append(cs, badCase{"feed-forward of another width", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, blk(1, "ffn_up.weight"))
			m.reshape(t, blk(1, "ffn_up.weight"), s[0], s[1]+8)
		}, []string{blk(1, "ffn_up.weight")}})
	}
	E, latent := m.u("expert_count"), m.u("moe_latent_size")
	return append(cs, []badCase{
		{"expert_count 0", set("expert_count", u32(0)), []string{k("expert_count")}},
		{"expert_used_count above expert_count", set("expert_used_count", u32(E+1)), []string{k("expert_used_count")}},
		{"expert_shared_feed_forward_length missing", set("expert_shared_feed_forward_length", nil), []string{k("expert_shared_feed_forward_length")}},
		{"expert_feed_forward_length doubled", set("expert_feed_forward_length", u32(2*m.u("expert_feed_forward_length"))), []string{blk(1, "ffn_")}},
		{"moe_latent_size doubled", set("moe_latent_size", u32(2*latent)), []string{blk(1, "ffn_latent_down.weight")}},
		{"missing latent projection", func(_ *testing.T, m *ggufFile) { m.drop(blk(4, "ffn_latent_up.weight")) }, []string{blk(4, "ffn_latent_up.weight")}},
		{"missing selection bias", func(_ *testing.T, m *ggufFile) { m.drop(blk(1, "exp_probs_b.bias")) }, []string{blk(1, "exp_probs_b.bias")}},
		{"router with more experts than the expert tensors", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, blk(7, "ffn_gate_inp.weight"))
			m.reshape(t, blk(7, "ffn_gate_inp.weight"), s[0], 2*E)
		}, []string{blk(7, "ffn_gate_inp.weight")}},
		{"expert tensor of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(4, "ffn_up_exps.weight"), gguf.TensorI32) },
			[]string{blk(4, "ffn_up_exps.weight")}},
		{"shared expert of another width", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, blk(1, "ffn_down_shexp.weight"))
			m.reshape(t, blk(1, "ffn_down_shexp.weight"), s[0]+8, s[1])
		}, []string{blk(1, "ffn_down_shexp.weight")}},
	}...)
}

func mlaCases(m *ggufFile) []badCase {
	k := func(s string) string { return "deepseek2." + s }
	set := func(key string, v any) func(*testing.T, *ggufFile) {
		return func(_ *testing.T, m *ggufFile) { m.set(key, v) }
	}
	u32 := func(n int) uint32 { return uint32(n) }
	blk := func(i int, s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
	heads, layers, rd := m.u("attention.head_count"), m.u("block_count"), m.u("rope.dimension_count")
	kvr := m.u("attention.kv_lora_rank")
	absorbed := m.get("attention.key_length_mla") != nil
	hk, vd := m.u("attention.key_length"), m.u("attention.value_length") // files with attn_kv_b
	if absorbed {
		hk, vd = m.u("attention.key_length_mla"), m.u("attention.value_length_mla")
	}
	lead, qr := m.u("leading_dense_block_count"), m.u("attention.q_lora_rank")
	q := "attn_q.weight"
	if qr > 0 {
		q = "attn_q_b.weight"
	}
	cs := []badCase{
		{"head_count 0", set("attention.head_count", u32(0)), []string{k("attention.head_count")}},
		{"head_count missing", set("attention.head_count", nil), []string{k("attention.head_count")}},
		{"head_count doubled", set("attention.head_count", u32(2*heads)), []string{blk(0, q)}},
		{"kv_lora_rank missing", set("attention.kv_lora_rank", nil), []string{k("attention.kv_lora_rank")}},
		{"kv_lora_rank 0", set("attention.kv_lora_rank", u32(0)), []string{k("attention.kv_lora_rank")}},
		{"q_lora_rank negative", set("attention.q_lora_rank", int32(-1)), []string{k("attention.q_lora_rank")}},
		{"rope.dimension_count odd", set("rope.dimension_count", u32(rd-1)), []string{k("rope.dimension_count")}},
		{"rope.dimension_count 0", set("rope.dimension_count", u32(0)), []string{k("rope.dimension_count")}},
		{"rope.dimension_count past the head", set("rope.dimension_count", u32(2*hk)), []string{k("rope.dimension_count")}},
		{"block_count larger than the layers present", set("block_count", u32(layers+1)), []string{k("block_count")}},
		{"block_count huge", set("block_count", u32(hugeBlocks)), []string{k("block_count")}},
		{"embedding_length wrong", set("embedding_length", u32(m.u("embedding_length")+32)), []string{"token_embd.weight"}},
		{"kv norm of the cached head's width", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(1, "attn_kv_a_norm.weight"), kvr+rd) },
			[]string{blk(1, "attn_kv_a_norm.weight")}},
		{"attention output of type f64", func(t *testing.T, m *ggufFile) { m.retype(t, blk(1, "attn_output.weight"), gguf.TensorF64) },
			[]string{blk(1, "attn_output.weight")}},
		{"norm of type q8_0", func(t *testing.T, m *ggufFile) { m.retype(t, "output_norm.weight", gguf.TensorQ8_0) }, []string{"output_norm.weight"}},
		{"leading_dense_block_count past the layers", set("leading_dense_block_count", u32(layers+1)), []string{k("leading_dense_block_count")}},
		{"leading_dense_block_count one short", set("leading_dense_block_count", u32(lead-1)), []string{blk(lead-1, "ffn_gate_inp.weight")}},
		{"expert_shared_count one more", set("expert_shared_count", u32(m.u("expert_shared_count")+1)), []string{blk(lead, "ffn_gate_shexp.weight")}},
		{"expert_gating_func 3", set("expert_gating_func", u32(3)), []string{k("expert_gating_func")}},
		{"expert_group_count 4", set("expert_group_count", u32(4)), []string{k("expert_group_count")}},
		{"attention temperature", set("attention.temperature_scale", float32(0.1)), []string{k("attention.temperature_scale")}},
	}
	if absorbed {
		cs = append(cs, []badCase{
			{"head_count_kv 2 with a latent cache", set("attention.head_count_kv", u32(2)), []string{k("attention.head_count_kv")}},
			{"kv_lora_rank and the cached head larger than the tensors'", func(_ *testing.T, m *ggufFile) {
				m.set("attention.kv_lora_rank", u32(kvr+32))
				m.set("attention.key_length", u32(kvr+32+rd))
				m.set("attention.value_length", u32(kvr+32))
			}, []string{blk(0, "attn_kv_a_mqa.weight")}},
			{"key_length not kv_lora_rank + rope", set("attention.key_length", u32(kvr)), []string{k("attention.key_length")}},
			{"value_length not kv_lora_rank", set("attention.value_length", u32(kvr+1)), []string{k("attention.value_length")}},
			{"key_length_mla no larger than the rope", set("attention.key_length_mla", u32(rd)), []string{k("attention.key_length_mla")}},
			{"key_length_mla doubled", set("attention.key_length_mla", u32(2*hk)), []string{blk(0, q)}},
			{"value_length_mla doubled", set("attention.value_length_mla", u32(2*vd)), []string{blk(0, "attn_v_b.weight")}},
			// Without the *_mla keys the file is read as one of attn_kv_b.
			{"value_length_mla missing", set("attention.value_length_mla", nil), []string{blk(0, "attn_kv_b.weight")}},
			{"missing attn_k_b", func(_ *testing.T, m *ggufFile) { m.drop(blk(1, "attn_k_b.weight")) }, []string{blk(1, "attn_k_b.weight")}},
			{"attn_v_b 2-D", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(2, "attn_v_b.weight"), kvr, vd*heads) },
				[]string{blk(2, "attn_v_b.weight")}},
			{"attn_k_b of type i32", func(t *testing.T, m *ggufFile) { m.retype(t, blk(0, "attn_k_b.weight"), gguf.TensorI32) },
				[]string{blk(0, "attn_k_b.weight")}},
		}...)
	} else {
		cs = append(cs, []badCase{
			{"kv_lora_rank larger than the tensors'", set("attention.kv_lora_rank", u32(kvr+32)), []string{blk(0, "attn_kv_a_mqa.weight")}},
			{"key_length no larger than the rope", set("attention.key_length", u32(rd)), []string{k("attention.key_length")}},
			{"value_length doubled", set("attention.value_length", u32(2*vd)), []string{blk(0, "attn_kv_b.weight")}},
			{"missing attn_kv_b", func(_ *testing.T, m *ggufFile) { m.drop(blk(1, "attn_kv_b.weight")) }, []string{blk(1, "attn_kv_b.weight")}},
			{"attn_kv_b 3-D", func(t *testing.T, m *ggufFile) { m.reshape(t, blk(2, "attn_kv_b.weight"), kvr, hk-rd+vd, heads) },
				[]string{blk(2, "attn_kv_b.weight")}},
		}...)
	}
	if qr > 0 {
		cs = append(cs, []badCase{
			{"q_lora_rank 0 (read as attn_q)", set("attention.q_lora_rank", u32(0)), []string{blk(0, "attn_q.weight")}},
			{"q_lora_rank larger than the tensors'", set("attention.q_lora_rank", u32(qr+32)), []string{blk(0, "attn_q_a.weight")}},
			{"selection bias of the wrong length", func(t *testing.T, m *ggufFile) {
				m.reshape(t, blk(lead, "exp_probs_b.bias"), m.u("expert_count")+1)
			}, []string{blk(lead, "exp_probs_b.bias")}},
		}...)
	}
	return cs
}

// runEncoder opens an encoder file as `ggml-rs embed` and serve do, and
// embeds one sequence.
func runEncoder(path string) (stage string, err error) {
	stage = "open"
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("PANIC in %s: %v", stage, p)
		}
	}()
	b, err := ml.NewBackend(path, ml.BackendParams{AllocMemory: true, NumThreads: 2})
	if err != nil {
		return stage, err
	}
	defer b.Close()
	stage = "load"
	if err := b.Load(context.Background(), nil); err != nil {
		return stage, err
	}
	stage = "bert.New"
	m, err := bert.New(b)
	if err != nil {
		return stage, err
	}
	stage = "embed"
	_, err = m.Embed([][]int32{{2, 10, 20, 30, 3}})
	return stage, err
}

// TestBadEncoders is TestBadModels for Nomic BERT (the encoder package's
// second architecture): heads, sizes, RoPE, pooling and its tensors.
func TestBadEncoders(t *testing.T) {
	orig := readGGUF(t, modelPath(t, "nomic-bert-small-f16"))
	if stage, err := runEncoder(modelPath(t, "nomic-bert-small-f16")); err != nil {
		t.Fatalf("the unmodified model: %s: %v", stage, err)
	}
	k := func(s string) string { return "nomic-bert." + s }
	set := func(key string, v any) func(*testing.T, *ggufFile) {
		return func(_ *testing.T, m *ggufFile) { m.set(key, v) }
	}
	d, heads, layers := orig.u("embedding_length"), orig.u("attention.head_count"), orig.u("block_count")
	cases := []badCase{
		{"head_count 0", set("attention.head_count", uint32(0)), []string{k("attention.head_count")}},
		{"head_count not dividing embedding_length", set("attention.head_count", uint32(nonDivisor(d))), []string{"head count"}},
		{"head_count giving an odd head for RoPE", set("attention.head_count", uint32(d)), []string{k("rope.freq_base")}},
		{"rope.freq_base 0", set("rope.freq_base", float32(0)), []string{k("rope.freq_base")}},
		{"rope.freq_base NaN", set("rope.freq_base", float32(math.NaN())), []string{k("rope.freq_base")}},
		{"embedding_length wrong", set("embedding_length", uint32(d+2*heads)), []string{"token_embd.weight"}},
		{"block_count larger than the layers present", set("block_count", uint32(layers+1)), []string{fmt.Sprintf("blk.%d.", layers)}},
		{"feed_forward_length missing", set("feed_forward_length", nil), []string{k("feed_forward_length")}},
		{"pooling_type 7", set("pooling_type", uint32(7)), []string{"pooling"}},
		{"missing gate", func(_ *testing.T, m *ggufFile) { m.drop("blk.1.ffn_gate.weight") }, []string{"blk.1.ffn_gate.weight"}},
		{"fused QKV of the wrong width", func(t *testing.T, m *ggufFile) { m.reshape(t, "blk.2.attn_qkv.weight", d, 2*d) },
			[]string{"blk.2.attn_qkv.weight"}},
		{"QKV bias of the wrong length", func(_ *testing.T, m *ggufFile) { m.add("blk.0.attn_qkv.bias", gguf.TensorF32, d) },
			[]string{"blk.0.attn_qkv.bias"}},
		{"output norm bias missing", func(_ *testing.T, m *ggufFile) { m.drop("blk.3.layer_output_norm.bias") },
			[]string{"blk.3.layer_output_norm.bias"}},
		{"tokenizer without [UNK]", set("tokenizer.ggml.unknown_token_id", nil), []string{"unknown token"}},
	}
	runBadEncoders(t, orig, cases)
}

// TestBadMoEEncoders: Nomic BERT MoE files whose experts contradict their
// keys, or are missing, are refused with the key or tensor named.
func TestBadMoEEncoders(t *testing.T) {
	orig := readGGUF(t, modelPath(t, "nomic-bert-moe-small-f16"))
	if stage, err := runEncoder(modelPath(t, "nomic-bert-moe-small-f16")); err != nil {
		t.Fatalf("the unmodified model: %s: %v", stage, err)
	}
	k := func(s string) string { return "nomic-bert-moe." + s }
	set := func(key string, v any) func(*testing.T, *ggufFile) {
		return func(_ *testing.T, m *ggufFile) { m.set(key, v) }
	}
	E := orig.u("expert_count")
	cases := []badCase{
		{"expert_count 0", set("expert_count", uint32(0)), []string{k("expert_count")}},
		{"expert_count missing", set("expert_count", nil), []string{k("expert_count")}},
		{"expert_used_count above expert_count", set("expert_used_count", uint32(E+1)), []string{k("expert_used_count")}},
		{"moe_every_n_layers 1 (no layer with experts)", set("moe_every_n_layers", uint32(1)), []string{"blk.1.ffn_up.weight"}},
		{"moe_every_n_layers 0", set("moe_every_n_layers", uint32(0)), []string{"blk.1.ffn_up.weight"}},
		{"expert_count larger than the tensors'", set("expert_count", uint32(2*E)), []string{"blk.1.ffn_gate_inp.weight"}},
		{"router of the wrong width", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, "blk.3.ffn_gate_inp.weight")
			m.reshape(t, "blk.3.ffn_gate_inp.weight", s[0], s[1]+1)
		}, []string{"blk.3.ffn_gate_inp.weight"}},
		{"missing expert tensor", func(_ *testing.T, m *ggufFile) { m.drop("blk.3.ffn_down_exps.weight") }, []string{"blk.3.ffn_down_exps.weight"}},
		{"expert tensor 2-D", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, "blk.1.ffn_up_exps.weight")
			m.reshape(t, "blk.1.ffn_up_exps.weight", s[0], s[1]*s[2])
		}, []string{"blk.1.ffn_up_exps.weight"}},
		{"dense layer's up bias of the wrong length", func(t *testing.T, m *ggufFile) {
			s := m.shape(t, "blk.2.ffn_up.bias")
			m.reshape(t, "blk.2.ffn_up.bias", s[0]+1)
		}, []string{"blk.2.ffn_up.bias"}},
	}
	runBadEncoders(t, orig, cases)
}

// runBadEncoders writes each case's edit of orig and requires the encoder
// to refuse it, naming what its case wants named.
func runBadEncoders(t *testing.T, orig *ggufFile, cases []badCase) {
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := orig.clone()
			c.edit(t, m)
			path := filepath.Join(dir, fmt.Sprintf("case%03d.gguf", i))
			m.write(t, path)
			defer os.Remove(path)
			stage, err := runEncoder(path)
			if err == nil {
				t.Fatalf("accepted (through %s)", stage)
			}
			msg := err.Error()
			if strings.Contains(msg, "PANIC") {
				t.Fatalf("%s", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: error %q does not name %q", stage, msg, w)
				}
			}
			t.Logf("%s: %v", stage, msg)
		})
	}
}
