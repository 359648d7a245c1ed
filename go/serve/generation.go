package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat"
)

// generation is a request's run through an engine, as the APIs use it:
// the prompt's tokens, the options, and what the engine sends back.
type generation struct {
	l      *loaded
	req    *genRequest
	opts   genOptions
	start  time.Time
	text   string  // the prompt's
	tokens []int32 // the prompt's
	// split, when set, separates the reasoning from the answer in the
	// events next returns; done holds the final event while the
	// splitter's last text goes out.
	split splitter
	done  *event
	// tools, when set, parses the answer's text for tool calls.
	tools toolParser
}

// startGeneration makes the prompt text (prompt: a chat template's
// rendering, or the raw prompt), tokenizes it after the tokens of an
// earlier context (Ollama's deprecated "context"), checks it against the
// context and queues it on the model's engine.
//
// A prompt longer in bytes than the context's tokens can hold is refused
// before it is tokenized, and the rendering and tokenizing are work of
// the server's prep slots (a few at a time), so that huge prompts cost
// neither unbounded CPU nor memory before their refusal.
func (s *Server) startGeneration(r *http.Request, l *loaded, before []int32, prompt func() (string, error), opts genOptions, start time.Time) (*generation, error) {
	if l.eng == nil {
		return nil, badRequest("model %s is an embedding model: it does not generate text (use /api/embed or /v1/embeddings)", l.file.name)
	}
	vocab := l.eng.m.Vocab
	for _, id := range before {
		if id < 0 || int(id) >= vocab {
			return nil, badRequest("context: token id %d is outside the model's %d-token vocabulary", id, vocab)
		}
	}
	limit, err := opts.contextLimit(l.eng.contextSize())
	if err != nil {
		return nil, badRequest("%v", err)
	}
	done, err := s.prep.acquire(r.Context())
	if err != nil {
		return nil, err
	}
	defer done()
	text, err := prompt()
	if err != nil {
		return nil, err
	}
	if err := fitsBytes(len(before), len(text), l.maxTokenBytes, limit); err != nil {
		return nil, badRequest("%v", err)
	}
	ids := append(append([]int32(nil), before...), l.tok.Encode(text, len(before) == 0)...)
	if len(ids) == 0 {
		return nil, badRequest("the prompt is empty (and the model adds no BOS token)")
	}
	limit, err = opts.resolve(l.eng.contextSize(), len(ids))
	if err != nil {
		return nil, badRequest("%v", err)
	}
	req := newGenRequest(r.Context(), ids, limit, opts.maxTokens, opts.sampling, opts.stops)
	if opts.format != "" {
		root := opts.grammarRoot
		if root == "" {
			root = "root"
		}
		if req.grammar, req.vocab, err = l.compileGrammar(opts.format, root); err != nil {
			return nil, err
		}
	}
	if err := l.eng.submit(req); err != nil {
		return nil, err
	}
	return &generation{l: l, req: req, opts: opts, start: start, tokens: ids, text: text}, nil
}

// rawPrompt is a prompt sent as it is.
func rawPrompt(text string) func() (string, error) {
	return func() (string, error) { return text, nil }
}

// startChat starts a chat reply on l, as both APIs do: the model's
// template must parse and chat (embedHint names the API's embeddings
// endpoint for an embedding model), think and tools must suit it, a
// tool_choice that forces a call becomes a grammar; then the prompt from
// the template, and the reply's splitter (reasoning) and tool parser.
func (s *Server) startChat(r *http.Request, l *loaded, model string, msgs []message, think *bool, ts *toolSet,
	opts genOptions, start time.Time, embedHint string) (*generation, error) {
	if l.templateErr != nil {
		return nil, l.templateErr
	}
	if l.prompts == nil {
		return nil, badRequest("model %s is an embedding model: it does not chat (use %s)", l.file.name, embedHint)
	}
	if err := l.prompts.checkThink(model, think); err != nil {
		return nil, err
	}
	if err := l.prompts.checkTools(model, ts); err != nil {
		return nil, err
	}
	think, err := l.prompts.forTools(ts, think, &opts)
	if err != nil {
		return nil, err
	}
	g, err := s.startGeneration(r, l, nil, chatPrompt(l.prompts, msgs, think, ts), opts, start)
	if err != nil {
		return nil, err
	}
	g.split = newSplitter(l.prompts.style, think, g.text, ts)
	if ts.parsed() {
		g.tools = newToolParser(l.prompts.tools, ts)
	}
	return g, nil
}

