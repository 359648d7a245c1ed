package main

// Parity of the MTP (NextN) head with llama.cpp's: the golden files of the
// qwen35 and qwen35moe models hold, under "mtp", what llama-ref's mtp
// command (llama.cpp's draft-mtp graph and driver) gives on a 32-token
// sequence: the head's logits at every position and a 4-step greedy draft
// from the main model's next token. Ours runs computeMTP, the runner's mtp
// command, on the same file.

import (
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/model"
)

type mtpGolden struct {
	Mtp *struct {
		Tokens      []int32
		Logits      [][]float32
		TargetNext  int32 `json:"target_next"`
		Draft       []int32
		DraftLogits [][]float32 `json:"draft_logits"`
	}
}

func TestMTPParity(t *testing.T) {
	var names []string
	for _, name := range parityModels(t) {
		if strings.HasPrefix(name, "qwen35-") || strings.HasPrefix(name, "qwen35moe-") {
			names = append(names, name)
		}
	}
	if len(names) < 8 {
		t.Fatalf("golden files of MTP models: %v (want qwen35 and qwen35moe in four types)", names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var doc goldenDoc
			readGolden(t, "ref_"+name+".json", &doc)
			var g mtpGolden
			readGolden(t, "ref_"+name+".json", &g)
			if g.Mtp == nil {
				t.Fatalf("the golden file has no \"mtp\" entry (parity.py mtp-golden writes it)")
			}
			want := g.Mtp
			path := modelPath(t, name)
			checkSHA(t, path, doc.ModelSHA256)
			df := addDecoderFlags(newFlags("parity", "", ""))
			*df.fa, *df.ngl = "on", 0
			b, m, _, err := openDecoder(path, df)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			head, err := model.NewMTP(b)
			if err != nil {
				t.Fatal(err)
			}
			r, err := computeMTP(m, head, want.Tokens, len(want.Draft), 4096)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, ref [][]float32) {
				t.Helper()
				if len(got) != len(ref) {
					t.Fatalf("%s: %d rows, golden %d", what, len(got), len(ref))
				}
				var sc parityScore
				for i := range got {
					sc.add(t, got[i], ref[i], 0)
				}
				t.Logf("%-12s max|d| %.2e, top-1 %d/%d", what, sc.worst, sc.top1, sc.rows)
				if sc.worst > parityMaxAbs || sc.top1 != sc.rows {
					t.Errorf("%s: max|d| %.3g (at most %g), top-1 %d/%d (all)", what, sc.worst, parityMaxAbs, sc.top1, sc.rows)
				}
			}
			check("head logits", r.logits, want.Logits)
			if r.next != want.TargetNext || !slices.Equal(r.draft, want.Draft) {
				t.Errorf("main model's next token %d and draft %v; llama.cpp's %d and %v", r.next, r.draft, want.TargetNext, want.Draft)
			}
			check("draft logits", r.draftLogits, want.DraftLogits)
		})
	}
}

// TestMTPErrors: a model without an MTP head asked for one, and a draft
// that does not fit the context, are clear errors.
func TestMTPErrors(t *testing.T) {
	for name, want := range map[string]string{
		"qwen3next-small-f16": `architecture "qwen3next" has no MTP head`,
		"llama-small-f16":     `architecture "llama" has no MTP head`,
	} {
		df := addDecoderFlags(newFlags("parity", "", ""))
		*df.ngl = 0
		b, _, _, err := openDecoder(modelPath(t, name), df)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := model.NewMTP(b); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, want)
		}
		b.Close()
	}
	df := addDecoderFlags(newFlags("parity", "", ""))
	*df.ngl = 0
	b, m, _, err := openDecoder(modelPath(t, "qwen35-small-q8_0"), df)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	head, err := model.NewMTP(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := computeMTP(m, head, []int32{1, 2, 3}, 8, 8); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("a draft past the context: %v", err)
	}
}
