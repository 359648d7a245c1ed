package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/chat"
	"github.com/ggml-rs/ggml-rs/go/fs"
	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/grammar"
	"github.com/ggml-rs/ggml-rs/go/grammar/schema"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/model/speculate"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// decoderFlags are generate's and bench's flags on top of the model flags.
type decoderFlags struct {
	*modelFlags
	fa       *string
	ctx      *int
	batch    *int
	deltaNet *string
}

func addDecoderFlags(fs *flag.FlagSet) *decoderFlags {
	return &decoderFlags{
		modelFlags: addModelFlags(fs),
		fa:         fs.String("fa", "", "flash attention: auto, on or off (short for -flash-attention)"),
		ctx:        fs.Int("ctx", 4096, "context size: KV cache capacity in tokens"),
		batch:      fs.Int("batch", 512, "prompt processing batch size"),
		deltaNet:   fs.String("delta-net", "fused", "gated delta-net rule of the hybrid models: fused (ggml's kernel) or primitive (a graph of basic ops)"),
	}
}

// resolveFA applies -fa to the model flags.
func (f *decoderFlags) resolveFA() error {
	switch strings.ToLower(*f.fa) {
	case "":
	case "on", "off", "auto":
		*f.flash = strings.ToLower(*f.fa)
	default:
		return usagef("-fa %q: auto, on or off", *f.fa)
	}
	if *f.ctx < 1 || *f.ctx > maxContext {
		return usagef("-ctx %d: 1 to %d tokens", *f.ctx, maxContext)
	}
	if *f.batch < 1 || *f.batch > maxContext {
		return usagef("-batch %d: 1 to %d tokens", *f.batch, maxContext)
	}
	if *f.deltaNet != "fused" && *f.deltaNet != "primitive" {
		return usagef("-delta-net %q: fused or primitive", *f.deltaNet)
	}
	return nil
}

// openDecoder opens a decoder model of any supported architecture and its
// tokenizer, once checkCacheFits has found room next to the weights for a
// cache of -ctx tokens.
func openDecoder(path string, f *decoderFlags) (*backend.Backend, *decoder.Model, decoder.Tokenizer, error) {
	return openDecoderFor(path, f, decoder.CacheOptions{Capacity: *f.ctx, MaxBatch: *f.batch})
}

// openDecoderFor is openDecoder for a cache sized by o (several sequences,
// rewind states).
func openDecoderFor(path string, f *decoderFlags, o decoder.CacheOptions) (*backend.Backend, *decoder.Model, decoder.Tokenizer, error) {
	if err := f.resolveFA(); err != nil {
		return nil, nil, nil, err
	}
	if err := checkCacheFits(path, f.modelFlags, o, *f.ctx); err != nil {
		return nil, nil, nil, err
	}
	b, err := openModel(path, f.modelFlags, true)
	if err != nil {
		return nil, nil, nil, err
	}
	m, err := model.New(b)
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	for _, bl := range m.Blocks {
		if dn, ok := bl.Mixer.(*nn.DeltaNet); ok {
			dn.Primitive = *f.deltaNet == "primitive"
		}
	}
	tok, err := decoder.NewTokenizer(b.Config())
	if err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	return b, m, tok, nil
}

