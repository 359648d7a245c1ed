package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat"
)

// Ollama's API: /api/generate, /api/chat, /api/embed, /api/embeddings,
// /api/tags, /api/show, /api/ps, /api/version.

type generateRequest struct {
	Model     string                     `json:"model"`
	Prompt    string                     `json:"prompt"`
	Suffix    string                     `json:"suffix"`
	System    string                     `json:"system"`
	Template  string                     `json:"template"`
	Context   []int32                    `json:"context"`
	Stream    *bool                      `json:"stream"`
	Raw       bool                       `json:"raw"`
	Format    json.RawMessage            `json:"format"`
	Images    []json.RawMessage          `json:"images"`
	Options   map[string]json.RawMessage `json:"options"`
	KeepAlive json.RawMessage            `json:"keep_alive"`
	Think     json.RawMessage            `json:"think"`
}

type chatMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Thinking   string            `json:"thinking,omitempty"`
	Images     []json.RawMessage `json:"images,omitempty"`
	ToolCalls  []json.RawMessage `json:"tool_calls,omitempty"`
	ToolName   string            `json:"tool_name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

type chatRequest struct {
	Model     string                     `json:"model"`
	Messages  []chatMessage              `json:"messages"`
	Stream    *bool                      `json:"stream"`
	Format    json.RawMessage            `json:"format"`
	Tools     []json.RawMessage          `json:"tools"`
	Options   map[string]json.RawMessage `json:"options"`
	KeepAlive json.RawMessage            `json:"keep_alive"`
	Think     json.RawMessage            `json:"think"`
}

// metrics are the counts and durations (nanoseconds) Ollama's final reply
// carries.
type metrics struct {
	TotalDuration      int64 `json:"total_duration,omitempty"`
	LoadDuration       int64 `json:"load_duration,omitempty"`
	PromptEvalCount    int   `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64 `json:"prompt_eval_duration,omitempty"`
	EvalCount          int   `json:"eval_count,omitempty"`
	EvalDuration       int64 `json:"eval_duration,omitempty"`
}

func newMetrics(g *generation, e event, loadDur time.Duration) metrics {
	return metrics{TotalDuration: int64(time.Since(g.start)), LoadDuration: int64(loadDur),
		PromptEvalCount: e.stats.PromptTokens, PromptEvalDuration: int64(e.stats.PromptEval),
		EvalCount: e.stats.Generated, EvalDuration: int64(e.stats.Eval)}
}

type generateResponse struct {
	Model      string  `json:"model"`
	CreatedAt  string  `json:"created_at"`
	Response   string  `json:"response"`
	Thinking   string  `json:"thinking,omitempty"`
	Done       bool    `json:"done"`
	DoneReason string  `json:"done_reason,omitempty"`
	Context    []int32 `json:"context,omitempty"`
	metrics
}

