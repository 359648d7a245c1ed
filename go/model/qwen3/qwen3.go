// Package qwen3 is llama.cpp's dense "qwen3" architecture: the llama
// decoder with per-head RMS norms of queries and keys (attn_q_norm,
// attn_k_norm) and NeoX RoPE. The graph is package llama's.
package qwen3

import (
	"ggmlrs/ml"
	"ggmlrs/model/llama"
)

// New reads a qwen3 model from a backend opened on its GGUF file.
func New(b ml.Backend) (*llama.Model, error) { return llama.New(b, llama.Qwen3) }
