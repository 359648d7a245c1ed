package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/grammar"
	"github.com/ggml-rs/ggml-rs/go/grammar/schema"
)

// Structured output: a request's format becomes a GBNF grammar (package
// grammar/schema), compiled for the model's vocabulary (package grammar),
// that the sequence's sampler obeys token by token.

// ollamaFormat is the grammar of Ollama's format: "json" (a JSON object,
// Ollama's own language) or a JSON schema object; "" for none.
func ollamaFormat(format json.RawMessage) (string, error) {
	f := bytes.TrimSpace(format)
	switch s := string(f); s {
	case "", "null", `""`:
		return "", nil
	case `"json"`:
		return schema.OllamaJSON, nil
	}
	if f[0] != '{' {
		return "", badRequest("invalid format: %s; expected \"json\" or a valid JSON Schema object", clipJSON(format))
	}
	return schemaGrammar("format", f)
}

// oaiResponseFormat is OpenAI's response_format, as llama-server reads
// it: {"type": "text"} (none), {"type": "json_object"} (any JSON value,
// llama-server's grammar of the schema {}), or {"type": "json_schema",
// "json_schema": {"name", "schema", "strict"}} (the schema; strict or not,
// the grammar holds the output to it). A schema given as "schema" beside
// "type" (llama-server's shorthand) is taken too.
type oaiResponseFormat struct {
	Type       string          `json:"type"`
	Schema     json.RawMessage `json:"schema"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

func (f *oaiResponseFormat) grammar() (string, error) {
	if f == nil {
		return "", nil
	}
	switch f.Type {
	case "", "text":
		return "", nil
	case "json_object":
		if len(f.Schema) > 0 && string(f.Schema) != "null" {
			return schemaGrammar("response_format.schema", f.Schema)
		}
		return schema.JSON(), nil
	case "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 || string(f.JSONSchema.Schema) == "null" {
			if len(f.Schema) > 0 && string(f.Schema) != "null" {
				return schemaGrammar("response_format.schema", f.Schema)
			}
			return "", badRequest("response_format json_schema needs json_schema.schema")
		}
		return schemaGrammar("response_format.json_schema.schema", f.JSONSchema.Schema)
	default:
		return "", badRequest("response_format type %q: text, json_object or json_schema", f.Type)
	}
}

// schemaGrammar converts a JSON schema, a 400 naming the field when it is
// not one llama.cpp's converter takes.
func schemaGrammar(field string, s json.RawMessage) (string, error) {
	g, err := schema.ToGrammar(s)
	if err != nil {
		return "", badRequest("%s: invalid JSON schema: %v", field, err)
	}
	return g, nil
}

// grammarVocab is a model's vocabulary as the grammar matcher sees it,
// built once, on the first request with a format.
type grammarVocab struct {
	once    sync.Once
	v       *grammar.Vocab
	resolve grammar.TokenResolver
	err     error
}

// compileGrammar compiles a format's grammar, from its rule root, for
// model l.
func (l *loaded) compileGrammar(text, root string) (*grammar.Grammar, *grammar.Vocab, error) {
	gv := &l.gvocab
	gv.once.Do(func() {
		f, err := gguf.Open(l.file.path)
		if err != nil {
			gv.err = err
			return
		}
		gv.v, gv.resolve, gv.err = grammar.VocabFromGGUF(f)
	})
	if gv.err != nil {
		return nil, nil, fmt.Errorf("model %s: its vocabulary for the format's grammar: %w", l.file.name, gv.err)
	}
	g, err := grammar.Compile(text, root, gv.resolve)
	if err != nil {
		return nil, nil, badRequest("format: the grammar does not compile: %s", strings.TrimSpace(err.Error()))
	}
	return g, gv.v, nil
}
