package serve

import (
	"encoding/json"
	"math"
	"net/http"
	"time"
)

// Ollama's /api/embed and /api/embeddings.

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
