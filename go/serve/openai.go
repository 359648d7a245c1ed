package serve

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/ggml-rs/ggml-rs/go/sample"
)

// OpenAI's API: /v1/chat/completions, /v1/completions, /v1/embeddings,
// /v1/models.

// oaiParams are the sampling and length parameters both completion
// endpoints take.
type oaiParams struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	Seed                *int64             `json:"seed"`
	Stop                json.RawMessage    `json:"stop"`
	N                   *int               `json:"n"`
	ResponseFormat      *oaiResponseFormat `json:"response_format"`
	Tools               []json.RawMessage  `json:"tools"`
	ToolChoice          json.RawMessage    `json:"tool_choice"`
	Logprobs            json.RawMessage    `json:"logprobs"`
}

// options turns the parameters into a generation's options: OpenAI's
// defaults (temperature 1, top-p 1, no penalties), unless given.
func (p *oaiParams) options() (genOptions, error) {
	o := genOptions{sampling: sample.Options{Temperature: 1, TopP: 1, Seed: -1}}
	set := func(dst *float32, v *float64, name string, lo, hi float64) error {
		if v == nil {
			return nil
		}
		if math.IsNaN(*v) || *v < lo || *v > hi {
			return badRequest("%s %v: a number in [%v, %v]", name, *v, lo, hi)
		}
		*dst = float32(*v)
		return nil
	}
	if err := set(&o.sampling.Temperature, p.Temperature, "temperature", 0, 2); err != nil {
		return o, err
	}
	if err := set(&o.sampling.TopP, p.TopP, "top_p", 0, 1); err != nil {
		return o, err
	}
	if err := set(&o.sampling.FrequencyPenalty, p.FrequencyPenalty, "frequency_penalty", -2, 2); err != nil {
		return o, err
	}
	if err := set(&o.sampling.PresencePenalty, p.PresencePenalty, "presence_penalty", -2, 2); err != nil {
		return o, err
	}
	if o.sampling.FrequencyPenalty != 0 || o.sampling.PresencePenalty != 0 {
		o.sampling.RepeatLastN = -1 // OpenAI's penalties look at the whole text
	}
	if p.Seed != nil {
		o.sampling.Seed = *p.Seed & math.MaxInt64
	}
	max := p.MaxCompletionTokens
	if max == nil {
		max = p.MaxTokens
	}
	if max != nil {
		if *max < 1 {
			return o, badRequest("max_tokens %d: at least 1", *max)
		}
		o.maxTokens = *max
	}
	if p.N != nil && *p.N != 1 {
		return o, badRequest("n %d: only one choice per request is supported", *p.N)
	}
	format, err := p.ResponseFormat.grammar()
	if err != nil {
		return o, err
	}
	o.format = format
	if l := string(p.Logprobs); l != "" && l != "null" && l != "false" && l != "0" {
		return o, badRequest("logprobs are not supported")
	}
	if len(p.Stop) > 0 && string(p.Stop) != "null" {
		stops, err := jsonStops(p.Stop)
		if err != nil {
			return o, badRequest("stop: %v", err)
		}
		o.stops = stops
	}
	if p.Model == "" {
		return o, badRequest("model is required")
	}
	return o, nil
}

func newID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

type oaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usage(e event) *oaiUsage {
	return &oaiUsage{PromptTokens: e.stats.PromptTokens, CompletionTokens: e.stats.Generated, TotalTokens: e.stats.PromptTokens + e.stats.Generated}
}

// finishReason is OpenAI's name for why a generation ended.
func finishReason(reason string) string {
	if reason == "length" {
		return "length"
	}
	return "stop"
}

// oaiFinish is finishReason, "tool_calls" when the reply made calls.
func oaiFinish(reason string, calls int) string {
	if calls > 0 && reason != "length" {
		return "tool_calls"
	}
	return finishReason(reason)
}

// oaiToolCalls are calls as OpenAI's message.tool_calls gives them:
// {"id", "type": "function", "function": {"name", "arguments": TEXT}}.
func oaiToolCalls(calls []toolCall) []any {
	out := make([]any, len(calls))
	for i, c := range calls {
		out[i] = map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": string(c.Args)}}
	}
	return out
}

// oaiChunks is what one event of a chat stream sends, when it is more
// than one chunk.
type oaiChunks []any

type oaiMessage struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
	// Reasoning: the model's reasoning, apart from its answer (Ollama's
	// field in its OpenAI API).
	Reasoning string `json:"reasoning,omitempty"`
}

// oaiThink reads reasoning_effort (or Ollama's reasoning.effort) as
// Ollama's think: "none" off, "low"/"medium"/"high" on, absent the
// model's default.
func oaiThink(effort string, reasoning *struct {
	Effort string `json:"effort"`
}) (*bool, error) {
	if effort == "" && reasoning != nil {
		effort = reasoning.Effort
	}
	switch effort {
	case "":
		return nil, nil
	case "none":
		f := false
		return &f, nil
	case "low", "medium", "high", "minimal":
		t := true
		return &t, nil
	}
	return nil, badRequest("reasoning_effort %q: one of none, low, medium, high", effort)
}

