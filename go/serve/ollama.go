package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat"
)

// Ollama's API: /api/generate, /api/chat, /api/embed, /api/embeddings,
// /api/tags, /api/show, /api/ps, /api/version.

// refuseUnsupported refuses request features this server does not have,
// rather than ignoring them and answering something else.
func refuseUnsupported(images int) error {
	if images > 0 {
		return badRequest("images are not supported: the models served here read text only")
	}
	return nil
}

// parseThink reads Ollama's think: a bool, or a level ("low", "medium",
// "high": on). Absent: nil (the template's default).
func parseThink(v json.RawMessage) (*bool, error) {
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err == nil {
		return &b, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch s {
		case "low", "medium", "high":
			on := true
			return &on, nil
		}
	}
	return nil, badRequest("think %s: true, false, or \"low\", \"medium\", \"high\"", clipJSON(v))
}

func streaming(p *bool) bool { return p == nil || *p }

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req generateRequest
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	err := s.ollamaCommon(req.Model, len(req.Images))
	if err == nil && req.Template != "" {
		err = badRequest("template is not supported: the model's own chat template is used (or raw: true)")
	}
	if err == nil && req.Suffix != "" && req.Raw {
		err = badRequest("raw mode does not support suffix: send the fill-in-the-middle tokens in the prompt")
	}
	var think *bool
	var keep time.Duration
	var opts genOptions
	if err == nil {
		think, keep, opts, err = s.ollamaSettings(req.Think, req.KeepAlive, req.Options)
	}
	if err == nil {
		opts.format, err = ollamaFormat(req.Format)
	}
	if err != nil {
		fail(w, r, err)
		return
	}
	// An empty prompt loads (or, with keep_alive 0, unloads) the model.
	if req.Prompt == "" && req.Suffix == "" && len(req.Context) == 0 {
		s.loadOrUnload(w, r, req.Model, keep, func(reason string) any {
			return generateResponse{Model: req.Model, CreatedAt: now(), Done: true, DoneReason: reason}
		})
		return
	}
	l, err := s.reg.acquire(r.Context(), req.Model)
	if err != nil {
		fail(w, r, err)
		return
	}
	defer s.reg.release(l, keep)
	prompt := rawPrompt(req.Prompt)
	if req.Suffix != "" {
		// Fill in the middle: the FIM tokens around prompt and suffix, no
		// chat template (fim.go).
		text, err := l.fimPrompt(req.Prompt, req.Suffix)
		if err != nil {
			fail(w, r, err)
			return
		}
		prompt, req.Raw = rawPrompt(text), true
	}
	if !req.Raw && l.templateErr != nil {
		fail(w, r, l.templateErr)
		return
	}
	templated := !req.Raw && l.prompts != nil
	if templated {
		if err := l.prompts.checkThink(req.Model, think); err != nil {
			fail(w, r, err)
			return
		}
		var msgs []message
		if req.System != "" {
			msgs = append(msgs, message{Role: "system", Content: req.System})
		}
		msgs = append(msgs, message{Role: "user", Content: req.Prompt})
		prompt = chatPrompt(l.prompts, msgs, think, nil)
	}
	g, err := s.startGeneration(r, l, req.Context, prompt, opts, start)
	if err != nil {
		fail(w, r, err)
		return
	}
	if templated {
		g.split = newSplitter(l.prompts.style, think, g.text, nil)
	}
	final := func(e event) generateResponse {
		return generateResponse{Model: req.Model, CreatedAt: now(), Done: true, DoneReason: e.reason,
			Context: append(append([]int32(nil), g.tokens...), e.tokens...), metrics: newMetrics(g, e, l.loadDur)}
	}
	if !streaming(req.Stream) {
		out, e, err := g.collect(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		resp := final(e)
		resp.Response, resp.Thinking = out.text, out.thinking
		writeJSON(w, http.StatusOK, resp)
		return
	}
	streamOllama(w, r, g, func(e event) any {
		return generateResponse{Model: req.Model, CreatedAt: now(), Response: e.text, Thinking: e.thinking}
	}, func(e event) any { return final(e) })
}

