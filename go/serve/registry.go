package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
	"github.com/ggml-rs/ggml-rs/go/model"
	"github.com/ggml-rs/ggml-rs/go/model/bert"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// errUnknownModel is a model name the catalog does not hold.
type errUnknownModel struct{ name string }

func (e errUnknownModel) Error() string {
	return fmt.Sprintf("model %q not found (GET /api/tags lists the models)", e.name)
}

// loaded is a model in memory: a decoder with its engine, or an embedding
// model.
type loaded struct {
	file    *modelFile
	b       *backend.Backend
	eng     *engine // decoders
	tok     decoder.Tokenizer
	emb     *embedder    // embedding models
	prompts *promptMaker // decoders: chat templates
	loadDur time.Duration
	memory  uint64 // bytes on all devices
	vram    uint64 // bytes on devices other than the CPU

	// maxTokenBytes is the most bytes of text one token covers (decoders;
	// 0: unknown).
	maxTokenBytes int
	// templateErr: the decoder's chat template does not parse (prompts
	// is nil); what its chat requests get.
	templateErr error
	// gvocab: the vocabulary of format grammars (format.go), built once.
	gvocab grammarVocab
	// fim: the fill-in-the-middle tokens (fim.go), read once.
	fim fimMarkers

	// Guarded by the registry's mutex.
	ready   chan struct{} // closed when loading ends
	err     error         // loading's error
	refs    int           // requests using it
	expires time.Time     // when idle: unload then (zero: never)
	timer   *time.Timer
	gone    bool // unloaded
	// unloadIdle: a request with keep_alive 0 and nothing to generate
	// came while others used the model: it unloads when the last of them
	// ends (Ollama's), unless a later request comes.
	unloadIdle bool
}

// registry loads models when asked for and unloads them when their keep
// alive has passed with no request using them.
type registry struct {
	cfg Config
	cat *catalog
	log *slog.Logger

	mu     sync.Mutex
	models map[string]*loaded
	loadMu sync.Mutex // one load at a time (each uses every core)
}

func newRegistry(cfg Config, cat *catalog, log *slog.Logger) *registry {
	return &registry{cfg: cfg, cat: cat, log: log, models: map[string]*loaded{}}
}

// acquire returns the model, loading it if needed; release it when done.
func (r *registry) acquire(ctx context.Context, name string) (*loaded, error) {
	f, ok := r.cat.lookup(name)
	if !ok {
		return nil, errUnknownModel{name}
	}
	r.mu.Lock()
	l := r.models[f.name]
	if l == nil {
		l = &loaded{file: f, ready: make(chan struct{})}
		r.models[f.name] = l
		go r.load(l)
	}
	l.refs++
	l.unloadIdle = false // a later request's keep_alive takes over
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	r.mu.Unlock()
	select {
	case <-l.ready:
	case <-ctx.Done():
		r.release(l, -2)
		return nil, ctx.Err()
	}
	if l.err != nil {
		r.release(l, -2)
		return nil, l.err
	}
	return l, nil
}

// release ends a request's use of l; keepAlive is how long the model
// stays loaded once idle (negative: forever; -2: the current setting,
// for a request that did not get to use it).
func (r *registry) release(l *loaded, keepAlive time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.refs--
	if keepAlive == -2 {
		keepAlive = r.cfg.KeepAlive
	}
	if l.unloadIdle {
		keepAlive = 0
	}
	if l.err != nil {
		// A failed load is forgotten once nobody waits on it, so that the
		// next request tries again.
		if l.refs == 0 && r.models[l.file.name] == l {
			delete(r.models, l.file.name)
		}
		return
	}
	if l.refs > 0 || l.gone {
		return
	}
	if keepAlive < 0 {
		l.expires = time.Time{}
		return
	}
	l.expires = time.Now().Add(keepAlive)
	l.timer = time.AfterFunc(keepAlive, func() { r.expire(l) })
}

// expire unloads l if it is still idle.
func (r *registry) expire(l *loaded) {
	r.mu.Lock()
	if l.refs > 0 || l.gone || l.expires.IsZero() || time.Now().Before(l.expires) {
		r.mu.Unlock()
		return
	}
	l.gone = true
	delete(r.models, l.file.name)
	r.mu.Unlock()
	r.log.Info("unloading idle model", "model", l.file.name)
	l.close()
}

// load loads l's file (one load at a time), after checking it fits.
func (r *registry) load(l *loaded) {
	defer close(l.ready)
	r.loadMu.Lock()
	defer r.loadMu.Unlock()
	start := time.Now()
	err := r.fit(l.file)
	var nofit errNoFit
	if errors.As(err, &nofit) && r.unloadIdle(l) {
		err = r.fit(l.file)
	}
	if err == nil {
		err = l.open(r.cfg)
	}
	l.loadDur = time.Since(start)
	if err != nil {
		r.log.Error("loading failed", "model", l.file.name, "err", err)
		r.mu.Lock()
		l.err = err
		r.mu.Unlock()
		return
	}
	r.log.Info("model loaded", "model", l.file.name, "seconds", l.loadDur.Seconds(), "bytes", l.memory)
}

// unloadIdle unloads every idle model but except, and reports whether
// there were any.
func (r *registry) unloadIdle(except *loaded) bool {
	r.mu.Lock()
	var idle []*loaded
	for name, l := range r.models {
		select {
		case <-l.ready:
		default:
			continue
		}
		if l != except && l.refs == 0 && l.err == nil && !l.gone {
			l.gone = true
			if l.timer != nil {
				l.timer.Stop()
			}
			delete(r.models, name)
			idle = append(idle, l)
		}
	}
	r.mu.Unlock()
	for _, l := range idle {
		r.log.Info("unloading idle model to make room", "model", l.file.name)
		l.close()
	}
	return len(idle) > 0
}

