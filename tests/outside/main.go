// Command app is a program outside the ggml-rs repository that depends on
// the Go module github.com/ggml-rs/ggml-rs/go as any user's would:
// tests/outside/run.sh copies it into a temporary module that requires the
// module from a module proxy and links the installed library through
// pkg-config. It prints what the repository's own runner prints for the
// same inputs, for run.sh to compare:
//
//	app embed MODEL TEXT...        the embeddings, as JSON (ggml-rs embed -json's data)
//	app generate MODEL N PROMPT    PROMPT and N greedy tokens after it (ggml-rs generate -temp 0)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: app embed MODEL TEXT... | app generate MODEL N PROMPT")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "embed":
		err = embed(os.Args[2], os.Args[3:])
	case "generate":
		err = generate(os.Args[2], os.Args[3], os.Args[4])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

// open makes the backend of a model file and loads its weights, as
// Ollama's runner does (ml.NewBackend, then Load), with flash attention
// left to the backend, as the runner and llama.cpp leave it.
func open(path string) (ml.Backend, error) {
	b, err := backend.New(path, ml.BackendParams{AllocMemory: true, FlashAttention: ml.FlashAttentionAuto})
	if err != nil {
		return nil, err
	}
	if err := b.Load(context.Background(), func(float32) {}); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func embed(path string, texts []string) error {
	b, err := open(path)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := bert.New(b)
	if err != nil {
		return err
	}
	seqs := make([][]int32, len(texts))
	for i, t := range texts {
		seqs[i], _ = m.Tokenize(t)
	}
	embs, err := m.Embed(seqs)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(embs)
}

func generate(path, n, prompt string) error {
	max, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	b, err := open(path)
	if err != nil {
		return err
	}
	defer b.Close()
	m, err := model.New(b)
	if err != nil {
		return err
	}
	tok, err := decoder.NewTokenizer(b.Config())
	if err != nil {
		return err
	}
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: 512, MaxBatch: 512})
	if err != nil {
		return err
	}
	defer cache.Close()
	ids := tok.Encode(prompt, true)
	text := decoder.NewTextStream(tok, ids)
	fmt.Print(prompt)
	_, err = m.Generate(cache, ids, decoder.GenerateOptions{MaxTokens: max, IsEOG: tok.IsEOG}, func(id int32) bool {
		fmt.Print(text.Add(id))
		return true
	})
	fmt.Println(text.Flush())
	return err
}
