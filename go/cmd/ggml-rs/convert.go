package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/convert"
	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
)

func runConvert(args []string) error {
	fs := newFlags("convert", "[flags] DIR",
		"Converts the Hugging Face BERT checkpoint in DIR (model.safetensors, config.json, vocab.txt;\n"+
			"sentence-transformers' modules.json and 1_Pooling/config.json when present) to GGUF with\n"+
			"llama.cpp's conventions for the \"bert\" architecture.")
	out := fs.String("o", "", "output file (default: DIR.gguf)")
	typ := fs.String("type", "f32", "type of the weight matrices: f32 or f16 (norms and biases stay f32)")
	name := fs.String("name", "", "general.name (default: DIR's name)")
	pooling := fs.String("pooling", "", "override the pooling: mean, cls or last (default: 1_Pooling/config.json, else mean)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("convert takes one directory, got %d arguments", len(pos))
	}
	dir := pos[0]
	opts := convert.BERTOptions{Name: *name}
	switch strings.ToLower(*typ) {
	case "f32":
		opts.Type = gguf.TensorF32
	case "f16":
		opts.Type = gguf.TensorF16
	default:
		return usagef("-type %q: f32 or f16", *typ)
	}
	if *pooling != "" {
		p, err := bert.ParsePooling(*pooling)
		if err != nil {
			return usagef("-pooling: %v", err)
		}
		opts.Pooling = &p
	}
	if st, err := os.Stat(dir); err != nil {
		return err
	} else if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	path := *out
	if path == "" {
		path = strings.TrimSuffix(filepath.Clean(dir), string(filepath.Separator)) + ".gguf"
	}

	t0 := time.Now()
	b, err := convert.BERT(dir, opts)
	if err != nil {
		return err
	}
	if err := b.WriteFile(path); err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s weights) in %.2f s\n", path, bytesIEC(uint64(st.Size())), opts.Type, time.Since(t0).Seconds())
	return nil
}
