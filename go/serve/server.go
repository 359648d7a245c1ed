package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// Config configures a Server.
type Config struct {
	Parallel  int           // sequences of one model computed together
	Context   int           // tokens per sequence
	Batch     int           // tokens computed in one step at most (prefill chunk)
	MaxQueue  int           // requests waiting for a slot per model, at most
	KeepAlive time.Duration // how long an idle model stays loaded (negative: forever)
	MaxBody   int64         // request body bytes, at most
	// ChatTemplate, when set, is the chat template (Jinja) of every
	// decoder model instead of its own tokenizer.chat_template.
	ChatTemplate string
	// Open opens a model file (with alloc, its weights loaded; without,
	// in fit mode: sizes only).
	Open    func(path string, alloc bool) (*backend.Backend, error)
	Log     *slog.Logger
	Version string
	// APIKey, when set, is the bearer token every request must carry
	// ("Authorization: Bearer KEY"); others get a 401.
	APIKey string
}

func (c *Config) defaults() error {
	if c.Parallel == 0 {
		c.Parallel = 4
	}
	if c.Context == 0 {
		c.Context = 4096
	}
	if c.Batch == 0 {
		c.Batch = 512
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = 512
	}
	if c.MaxBody == 0 {
		c.MaxBody = 32 << 20
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	switch {
	case c.Parallel < 1 || c.Parallel > 256:
		return fmt.Errorf("-parallel %d: 1 to 256 sequences", c.Parallel)
	case c.Context < 16 || c.Context > 1<<24:
		return fmt.Errorf("-ctx %d: 16 to %d tokens", c.Context, 1<<24)
	case c.Batch < 1 || c.Batch > 1<<16:
		return fmt.Errorf("-batch %d: 1 to %d tokens", c.Batch, 1<<16)
	case c.Context*c.Parallel > maxCacheTokens:
		return fmt.Errorf("-ctx %d × -parallel %d: at most %d tokens of cache in all", c.Context, c.Parallel, maxCacheTokens)
	case c.MaxQueue < 1:
		return fmt.Errorf("-max-queue %d: at least 1", c.MaxQueue)
	case c.MaxBody < 1<<10:
		return fmt.Errorf("-max-body %d: at least 1 KiB", c.MaxBody)
	case c.Open == nil:
		return errors.New("serve: no Open function")
	}
	return nil
}

// maxCacheTokens bounds a model's cache (the cache's bookkeeping lives in
// Go memory: 16M tokens take about 128 MiB of it).
const maxCacheTokens = 1 << 24

// Server answers Ollama's and OpenAI's HTTP APIs.
type Server struct {
	cfg     Config
	cat     *catalog
	reg     *registry
	mux     *http.ServeMux
	started time.Time
	prep    slots     // requests' work before their engine: rendering, tokenizing
	reclaim reclaimer // memory back to the system after large requests
}

// New makes a server for the models of paths (GGUF files, or directories
// of them).
func New(cfg Config, paths []string) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	cat, err := newCatalog(paths, func(msg string) { cfg.Log.Warn(msg) })
	if err != nil {
		return nil, err
	}
	if len(cat.names) == 0 {
		return nil, errors.New("no models: name GGUF files or directories holding some")
	}
	if cfg.ChatTemplate != "" {
		if _, err := chat.Parse(cfg.ChatTemplate); err != nil {
			return nil, fmt.Errorf("-chat-template: the template does not parse: %w", err)
		}
	}
	// A model whose own template does not parse is served all the same
	// (raw prompts work; its chat requests get the error): said at once.
	for _, n := range cat.names {
		if err := checkTemplate(cat.files[n], cfg.ChatTemplate); err != nil {
			cfg.Log.Warn(err.Error())
		}
	}
	s := &Server{cfg: cfg, cat: cat, reg: newRegistry(cfg, cat, cfg.Log), mux: http.NewServeMux(), started: time.Now(),
		prep: newPrepSlots(), reclaim: reclaimer{delay: time.Second}}
	s.routes()
	return s, nil
}

// Models is the names of the models the server knows.
func (s *Server) Models() []string { return append([]string(nil), s.cat.names...) }

