// Command ggml-rs runs GGUF models on ggml-rs through the Go ml API.
//
//	ggml-rs devices                       list the devices ggml sees
//	ggml-rs convert [flags] DIR           Hugging Face BERT checkpoint -> GGUF
//	ggml-rs quantize [flags] IN OUT       quantize a GGUF model as llama.cpp's llama-quantize
//	ggml-rs embed [flags] MODEL TEXT...   sentence embeddings (JSON or a similarity table)
//	ggml-rs inspect [flags] MODEL         metadata, tensors, placement and memory
//	ggml-rs generate [flags] MODEL -p P   text generation with any decoder model.New supports
//	ggml-rs bench [flags] MODEL           prefill and decode tokens/s
//	ggml-rs bench-spec [flags] MODEL      speculative decoding against plain decoding
//	ggml-rs logits [flags] MODEL TOKEN... logits of token ids as JSON (parity with llama.cpp)
//	ggml-rs mtp [flags] MODEL TOKEN...    a Qwen3.5 model's MTP head logits and draft as JSON
//	ggml-rs tokenize [flags] MODEL TEXT   token ids of a text (or of each string of a JSON file)
//	ggml-rs serve [flags] MODEL...        Ollama- and OpenAI-compatible HTTP server
//
// Errors are printed as one line on stderr, with exit status 1 (2 for a
// usage error).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"strings"
)

// usageError is a command-line mistake: printed with the usage hint,
// exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type command struct {
	name, args, help string
	run              func(args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"devices", "", "list the devices ggml sees (CPU, GPUs) with their memory", runDevices},
		{"convert", "[flags] DIR", "convert a Hugging Face BERT checkpoint (model.safetensors, config.json, vocab.txt) to GGUF", runConvert},
		{"quantize", "[flags] IN.gguf OUT.gguf", "quantize a GGUF model (Q4_K_M, Q8_0, ...) byte for byte as llama.cpp's llama-quantize", runQuantize},
		{"embed", "[flags] MODEL TEXT...", "sentence embeddings of each TEXT: a cosine-similarity table, or JSON with -json", runEmbed},
		{"inspect", "[flags] MODEL", "a model's architecture, key/values, tensors with their placement, and memory per device (allocates nothing)", runInspect},
		{"generate", "[flags] MODEL -p PROMPT", "text generation with a decoder model (llama, qwen2, mistral3, gemma2, gemma3, gemma3n, olmo2, olmo3, lfm2, lfm2moe, deepseek2, llama4, nemotron_h, nemotron_h_moe, qwen3, qwen3moe, gpt-oss, qwen3next, qwen35, qwen35moe), streamed, with prefill and decode speed", runGenerate},
		{"bench", "[flags] MODEL", "prompt processing and generation speed, as llama-bench's table", runBench},
		{"bench-spec", "[flags] MODEL", "speculative decoding (oracle drafts at chosen rates, the MTP head) against plain decoding", runBenchSpec},
		{"logits", "[flags] MODEL TOKEN...", "the logits of token ids (last position, or every one with -all) as JSON", runLogits},
		{"mtp", "[flags] MODEL TOKEN...", "the logits of a Qwen3.5 model's MTP head at every position, and its greedy draft (-draft N), as JSON", runMTP},
		{"serve", "[flags] MODEL...", "serve models over HTTP with Ollama's and OpenAI's APIs, many requests at once (continuous batching)", runServe},
		{"tokenize", "[flags] MODEL [TEXT]", "the token ids of TEXT (or of each string of a JSON file) with the model's tokenizer", runTokenize},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ggml-rs COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.help)
	}
	fmt.Fprintln(w, "\nRun ggml-rs COMMAND -h for a command's flags.")
}

func main() { os.Exit(profiled(func() int { return run(os.Args[1:]) })) }

// profiled runs f, writing a Go CPU profile to the file named by
// GGML_RS_CPUPROFILE when it is set (for finding where time goes outside
// ggml's kernels: graph building, cache bookkeeping).
func profiled(f func() int) int {
	path := os.Getenv("GGML_RS_CPUPROFILE")
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ggml-rs: GGML_RS_CPUPROFILE: %v\n", err)
		return f()
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		fmt.Fprintf(os.Stderr, "ggml-rs: GGML_RS_CPUPROFILE: %v\n", err)
		return f()
	}
	defer pprof.StopCPUProfile()
	return f()
}

// run executes a command line and returns the exit status.
func run(args []string) (status int) {
	setLogLevel(slog.LevelWarn)
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(os.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	var cmd *command
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(os.Stderr, "ggml-rs: unknown command %q (run ggml-rs -h for the list)\n", name)
		return 2
	}
	// Library calls report misuse by panicking (Ollama's signatures return
	// no errors): turn any panic into the same one-line report.
	defer func() {
		if p := recover(); p != nil {
			status = report(name, fmt.Errorf("%v", p))
		}
	}()
	err := cmd.run(args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return report(name, err)
}

// report prints err as one line and returns the exit status.
func report(name string, err error) int {
	if err == nil {
		return 0
	}
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	msg = strings.TrimPrefix(msg, "ggml-rs: ") // the library's own prefix
	fmt.Fprintf(os.Stderr, "ggml-rs %s: %s\n", name, msg)
	var u usageError
	if errors.As(err, &u) {
		fmt.Fprintf(os.Stderr, "run ggml-rs %s -h for usage\n", name)
		return 2
	}
	return 1
}

var logLevel slog.LevelVar

func setLogLevel(l slog.Level) {
	logLevel.Set(l)
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: &logLevel})))
}

// newFlags makes a command's flag set with the shared -v flag. Parse
// errors are reported by run (one line); -h prints the usage on stdout.
func newFlags(name, args, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.Bool("v", false, "log the library's diagnostics (debug level)")
	usages[fs] = func() {
		fmt.Printf("usage: ggml-rs %s %s\n\n%s\n\nflags:\n", name, args, help)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// usages prints each flag set's help.
var usages = map[*flag.FlagSet]func(){}

// parse parses flags anywhere among the arguments (up to a "--") and
// returns the positional arguments; it applies -v.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usages[fs]()
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		// fs.Parse consumed a "--" if that is what stopped it.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if v := fs.Lookup("v"); v != nil && v.Value.String() == "true" {
		setLogLevel(slog.LevelDebug)
	}
	return pos, nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
