package main

// Parity with llama.cpp: our logits and our tokenizers against the golden
// files that llama.cpp's libllama (tools/llama-ref, scripts/parity.py)
// wrote into tests/golden for the deterministic random-weight models of
// scripts/gen-models.py.
//
// The models live in $GGML_RS_MODELS and the vocabulary-only files in
// $GGML_RS_VOCABS (make test sets both and generates the files first; a
// missing one is then a failure) or, without them, in .cache/models and
// .cache/vocabs, where a missing file skips the test.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/chat"
	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// Tolerances, also in scripts/parity.py (keep them in agreement).
const (
	// parityMaxAbs bounds |ours - golden| over every logit of the three
	// sequences' last positions. Ours matches llama.cpp's own output to
	// its print precision (about 5e-6 here: the golden files keep 6
	// significant digits); another CPU's ggml kernels may move both by
	// far less than this. Running without flash attention (unlike the
	// reference) gives 6e-3 on the F16 models and 0.17 on the quantized
	// ones; a wrong graph gives more.
	parityMaxAbs = 2e-3
	// otherCPUSpreads is how many times the reference's own spread (see
	// goldenDoc.spread) ours may stray from the golden files on a CPU
	// whose ggml features differ from those they were made with
	// (goldenCPU). Another instruction set sums in another order, and
	// these random-weight models amplify any rounding change as much as a
	// change of ubatch size does. Measured: on an Intel Xeon (AVX-512 with
	// VNNI, no BF16) llama.cpp's own unfused delta net left the golden
	// files by up to 0.84 of the spread (2.1e-1 of 0.25 on
	// qwen35moe-small-q4_0); with ggml built for AVX2 alone (the portable
	// build) ours left them by 0.2 to 1.3 spreads on 35 of the 36 model
	// and path pairs and by 2.5 on one (6.8e-2 of 2.7e-2,
	// qwen3next-small-f16, fused, the two-sequence batch;
	// docs/notes/parity-across-cpus.md). Four spreads leave 1.6 times
	// the worst.
	otherCPUSpreads = 4
	// parityMinGreedy is the least fraction of the reference's 64-token
	// greedy continuation whose every token ours predicts as top-1 when
	// fed the reference's tokens one at a time after the prompt, as
	// llama.cpp generated them (100% here).
	parityMinGreedy = 0.95
)

// parityModels are the models with a golden file (tests/golden/ref_*.json).
func parityModels(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(goldenDir, "ref_*.json"))
	if err != nil || len(files) < 24 {
		t.Fatalf("golden files: %v (%d found)", err, len(files))
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "ref_"), ".json"))
	}
	return names
}

const goldenDir = "../../../tests/golden"

// modelPath is where a generated model lives; it skips the test when the
// models are not there and GGML_RS_MODELS does not require them.
func modelPath(t *testing.T, name string) string {
	return generated(t, "GGML_RS_MODELS", "../../../.cache/models", name, "make models (scripts/gen-models.py --size small)")
}

// vocabPath is where a generated vocabulary-only GGUF lives
// (GGML_RS_VOCABS, as modelPath).
func vocabPath(t *testing.T, name string) string {
	return generated(t, "GGML_RS_VOCABS", "../../../.cache/vocabs", name, "make vocabs (scripts/gen-vocabs.py)")
}

func generated(t *testing.T, env, def, name, how string) string {
	t.Helper()
	dir, required := os.LookupEnv(env)
	if !required {
		dir = def
	}
	path := filepath.Join(dir, name+".gguf")
	if _, err := os.Stat(path); err != nil {
		if required {
			t.Fatalf("%s is missing: %s writes it", path, how)
		}
		t.Skipf("%s is not there (%s writes it; make test does)", path, how)
	}
	return path
}

