package serve

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/ggml-rs/ggml-rs/go/grammar"
	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// ErrBusy is returned when an engine's queue is full.
var ErrBusy = errors.New("the server is busy: too many requests are waiting for this model")

// errClosed is returned to requests an engine drops when it shuts down.
var errClosed = errors.New("the model was unloaded")

// engine runs one decoder model for many requests at once: continuous
// batching over a cache of Parallel sequences. A single goroutine (run)
// owns the model and the cache; submit only queues.
type engine struct {
	m        *decoder.Model
	tok      decoder.Tokenizer
	cache    *kvcache.Cache
	batch    int // tokens computed in one step at most
	maxQueue int

	mu      sync.Mutex
	queue   []*genRequest
	closing bool
	wake    chan struct{} // a request was queued, or closing
	done    chan struct{} // run has returned

	slots []slot // the goroutine's own

	// observe, when set (tests), sees every row of logits a sequence
	// samples from, before sampling.
	observe func(r *genRequest, logits []float32)
}

// slot is one sequence of the cache (its sequence id is its index): the
// tokens the cache holds for it, kept after a request ends so that the
// next prompt with the same beginning (a chat's next turn) reuses them.
type slot struct {
	held []int32
	seq  *sequence // nil: free
	used time.Time // when its last sequence ended
}

type engineConfig struct {
	Parallel int // sequences computed together
	Context  int // tokens per sequence
	Batch    int // tokens per step
	MaxQueue int // requests waiting for a slot, at most
}

func newEngine(m *decoder.Model, tok decoder.Tokenizer, c engineConfig) (*engine, error) {
	cache, err := m.NewCache(decoder.CacheOptions{Capacity: c.Context * c.Parallel, Sequences: c.Parallel, MaxBatch: c.Batch})
	if err != nil {
		return nil, err
	}
	e := &engine{m: m, tok: tok, cache: cache, batch: c.Batch, maxQueue: c.MaxQueue,
		wake: make(chan struct{}, 1), done: make(chan struct{}), slots: make([]slot, c.Parallel)}
	return e, nil
}

// start runs the engine's goroutine.
func (e *engine) start() { go e.run() }

// contextSize is the tokens one sequence can hold.
func (e *engine) contextSize() int { return e.cache.Capacity() }

// submit queues a request; its events come on r.events.
func (e *engine) submit(r *genRequest) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		return errClosed
	}
	if len(e.queue) >= e.maxQueue {
		return ErrBusy
	}
	e.queue = append(e.queue, r)
	e.signal()
	return nil
}