type chatResponse struct {
	Model      string      `json:"model"`
	CreatedAt  string      `json:"created_at"`
	Message    chatMessage `json:"message"`
	Done       bool        `json:"done"`
	DoneReason string      `json:"done_reason,omitempty"`
	metrics
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

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
	if l.templateErr != nil {
		fail(w, r, l.templateErr)
		return
	}
	if l.prompts == nil {
		fail(w, r, badRequest("model %s is an embedding model: it does not chat (use /api/embed)", l.file.name))
		return
	}
	if err := l.prompts.checkThink(req.Model, think); err != nil {
		fail(w, r, err)
		return
	}
	if err := l.prompts.checkTools(req.Model, ts); err != nil {
		fail(w, r, err)
		return
	}
	g, err := s.startGeneration(r, l, nil, chatPrompt(l.prompts, msgs, think, ts), opts, start)
	if err != nil {
		fail(w, r, err)
		return
	}
	g.split = newSplitter(l.prompts.style, think, g.text, ts)
	if ts.parsed() {
		g.tools = newToolParser(l.prompts.tools, ts)
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

// --- embeddings -----------------------------------------------------------

type embedRequest struct {
	Model      string                     `json:"model"`
	Input      json.RawMessage            `json:"input"`
	Truncate   *bool                      `json:"truncate"`
	Dimensions int                        `json:"dimensions"`
	Options    map[string]json.RawMessage `json:"options"`
	KeepAlive  json.RawMessage            `json:"keep_alive"`
}

// maxInputs bounds the texts of one embedding request.
const maxInputs = 2048

// embedInputs reads an input that is a string or a list of strings.
func embedInputs(v json.RawMessage) ([]string, error) {
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, badRequest("input %s: a string or a list of strings", clipJSON(v))
	}
	if len(list) > maxInputs {
		return nil, badRequest("%d inputs: at most %d in one request", len(list), maxInputs)
	}
	return list, nil
}

// embedTexts runs texts through an embedding model, cut to dims
// dimensions (and then normalized again) when dims > 0.
func (s *Server) embedTexts(r *http.Request, model string, texts []string, truncate bool, dims int, keep time.Duration) (*loaded, [][]float32, int, error) {
	l, err := s.reg.acquire(r.Context(), model)
	if err != nil {
		return nil, nil, 0, err
	}
	defer s.reg.release(l, keep)
	if l.emb == nil {
		return nil, nil, 0, badRequest("model %s does not make embeddings (an embedding model, architecture bert, does)", l.file.name)
	}
	for i, t := range texts {
		if t == "" {
			return nil, nil, 0, badRequest("input %d is empty", i)
		}
	}
	// Tokenizing is the prep slots' work (inputs can be large); the
	// embedder computes one batch at a time on its own.
	done, err := s.prep.acquire(r.Context())
	if err != nil {
		return nil, nil, 0, err
	}
	seqs, n, err := l.emb.tokenize(texts, truncate)
	done()
	if err != nil {
		return nil, nil, 0, err
	}
	embs, err := l.emb.embed(seqs)
	if err != nil {
		return nil, nil, 0, err
	}
	if dims < 0 {
		return nil, nil, 0, badRequest("dimensions %d: a positive count", dims)
	}
	if dims > 0 {
		for i, e := range embs {
			if dims > len(e) {
				return nil, nil, 0, badRequest("dimensions %d: the model's embeddings have %d", dims, len(e))
			}
			embs[i] = normalize(e[:dims])
		}
	}
	return l, embs, n, nil
}

func normalize(v []float32) []float32 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return v
	}
	inv := 1 / math.Sqrt(ss)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

func (s *Server) embed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req embedRequest
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	if req.Model == "" {
		fail(w, r, badRequest("model is required"))
		return
	}
	texts, err := embedInputs(req.Input)
	if err != nil {
		fail(w, r, err)
		return
	}
	keep, err := parseKeepAlive(req.KeepAlive, s.cfg.KeepAlive)
	if err != nil {
		fail(w, r, badRequest("%v", err))
		return
	}
	if len(texts) == 0 {
		s.loadOrUnload(w, r, req.Model, keep, func(string) any {
			return map[string]any{"model": req.Model, "embeddings": [][]float32{}}
		})
		return
	}
	l, embs, n, err := s.embedTexts(r, req.Model, texts, req.Truncate == nil || *req.Truncate, req.Dimensions, keep)
	if err != nil {
		fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"model": req.Model, "embeddings": embs,
		"total_duration": int64(time.Since(start)), "load_duration": int64(l.loadDur), "prompt_eval_count": n})
}