// checkSHA fails unless the model is the one the golden file was made from.
func checkSHA(t *testing.T, path, want string) {
	t.Helper()
	if got := testfile.SHA256(t, path); got != want {
		t.Fatalf("%s has sha256 %s, but the golden file was made from %s: the generated model changed "+
			"(scripts/gen-models.py or its pinned numpy/gguf); regenerate it (rm it; make models), or, if the "+
			"generator changed on purpose, the golden files too (make parity-golden)", path, got, want)
	}
}

func readGolden(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// goldenDoc is a reference file of scripts/parity.py golden.
type goldenDoc struct {
	ModelSHA256 string `json:"model_sha256"`
	NVocab      int    `json:"n_vocab"`
	Sequences   []struct {
		Tokens []int32
		Logits []float32
	}
	refRuns
	// Unfused: the hybrids' reference with llama.cpp's unfused delta net
	// (scripts/llama-patches/01-ref-unfused-gdn.sh), which our primitive
	// path is held to.
	Unfused *refRuns
	// Long: one prompt past a long prefix (Llama 4's chunk and attention
	// temperature, at 8192 positions) in ubatches of 512, its last Decode
	// tokens one at a time; the last position's logits per flash-attention
	// setting.
	Long *struct {
		Tokens []int32
		Decode int
		Cases  []struct {
			FA     string
			Logits []float32
		}
	}
}

// refRuns are the reference's runs of one configuration: the three
// sequences in each case (flash attention, ubatch), the parallel batches
// and the greedy continuation.
type refRuns struct {
	Cases []struct {
		FA     string
		Ubatch int
		Logits [][]float32
	}
	Parallel []struct {
		FA        string
		Sequences [][]int32
		Logits    [][]float32
	}
	Greedy struct {
		Prompt, Tokens []int32
	}
}

// goldenCPU reports whether the bundled ggml's CPU features
// (backend.CPUFeatures) are those the golden files were made with and
// reproduce on (tests/golden/cpu-features, written by make parity-golden),
// and those.
func goldenCPU(t *testing.T) (bool, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, "cpu-features"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			want = strings.Fields(line)
			break
		}
	}
	if len(want) == 0 {
		t.Fatalf("%s lists no features", filepath.Join(goldenDir, "cpu-features"))
	}
	return slices.Equal(backend.CPUFeatures(), want), want
}

// spread is the largest difference between the reference's own runs of
// the same input on the machine that made the golden file: each case's
// sequences across ubatch sizes (per flash-attention setting), and the
// fused delta net's cases and parallel batches against the unfused one's.
// It measures how far a change of rounding order alone moves these
// logits, which is what another CPU is.
func (d *goldenDoc) spread() float64 {
	var worst float64
	diff := func(a, b [][]float32) {
		for i := range min(len(a), len(b)) {
			for j := range min(len(a[i]), len(b[i])) {
				worst = math.Max(worst, math.Abs(float64(a[i][j]-b[i][j])))
			}
		}
	}
	runs := []*refRuns{&d.refRuns}
	if d.Unfused != nil {
		runs = append(runs, d.Unfused)
		for i := range min(len(d.Cases), len(d.Unfused.Cases)) {
			diff(d.Cases[i].Logits, d.Unfused.Cases[i].Logits)
		}
		for i := range min(len(d.Parallel), len(d.Unfused.Parallel)) {
			diff(d.Parallel[i].Logits, d.Unfused.Parallel[i].Logits)
		}
	}
	for _, r := range runs {
		for i, a := range r.Cases {
			for _, b := range r.Cases[i+1:] {
				if a.FA == b.FA {
					diff(a.Logits, b.Logits)
				}
			}
		}
	}
	return worst
}

// parityScore accumulates one setting's comparison.
type parityScore struct {
	worst      float64
	top1, rows int
	// ties: rows whose top-1 need not agree (tie below), among rows.
	ties int
}

