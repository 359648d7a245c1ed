package bert_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/convert"
	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
)

// A tiny random BERT checkpoint in Hugging Face's layout, converted and run
// through the backend, against a float64 forward pass written here. It
// needs no download, so it always runs.

type tinyConfig struct {
	hidden, layers, heads, ff, ctx int
}

var tinyVocab = []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff", "##able", ",", "!", "the", "cat"}

// tensor is a named PyTorch-layout tensor (slowest dimension first).
type tensor struct {
	name  string
	shape []int
	data  []float32
}

func randTensor(r *rand.Rand, name string, scale float64, shape ...int) tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	t := tensor{name: name, shape: shape, data: make([]float32, n)}
	for i := range t.data {
		t.data[i] = float32(r.NormFloat64() * scale)
	}
	return t
}

// gain is 1 + noise (layer-norm weights).
func gain(r *rand.Rand, name string, n int) tensor {
	t := randTensor(r, name, 0.1, n)
	for i := range t.data {
		t.data[i]++
	}
	return t
}

func tinyWeights(c tinyConfig, seed int64) []tensor {
	r := rand.New(rand.NewSource(seed))
	h, v := c.hidden, len(tinyVocab)
	ts := []tensor{
		randTensor(r, "bert.embeddings.word_embeddings.weight", 1, v, h), // "bert." prefixes are stripped
		randTensor(r, "embeddings.position_embeddings.weight", 0.5, c.ctx, h),
		randTensor(r, "embeddings.token_type_embeddings.weight", 0.5, 2, h),
		gain(r, "embeddings.LayerNorm.weight", h),
		randTensor(r, "embeddings.LayerNorm.bias", 0.1, h),
		randTensor(r, "pooler.dense.weight", 1, h, h), // skipped
		randTensor(r, "pooler.dense.bias", 1, h),
	}
	lin := func(p string, in, out int) {
		ts = append(ts, randTensor(r, p+".weight", 1/math.Sqrt(float64(in)), out, in), randTensor(r, p+".bias", 0.1, out))
	}
	for l := 0; l < c.layers; l++ {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		lin(p+"attention.self.query", h, h)
		lin(p+"attention.self.key", h, h)
		lin(p+"attention.self.value", h, h)
		lin(p+"attention.output.dense", h, h)
		ts = append(ts, gain(r, p+"attention.output.LayerNorm.gamma", h), randTensor(r, p+"attention.output.LayerNorm.beta", 0.1, h))
		lin(p+"intermediate.dense", h, c.ff)
		lin(p+"output.dense", c.ff, h)
		ts = append(ts, gain(r, p+"output.LayerNorm.weight", h), randTensor(r, p+"output.LayerNorm.bias", 0.1, h))
	}
	return ts
}

