package serve

import (
	"context"
	"time"

	"github.com/ggml-rs/ggml-rs/go/grammar"
	"github.com/ggml-rs/ggml-rs/go/model/decoder"
	"github.com/ggml-rs/ggml-rs/go/sample"
)

// genRequest is one generation handed to an engine: the prompt's tokens
// and what to do with them. The handler that made it reads its events.
type genRequest struct {
	ctx       context.Context // the client's: cancelled when it goes away
	prompt    []int32
	maxTokens int // tokens to generate at most (<= 0: until the end or the context)
	limit     int // context tokens of this sequence (num_ctx, at most the engine's)
	sampling  sample.Options
	stops     []string
	// grammar (with its vocabulary), when set, constrains the output.
	grammar *grammar.Grammar
	vocab   *grammar.Vocab
	events  chan event // buffered for every event the sequence can send
	queued  time.Time
}

// event is a piece of a generation's text, or its end.
type event struct {
	text     string
	thinking string     // with a splitter (generation.split): the reasoning of text
	calls    []toolCall // with tools: the calls completed (generation.tools)
	done     bool
	// With done: why it ended ("stop", "length", or "" with err), and its
	// counts and times.
	reason string
	err    error
	stats  genStats
	tokens []int32 // the generated tokens
}

// genStats are one generation's counts and times, as the APIs report them.
type genStats struct {
	PromptTokens int           // prompt tokens (cached ones included)
	CachedTokens int           // prompt tokens the cache already held
	Generated    int           // tokens generated
	PromptEval   time.Duration // from admission to the first token's logits
	Eval         time.Duration // from then to the end
	Queued       time.Duration // waiting for a slot
}

// newGenRequest makes a request whose event channel holds every event the
// sequence can send (one per generated token at most, and the end), so
// that the engine never waits for a slow client.
func newGenRequest(ctx context.Context, prompt []int32, limit, maxTokens int, o sample.Options, stops []string) *genRequest {
	n := limit - len(prompt) + 4
	if maxTokens > 0 {
		n = min(n, maxTokens+4)
	}
	return &genRequest{ctx: ctx, prompt: prompt, maxTokens: maxTokens, limit: limit, sampling: o, stops: stops,
		events: make(chan event, max(n, 2)), queued: time.Now()}
}

// sequence is a request in a slot: where its prompt stands, what it has
// generated, its sampler and text state.
type sequence struct {
	req      *genRequest
	pending  []int32 // prompt tokens not yet computed
	next     int32   // the last sampled token, to compute next (decoding)
	decoding bool
	sampler  *sample.Sampler
	detok    *decoder.TextStream
	stop     stopper
	cut      bool // a stop sequence ended the text
	stats    genStats
	tokens   []int32 // generated
	admitted time.Time
	firstTok time.Time
}

// send delivers an event without ever blocking the engine (the channel
// was sized for every event; a full one means a bug, and the text is
// dropped rather than the engine stalled).
func (s *sequence) send(e event) {
	select {
	case s.req.events <- e:
	default:
	}
}

// finish ends the sequence with a reason or an error.
func (s *sequence) finish(reason string, err error) {
	if err == nil && !s.cut {
		tail, stopped := s.stop.push(s.detok.Flush())
		if !stopped {
			tail += s.stop.flush()
		}
		if tail != "" {
			s.send(event{text: tail})
		}
	}
	now := time.Now()
	if s.firstTok.IsZero() {
		s.stats.PromptEval = now.Sub(s.admitted)
	} else {
		s.stats.Eval = now.Sub(s.firstTok)
	}
	s.send(event{done: true, reason: reason, err: err, stats: s.stats, tokens: s.tokens})
}