// add scores one row. Where tie > 0, a row whose golden top-1 leads its
// runner-up by no more than 2*tie is a tie within the tolerance, and its
// top-1 is not required to agree (max|d| still holds for it).
func (p *parityScore) add(t *testing.T, got, want []float32, tie float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d logits, golden %d", len(got), len(want))
	}
	for i := range got {
		p.worst = math.Max(p.worst, math.Abs(float64(got[i]-want[i])))
	}
	p.rows++
	switch {
	case sample.Greedy(got) == sample.Greedy(want):
		p.top1++
	case tie > 0 && lead(want) <= 2*tie:
		p.ties++
	}
}

// lead is by how much a row's largest value exceeds its second largest.
func lead(row []float32) float64 {
	first, second := math.Inf(-1), math.Inf(-1)
	for _, v := range row {
		switch x := float64(v); {
		case x > first:
			first, second = x, first
		case x > second:
			second = x
		}
	}
	return first - second
}

// TestParityWithLlamaCpp holds ours to llama.cpp's golden outputs on every
// generated model: the last-position logits of three sequences with the
// prompt in ubatches of 1, 7, 32 and 512 tokens, flash attention on and
// off; two sequences of different lengths in one batch; and the
// teacher-forced greedy continuation. The hybrid models run both delta-net
// paths (fused kernel, primitive graph).
func TestParityWithLlamaCpp(t *testing.T) {
	for _, name := range parityModels(t) {
		t.Run(name, func(t *testing.T) {
			var doc goldenDoc
			readGolden(t, "ref_"+name+".json", &doc)
			if len(doc.Cases) != 8 || len(doc.Parallel) != 2 || len(doc.Sequences) != 3 {
				t.Fatalf("golden file has %d cases, %d parallel batches, %d sequences (want 8, 2, 3)", len(doc.Cases), len(doc.Parallel), len(doc.Sequences))
			}
			if strings.HasPrefix(name, "llama4-") && doc.Long == nil {
				t.Fatal("golden file has no \"long\" prompt (make parity-golden writes it for llama4)")
			}
			path := modelPath(t, name)
			checkSHA(t, path, doc.ModelSHA256)
			paths := []string{"fused"}
			if slices.ContainsFunc([]string{"qwen3next-", "qwen35-", "qwen35moe-"}, func(p string) bool { return strings.HasPrefix(name, p) }) {
				paths = append(paths, "primitive")
			}
			for _, dn := range paths {
				for _, fa := range []string{"on", "off"} {
					t.Run(dn+"/fa-"+fa, func(t *testing.T) { parityCase(t, path, name, dn, fa, &doc, false) })
				}
			}
		})
	}
}

