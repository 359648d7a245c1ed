package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"ggmlrs/model/decoder"
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
			"With -batch FILE (\"-\": stdin), FILE holds one hex-encoded text a line (any bytes) and\n"+
			`the output is {"model","n_vocab","results":[{"plain":[...],"special":[...]}, ...]}.`)
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
	texts, err := readHexLines(*batch)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, `{"model":%s,"n_vocab":%d,"results":[`, model, vocab)
	for i, text := range texts {
		plain, _ := json.Marshal(nonNil(tok.Encode(text, false)))
		spec, _ := json.Marshal(nonNil(tok.Encode(text, true)))
		if i > 0 {
			w.WriteString(",")
		}
		fmt.Fprintf(w, "\n{\"plain\":%s,\"special\":%s}", plain, spec)
	}
	fmt.Fprintln(w, "]}")
	return nil
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

// readHexLines reads one hex-encoded text a line (an empty line is the
// empty text); name "-" is stdin.
func readHexLines(name string) ([]string, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	s := strings.TrimSuffix(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	if s == "" && len(data) == 0 {
		return nil, nil
	}
	var texts []string
	for i, line := range strings.Split(s, "\n") {
		b, err := hex.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not hex: %v", name, i+1, err)
		}
		texts = append(texts, string(b))
	}
	return texts, nil
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