// embeddings is the older /api/embeddings: one prompt, one vector.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model     string                     `json:"model"`
		Prompt    string                     `json:"prompt"`
		Options   map[string]json.RawMessage `json:"options"`
		KeepAlive json.RawMessage            `json:"keep_alive"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	if req.Model == "" {
		fail(w, r, badRequest("model is required"))
		return
	}
	keep, err := parseKeepAlive(req.KeepAlive, s.cfg.KeepAlive)
	if err != nil {
		fail(w, r, badRequest("%v", err))
		return
	}
	if req.Prompt == "" {
		s.loadOrUnload(w, r, req.Model, keep, func(string) any { return map[string]any{"embedding": []float32{}} })
		return
	}
	_, embs, _, err := s.embedTexts(r, req.Model, []string{req.Prompt}, true, 0, keep)
	if err != nil {
		fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": embs[0]})
}

// --- model listing --------------------------------------------------------

type modelDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func details(f *modelFile) modelDetails {
	return modelDetails{Format: "gguf", Family: f.arch, Families: []string{f.arch}, ParameterSize: f.parameterSize(), QuantizationLevel: f.fileType}
}

// tagName is a model's name as Ollama lists it (with its tag).
func tagName(f *modelFile) string { return f.name + ":latest" }

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": s.cfg.Version})
}

func (s *Server) tags(w http.ResponseWriter, r *http.Request) {
	type tag struct {
		Name       string       `json:"name"`
		Model      string       `json:"model"`
		ModifiedAt time.Time    `json:"modified_at"`
		Size       int64        `json:"size"`
		Digest     string       `json:"digest"`
		Details    modelDetails `json:"details"`
	}
	out := []tag{}
	for _, n := range s.cat.names {
		f := s.cat.files[n]
		out = append(out, tag{Name: tagName(f), Model: tagName(f), ModifiedAt: f.modified, Size: f.size, Digest: f.sha256(), Details: details(f)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": out})
}

func (s *Server) ps(w http.ResponseWriter, r *http.Request) {
	type running struct {
		Name          string       `json:"name"`
		Model         string       `json:"model"`
		Size          uint64       `json:"size"`
		Digest        string       `json:"digest"`
		Details       modelDetails `json:"details"`
		ExpiresAt     time.Time    `json:"expires_at"`
		SizeVRAM      uint64       `json:"size_vram"`
		ContextLength int          `json:"context_length,omitempty"`
	}
	out := []running{}
	for _, l := range s.reg.running() {
		ctx := 0
		if l.eng != nil {
			ctx = l.eng.contextSize()
		}
		s.reg.mu.Lock()
		exp := l.expires
		s.reg.mu.Unlock()
		if exp.IsZero() {
			exp = time.Now().Add(100 * 365 * 24 * time.Hour)
		}
		out = append(out, running{Name: tagName(l.file), Model: tagName(l.file), Size: l.memory, Digest: l.file.sha256(),
			Details: details(l.file), ExpiresAt: exp, SizeVRAM: l.vram, ContextLength: ctx})
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": out})
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model   string `json:"model"`
		Name    string `json:"name"` // the older field
		Verbose bool   `json:"verbose"`
	}
	if err := decodeBody(r, &req); err != nil {
		fail(w, r, err)
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	if req.Model == "" {
		fail(w, r, badRequest("model is required"))
		return
	}
	f, ok := s.cat.lookup(req.Model)
	if !ok {
		fail(w, r, errUnknownModel{req.Model})
		return
	}
	info := map[string]any{}
	for _, kv := range f.kvs {
		v := kv.Value
		if !req.Verbose && strings.HasPrefix(kv.Key, "tokenizer.ggml.") {
			if _, scalar := v.(string); !scalar && isArray(v) {
				v = nil // large arrays only with verbose, as Ollama
			}
		}
		info[kv.Key] = v
	}
	caps := []string{"completion"}
	tmpl := f.template
	if s.cfg.ChatTemplate != "" {
		tmpl = s.cfg.ChatTemplate
	}
	tmplErr := checkTemplate(f, s.cfg.ChatTemplate)
	if tmplErr == nil && styleOf(tmpl) != noThinking {
		caps = append(caps, "thinking")
	}
	if tmplErr == nil {
		if t, err := chat.Parse(tmpl); err == nil && t.ToolCaps().Tools {
			caps = append(caps, "tools")
		}
	}
	if isEmbedding(f.arch) {
		caps = []string{"embedding"}
	}
	resp := map[string]any{
		"modelfile":    fmt.Sprintf("FROM %s\n", f.path),
		"parameters":   "",
		"template":     f.template,
		"details":      details(f),
		"model_info":   info,
		"capabilities": caps,
		"modified_at":  f.modified,
	}
	if tmplErr != nil {
		resp["template_error"] = tmplErr.Error() // ours: chat requests get it
	}
	writeJSON(w, http.StatusOK, resp)
}

func isArray(v any) bool {
	switch v.(type) {
	case []string, []int32, []uint32, []float32, []uint8, []int8, []int16, []uint16, []int64, []uint64, []float64, []bool, []any:
		return true
	}
	return false
}