// parityCase checks one model, delta-net path and flash-attention setting
// against its golden file; with fast, on the fast CPU kernels
// (-fast-kernels) and within fastTolerance.
func parityCase(t *testing.T, path, name, deltaNet, fa string, doc *goldenDoc, fast bool) {
	df := addDecoderFlags(newFlags("parity", "", ""))
	*df.fa, *df.ngl, *df.deltaNet, *df.fast = fa, 0, deltaNet, fast
	b, m, _, err := openDecoder(path, df)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if m.Vocab != doc.NVocab {
		t.Fatalf("vocabulary %d, golden %d", m.Vocab, doc.NVocab)
	}
	// The fused path against the reference's (fused) runs; the primitive
	// path against the reference's unfused delta net, the same algorithm:
	// llama.cpp's fused and unfused paths themselves part by up to 0.4 on
	// these models (README), so each is held to its counterpart.
	ref := &doc.refRuns
	if deltaNet == "primitive" {
		if ref = doc.Unfused; ref == nil {
			t.Fatalf("the golden file has no \"unfused\" runs (make parity-golden writes them)")
		}
	}
	// With the golden files' CPU features, ours is held to parityMaxAbs;
	// on another CPU to otherCPUSpreads times the reference's own spread,
	// and its top-1 to agree wherever the golden lead is beyond that.
	tol, tie := parityMaxAbs, 0.0
	if same, features := goldenCPU(t); !same {
		tol = math.Max(parityMaxAbs, otherCPUSpreads*doc.spread())
		tie = tol
		t.Logf("CPU features %q, not the golden files' %q: tolerance %.3g, %g times the reference's spread %.3g",
			backend.CPUFeatures(), features, tol, float64(otherCPUSpreads), doc.spread())
	}
	minGreedy := parityMinGreedy
	if fast {
		tol, tie, minGreedy = fastTolerance(name, doc.spread()), fastTolerance(name, doc.spread()), fastMinGreedy
		t.Logf("fast kernels: tolerance %.3g (reference spread %.3g)", tol, doc.spread())
	}
	check := func(what string, sc parityScore) {
		t.Helper()
		t.Logf("%-10s max|d| %.2e, top-1 %d/%d (%d ties)", what, sc.worst, sc.top1, sc.rows, sc.ties)
		if sc.worst > tol || sc.top1+sc.ties != sc.rows {
			t.Errorf("%s: max|d| %.3g (at most %.3g), top-1 %d/%d (all but %d ties)", what, sc.worst, tol, sc.top1, sc.rows, sc.ties)
		}
	}
	if len(ref.Cases) != 8 || len(ref.Parallel) != 2 {
		t.Fatalf("golden file: %d cases, %d parallel batches (want 8, 2)", len(ref.Cases), len(ref.Parallel))
	}
	for _, c := range ref.Cases {
		if c.FA != fa {
			continue
		}
		var sc parityScore
		for i, s := range doc.Sequences {
			rows, err := computeLogits(m, s.Tokens, false, len(s.Tokens), c.Ubatch, 0)
			if err != nil {
				t.Fatal(err)
			}
			sc.add(t, rows[0], c.Logits[i], tie)
		}
		check(fmt.Sprintf("ubatch %d", c.Ubatch), sc)
	}
	for _, p := range ref.Parallel {
		if p.FA != fa {
			continue
		}
		rows, err := computeSeqLogits(m, p.Sequences, 0, 512)
		if err != nil {
			t.Fatal(err)
		}
		var sc parityScore
		for i := range rows {
			sc.add(t, rows[i], p.Logits[i], tie)
		}
		check(fmt.Sprintf("%d seqs", len(rows)), sc)
	}
	if l := doc.Long; l != nil && deltaNet == "fused" {
		for _, c := range l.Cases {
			if c.FA != fa {
				continue
			}
			rows, err := computeLogits(m, l.Tokens, false, len(l.Tokens), 512, l.Decode)
			if err != nil {
				t.Fatal(err)
			}
			var sc parityScore
			sc.add(t, rows[0], c.Logits, tie)
			check(fmt.Sprintf("long %d", len(l.Tokens)), sc)
		}
	}
	if fa != "on" {
		return // the greedy continuation is the reference's default (flash attention on)
	}
	// Teacher-forced: the prompt in one batch, then the reference's
	// continuation one token at a time.
	p, cont := ref.Greedy.Prompt, ref.Greedy.Tokens
	seq := append(slices.Clone(p), cont[:len(cont)-1]...)
	rows, err := computeLogits(m, seq, true, len(seq), 512, len(cont)-1)
	if err != nil {
		t.Fatal(err)
	}
	agree := 0
	for i, want := range cont {
		if sample.Greedy(rows[len(p)-1+i]) == want {
			agree++
		}
	}
	frac := float64(agree) / float64(len(cont))
	t.Logf("greedy     teacher-forced top-1 %d/%d", agree, len(cont))
	if frac < minGreedy {
		t.Errorf("greedy top-1 %.1f%% (at least %.0f%%)", 100*frac, 100*minGreedy)
	}
}

