// Package llama is the API of Ollama's llama package
// (github.com/ollama/ollama/llama, v0.17.x) on ggml-rs, for Ollama built
// with ggml-rs in place of its cgo ggml and llama.cpp copy (make
// ollama-ggml-rs rewrites that import path to this one).
//
// What Ollama's Go engine uses of it works: the grammar of structured
// output (NewGrammar, Grammar.Apply/Accept/Free, TokenData, on package
// grammar, with llama.cpp's semantics) and SchemaToGrammar (package
// grammar/schema, llama.cpp's converter), so format: "json" and JSON
// schemas work in Ollama's Go engine; GetModelArch reads the GGUF header;
// EnumerateGPUs lists the GPUs ggml-rs sees.
//
// The llama.cpp engine itself (LoadModelFromFile, Context, Batch, the
// multimodal and sampling contexts) is not part of ggml-rs: those
// constructors return an error that says so (ErrNoLlamaEngine), which
// Ollama reports for a model its Go engine does not run, and the methods of
// values that cannot be made do nothing. Run Ollama with OLLAMA_NEW_ENGINE=1
// so that every architecture its Go engine implements uses it.
package llama
