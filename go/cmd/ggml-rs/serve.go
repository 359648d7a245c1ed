package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/serve"
)

// version is what /api/version reports.
const version = "0.1.0-ggml-rs"

// apiKeyEnv holds serve's API key when -api-key is not given (a flag
// shows in the process list; the environment does not).
const apiKeyEnv = "GGML_RS_API_KEY"

func runServe(args []string) error {
	fs := newFlags("serve", "[flags] MODEL...",
		"Serves the GGUF models MODEL (files, or directories of .gguf files; a model's name is its file\n"+
			"name without .gguf) over HTTP with Ollama's API (/api/generate, /api/chat, /api/embed, ...)\n"+
			"and OpenAI's (/v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models).\n"+
			"Up to -parallel requests per model are computed together (continuous batching).")
	addr := fs.String("addr", "127.0.0.1:11434", "address to listen on (host:port; a loopback address unless -allow-remote)")
	allowRemote := fs.Bool("allow-remote", false, "allow an -addr other machines can reach (0.0.0.0, :PORT, a LAN address): plain HTTP, so use -api-key and a TLS proxy")
	apiKey := fs.String("api-key", "", "a key every request must send as \"Authorization: Bearer KEY\" (default: $"+apiKeyEnv+"; none: no check)")
	parallel := fs.Int("parallel", 4, "sequences of one model computed together")
	ctxSize := fs.Int("ctx", 4096, "context size of each sequence, in tokens")
	batch := fs.Int("batch", 512, "tokens computed in one step at most (long prompts are prefilled in chunks of this)")
	keepAlive := fs.Duration("keep-alive", 5*time.Minute, "how long an idle model stays loaded (negative: forever)")
	maxQueue := fs.Int("max-queue", 512, "requests waiting for a free sequence, per model, at most (then 503)")
	maxBody := fs.Int64("max-body", 32<<20, "request body size limit in bytes")
	templateFile := fs.String("chat-template", "", "a file holding the chat template (Jinja) to use for every model instead of its own")
	preload := fs.Bool("preload", true, "load the model files named on the command line at start (directories' models load on first use)")
	mf := addModelFlags(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("serve needs at least one model file or directory")
	}
	if err := mf.check(); err != nil {
		return err
	}
	if err := serve.CheckListenAddr(*addr, *allowRemote); err != nil {
		return usagef("%v", err)
	}
	if *apiKey == "" {
		*apiKey = os.Getenv(apiKeyEnv)
	}
	var template string
	if *templateFile != "" {
		b, err := os.ReadFile(*templateFile)
		if err != nil {
			return fmt.Errorf("-chat-template: %w", err)
		}
		template = string(b)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv, err := serve.New(serve.Config{
		Parallel: *parallel, Context: *ctxSize, Batch: *batch, MaxQueue: *maxQueue, KeepAlive: *keepAlive, MaxBody: *maxBody,
		Open:         func(path string, alloc bool) (*backend.Backend, error) { return openModel(path, mf, alloc) },
		ChatTemplate: template,
		Log:          log,
		Version:      version,
		APIKey:       *apiKey,
	}, pos)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if err := serve.CheckListener(ln, *allowRemote); err != nil {
		ln.Close()
		return err
	}
	if *allowRemote && *apiKey == "" {
		log.Warn("serving other machines with no API key: anyone who reaches the port can use the models (set -api-key or " + apiKeyEnv + ")")
	}
	if *preload {
		for _, p := range pos {
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				if err := srv.Load(serve.ModelName(p)); err != nil {
					ln.Close()
					return err
				}
			}
		}
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 2 * time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "models", srv.Models(), "parallel", *parallel, "ctx", *ctxSize)
	fmt.Fprintf(os.Stderr, "ggml-rs serve: listening on http://%s\n", ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(sctx)
	return nil
}
