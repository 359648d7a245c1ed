package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/quantize"
)

func runQuantize(args []string) error {
	fs := newFlags("quantize", "[flags] IN.gguf OUT.gguf",
		"Quantizes the F32/F16/BF16 GGUF model IN to OUT, byte for byte as llama.cpp's llama_model_quantize\n"+
			"(llama-quantize) does with the same file type and flags: its per-tensor type mixes, the tensors it\n"+
			"keeps (norms, 1-D tensors, routers, conv1d...), its metadata (general.file_type,\n"+
			"general.quantization_version). OUT is written to a temporary file renamed when complete.\n"+
			"With -imatrix, the importance matrix of llama-imatrix (GGUF or legacy file) weighs the\n"+
			"quantization as llama-quantize --imatrix does, and its keys (quantize.imatrix.*) are written.\n"+
			"File types (name, llama_ftype number):\n"+strings.TrimRight(quantize.FileTypeHelp(), "\n"))
	typ := fs.String("type", "Q8_0", "file type (as llama-quantize names it)")
	pure := fs.Bool("pure", false, "every quantizable tensor gets the file type's default type (no mixes)")
	outType := fs.String("output-type", "", "type of output.weight (a ggml type: q8_0, f16, q6_K, ...)")
	embType := fs.String("token-embedding-type", "", "type of token_embd.weight (a ggml type)")
	imatrix := fs.String("imatrix", "", "importance matrix file (llama-imatrix's GGUF or legacy format)")
	var include, exclude, tensorTypes listFlag
	fs.Var(&include, "include-weights", "use the importance matrix only for tensors whose name contains this (repeatable)")
	fs.Var(&exclude, "exclude-weights", "do not use the importance matrix for tensors whose name contains this (repeatable)")
	fs.Var(&tensorTypes, "tensor-type", "PATTERN=TYPE: tensors whose name matches the regular expression get TYPE (repeatable; the first match wins)")
	tensorTypeFile := fs.String("tensor-type-file", "", "file of PATTERN=TYPE overrides, separated by white space")
	threads := fs.Int("threads", runtime.NumCPU(), "threads quantizing a tensor's rows (the output does not depend on it)")
	fs.IntVar(threads, "t", runtime.NumCPU(), "the same as -threads")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("quantize takes IN.gguf and OUT.gguf, got %d arguments", len(pos))
	}
	ft, err := quantize.ParseFileType(*typ)
	if err != nil {
		return usagef("-type: %v", err)
	}
	opts := quantize.Options{FileType: ft, Pure: *pure, Threads: *threads}
	for _, f := range []struct {
		name string
		val  string
		dst  **gguf.TensorType
	}{{"-output-type", *outType, &opts.OutputType}, {"-token-embedding-type", *embType, &opts.TokenEmbeddingType}} {
		if f.val == "" {
			continue
		}
		t, err := quantize.ParseTensorType(f.val)
		if err != nil {
			return usagef("%s: %v", f.name, err)
		}
		*f.dst = &t
	}
	if *threads < 1 {
		return usagef("-threads must be at least 1")
	}
	if len(include) > 0 && len(exclude) > 0 {
		return usagef("-include-weights and -exclude-weights cannot be used together")
	}
	if (len(include) > 0 || len(exclude) > 0) && *imatrix == "" {
		return usagef("-include-weights and -exclude-weights need -imatrix")
	}
	if *tensorTypeFile != "" {
		b, err := os.ReadFile(*tensorTypeFile)
		if err != nil {
			return usagef("-tensor-type-file: %v", err)
		}
		tensorTypes = append(tensorTypes, strings.Fields(string(b))...)
	}
	for _, tt := range tensorTypes {
		o, err := quantize.ParseTensorTypeOverride(tt)
		if err != nil {
			return usagef("-tensor-type: %v", err)
		}
		opts.TensorTypes = append(opts.TensorTypes, o)
	}
	if *imatrix != "" {
		m, err := quantize.LoadImatrix(*imatrix)
		if err != nil {
			return err
		}
		m.Filter(include, exclude)
		opts.Imatrix = m
	}
	if !*quiet {
		opts.Progress = os.Stderr
	}
	if err := quantize.Run(pos[0], pos[1], opts); err != nil {
		return err
	}
	st, err := os.Stat(pos[1])
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s)\n", pos[1], ft, bytesIEC(uint64(st.Size())))
	return nil
}

// listFlag: a flag that may be given several times, in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }
