// Package model opens the decoder of any supported architecture from a
// backend opened on its GGUF file.
package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/deepseek2"
	"github.com/ggml-rs/ggml-rs/go/model/gemma"
	"github.com/ggml-rs/ggml-rs/go/model/gemma3n"
	"github.com/ggml-rs/ggml-rs/go/model/gptoss"
	"github.com/ggml-rs/ggml-rs/go/model/lfm2"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
	"github.com/ggml-rs/ggml-rs/go/model/llama4"
	"github.com/ggml-rs/ggml-rs/go/model/nemotronh"
	"github.com/ggml-rs/ggml-rs/go/model/olmo"
	"github.com/ggml-rs/ggml-rs/go/model/qwen3next"
)

// constructors by general.architecture.
var constructors = map[string]func(ml.Backend) (*decoder.Model, error){
	"llama":          func(b ml.Backend) (*decoder.Model, error) { return llama.New(b, llama.Llama) },
	"qwen2":          func(b ml.Backend) (*decoder.Model, error) { return llama.New(b, llama.Qwen2) },
	"mistral3":       func(b ml.Backend) (*decoder.Model, error) { return llama.New(b, llama.Mistral3) },
	"qwen3":          func(b ml.Backend) (*decoder.Model, error) { return llama.New(b, llama.Qwen3) },
	"qwen3moe":       func(b ml.Backend) (*decoder.Model, error) { return llama.New(b, llama.Qwen3MoE) },
	"llama4":         llama4.New,
	"nemotron_h":     nemotronh.New,
	"nemotron_h_moe": nemotronh.New,
	"deepseek2":      deepseek2.New,
	"glm4moelite":    deepseek2.New, // Ollama's converter's name for GLM-4.7-Flash
	"gemma2":         func(b ml.Backend) (*decoder.Model, error) { return gemma.New(b, gemma.Gemma2) },
	"gemma3":         func(b ml.Backend) (*decoder.Model, error) { return gemma.New(b, gemma.Gemma3) },
	"gemma3n":        gemma3n.New,
	"lfm2":           lfm2.New,
	"lfm2moe":        lfm2.New,
	"olmo2":          olmo.New,
	"olmo3":          olmo.New, // Ollama's converter's name for OLMo 3
	"gpt-oss":        gptoss.New,
	"gptoss":         gptoss.New, // Ollama's converter's name
	"qwen3next":      qwen3next.New,
	"qwen35":         qwen3next.New,
	"qwen35moe":      qwen3next.New,
}

// mtpConstructors by general.architecture: the architectures whose files
// may carry a multi-token-prediction head (nextn_predict_layers).
var mtpConstructors = map[string]func(ml.Backend) (*decoder.Model, error){
	"qwen35":    qwen3next.NewMTP,
	"qwen35moe": qwen3next.NewMTP,
}

// NewMTP reads the MTP (NextN) head of backend b's model, a draft model
// for speculative decoding: an error for an architecture without one, or
// a file whose nextn_predict_layers is 0.
func NewMTP(b ml.Backend) (*decoder.Model, error) {
	a := b.Config().Architecture()
	f, ok := mtpConstructors[a]
	if !ok {
		return nil, fmt.Errorf("architecture %q has no MTP head (MTP: qwen35, qwen35moe)", a)
	}
	return f(b)
}

// Architectures lists the supported architectures.
func Architectures() []string {
	var out []string
	for a := range constructors {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// New reads the model of backend b (the weights need not be loaded yet).
func New(b ml.Backend) (*decoder.Model, error) {
	a := b.Config().Architecture()
	f, ok := constructors[a]
	if !ok {
		return nil, fmt.Errorf("architecture %q is not supported (%s)", a, strings.Join(Architectures(), ", "))
	}
	return f(b)
}