func runGenerate(args []string) error {
	fs := newFlags("generate", "[flags] MODEL -p PROMPT",
		"Generates text after PROMPT with the GGUF model MODEL (a decoder: llama, qwen2, mistral3, qwen3,\n"+
			"qwen3moe, gpt-oss, qwen3next, qwen35, qwen35moe, gemma2, gemma3, gemma3n, olmo2, olmo3, lfm2,\n"+
			"lfm2moe, deepseek2 (Ollama's glm4moelite), llama4, nemotron_h or nemotron_h_moe, in\n"+
			"llama.cpp's or Ollama's layout),\n"+
			"streaming it to stdout, then prints prompt and generation speed on stderr.")
	prompt := fs.String("p", "", "the prompt")
	asChat := fs.Bool("chat", false, "the prompt is a user's message: render it with the model's chat template (a one-shot chat)\nand print only the answer")
	system := fs.String("system", "", "with -chat: a system message before the user's")
	n := fs.Int("n", 128, "tokens to generate at most (0: until end of text or a full context)")
	temp := fs.Float64("temp", 0.8, "sampling temperature (0: greedy)")
	topK := fs.Int("top-k", 40, "sample among the k most likely tokens (0: all)")
	topP := fs.Float64("top-p", 0.95, "sample among the most likely tokens of this probability mass (1: all)")
	seed := fs.Int64("seed", -1, "random seed (-1: from the clock)")
	grammarFile := fs.String("grammar", "", "constrain the output to the GBNF grammar in this file (llama.cpp's grammar language)")
	jsonSchema := fs.String("json-schema", "", "constrain the output to this JSON schema (inline, or @FILE)")
	anyJSON := fs.Bool("json", false, "constrain the output to JSON (any value; the grammar of the schema {})")
	draft := fs.String("draft", "", "speculative decoding: mtp (the model's own MTP head drafts; qwen35, qwen35moe)")
	draftMax := fs.Int("draft-max", 3, "with -draft: tokens drafted a step, then verified in one batch")
	df := addDecoderFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 2 && *prompt == "" {
		*prompt, pos = pos[1], pos[:1]
	}
	if len(pos) != 1 {
		return usagef("generate needs one model (and -p PROMPT)")
	}
	if *n < 0 {
		return usagef("-n %d: 0 (until the end of text or a full context) or more", *n)
	}
	sopts := sample.Options{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP)}
	if err := sopts.Validate(); err != nil {
		return usagef("-%v", err)
	}
	if *seed == -1 {
		*seed = nowSeed()
	}
	sopts.Seed = *seed
	gtext, err := outputGrammar(*grammarFile, *jsonSchema, *anyJSON)
	if err != nil {
		return err
	}
	switch {
	case gtext != "" && *draft != "":
		return usagef("-draft does not combine with a grammar (-grammar, -json-schema, -json)")
	case *draft != "" && *draft != "mtp":
		return usagef("-draft %q: the only drafter is mtp", *draft)
	case *draft != "" && *draftMax < 1:
		return usagef("-draft-max must be at least 1")
	case *draft != "" && *draftMax >= *df.ctx:
		return usagef("-draft-max %d does not fit the %d-token context (-ctx)", *draftMax, *df.ctx)
	}
	rewind := 0
	if *draft == "mtp" {
		rewind = *draftMax
	}
	b, m, tok, err := openDecoderFor(pos[0], df, decoder.CacheOptions{Capacity: *df.ctx, MaxBatch: *df.batch, Rewind: rewind})
	if err != nil {
		return err
	}
	defer b.Close()
	var drafter *speculate.MTP
	if *draft == "mtp" {
		head, err := model.NewMTP(b)
		if err != nil {
			return fmt.Errorf("-draft mtp: %w", err)
		}
		hc, err := head.NewCache(decoder.CacheOptions{Capacity: *df.ctx, MaxBatch: *df.batch})
		if err != nil {
			return err
		}
		defer hc.Close()
		defer head.ReleaseGraph()
		drafter = &speculate.MTP{Head: head, Cache: hc}
	}
	text := *prompt
	if *asChat {
		if text, err = chatPrompt(b.Config(), tok, *system, *prompt); err != nil {
			return err
		}
	} else if *system != "" {
		return usagef("-system needs -chat")
	}
	ids := tok.Encode(text, true)
	if len(ids) == 0 {
		return usagef("the prompt is empty (and the model adds no BOS token)")
	}
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: *df.ctx, MaxBatch: *df.batch, Rewind: rewind})
	if err != nil {
		return err
	}
	defer cache.Close()
	if len(ids) >= cache.Capacity() {
		return fmt.Errorf("the prompt's %d tokens fill the %d-token context (-ctx)", len(ids), cache.Capacity())
	}

	out := os.Stdout
	if !*asChat {
		fmt.Fprint(out, *prompt)
	}
	stream := decoder.NewTextStream(tok, ids)
	smp := sample.New(sopts)
	if gtext != "" {
		if smp.Grammar, err = grammarState(pos[0], gtext); err != nil {
			return err
		}
	}
	emit := func(id int32) bool {
		fmt.Fprint(out, stream.Add(id))
		return true
	}
	gopts := decoder.GenerateOptions{MaxTokens: *n, Batch: *df.batch, Sampler: smp, IsEOG: tok.IsEOG}
	var st decoder.Stats
	if drafter != nil {
		var sst speculate.Stats
		sst, err = speculate.Generate(m, cache, drafter, ids, speculate.Options{GenerateOptions: gopts, Max: *draftMax}, emit)
		st = sst.Stats
		defer fmt.Fprintf(os.Stderr, "draft:   %d steps, %d drafted, %d accepted (%.1f%%)\n", sst.Steps, sst.Drafted, sst.Accepted, 100*sst.AcceptanceRate())
	} else {
		st, err = m.Generate(cache, ids, gopts, emit)
	}
	fmt.Fprintln(out, stream.Flush())
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "prefill: %d tokens in %.3f s, %.2f tokens/s\n", st.PromptTokens, st.Prefill.Seconds(), float64(st.PromptTokens)/st.Prefill.Seconds())
	fmt.Fprintf(os.Stderr, "decode:  %d tokens in %.3f s, %.2f tokens/s\n", st.Generated, st.Decode.Seconds(), float64(st.Generated)/st.Decode.Seconds())
	return nil
}

