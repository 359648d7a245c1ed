package main

// Ollama's GGUF layout. For the same checkpoint Ollama's converter writes
// another file than llama.cpp's: other architecture names (gptoss; a
// Qwen3-Next checkpoint as qwen35moe; olmo3 for llama.cpp's olmo2), other tensor names (ssm_dt,
// attn_out, ffn_norm, attn_sinks), other keys (a per-layer head_count_kv
// array whose zeros mark the recurrent layers, 3 rope sections and their
// aliases, no MTP layers in block_count, no expert_feed_forward_length or
// rope.scaling.type for gpt-oss; OLMo 3's sliding layers as a bool array,
// no head sizes; Mistral 3's YaRN and temperature under other names;
// GLM-4.7-Flash's per-head and cached head sizes swapped) and
// stray tensors (mtp.*; Mistral 3's vision tower).
// scripts/gen-models.py --layout ollama writes those files
// (<model>-ollama.gguf) from the same tensor bytes as the llama.cpp-layout
// models, so they are held to the same golden files.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// ollamaArchs maps the architectures that have an Ollama layout (the
// llama.cpp name, as in the model file names) to the name in Ollama's file.
var ollamaArchs = map[string]string{
	"gpt-oss":     "gptoss",
	"qwen3next":   "qwen35moe",
	"qwen35":      "qwen35",
	"qwen35moe":   "qwen35moe",
	"olmo3":       "olmo3", // llama.cpp's converter: olmo2
	"mistral3":    "mistral3",
	"glm4moelite": "glm4moelite", // llama.cpp's converter: deepseek2
	"llama4":      "llama4",
	"gemma3n":     "gemma3n",
}

// TestOllamaLayout checks that each Ollama-layout model gives
// bit-identical logits in ours to the llama.cpp-layout model of the same
// weights, on each delta-net path, and holds it to that model's golden
// file with the fused path and flash attention (parityCase, the same
// tolerances); the other cases would repeat TestParityWithLlamaCpp's.
func TestOllamaLayout(t *testing.T) {
	for _, arch := range slices.Sorted(maps.Keys(ollamaArchs)) {
		for _, typ := range []string{"f16", "q8_0", "q4_0"} {
			name := arch + "-small-" + typ
			t.Run(name, func(t *testing.T) {
				var doc goldenDoc
				readGolden(t, "ref_"+name+".json", &doc)
				path := modelPath(t, name)
				checkSHA(t, path, doc.ModelSHA256)
				opath := modelPath(t, name+"-ollama")
				paths := []string{"fused"}
				if strings.HasPrefix(arch, "qwen3") {
					paths = append(paths, "primitive") // the delta net's
				}
				if !t.Run("same-logits", func(t *testing.T) { sameLogits(t, path, opath, arch, paths, &doc) }) {
					return
				}
				// Bit-identical logits on every path make the file's other
				// parity cases those of TestParityWithLlamaCpp; one runs
				// end to end against the golden file.
				t.Run("fused/fa-on", func(t *testing.T) { parityCase(t, opath, name, "fused", "on", &doc, false) })
			})
		}
	}
}