// Load loads a model now (it then stays loaded for the keep-alive time).
func (s *Server) Load(name string) error {
	l, err := s.reg.acquire(context.Background(), name)
	if err != nil {
		return err
	}
	s.reg.release(l, s.cfg.KeepAlive)
	return nil
}

// Close unloads every model.
func (s *Server) Close() { s.reg.closeAll() }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ggml-rs is running") })
	m.HandleFunc("HEAD /{$}", func(w http.ResponseWriter, r *http.Request) {})
	m.HandleFunc("GET /api/version", s.version)
	m.HandleFunc("GET /api/tags", s.tags)
	m.HandleFunc("GET /api/ps", s.ps)
	m.HandleFunc("POST /api/show", s.show)
	m.HandleFunc("POST /api/generate", s.generate)
	m.HandleFunc("POST /api/chat", s.chat)
	m.HandleFunc("POST /api/embed", s.embed)
	m.HandleFunc("POST /api/embeddings", s.embeddings)
	m.HandleFunc("GET /v1/models", s.oaiModels)
	m.HandleFunc("GET /v1/models/{model...}", s.oaiModel)
	m.HandleFunc("POST /v1/chat/completions", s.oaiChat)
	m.HandleFunc("POST /v1/completions", s.oaiCompletions)
	m.HandleFunc("POST /v1/embeddings", s.oaiEmbeddings)
}

// serveHTTP checks the API key, bounds the body, routes, and turns a
// panic in a handler into a 500 (the server goes on). Once the handler is
// done, what the client still sends of its body is read and dropped (a
// bounded amount), so that a client refused before its body was read
// sees the refusal rather than a reset connection.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body := trackBody(r)
	aborted := false
	defer func() {
		if !aborted {
			drainBody(w, r, body)
		}
		if body != nil && body.n >= bigBody {
			s.reclaim.soon()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				aborted = true
				panic(p)
			}
			s.cfg.Log.Error("handler panic", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			writeError(w, r, http.StatusInternalServerError, fmt.Errorf("internal error: %v", p))
		}
	}()
	if !s.authorized(r) {
		refuseUnauthorized(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	if _, pattern := s.mux.Handler(r); pattern == "" {
		writeError(w, r, http.StatusNotFound, fmt.Errorf("%s %s: no such endpoint", r.Method, r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// httpError is an error with its HTTP status.
type httpError struct {
	status int
	err    error
}

func (e httpError) Error() string { return e.err.Error() }
func (e httpError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return httpError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// statusOf maps an error to its HTTP status.
func statusOf(err error) int {
	var he httpError
	var unknown errUnknownModel
	var nofit errNoFit
	var long errTooLong
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.As(err, &unknown):
		return http.StatusNotFound
	case errors.As(err, &long):
		return http.StatusBadRequest
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBusy):
		return http.StatusServiceUnavailable
	case errors.As(err, &nofit):
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// isOpenAI reports whether the request is to OpenAI's API (its errors
// have their own shape).
func isOpenAI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/v1/") }

// writeError answers with an error in the request's API's shape.
func writeError(w http.ResponseWriter, r *http.Request, status int, err error) {
	if isOpenAI(r) {
		typ := "invalid_request_error"
		if status >= 500 {
			typ = "api_error"
		}
		code := any(nil)
		if status == http.StatusNotFound {
			code = "model_not_found"
		}
		writeJSON(w, status, map[string]any{"error": map[string]any{"message": err.Error(), "type": typ, "param": nil, "code": code}})
		return
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// fail answers with err's status.
func fail(w http.ResponseWriter, r *http.Request, err error) { writeError(w, r, statusOf(err), err) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// decodeBody reads a JSON request body into v: malformed JSON, a body too
// large, or trailing data are 4xx errors.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return httpError{http.StatusRequestEntityTooLarge, fmt.Errorf("the request body is larger than %d bytes", mbe.Limit)}
		case errors.Is(err, io.EOF):
			return badRequest("the request body is empty: a JSON object is expected")
		}
		return badRequest("invalid JSON in the request body: %v", err)
	}
	if dec.More() {
		return badRequest("invalid JSON in the request body: data after the object")
	}
	return nil
}