// TestTokenizerGolden tokenizes the golden files' strings (hand-written
// edge cases and random mixes, some not valid UTF-8) as llama.cpp's
// llama_tokenize did, with add_special and parse_special both off
// ("plain") and both on ("special"), and requires identical ids: the small
// models' synthetic vocabularies (SentencePiece, and SentencePiece laid out
// as Gemma's: no space prefix, user-defined newlines and </s>; byte-level
// BPE with pre-tokenizer qwen2) and GPT-2's real one under eight pre-tokenizers.
func TestTokenizerGolden(t *testing.T) {
	vocabs := []string{"llama-small-f16", "gemma3-small-f16", "qwen3-small-f16"}
	for _, pre := range []string{"gpt-2", "llama-bpe", "qwen2", "qwen35", "default", "glm4", "deepseek-v3", "gpt-4o"} {
		vocabs = append(vocabs, "gpt2-"+pre)
	}
	for _, name := range vocabs {
		t.Run(name, func(t *testing.T) {
			var doc struct {
				ModelSHA256 string `json:"model_sha256"`
				Cases       []struct {
					Text, Hex      string
					Plain, Special []int32
				}
			}
			readGolden(t, "tokens_"+name+".json", &doc)
			if len(doc.Cases) < 300 {
				t.Fatalf("only %d strings in the golden file", len(doc.Cases))
			}
			var path string
			if strings.HasPrefix(name, "gpt2-") {
				path = vocabPath(t, name)
			} else {
				path = modelPath(t, name)
			}
			checkSHA(t, path, doc.ModelSHA256)
			tok, _, err := openTokenizer(path)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for _, c := range doc.Cases {
				text := c.Text
				if c.Hex != "" {
					b, err := hex.DecodeString(c.Hex)
					if err != nil {
						t.Fatal(err)
					}
					text = string(b)
				}
				for _, mode := range []struct {
					special bool
					want    []int32
				}{{false, c.Plain}, {true, c.Special}} {
					if got := tok.Encode(text, mode.special); !slices.Equal(nonNil(got), nonNil(mode.want)) {
						if bad++; bad <= 10 {
							t.Errorf("%s (special %v):\n got %v\nwant %v", quote(text), mode.special, got, mode.want)
						}
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d tokenizations differ from llama.cpp's", bad, 2*len(doc.Cases))
			}
		})
	}
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.TrimSuffix(fmt.Sprintf("%+q", s), "\n")
}

// realModel is a real model's path from env (the Makefile sets
// GGML_RS_GEMMA3 and GGML_RS_SMOLLM2 to the files it fetches: a missing
// file is then a failure); the test is skipped when env is unset.
func realModel(t *testing.T, env, fetch string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Skipf("%s is not set (make test sets it; make %s fetches the file)", env, fetch)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v (make %s fetches it)", env, err, fetch)
	}
	return path
}

// realModels are the real models with golden files: the variable that
// names each file and the make target that fetches it.
var realModels = []struct{ name, env, fetch string }{
	{"gemma3-270m", "GGML_RS_GEMMA3", "fetch-gemma3"},
	{"smollm2-135m", "GGML_RS_SMOLLM2", "fetch-smollm2"},
}

// realGolden reads a real model's golden file and returns the model's path,
// failing if the file there is not the one the golden file was made from.
func realGolden(t *testing.T, name, env, fetch string) (string, *realDoc) {
	t.Helper()
	var doc realDoc
	readGolden(t, "real_"+name+".json", &doc)
	path := realModel(t, env, fetch)
	if got := testfile.SHA256(t, path); got != doc.ModelSHA256 {
		t.Fatalf("%s has sha256 %s, the golden file's model %s", path, got, doc.ModelSHA256)
	}
	return path, &doc
}

// realDoc is a golden file of scripts/parity.py real-golden.
type realDoc struct {
	ModelSHA256 string `json:"model_sha256"`
	Prompts     []struct {
		Text   string
		Tokens []int32
		Cases  []struct {
			FA     string
			Ubatch int
			IDs    []int32
			Logits []float32
		}
	}
	Tokens []struct {
		Text, Hex      string
		Plain, Special []int32
	}
	Chat struct {
		Template, User, Prompt string
		Tokens, Greedy         []int32
	}
}

// spread is the largest difference between the reference's own cases of
// one prompt and flash-attention setting (other ubatch sizes), over the
// ids both kept: how far a change of rounding order moves these logits.
func (d *realDoc) spread() float64 {
	var worst float64
	for _, p := range d.Prompts {
		for i, a := range p.Cases {
			for _, b := range p.Cases[i+1:] {
				if a.FA != b.FA {
					continue
				}
				at := map[int32]float32{}
				for k, id := range a.IDs {
					at[id] = a.Logits[k]
				}
				for k, id := range b.IDs {
					if v, ok := at[id]; ok {
						worst = math.Max(worst, math.Abs(float64(v-b.Logits[k])))
					}
				}
			}
		}
	}
	return worst
}

// TestRealWeights holds ours to llama.cpp on real published weights:
// Gemma 3 270M (Q4_K_M; sliding-window layers, a prompt longer than its
// 512-token window) and SmolLM2-135M-Instruct (Q4_1). Each prompt's
// tokens are llama-ref's; the reference's 64 largest last-position logits
// in each case (flash attention on/off, several ubatch sizes) are ours to
// parityMaxAbs on the golden files' CPU features (otherCPUSpreads times
// the reference's own spread elsewhere), with the same top-1. A chat turn
// rendered with the model's template (the file's; Gemma 3's file has none,
// so Gemma's turn format) tokenizes to llama-ref's ids and its greedy
// continuation is the reference's token for token (teacher-forced, each
// token decoded alone as generation does: the same as comparing greedy
// generations). Gemma 3's tokenizer also gives llama.cpp's ids on the 433
// tokenizer test strings.
func TestRealWeights(t *testing.T) {
	for _, c := range realModels {
		t.Run(c.name, func(t *testing.T) {
			path, doc := realGolden(t, c.name, c.env, c.fetch)
			tol, tie := parityMaxAbs, 0.0
			if same, features := goldenCPU(t); !same {
				tol = math.Max(parityMaxAbs, otherCPUSpreads*doc.spread())
				tie = tol
				t.Logf("CPU features %q, not the golden files' %q: tolerance %.3g", backend.CPUFeatures(), features, tol)
			}
			for _, fa := range []string{"on", "off"} {
				t.Run("fa-"+fa, func(t *testing.T) { realLogits(t, path, fa, doc, tol, tie, false) })
			}
			t.Run("chat", func(t *testing.T) { realChat(t, path, c.name, doc, tie > 0) })
			t.Run("tokenizer", func(t *testing.T) { realTokens(t, path, doc) })
		})
	}
}

// realLogits checks a real model's last-position logits against the
// golden file's cases of flash-attention setting fa; with fast, on the
// fast CPU kernels (-fast-kernels).
func realLogits(t *testing.T, path, fa string, doc *realDoc, tol, tie float64, fast bool) {
	df := addDecoderFlags(newFlags("parity", "", ""))
	*df.fa, *df.ngl, *df.fast = fa, 0, fast
	b, m, tok, err := openDecoder(path, df)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for pi, p := range doc.Prompts {
		if got := tok.Encode(p.Text, true); !slices.Equal(got, p.Tokens) {
			t.Errorf("prompt %d tokenizes to %v, llama.cpp %v", pi, got, p.Tokens)
		}
		for _, c := range p.Cases {
			if c.FA != fa {
				continue
			}
			rows, err := computeLogits(m, p.Tokens, false, len(p.Tokens), c.Ubatch, 0)
			if err != nil {
				t.Fatal(err)
			}
			row := rows[0]
			var worst float64
			for k, id := range c.IDs {
				worst = math.Max(worst, math.Abs(float64(row[id]-c.Logits[k])))
			}
			top := sample.Greedy(row)
			t.Logf("prompt %d (%d tokens) ubatch %-3d max|d| %.2e over the reference's top %d, top-1 %d (reference %d)",
				pi, len(p.Tokens), c.Ubatch, worst, len(c.IDs), top, c.IDs[0])
			tied := tie > 0 && len(c.Logits) > 1 && float64(c.Logits[0]-c.Logits[1]) <= 2*tie
			if worst > tol || (top != c.IDs[0] && !tied) {
				t.Errorf("prompt %d, ubatch %d: max|d| %.3g (at most %.3g), top-1 %d, reference %d", pi, c.Ubatch, worst, tol, top, c.IDs[0])
			}
		}
	}
}

func realChat(t *testing.T, path, name string, doc *realDoc, otherCPU bool) {
	df := addDecoderFlags(newFlags("parity", "", ""))
	*df.ngl = 0
	b, m, tok, err := openDecoder(path, df)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := b.Config()
	tmpl := c.String("tokenizer.chat_template")
	if name == "gemma3-270m" {
		if tmpl != "" {
			t.Fatalf("the file now has a chat template")
		}
		data, err := os.ReadFile("../../chat/testdata/templates/google-gemma-2-2b-it.jinja")
		if err != nil {
			t.Fatal(err)
		}
		tmpl = string(data)
	}
	ct, err := chat.Parse(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	o := chat.ModelOptions(c, tok)
	o.AddGenerationPrompt = true
	prompt, err := ct.Render([]chat.Message{{Role: "user", Content: doc.Chat.User}}, o)
	if err != nil {
		t.Fatal(err)
	}
	if prompt != doc.Chat.Prompt {
		t.Fatalf("rendered %q, llama.cpp %q", prompt, doc.Chat.Prompt)
	}
	ids := tok.Encode(prompt, true)
	if !slices.Equal(ids, doc.Chat.Tokens) {
		t.Fatalf("the prompt tokenizes to %v, llama.cpp %v", ids, doc.Chat.Tokens)
	}
	want := doc.Chat.Greedy
	seq := append(slices.Clone(ids), want[:len(want)-1]...)
	rows, err := computeLogits(m, seq, true, len(seq), 512, len(want)-1)
	if err != nil {
		t.Fatal(err)
	}
	agree, first := 0, -1
	for i, w := range want {
		if sample.Greedy(rows[len(ids)-1+i]) == w {
			agree++
		} else if first < 0 {
			first = i
		}
	}
	end := len(want)
	for i, w := range want {
		if tok.IsEOG(w) {
			end = i
			break
		}
	}
	t.Logf("greedy %d/%d tokens as llama.cpp's: %q", agree, len(want), tok.Decode(want[:end]))
	if otherCPU {
		if frac := float64(agree) / float64(len(want)); frac < parityMinGreedy {
			t.Errorf("greedy top-1 %.1f%% (at least %.0f%% on another CPU)", 100*frac, 100*parityMinGreedy)
		}
	} else if first >= 0 {
		t.Errorf("the greedy continuation departs from llama.cpp's at token %d of %d", first, len(want))
	}
}

func realTokens(t *testing.T, path string, doc *realDoc) {
	if len(doc.Tokens) < 300 {
		t.Fatalf("only %d strings in the golden file", len(doc.Tokens))
	}
	tok, _, err := openTokenizer(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for _, c := range doc.Tokens {
		text := c.Text
		if c.Hex != "" {
			b, err := hex.DecodeString(c.Hex)
			if err != nil {
				t.Fatal(err)
			}
			text = string(b)
		}
		for _, mode := range []struct {
			special bool
			want    []int32
		}{{false, c.Plain}, {true, c.Special}} {
			if got := tok.Encode(text, mode.special); !slices.Equal(nonNil(got), nonNil(mode.want)) {
				if bad++; bad <= 10 {
					t.Errorf("%s (special %v):\n got %v\nwant %v", quote(text), mode.special, got, mode.want)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d tokenizations differ from llama.cpp's", bad, 2*len(doc.Tokens))
	}
}
