package serve

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ggml-rs/ggml-rs/go/chat"
)

// Ollama's model listing: /api/version, /api/tags, /api/ps, /api/show.

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