// ollamaSettings reads what generate and chat both take: think,
// keep_alive and the options (each error a 400).
func (s *Server) ollamaSettings(thinkRaw, keepRaw json.RawMessage, options map[string]json.RawMessage) (*bool, time.Duration, genOptions, error) {
	think, err := parseThink(thinkRaw)
	if err != nil {
		return nil, 0, genOptions{}, err
	}
	keep, err := parseKeepAlive(keepRaw, s.cfg.KeepAlive)
	if err != nil {
		return nil, 0, genOptions{}, badRequest("%v", err)
	}
	opts, err := parseOllamaOptions(options)
	if err != nil {
		return nil, 0, genOptions{}, badRequest("%v", err)
	}
	return think, keep, opts, nil
}

// streamOllama sends a generation as newline-delimited JSON: a line per
// piece of text, then the final line (or an error line).
func streamOllama(w http.ResponseWriter, r *http.Request, g *generation, piece func(event) any, final func(event) any) {
	st := newStreamer(w, false)
	for {
		e, ok := g.next(r)
		if !ok {
			return
		}
		if e.done {
			if e.err != nil {
				st.send(map[string]string{"error": e.err.Error()})
				return
			}
			st.send(final(e))
			return
		}
		if e.text == "" && e.thinking == "" && len(e.calls) == 0 {
			continue // all held by the splitter or the tool parser
		}
		if st.send(piece(e)) != nil {
			return
		}
	}
}

// ollamaCommon checks what every generation request needs.
func (s *Server) ollamaCommon(model string, images int) error {
	if model == "" {
		return badRequest("model is required")
	}
	if _, ok := s.cat.lookup(model); !ok {
		return errUnknownModel{model}
	}
	return refuseUnsupported(images)
}

// loadOrUnload answers a request with nothing to generate: the model is
// loaded (done_reason "load") or, with keep_alive 0, unloaded ("unload").
func (s *Server) loadOrUnload(w http.ResponseWriter, r *http.Request, model string, keep time.Duration, reply func(string) any) {
	if keep == 0 {
		if err := s.reg.unload(model); err != nil {
			fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, reply("unload"))
		return
	}
	l, err := s.reg.acquire(r.Context(), model)
	if err != nil {
		fail(w, r, err)
		return
	}
	s.reg.release(l, keep)
	writeJSON(w, http.StatusOK, reply("load"))
}

// chatMessages checks a conversation and turns it into the template's
// messages: an assistant turn's tool calls ({"id", "function": {"name",
// "arguments"}}, arguments a JSON object or text holding one), a tool
// turn's function name (tool_name, or name; else the name of the call
// its tool_call_id answers) and call id.
func chatMessages(in []chatMessage) ([]message, error) {
	msgs := make([]message, 0, len(in))
	names := map[string]string{} // call id: function
	for i, m := range in {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return nil, badRequest("messages[%d]: role %q: system, user, assistant or tool", i, m.Role)
		}
		if len(m.Images) > 0 {
			return nil, badRequest("messages[%d]: images are not supported: the models served here read text only", i)
		}
		out := message{Role: m.Role, Content: m.Content}
		if len(m.ToolCalls) > 0 {
			if m.Role != "assistant" {
				return nil, badRequest("messages[%d]: only assistant messages have tool_calls", i)
			}
			calls, err := messageToolCalls(m.ToolCalls, i)
			if err != nil {
				return nil, err
			}
			for _, c := range calls {
				if c.ID != "" {
					names[c.ID] = c.Name
				}
			}
			out.ToolCalls = calls
		}
		if m.Role == "tool" {
			out.ToolName, out.ToolCallID = m.ToolName, m.ToolCallID
			if out.ToolName == "" {
				out.ToolName = names[m.ToolCallID]
			}
		}
		msgs = append(msgs, out)
	}
	return msgs, nil
}

