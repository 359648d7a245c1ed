// Package qwen3 is llama.cpp's dense "qwen3" architecture: the llama
// decoder with per-head RMS norms of queries and keys (attn_q_norm,
// attn_k_norm) and NeoX RoPE; and "qwen3moe", the same with a
// mixture-of-experts feed-forward. The graph is package llama's.
package qwen3

import (
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

// New reads a qwen3 model from a backend opened on its GGUF file.
func New(b ml.Backend) (*decoder.Model, error) { return llama.New(b, llama.Qwen3) }

// NewMoE reads a qwen3moe model.
func NewMoE(b ml.Backend) (*decoder.Model, error) { return llama.New(b, llama.Qwen3MoE) }