func (e *engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// close ends every request (queued ones and those computing get an
// error), stops the goroutine and frees the cache.
func (e *engine) close() {
	e.mu.Lock()
	e.closing = true
	e.signal()
	e.mu.Unlock()
	<-e.done
}

func (e *engine) run() {
	// ggml computes on the calling thread: one OS thread for the loop
	// (see decoder.Generate).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(e.done)
	defer e.cache.Close()
	defer e.m.ReleaseGraph()
	for {
		closing := e.admit()
		if closing {
			e.shutdown()
			return
		}
		e.dropCancelled()
		if !e.busy() {
			<-e.wake
			continue
		}
		e.step()
	}
}

// shutdown fails every queued and running request.
func (e *engine) shutdown() {
	e.mu.Lock()
	q := e.queue
	e.queue = nil
	e.mu.Unlock()
	for _, r := range q {
		r.events <- event{done: true, err: errClosed}
	}
	for i := range e.slots {
		if s := e.slots[i].seq; s != nil {
			s.finish("", errClosed)
			e.slots[i].seq = nil
		}
	}
}

func (e *engine) busy() bool {
	for _, s := range e.slots {
		if s.seq != nil {
			return true
		}
	}
	return false
}

// admit moves queued requests into free slots (the one whose held tokens
// share the longest beginning with the prompt), and reports whether the
// engine is closing.
func (e *engine) admit() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closing {
		return true
	}
	for len(e.queue) > 0 {
		r := e.queue[0]
		if r.ctx.Err() != nil {
			e.queue = e.queue[1:]
			r.events <- event{done: true, err: r.ctx.Err()}
			continue
		}
		// The free slot sharing the longest beginning with the prompt; on
		// a tie the one unused longest, so that recent conversations stay.
		best, bestLen := -1, -1
		for i, s := range e.slots {
			if s.seq != nil {
				continue
			}
			n := commonPrefix(s.held, r.prompt)
			if n > bestLen || n == bestLen && s.used.Before(e.slots[best].used) {
				best, bestLen = i, n
			}
		}
		if best < 0 {
			break
		}
		e.queue = e.queue[1:]
		e.begin(best, r)
	}
	return false
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// begin puts request r into slot i, keeping what the cache holds of its
// prompt.
func (e *engine) begin(i int, r *genRequest) {
	sl := &e.slots[i]
	keep := e.cache.KeepPrefix(i, sl.held, r.prompt)
	sl.held = append(sl.held[:0], r.prompt[:keep]...)
	now := time.Now()
	s := &sequence{req: r, pending: r.prompt[keep:], sampler: sample.New(r.sampling),
		detok: decoder.NewTextStream(e.tok, r.prompt), stop: stopper{stops: r.stops}, admitted: now}
	s.sampler.Accept(r.prompt...)
	if r.grammar != nil {
		s.sampler.Grammar = grammar.NewState(r.grammar, r.vocab)
	}
	s.stats.PromptTokens = len(r.prompt)
	s.stats.CachedTokens = keep
	s.stats.Queued = now.Sub(r.queued)
	sl.seq = s
}

// dropCancelled ends the sequences whose client has gone.
func (e *engine) dropCancelled() {
	for i := range e.slots {
		if s := e.slots[i].seq; s != nil && s.req.ctx.Err() != nil {
			s.finish("", s.req.ctx.Err())
			e.slots[i].seq, e.slots[i].used = nil, time.Now()
		}
	}
}

// step computes one batch: a token of every decoding sequence, and as
// much of the prompts being prefilled as the step's token budget allows
// (the sequence admitted first first), then samples the sequences whose
// logits are ready.
func (e *engine) step() {
	var batch []decoder.Input
	var slotOf []int
	budget := e.batch
	for i, sl := range e.slots {
		if s := sl.seq; s != nil && s.decoding {
			batch = append(batch, decoder.Input{Sequence: kvcache.Sequence{Seq: i, Tokens: []int32{s.next}}})
			slotOf = append(slotOf, i)
			budget--
		}
	}
	for _, i := range e.prefillOrder() {
		s := e.slots[i].seq
		n := min(len(s.pending), budget)
		if n <= 0 && len(batch) > 0 {
			break
		}
		n = max(n, 1)
		batch = append(batch, decoder.Input{Sequence: kvcache.Sequence{Seq: i, Tokens: s.pending[:n]}})
		slotOf = append(slotOf, i)
		budget -= n
	}
	// Scratch: each row is sampled below, before the next step.
	out, err := e.m.Run(e.cache, batch, decoder.RunOptions{MaxBatch: e.batch, Scratch: true})
	if err != nil {
		// The batch's sequences fail; the cache forgets them (what it
		// holds of them is unknown), the others go on.
		for _, i := range slotOf {
			e.slots[i].seq.finish("", fmt.Errorf("compute: %w", err))
			e.slots[i].seq = nil
			e.cache.Remove(i)
			e.slots[i].held = e.slots[i].held[:0]
		}
		return
	}
	for k, i := range slotOf {
		sl := &e.slots[i]
		s := sl.seq
		fed := batch[k].Tokens
		sl.held = append(sl.held, fed...)
		if !s.decoding {
			s.pending = s.pending[len(fed):]
			if len(s.pending) > 0 {
				continue
			}
			s.decoding = true
			s.firstTok = time.Now()
			s.stats.PromptEval = s.firstTok.Sub(s.admitted)
		}
		if e.sample(s, out[k].Logits[len(out[k].Logits)-1], len(sl.held)) {
			sl.seq, sl.used = nil, time.Now()
		}
	}
}

// prefillOrder is the slots whose prompt is still being computed, the
// longest-waiting first.
func (e *engine) prefillOrder() []int {
	var order []int
	for i, sl := range e.slots {
		if sl.seq != nil && !sl.seq.decoding {
			order = append(order, i)
		}
	}
	for a := 1; a < len(order); a++ {
		for b := a; b > 0 && e.slots[order[b]].seq.admitted.Before(e.slots[order[b-1]].seq.admitted); b-- {
			order[b], order[b-1] = order[b-1], order[b]
		}
	}
	return order
}

// sample draws a sequence's next token from its logits, sends its text,
// and reports whether the sequence ended (held: tokens its cache holds).
func (e *engine) sample(s *sequence, logits []float32, held int) bool {
	if e.observe != nil {
		e.observe(s.req, logits)
	}
	tok := s.sampler.Sample(logits)
	if tok < 0 { // the format's grammar failed (its limits, or a dead end)
		s.finish("", fmt.Errorf("format: %w", s.sampler.Err()))
		return true
	}
	s.sampler.Accept(tok)
	if e.tok.IsEOG(tok) {
		s.finish("stop", nil)
		return true
	}
	s.stats.Generated++
	s.tokens = append(s.tokens, tok)
	text, stopped := s.stop.push(s.detok.Add(tok))
	if text != "" {
		s.send(event{text: text})
	}
	switch {
	case stopped:
		s.cut = true
		s.finish("stop", nil)
		return true
	case s.req.maxTokens > 0 && s.stats.Generated >= s.req.maxTokens:
		s.finish("length", nil)
		return true
	case held >= s.req.limit:
		// The context is full: no room to compute the token sampled.
		s.finish("length", nil)
		return true
	}
	s.next = tok
	return false
}