// chatPrompt renders a one-shot chat (an optional system message and the
// user's) with the model's own chat template (ChatML for a model without
// one, as llama.cpp), ending with the opening of the assistant's turn.
func chatPrompt(c fs.Config, tok decoder.Tokenizer, system, user string) (string, error) {
	t, err := chat.Parse(c.String("tokenizer.chat_template"))
	if err != nil {
		return "", fmt.Errorf("-chat: the model's chat template does not parse: %w", err)
	}
	var msgs []chat.Message
	if system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: user})
	o := chat.ModelOptions(c, tok)
	o.AddGenerationPrompt = true
	return t.Render(msgs, o)
}

// outputGrammar is the GBNF text of generate's -grammar, -json-schema or
// -json (at most one), or "".
func outputGrammar(file, jsonSchema string, anyJSON bool) (string, error) {
	n := 0
	for _, set := range []bool{file != "", jsonSchema != "", anyJSON} {
		if set {
			n++
		}
	}
	switch {
	case n > 1:
		return "", usagef("-grammar, -json-schema and -json exclude each other")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("-grammar: %w", err)
		}
		return string(b), nil
	case jsonSchema != "":
		src := []byte(jsonSchema)
		if strings.HasPrefix(jsonSchema, "@") {
			var err error
			if src, err = os.ReadFile(jsonSchema[1:]); err != nil {
				return "", fmt.Errorf("-json-schema: %w", err)
			}
		}
		g, err := schema.ToGrammar(src)
		if err != nil {
			return "", fmt.Errorf("-json-schema: %w", err)
		}
		return g, nil
	case anyJSON:
		return schema.JSON(), nil
	}
	return "", nil
}

// grammarState compiles a grammar for the vocabulary of the model at path.
func grammarState(path, text string) (*grammar.State, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	v, resolve, err := grammar.VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	g, err := grammar.Compile(text, "root", resolve)
	if err != nil {
		return nil, fmt.Errorf("grammar: %w", err)
	}
	return grammar.NewState(g, v), nil
}