// unload unloads a model (keep_alive 0 with no prompt): now if idle;
// else, as Ollama does, when the last request using it (or waiting for
// its load) ends, its expiry now. Requests running finish normally.
func (r *registry) unload(name string) error {
	f, ok := r.cat.lookup(name)
	if !ok {
		return errUnknownModel{name}
	}
	r.mu.Lock()
	l := r.models[f.name]
	if l == nil || l.gone {
		r.mu.Unlock()
		return nil
	}
	loading := true
	select {
	case <-l.ready:
		loading = false
	default:
	}
	if loading || l.refs > 0 {
		l.unloadIdle = true
		l.expires = time.Now()
		r.mu.Unlock()
		return nil
	}
	if l.err != nil {
		r.mu.Unlock()
		return nil
	}
	l.gone = true
	if l.timer != nil {
		l.timer.Stop()
	}
	delete(r.models, f.name)
	r.mu.Unlock()
	l.close()
	return nil
}

// running lists the loaded models (for /api/ps).
func (r *registry) running() []*loaded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*loaded
	for _, l := range r.models {
		select {
		case <-l.ready:
			if l.err == nil && !l.gone {
				out = append(out, l)
			}
		default:
		}
	}
	slices.SortFunc(out, func(a, b *loaded) int { return cmpString(a.file.name, b.file.name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// closeAll unloads every model (the server is stopping).
func (r *registry) closeAll() {
	r.mu.Lock()
	var all []*loaded
	for name, l := range r.models {
		all = append(all, l)
		delete(r.models, name)
	}
	r.mu.Unlock()
	for _, l := range all {
		<-l.ready
		if l.err == nil {
			l.close()
		}
	}
}

// isEmbedding reports whether an architecture is served as an embedding
// model.
func isEmbedding(arch string) bool { return slices.Contains(bert.Architectures, arch) }

// fit opens the file without allocating anything (fit mode), makes the
// cache the engine would make, and checks every device has room.
func (r *registry) fit(f *modelFile) error {
	if !isEmbedding(f.arch) && !slices.Contains(model.Architectures(), f.arch) {
		return fmt.Errorf("model %s: architecture %q is not supported (decoders: %v; embeddings: bert)", f.name, f.arch, model.Architectures())
	}
	b, err := r.cfg.Open(f.path, false)
	if err != nil {
		return err
	}
	defer b.Close()
	if !isEmbedding(f.arch) {
		m, err := model.New(b)
		if err != nil {
			return err
		}
		cache, err := m.NewCache(decoder.CacheOptions{Capacity: r.cfg.Context * r.cfg.Parallel, Sequences: r.cfg.Parallel, MaxBatch: r.cfg.Batch})
		if err != nil {
			return err
		}
		defer cache.Close()
	}
	return checkFit(f.name, b.BackendMemory())
}

// open loads the weights and makes the engine or embedder. A model that
// the allocation itself finds too large (ml.ErrNoMem) is an error, not a
// crash.
func (l *loaded) open(cfg Config) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(ml.ErrNoMem); ok {
				err = fmt.Errorf("model %s: not enough memory: %w", l.file.name, e)
			} else {
				err = fmt.Errorf("model %s: %v", l.file.name, p)
			}
			if l.b != nil {
				l.b.Close()
				l.b = nil
			}
		}
	}()
	b, err := cfg.Open(l.file.path, true)
	if err != nil {
		return err
	}
	l.b = b
	fail := func(err error) error {
		b.Close()
		l.b = nil
		return err
	}
	if isEmbedding(l.file.arch) {
		m, err := bert.New(b)
		if err != nil {
			return fail(err)
		}
		l.emb = &embedder{m: m}
	} else {
		m, err := model.New(b)
		if err != nil {
			return fail(err)
		}
		tok, err := decoder.NewTokenizer(b.Config())
		if err != nil {
			return fail(err)
		}
		pm, err := newPromptMaker(l.file, cfg.ChatTemplate, b.Config(), tok)
		if err != nil {
			// Raw prompts are still served; requests that need the
			// template get its error.
			l.templateErr = templateError(l.file.name, err)
		}
		eng, err := newEngine(m, tok, engineConfig{Parallel: cfg.Parallel, Context: cfg.Context, Batch: cfg.Batch, MaxQueue: cfg.MaxQueue})
		if err != nil {
			return fail(err)
		}
		eng.start()
		l.eng, l.tok, l.prompts = eng, tok, pm
		l.maxTokenBytes = maxTokenBytes(b.Config().Strings("tokenizer.ggml.tokens"))
	}
	mem := b.BackendMemory()
	l.memory = mem.InputWeights + mem.CPU.Size()
	for _, g := range mem.GPUs {
		l.memory += g.Size()
		l.vram += g.Size()
	}
	return nil
}

// maxTokenBytes bounds the bytes of text one token of the vocabulary
// covers: its longest token's bytes, and at least 4, the longest UTF-8
// character (SentencePiece's unknown token covers one). A token's text is
// never shorter than what it covers: byte-level BPE writes each byte as a
// character of 1 or 2 bytes, SentencePiece a space as "▁" (3 bytes) and
// a byte as "<0xNN>"; special tokens are their text. (A vocabulary that
// lacks some byte tokens drops bytes it cannot spell: its prompts may
// take fewer tokens, and are judged by this bound as if they did not.)
func maxTokenBytes(tokens []string) int {
	n := 4
	for _, t := range tokens {
		n = max(n, len(t))
	}
	return n
}

// close stops the engine and frees the model.
func (l *loaded) close() {
	if l.eng != nil {
		l.eng.close()
	}
	if l.b != nil {
		l.b.Close()
	}
}
