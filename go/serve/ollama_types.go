package serve

import (
	"encoding/json"
	"time"
)

// The request and response types of Ollama's API (handlers: ollama.go,
// ollama_embed.go, ollama_models.go).

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
