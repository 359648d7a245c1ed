//go:build ggml_vulkan

package main

// Parity with llama.cpp on a Vulkan device: ours built with ggml's Vulkan
// backend (make test-vulkan) against llama.cpp built with Vulkan from the
// same pinned sources, on the same device (Mesa's llvmpipe where there is
// no GPU) and settings: tests/golden/vulkan/ref_*.json (scripts/
// parity-vulkan.py, make parity-golden-vulkan). Every generated model, with
// all layers and with the last half of them on the device (-ngl), flash
// attention auto: ours must resolve it as llama.cpp did there, and give its
// logits within the CPU test's tolerances. llama.cpp runs with
// -early-rows (tools/llama-ref): by default the pinned llama.cpp computes
// gpt-oss's and the hybrids' last layer for every position, for MTP, where
// ggml-rs computes it for the output rows only. The same numbers on the
// CPU; on Vulkan a batch's products round otherwise than one row's (f16
// activations in the matrix-matrix kernels), 1e-2 in the logits.
//
// Each run also logs how far both are from llama.cpp on the CPU (the
// golden files of parity_test.go): that difference is the Vulkan kernels'
// arithmetic, shared by both programs.

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

type vulkanGolden struct {
	ModelSHA256 string `json:"model_sha256"`
	NVocab      int    `json:"n_vocab"`
	Device      string
	BlockCount  int `json:"block_count"`
	Sequences   [][]int32
	Runs        []struct {
		Layers    string
		NGL       int
		FlashAttn string `json:"flash_attn"`
		Logits    [][]float32
	}
}

func TestParityWithLlamaCppOnVulkan(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "vulkan", "ref_*.json"))
	if err != nil || len(files) != len(parityModels(t)) {
		t.Fatalf("Vulkan golden files: %v (%d found, one per CPU golden file wanted)", err, len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "ref_"), ".json")
		t.Run(name, func(t *testing.T) {
			var doc vulkanGolden
			readGolden(t, filepath.Join("vulkan", filepath.Base(f)), &doc)
			var cpuDoc goldenDoc
			readGolden(t, "ref_"+name+".json", &cpuDoc)
			if len(doc.Runs) != 2 || len(doc.Sequences) != 3 {
				t.Fatalf("golden file has %d runs and %d sequences (want 2, 3)", len(doc.Runs), len(doc.Sequences))
			}
			path := modelPath(t, name)
			checkSHA(t, path, doc.ModelSHA256)
			for _, run := range doc.Runs {
				t.Run(fmt.Sprintf("%s layers (-ngl %d)", run.Layers, run.NGL), func(t *testing.T) {
					vulkanParityRun(t, path, &doc, run.NGL, run.FlashAttn, run.Logits, &cpuDoc)
				})
			}
		})
	}
}

func vulkanParityRun(t *testing.T, path string, doc *vulkanGolden, ngl int, fa string, want [][]float32, cpuDoc *goldenDoc) {
	df := addDecoderFlags(newFlags("parity", "", ""))
	*df.fa, *df.ngl = "auto", ngl
	b, m, _, err := openDecoder(path, df)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if devs := b.BackendDevices(); len(devs) != 1 || devs[0].Library != "Vulkan" {
		t.Fatalf("the layers are on %+v, want the Vulkan device", devs)
	}
	ours := map[ml.FlashAttentionType]string{ml.FlashAttentionEnabled: "on", ml.FlashAttentionDisabled: "off"}[b.FlashAttention()]
	if ours != fa {
		t.Errorf("flash attention auto: ours resolved to %q, llama.cpp on %s to %q", ours, doc.Device, fa)
	}
	var vs, cs parityScore
	got := make([][]float32, len(doc.Sequences))
	for i, s := range doc.Sequences {
		rows, err := computeLogits(m, s, false, len(s), 512, 0)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = rows[0]
		vs.add(t, rows[0], want[i], 0)
		cs.add(t, want[i], cpuDoc.Sequences[i].Logits, 0) // llama.cpp: Vulkan against CPU
	}
	tol := parityMaxAbs
	t.Logf("fa auto -> %s; ours-Vulkan vs llama.cpp-Vulkan max|d| %.2e (at most %g), top-1 %d/%d; llama.cpp Vulkan vs CPU max|d| %.2e",
		ours, vs.worst, tol, vs.top1, vs.rows, cs.worst)
	if vs.worst > tol {
		t.Errorf("max|d| %.3g (at most %g)", vs.worst, tol)
	}
	// The top-1 token must agree, except where llama.cpp's own two best
	// logits are closer than the tolerance (a known gap can swap them).
	for i, g := range got {
		if sample.Greedy(g) != sample.Greedy(want[i]) && topMargin(want[i]) >= tol {
			t.Errorf("sequence %d: top-1 %d, llama.cpp's %d (its margin %.3g)", i, sample.Greedy(g), sample.Greedy(want[i]), topMargin(want[i]))
		}
	}
}

// topMargin is the difference between the two largest logits.
func topMargin(l []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range l {
		switch f := float64(v); {
		case f > a:
			a, b = f, a
		case f > b:
			b = f
		}
	}
	return a - b
}