// oaiContent reads a message's content: a string, or a list of parts of
// which only text parts are supported.
func oaiContent(v json.RawMessage, i int) (string, error) {
	if len(v) == 0 || string(v) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(v, &parts); err != nil {
		return "", badRequest("messages[%d].content: a string or a list of content parts", i)
	}
	var out string
	for _, p := range parts {
		if p.Type != "text" {
			return "", badRequest("messages[%d]: content of type %q is not supported (text only)", i, p.Type)
		}
		out += p.Text
	}
	return out, nil
}

func (s *Server) oaiChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req struct {
		oaiParams
		Messages []struct {
			Role       string            `json:"role"`
			Content    json.RawMessage   `json:"content"`
			ToolCalls  []json.RawMessage `json:"tool_calls"`
			ToolCallID string            `json:"tool_call_id"`
			Name       string            `json:"name"`
		} `json:"messages"`
		ReasoningEffort string `json:"reasoning_effort"`
		Reasoning       *struct {
			Effort string `json:"effort"`
		} `json:"reasoning"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	opts, err := req.options()
	if err != nil {
		fail(w, r, err)
		return
	}
	think, err := oaiThink(req.ReasoningEffort, req.Reasoning)
	if err != nil {
		fail(w, r, err)
		return
	}
	if len(req.Messages) == 0 {
		fail(w, r, badRequest("messages: at least one message is required"))
		return
	}
	in := make([]chatMessage, len(req.Messages))
	for i, m := range req.Messages {
		role := m.Role
		if role == "developer" {
			role = "system" // OpenAI's newer name for system messages
		}
		content, err := oaiContent(m.Content, i)
		if err != nil {
			fail(w, r, err)
			return
		}
		in[i] = chatMessage{Role: role, Content: content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		if role == "tool" {
			in[i].ToolName = m.Name
		}
	}
	msgs, err := chatMessages(in)
	if err != nil {
		fail(w, r, err)
		return
	}
	ts, err := parseTools(req.Tools)
	if err == nil {
		err = ts.parseToolChoice(req.ToolChoice)
	}
	if err != nil {
		fail(w, r, err)
		return
	}
	l, err := s.reg.acquire(r.Context(), req.Model)
	if err != nil {
		fail(w, r, err)
		return
	}
	defer s.reg.release(l, s.cfg.KeepAlive)
	g, err := s.startChat(r, l, req.Model, msgs, think, ts, opts, start, "/v1/embeddings")
	if err != nil {
		fail(w, r, err)
		return
	}
	id, created := newID("chatcmpl-"), start.Unix()
	if !req.Stream {
		out, e, err := g.collect(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		var msg any = oaiMessage{Role: "assistant", Content: out.text, Reasoning: out.thinking}
		if len(out.calls) > 0 {
			m := map[string]any{"role": "assistant", "content": nil, "tool_calls": oaiToolCalls(out.calls)}
			if out.text != "" {
				m["content"] = out.text
			}
			if out.thinking != "" {
				m["reasoning"] = out.thinking
			}
			msg = m
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model, "system_fingerprint": "ggml-rs",
			"choices": []any{map[string]any{"index": 0, "message": msg,
				"finish_reason": oaiFinish(e.reason, len(out.calls)), "logprobs": nil}},
			"usage": usage(e),
		})
		return
	}
	chunk := func(delta any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"system_fingerprint": "ggml-rs", "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
	}
	st := newStreamer(w, true)
	if st.send(chunk(oaiMessage{Role: "assistant", Content: ""}, nil)) != nil {
		return
	}
	// A call streams as OpenAI streams one: a chunk with its index, id,
	// type and name (arguments ""), then one with its arguments.
	ncalls := 0
	s.oaiStream(r, st, g, req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		func(e event) any {
			if len(e.calls) == 0 {
				return chunk(oaiMessage{Content: e.text, Reasoning: e.thinking}, nil)
			}
			var out oaiChunks
			if e.text != "" || e.thinking != "" {
				out = append(out, chunk(oaiMessage{Content: e.text, Reasoning: e.thinking}, nil))
			}
			for _, c := range e.calls {
				out = append(out,
					chunk(map[string]any{"tool_calls": []any{map[string]any{"index": ncalls, "id": c.ID, "type": "function",
						"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil),
					chunk(map[string]any{"tool_calls": []any{map[string]any{"index": ncalls,
						"function": map[string]any{"arguments": string(c.Args)}}}}, nil))
				ncalls++
			}
			return out
		},
		func(e event) any { return chunk(map[string]any{}, oaiFinish(e.reason, ncalls)) },
		func(e event) any {
			return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
				"system_fingerprint": "ggml-rs", "choices": []any{}, "usage": usage(e)}
		})
}

// oaiStream sends a generation as server-sent events: a chunk per piece
// of text, the finish chunk, the usage chunk when asked for, then [DONE].
// An error after the stream began is sent as an error event.
func (s *Server) oaiStream(r *http.Request, st *streamer, g *generation, withUsage bool, piece, finish, usageChunk func(event) any) {
	for {
		e, ok := g.next(r)
		if !ok {
			return
		}
		if e.done {
			if e.err != nil {
				st.send(map[string]any{"error": map[string]any{"message": e.err.Error(), "type": "api_error", "param": nil, "code": nil}})
				st.done()
				return
			}
			st.send(finish(e))
			if withUsage {
				st.send(usageChunk(e))
			}
			st.done()
			return
		}
		if e.text == "" && e.thinking == "" && len(e.calls) == 0 {
			continue // all held by the splitter or the tool parser
		}
		p := piece(e)
		if cs, ok := p.(oaiChunks); ok {
			for _, c := range cs {
				if st.send(c) != nil {
					return
				}
			}
			continue
		}
		if st.send(p) != nil {
			return
		}
	}
}

func (s *Server) oaiCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req struct {
		oaiParams
		Prompt json.RawMessage `json:"prompt"`
		Suffix string          `json:"suffix"`
		Echo   bool            `json:"echo"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	opts, err := req.options()
	if err != nil {
		fail(w, r, err)
		return
	}
	if req.MaxTokens == nil && req.MaxCompletionTokens == nil {
		opts.maxTokens = 16 // OpenAI's default for completions
	}
	var prompt string
	if err := json.Unmarshal(req.Prompt, &prompt); err != nil {
		var list []string
		if json.Unmarshal(req.Prompt, &list) != nil || len(list) != 1 {
			fail(w, r, badRequest("prompt: a string (or a list of one string)"))
			return
		}
		prompt = list[0]
	}
	if req.Echo {
		fail(w, r, badRequest("echo is not supported"))
		return
	}
	if prompt == "" && req.Suffix == "" {
		fail(w, r, badRequest("prompt is empty"))
		return
	}
	l, err := s.reg.acquire(r.Context(), req.Model)
	if err != nil {
		fail(w, r, err)
		return
	}
	defer s.reg.release(l, s.cfg.KeepAlive)
	if req.Suffix != "" { // fill in the middle (fim.go)
		if prompt, err = l.fimPrompt(prompt, req.Suffix); err != nil {
			fail(w, r, err)
			return
		}
	}
	g, err := s.startGeneration(r, l, nil, rawPrompt(prompt), opts, start)
	if err != nil {
		fail(w, r, err)
		return
	}
	id, created := newID("cmpl-"), start.Unix()
	choice := func(text string, finish any) map[string]any {
		return map[string]any{"id": id, "object": "text_completion", "created": created, "model": req.Model, "system_fingerprint": "ggml-rs",
			"choices": []any{map[string]any{"index": 0, "text": text, "finish_reason": finish, "logprobs": nil}}}
	}
	if !req.Stream {
		out, e, err := g.collect(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		resp := choice(out.text, finishReason(e.reason))
		resp["usage"] = usage(e)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	st := newStreamer(w, true)
	s.oaiStream(r, st, g, req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		func(e event) any { return choice(e.text, nil) },
		func(e event) any { return choice("", finishReason(e.reason)) },
		func(e event) any {
			return map[string]any{"id": id, "object": "text_completion", "created": created, "model": req.Model, "choices": []any{}, "usage": usage(e)}
		})
}

func (s *Server) oaiEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	if req.Model == "" {
		fail(w, r, badRequest("model is required"))
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		fail(w, r, badRequest("encoding_format %q: float or base64", req.EncodingFormat))
		return
	}
	texts, err := embedInputs(req.Input)
	if err != nil {
		var ids [][]int32
		if json.Unmarshal(req.Input, &ids) == nil || json.Unmarshal(req.Input, new([]int32)) == nil {
			err = badRequest("input: token arrays are not supported (send text)")
		}
		fail(w, r, err)
		return
	}
	if len(texts) == 0 {
		fail(w, r, badRequest("input: at least one text is required"))
		return
	}
	_, embs, n, err := s.embedTexts(r, req.Model, texts, true, req.Dimensions, s.cfg.KeepAlive)
	if err != nil {
		fail(w, r, err)
		return
	}
	data := make([]any, len(embs))
	for i, e := range embs {
		var v any = e
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(e))
			for j, x := range e {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			v = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "embedding": v, "index": i}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": n, "total_tokens": n}})
}

type oaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) oaiModels(w http.ResponseWriter, r *http.Request) {
	data := []oaiModel{}
	for _, n := range s.cat.names {
		f := s.cat.files[n]
		data = append(data, oaiModel{ID: tagName(f), Object: "model", Created: f.modified.Unix(), OwnedBy: "library"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) oaiModel(w http.ResponseWriter, r *http.Request) {
	f, ok := s.cat.lookup(r.PathValue("model"))
	if !ok {
		fail(w, r, errUnknownModel{r.PathValue("model")})
		return
	}
	writeJSON(w, http.StatusOK, oaiModel{ID: tagName(f), Object: "model", Created: f.modified.Unix(), OwnedBy: "library"})
}