// messageToolCalls reads an assistant message's tool calls.
func messageToolCalls(raw []json.RawMessage, i int) ([]chat.ToolCall, error) {
	var calls []chat.ToolCall
	for j, r := range raw {
		var c struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		}
		if err := json.Unmarshal(r, &c); err != nil {
			return nil, badRequest("messages[%d].tool_calls[%d]: %v", i, j, err)
		}
		if c.Type != "" && c.Type != "function" {
			return nil, badRequest("messages[%d].tool_calls[%d]: type %q: only function calls", i, j, c.Type)
		}
		if c.Function.Name == "" {
			return nil, badRequest("messages[%d].tool_calls[%d]: function.name is required", i, j)
		}
		args := bytes.TrimSpace(c.Function.Arguments)
		var text string
		if json.Unmarshal(args, &text) == nil {
			args = []byte(strings.TrimSpace(text))
		}
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(args, &obj) != nil {
			return nil, badRequest("messages[%d].tool_calls[%d]: arguments must be a JSON object", i, j)
		}
		var compact bytes.Buffer
		json.Compact(&compact, args)
		calls = append(calls, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: compact.String()})
	}
	return calls, nil
}

// ollamaToolCalls are calls as Ollama's message.tool_calls gives them:
// {"id", "function": {"index", "name", "arguments": {...}}}; first is the
// index of the first in the reply.
func ollamaToolCalls(calls []toolCall, first int) []json.RawMessage {
	var out []json.RawMessage
	for i, c := range calls {
		b, _ := json.Marshal(map[string]any{"id": c.ID, "function": map[string]any{"index": first + i, "name": c.Name, "arguments": c.Args}})
		out = append(out, b)
	}
	return out
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req chatRequest
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	err := s.ollamaCommon(req.Model, 0)
	var msgs []message
	if err == nil {
		msgs, err = chatMessages(req.Messages)
	}
	var ts *toolSet
	if err == nil {
		ts, err = parseTools(req.Tools)
	}
	var think *bool
	var keep time.Duration
	var opts genOptions
	if err == nil {
		think, keep, opts, err = s.ollamaSettings(req.Think, req.KeepAlive, req.Options)
	}
	if err == nil {
		opts.format, err = ollamaFormat(req.Format)
	}
	if err != nil {
		fail(w, r, err)
		return
	}
	if len(msgs) == 0 {
		s.loadOrUnload(w, r, req.Model, keep, func(reason string) any {
			return chatResponse{Model: req.Model, CreatedAt: now(), Message: chatMessage{Role: "assistant"}, Done: true, DoneReason: reason}
		})
		return
	}
	l, err := s.reg.acquire(r.Context(), req.Model)
	if err != nil {
		fail(w, r, err)
		return
	}
	defer s.reg.release(l, keep)
	g, err := s.startChat(r, l, req.Model, msgs, think, ts, opts, start, "/api/embed")
	if err != nil {
		fail(w, r, err)
		return
	}
	final := func(e event, out reply) chatResponse {
		return chatResponse{Model: req.Model, CreatedAt: now(), Message: chatMessage{Role: "assistant", Content: out.text, Thinking: out.thinking,
			ToolCalls: ollamaToolCalls(out.calls, 0)}, Done: true, DoneReason: e.reason, metrics: newMetrics(g, e, l.loadDur)}
	}
	if !streaming(req.Stream) {
		out, e, err := g.collect(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, final(e, out))
		return
	}
	ncalls := 0
	streamOllama(w, r, g, func(e event) any {
		calls := ollamaToolCalls(e.calls, ncalls)
		ncalls += len(e.calls)
		return chatResponse{Model: req.Model, CreatedAt: now(), Message: chatMessage{Role: "assistant", Content: e.text, Thinking: e.thinking, ToolCalls: calls}}
	}, func(e event) any { return final(e, reply{}) })
}