// chatPrompt is a conversation rendered with the model's chat template
// (and the request's tools, if any).
func chatPrompt(p *promptMaker, msgs []message, think *bool, ts *toolSet) func() (string, error) {
	return func() (string, error) {
		var tools []chat.Tool
		if ts != nil {
			tools = ts.tools
		}
		text, err := p.chat(msgs, think, tools)
		if err != nil {
			return "", badRequest("chat template: %v", err)
		}
		return text, nil
	}
}

// next waits for the generation's next event. When the client goes away
// the engine ends the sequence at its next step; the handler returns at
// once.
func (g *generation) next(r *http.Request) (event, bool) {
	if g.done != nil {
		e := *g.done
		g.done = nil
		return e, true
	}
	var e event
	select {
	case e = <-g.req.events:
	case <-r.Context().Done():
		return event{}, false
	}
	if !e.done {
		if g.split != nil {
			e.thinking, e.text = g.split.add(e.text)
		}
		if g.tools != nil {
			e.text, e.calls = g.tools.add(e.text)
		}
		e.calls = append(e.calls, g.harmonyCalls()...)
		return e, true
	}
	if e.err != nil {
		return e, true
	}
	var th, co string
	if g.split != nil {
		th, co = g.split.flush()
	}
	var calls []toolCall
	if g.tools != nil {
		var more string
		co, calls = g.tools.add(co)
		more, rest := g.tools.flush()
		co += more
		calls = append(calls, rest...)
	}
	calls = append(calls, g.harmonyCalls()...)
	if th != "" || co != "" || len(calls) > 0 {
		g.done = &e
		return event{thinking: th, text: co, calls: calls}, true
	}
	return e, true
}

// harmonyCalls are the calls gpt-oss's splitter has completed.
func (g *generation) harmonyCalls() []toolCall {
	if h, ok := g.split.(*harmonySplitter); ok {
		return h.takeCalls()
	}
	return nil
}

// reply is a whole generation's text: its reasoning and its answer, and
// the tool calls parsed from it.
type reply struct {
	thinking, text string
	calls          []toolCall
}

// collect reads the whole generation (non-streaming replies). Beside
// tool calls, the answer's surrounding white space is dropped.
func (g *generation) collect(r *http.Request) (reply, event, error) {
	var text, thinking []byte
	var calls []toolCall
	for {
		e, ok := g.next(r)
		if !ok {
			return reply{}, e, r.Context().Err()
		}
		text = append(text, e.text...)
		thinking = append(thinking, e.thinking...)
		calls = append(calls, e.calls...)
		if e.done {
			out := reply{thinking: string(thinking), text: string(text), calls: calls}
			if len(calls) > 0 {
				out.text = strings.TrimSpace(out.text)
			}
			return out, e, e.err
		}
	}
}

// streamer writes a streamed reply: newline-delimited JSON (Ollama) or
// server-sent events (OpenAI), flushed after each message.
type streamer struct {
	w   http.ResponseWriter
	sse bool
}

func newStreamer(w http.ResponseWriter, sse bool) *streamer {
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.WriteHeader(http.StatusOK)
	return &streamer{w: w, sse: sse}
}

func (st *streamer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if st.sse {
		b = append(append([]byte("data: "), b...), '\n', '\n')
	} else {
		b = append(b, '\n')
	}
	if _, err := st.w.Write(b); err != nil {
		return err
	}
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// done ends an SSE stream as OpenAI's does.
func (st *streamer) done() {
	if st.sse {
		st.w.Write([]byte("data: [DONE]\n\n"))
		if f, ok := st.w.(http.Flusher); ok {
			f.Flush()
		}
	}
}