// sameLogits checks that opath is in Ollama's layout and gives exactly
// the logits of path, the llama.cpp-layout file of the same weights: every
// position of the golden sequences, in ubatches of 7 (several ubatches, so
// the caches carry over), on each delta-net path.
func sameLogits(t *testing.T, path, opath, arch string, deltaNets []string, doc *goldenDoc) {
	for _, dn := range deltaNets {
		df := addDecoderFlags(newFlags("parity", "", ""))
		*df.fa, *df.ngl, *df.deltaNet = "on", 0, dn
		b, m, _, err := openDecoder(path, df)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ob, om, _, err := openDecoder(opath, df)
		if err != nil {
			t.Fatalf("the Ollama-layout file: %v", err)
		}
		defer ob.Close()
		checkOllamaLayout(t, ob, arch)
		if len(om.Blocks) != len(m.Blocks) || om.Vocab != m.Vocab {
			t.Fatalf("%d blocks, vocabulary %d; the llama.cpp-layout file %d, %d", len(om.Blocks), om.Vocab, len(m.Blocks), m.Vocab)
		}
		n, differ := 0, 0
		for _, s := range doc.Sequences {
			want, err := computeLogits(m, s.Tokens, true, len(s.Tokens), 7, 0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := computeLogits(om, s.Tokens, true, len(s.Tokens), 7, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				n++
				if !slices.EqualFunc(got[i], want[i], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					differ++
				}
			}
		}
		t.Logf("%-9s %d of %d logit rows bit-identical", dn, n-differ, n)
		if differ > 0 {
			t.Errorf("%s: %d of %d logit rows differ from the llama.cpp-layout file's", dn, differ, n)
		}
	}
}

// checkOllamaLayout fails unless the file b was opened on has what marks
// Ollama's layout for arch (so that a stale or llama.cpp-layout file does
// not pass for one).
func checkOllamaLayout(t *testing.T, b ml.Backend, arch string) {
	t.Helper()
	c := b.Config()
	oarch := ollamaArchs[arch]
	var problems []string
	if a := c.Architecture(); a != oarch {
		problems = append(problems, fmt.Sprintf("architecture %q, not %q", a, oarch))
	}
	has := func(name string) bool { return b.Get(name) != nil }
	if arch == "gpt-oss" {
		if !has("blk.0.attn_out.weight") || !has("blk.0.attn_sinks") || !has("blk.0.ffn_norm.weight") || has("blk.0.attn_output.weight") {
			problems = append(problems, "not Ollama's gpt-oss tensor names")
		}
		if c.Value(oarch+".expert_feed_forward_length") != nil || c.Value(oarch+".rope.scaling.type") != nil {
			problems = append(problems, "keys Ollama does not write")
		}
	} else if arch == "mistral3" {
		if c.Value(oarch+".rope.scaling_beta") == nil || c.Value(oarch+".rope.scaling.mscale_all_dim") == nil ||
			c.Value(oarch+".attention.temperature_scale") != nil || c.Value(oarch+".rope.scaling.yarn_log_multiplier") != nil {
			problems = append(problems, "not Ollama's YaRN and temperature keys")
		}
		if !has("v.patch_conv.weight") {
			problems = append(problems, "no vision tower tensors")
		}
	} else if arch == "glm4moelite" {
		// Each head's key (nope + rope) as key_length, the cached one as
		// key_length_mla; every head a KV head; GLM's pre-tokenizer.
		kl, _ := c.Value(oarch + ".attention.key_length").(uint32)
		klm, _ := c.Value(oarch + ".attention.key_length_mla").(uint32)
		kv, _ := c.Value(oarch + ".attention.head_count_kv").(uint32)
		if kl == 0 || klm <= kl || kv <= 1 || c.Value("tokenizer.ggml.pre") != "glm4" {
			problems = append(problems, fmt.Sprintf("key_length %d, key_length_mla %d, head_count_kv %d, pre %v: not Ollama's", kl, klm, kv, c.Value("tokenizer.ggml.pre")))
		}
	} else if arch == "llama4" {
		// The feed-forward lengths under Ollama's keys, no chunk size.
		ff, _ := c.Value(oarch + ".intermediate_size").(uint32)
		ffe, _ := c.Value(oarch + ".intermediate_size_moe").(uint32)
		if ff == 0 || ffe == 0 || c.Value(oarch+".expert_feed_forward_length") != nil || c.Value(oarch+".attention.sliding_window") != nil {
			problems = append(problems, "not Ollama's feed-forward and chunk keys")
		}
		if !has("v.patch_conv.weight") {
			problems = append(problems, "no vision tower tensors")
		}
	} else if arch == "gemma3n" {
		// The head size as head_dim alone, the sliding layers' RoPE base
		// under Ollama's key, one feed-forward length.
		_, ff := c.Value(oarch + ".feed_forward_length").(uint32)
		if c.Value(oarch+".head_dim") == nil || c.Value(oarch+".attention.key_length") != nil ||
			c.Value(oarch+".rope.freq_base_local") == nil || c.Value(oarch+".rope.freq_base_swa") != nil || !ff {
			problems = append(problems, "not Ollama's head size, RoPE base and feed-forward keys")
		}
	} else if arch == "olmo3" {
		if _, ok := c.Value(oarch + ".attention.sliding_window_pattern").([]bool); !ok {
			problems = append(problems, "sliding_window_pattern is not a per-layer bool array")
		}
		if c.Value(oarch+".attention.key_length") != nil || c.Value(oarch+".rope.dimension_count") != nil {
			problems = append(problems, "keys Ollama does not write")
		}
	} else {
		if _, ok := c.Value(oarch + ".attention.head_count_kv").([]uint32); !ok {
			problems = append(problems, "head_count_kv is not a per-layer array")
		}
		if !has("blk.0.ssm_dt") || has("blk.0.ssm_dt.bias") || !has("mtp.fc.weight") {
			problems = append(problems, "not Ollama's delta-net tensor names (ssm_dt, mtp.*)")
		}
		if c.Value(oarch+".nextn_predict_layers") != nil {
			problems = append(problems, "nextn_predict_layers, which Ollama does not write")
		}
	}
	if len(problems) > 0 {
		t.Fatalf("not Ollama's layout (regenerate: rm it; make models): %s", strings.Join(problems, "; "))
	}
}
