package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// tokenize: token ids of texts with a model's tokenizer, as JSON. Its
// command line and output follow tools/llama-ref's, so that
// scripts/parity.py can compare the two.

func runTokenize(args []string) error {
	fs := newFlags("tokenize", "[flags] MODEL TEXT  |  -batch FILE MODEL",
		"Tokenizes TEXT with the tokenizer of the GGUF model MODEL (tokenizer.ggml.model gpt2 or\n"+
			`llama; no weights are loaded) and prints {"model","n_vocab","tokens"} as JSON.`+"\n"+
			"With -special, the model's BOS (and EOS) are added and special tokens written in the\n"+
			"text are recognised, as llama.cpp does with a prompt; without, neither.\n"+
			"With -batch FILE (\"-\": stdin), FILE holds one hex-encoded text a line (any bytes; at most\n"+
			fmt.Sprint(maxHexLine>>20)+" MiB of hex a line) and the output is\n"+
			`{"model","n_vocab","results":[{"plain":[...],"special":[...]}, ...]}, written as the lines`+"\n"+
			"are read (a bad or too long line ends it with an error).")
	special := fs.Bool("special", false, "add BOS/EOS and recognise special tokens in the text")
	batch := fs.String("batch", "", "a file of hex-encoded texts, one a line (\"-\": stdin)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *batch == "" && len(pos) != 2 || *batch != "" && len(pos) != 1 {
		return usagef("tokenize needs a model and one text (or -batch FILE and a model)")
	}
	tok, vocab, err := openTokenizer(pos[0])
	if err != nil {
		return err
	}
	model, _ := json.Marshal(pos[0])
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if *batch == "" {
		ids, _ := json.Marshal(nonNil(tok.Encode(pos[1], *special)))
		fmt.Fprintf(w, `{"model":%s,"n_vocab":%d,"tokens":%s}`+"\n", model, vocab, ids)
		return nil
	}
	r, err := openBatch(*batch)
	if err != nil {
		return err
	}
	defer r.Close()
	// Each line is tokenized and written as it is read: only one line is
	// held at a time.
	fmt.Fprintf(w, `{"model":%s,"n_vocab":%d,"results":[`, model, vocab)
	sep := ""
	err = scanHexLines(r, *batch, maxHexLine, func(text string) error {
		plain, _ := json.Marshal(nonNil(tok.Encode(text, false)))
		spec, _ := json.Marshal(nonNil(tok.Encode(text, true)))
		_, err := fmt.Fprintf(w, "%s\n{\"plain\":%s,\"special\":%s}", sep, plain, spec)
		sep = ","
		return err
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, "]}")
	return err
}

// openTokenizer builds the tokenizer of the model at path from its
// metadata (nothing is allocated) and returns it with the vocabulary size.
func openTokenizer(path string) (decoder.Tokenizer, int, error) {
	mf := addModelFlags(newFlags("", "", ""))
	*mf.ngl = 0
	b, err := openModel(path, mf, false)
	if err != nil {
		return nil, 0, err
	}
	defer b.Close()
	c := b.Config()
	tok, err := decoder.NewTokenizer(c)
	if err != nil {
		return nil, 0, err
	}
	return tok, len(c.Strings("tokenizer.ggml.tokens")), nil
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