// writeSafetensors writes ts (F32) plus an I64 position_ids tensor.
func writeSafetensors(t *testing.T, path string, ts []tensor) {
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	data = binary.LittleEndian.AppendUint64(data, 0) // position_ids [1, 1]
	header["embeddings.position_ids"] = map[string]any{"dtype": "I64", "shape": []int{1, 1}, "data_offsets": []int{0, 8}}
	for _, x := range ts {
		begin := len(data)
		for _, v := range x.data {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
		}
		header[x.name] = map[string]any{"dtype": "F32", "shape": x.shape, "data_offsets": []int{begin, len(data)}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeTiny(t *testing.T, c tinyConfig, ts []tensor, pooling string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{
		"model_type": "bert", "architectures": []string{"BertModel"}, "hidden_size": c.hidden,
		"num_hidden_layers": c.layers, "num_attention_heads": c.heads, "intermediate_size": c.ff,
		"max_position_embeddings": c.ctx, "layer_norm_eps": 1e-12, "type_vocab_size": 2,
		"vocab_size": len(tinyVocab), "hidden_act": "gelu", "position_embedding_type": "absolute",
	}
	files := map[string]any{"config.json": cfg}
	if pooling != "" {
		files["modules.json"] = []map[string]string{
			{"path": "", "type": "sentence_transformers.models.Transformer"},
			{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
		}
		files["1_Pooling/config.json"] = map[string]bool{"pooling_mode_" + pooling: true}
	}
	for name, v := range files {
		b, _ := json.Marshal(v)
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab.txt"), []byte(strings.Join(tinyVocab, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSafetensors(t, filepath.Join(dir, "model.safetensors"), ts)
	return dir
}

// reference is BERT's forward pass in float64: the pooled embedding.
func reference(c tinyConfig, ts []tensor, ids []int32, pooling bert.Pooling, normalize bool) []float64 {
	w := map[string][]float64{}
	for _, x := range ts {
		name := strings.TrimPrefix(x.name, "bert.")
		name = strings.Replace(strings.Replace(name, ".gamma", ".weight", 1), ".beta", ".bias", 1)
		f := make([]float64, len(x.data))
		for i, v := range x.data {
			f[i] = float64(v)
		}
		w[name] = f
	}
	h, n := c.hidden, len(ids)
	row := func(m []float64, i, width int) []float64 { return m[i*width : (i+1)*width] }
	norm := func(x []float64, g, b []float64) {
		var mu, v float64
		for _, a := range x {
			mu += a
		}
		mu /= float64(len(x))
		for _, a := range x {
			v += (a - mu) * (a - mu)
		}
		v /= float64(len(x))
		for i := range x {
			x[i] = (x[i]-mu)/math.Sqrt(v+1e-12)*g[i] + b[i]
		}
	}
	linear := func(x []float64, name string, in, out int) []float64 {
		y := make([]float64, out)
		for o := 0; o < out; o++ {
			s := w[name+".bias"][o]
			for i := 0; i < in; i++ {
				s += w[name+".weight"][o*in+i] * x[i]
			}
			y[o] = s
		}
		return y
	}
	x := make([][]float64, n)
	for t, id := range ids {
		x[t] = make([]float64, h)
		for i := range x[t] {
			x[t][i] = row(w["embeddings.word_embeddings.weight"], int(id), h)[i] +
				row(w["embeddings.position_embeddings.weight"], t, h)[i] + w["embeddings.token_type_embeddings.weight"][i]
		}
		norm(x[t], w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
	}
	hd := h / c.heads
	for l := 0; l < c.layers; l++ {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for t := range x {
			q[t] = linear(x[t], p+"attention.self.query", h, h)
			k[t] = linear(x[t], p+"attention.self.key", h, h)
			v[t] = linear(x[t], p+"attention.self.value", h, h)
		}
		for t := range x {
			a := make([]float64, h)
			for hh := 0; hh < c.heads; hh++ {
				s := make([]float64, n)
				m := math.Inf(-1)
				for u := range x {
					for d := 0; d < hd; d++ {
						s[u] += q[t][hh*hd+d] * k[u][hh*hd+d]
					}
					s[u] /= math.Sqrt(float64(hd))
					m = math.Max(m, s[u])
				}
				var z float64
				for u := range s {
					s[u] = math.Exp(s[u] - m)
					z += s[u]
				}
				for u := range s {
					for d := 0; d < hd; d++ {
						a[hh*hd+d] += s[u] / z * v[u][hh*hd+d]
					}
				}
			}
			o := linear(a, p+"attention.output.dense", h, h)
			for i := range o {
				o[i] += x[t][i]
			}
			norm(o, w[p+"attention.output.LayerNorm.weight"], w[p+"attention.output.LayerNorm.bias"])
			f := linear(o, p+"intermediate.dense", h, c.ff)
			for i, z := range f {
				f[i] = 0.5 * z * (1 + math.Erf(z/math.Sqrt2))
			}
			y := linear(f, p+"output.dense", c.ff, h)
			for i := range y {
				y[i] += o[i]
			}
			norm(y, w[p+"output.LayerNorm.weight"], w[p+"output.LayerNorm.bias"])
			x[t] = y
		}
	}
	pooled := make([]float64, h)
	switch pooling {
	case bert.PoolingMean:
		for t := range x {
			for i := range pooled {
				pooled[i] += x[t][i] / float64(n)
			}
		}
	case bert.PoolingCLS:
		copy(pooled, x[0])
	case bert.PoolingLast:
		copy(pooled, x[n-1])
	}
	if normalize {
		var s float64
		for _, v := range pooled {
			s += v * v
		}
		for i := range pooled {
			pooled[i] /= math.Sqrt(s)
		}
	}
	return pooled
}

func TestTinyModel(t *testing.T) {
	c := tinyConfig{hidden: 16, layers: 2, heads: 4, ff: 32, ctx: 12}
	ts := tinyWeights(c, 7)
	texts := []string{"hello world", "Unaffable, the cat!", "the", "hello hello hello world world the cat un the cat hello world"}
	for _, tc := range []struct {
		pooling   string // 1_Pooling/config.json's mode ("": no sentence-transformers files)
		want      bert.Pooling
		normalize bool
	}{
		{"", bert.PoolingMean, true},
		{"mean_tokens", bert.PoolingMean, false},
		{"cls_token", bert.PoolingCLS, false},
		{"lasttoken", bert.PoolingLast, false},
	} {
		t.Run(tc.want.String()+map[bool]string{true: "-normalized"}[tc.normalize], func(t *testing.T) {
			dir := writeTiny(t, c, ts, tc.pooling)
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			b, err := convert.BERT(dir, convert.BERTOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			checkGGUF(t, path, c, tc.want, tc.pooling != "")

			m := open(t, path)
			if m.Pooling != tc.want || m.Normalize != tc.normalize {
				t.Fatalf("pooling %s, normalize %v; want %s, %v", m.Pooling, m.Normalize, tc.want, tc.normalize)
			}
			seqs := make([][]int32, len(texts))
			for i, s := range texts {
				var cut bool
				seqs[i], cut = m.Tokenize(s)
				if cut != (i == 3) {
					t.Errorf("text %d: truncated %v", i, cut)
				}
			}
			if want := []int32{2, 7, 8, 9, 10, 12, 13, 11, 3}; !slices.Equal(seqs[1], want) {
				t.Fatalf("tokens %v, want %v", seqs[1], want)
			}
			if len(seqs[3]) != c.ctx || seqs[3][c.ctx-1] != 3 {
				t.Fatalf("truncated sequence %v: want %d tokens ending in [SEP]", seqs[3], c.ctx)
			}
			embs, err := m.Embed(seqs)
			if err != nil {
				t.Fatal(err)
			}
			for i, ids := range seqs {
				want := reference(c, ts, ids, tc.want, tc.normalize)
				for j := range want {
					if d := math.Abs(float64(embs[i][j]) - want[j]); d > 1e-4*math.Max(1, math.Abs(want[j])) {
						t.Fatalf("text %d, value %d: got %g, want %g", i, j, embs[i][j], want[j])
					}
				}
			}
		})
	}
}

// checkGGUF reads the converted file's header back.
func checkGGUF(t *testing.T, path string, c tinyConfig, pooling bert.Pooling, st bool) {
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]any{
		"general.architecture": "bert", "bert.block_count": uint32(c.layers), "bert.embedding_length": uint32(c.hidden),
		"bert.attention.head_count": uint32(c.heads), "bert.feed_forward_length": uint32(c.ff),
		"bert.context_length": uint32(c.ctx), "bert.pooling_type": uint32(pooling), "tokenizer.ggml.model": "bert",
		"tokenizer.ggml.bos_token_id": uint32(2), "tokenizer.ggml.seperator_token_id": uint32(3),
		"tokenizer.ggml.unknown_token_id": uint32(1), "bert.attention.layer_norm_epsilon": float32(1e-12),
	} {
		if got, _ := g.Get(key); got != want {
			t.Errorf("%s = %v (%T), want %v (%T)", key, got, got, want, want)
		}
	}
	if _, ok := g.Get("bert." + bert.KeyNormalize); ok != st {
		t.Errorf("%s present: %v, want %v", bert.KeyNormalize, ok, st)
	}
	toks, _ := g.Get("tokenizer.ggml.tokens")
	if got := toks.([]string); got[2] != "[CLS]" || got[5] != "\u2581hello" || got[8] != "aff" {
		t.Errorf("tokens %q", got)
	}
	var names []string
	for _, x := range g.Tensors {
		names = append(names, x.Name)
	}
	if len(names) != 5+16*c.layers || slices.Contains(names, "pooler.dense.weight") {
		t.Errorf("%d tensors: %v", len(names), names)
	}
	if x, _ := g.Tensor("blk.1.ffn_up.weight"); !slices.Equal(x.Shape, []uint64{uint64(c.hidden), uint64(c.ff)}) {
		t.Errorf("blk.1.ffn_up.weight shape %v", x.Shape)
	}
}

func TestConvertErrors(t *testing.T) {
	c := tinyConfig{hidden: 8, layers: 1, heads: 2, ff: 16, ctx: 8}
	ts := tinyWeights(c, 1)
	for _, tc := range []struct {
		name string
		edit func(dir string)
		want string
	}{
		{"missing tensor", func(dir string) { writeSafetensors(t, filepath.Join(dir, "model.safetensors"), ts[:len(ts)-1]) }, "lacks 1 tensors"},
		{"wrong shape", func(dir string) {
			bad := slices.Clone(ts)
			bad[1] = randTensor(rand.New(rand.NewSource(1)), bad[1].name, 1, c.ctx+1, c.hidden)
			writeSafetensors(t, filepath.Join(dir, "model.safetensors"), bad)
		}, "has shape"},
		{"cased", func(dir string) {
			os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"do_lower_case": false}`), 0o644)
		}, "cased"},
		{"activation", func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(string(b), `"gelu"`, `"relu"`, 1)), 0o644)
		}, "hidden_act"},
		{"no vocab", func(dir string) { os.Remove(filepath.Join(dir, "vocab.txt")) }, "vocab.txt"},
	} {
		dir := writeTiny(t, c, ts, "")
		tc.edit(dir)
		if _, err := convert.BERT(dir, convert.BERTOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
