// Package serve is `ggml-rs serve`: a long-lived HTTP server that keeps
// GGUF models loaded and answers Ollama's API (/api/generate, /api/chat,
// /api/embed, ...) and OpenAI's (/v1/chat/completions, /v1/completions,
// /v1/embeddings, /v1/models), so that the clients people already use talk
// to it unchanged.
//
// Each loaded decoder has one engine (engine.go): a goroutine that owns
// the model and its multi-sequence cache and computes up to Parallel
// sequences together, one forward per step, sequences joining and leaving
// between steps and long prompts prefilled in chunks (continuous
// batching). Handlers only validate, tokenize, queue and stream.
//
// Files: server.go (routes, limits, errors), registry.go (which models
// exist, loading, keep-alive, the memory check), engine.go and
// sequence.go (continuous batching), detok.go and stop.go (streamed text),
// options.go (sampling options), prompt.go (chat templates), ollama.go and
// openai.go (the two APIs), embed.go (embedding models).
package serve
