package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fuzzSeeds are valid requests of every endpoint, which the fuzzer cuts
// and mutates.
var fuzzSeeds = []struct{ method, path, body string }{
	{"POST", "/api/generate", `{"model":"qwen3-small-q8_0","prompt":"Why is the sky blue?","stream":true,"options":{"num_predict":4,"temperature":0.5,"top_k":10,"top_p":0.9,"seed":3,"stop":["\n"]}}`},
	{"POST", "/api/generate", `{"model":"qwen3-small-q8_0","prompt":"hi","raw":true,"stream":false,"context":[1,2,3],"keep_alive":"1m","options":{"num_predict":3,"num_ctx":32}}`},
	{"POST", "/api/chat", `{"model":"qwen3-small-q8_0","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"stream":false,"options":{"num_predict":3,"min_p":0.1,"repeat_penalty":1.2}}`},
	{"POST", "/api/embed", `{"model":"all-minilm-l6-v2","input":["a cat","a dog"],"truncate":true,"dimensions":8}`},
	{"POST", "/api/embeddings", `{"model":"all-minilm-l6-v2","prompt":"a cat"}`},
	{"POST", "/api/show", `{"model":"qwen3-small-q8_0","verbose":true}`},
	{"GET", "/api/tags", ``},
	{"GET", "/api/ps", ``},
	{"GET", "/api/version", ``},
	{"POST", "/v1/chat/completions", `{"model":"qwen3-small-q8_0","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"seed":5,"stop":"x"}`},
	{"POST", "/v1/completions", `{"model":"qwen3-small-q8_0","prompt":["Once upon"],"max_tokens":3,"frequency_penalty":0.5,"presence_penalty":0.5}`},
	{"POST", "/v1/embeddings", `{"model":"all-minilm-l6-v2","input":["x","y"],"encoding_format":"base64"}`},
	{"GET", "/v1/models", ``},
	{"GET", "/v1/models/qwen3-small-q8_0", ``},
}

// mutate returns a broken or odd version of a JSON body.
func mutate(rng *rand.Rand, body string) string {
	switch rng.Intn(6) {
	case 0: // cut anywhere
		if len(body) == 0 {
			return body
		}
		return body[:rng.Intn(len(body))]
	case 1: // random bytes
		b := []byte(body)
		for i := rng.Intn(5) + 1; i > 0 && len(b) > 0; i-- {
			b[rng.Intn(len(b))] = byte(rng.Intn(256))
		}
		return string(b)
	case 2: // garbage
		b := make([]byte, rng.Intn(200))
		rng.Read(b)
		return string(b)
	default: // a value replaced by another of any type
		var v any
		if json.Unmarshal([]byte(body), &v) != nil {
			return body
		}
		replaceRandom(rng, &v, 0)
		out, _ := json.Marshal(v)
		return string(out)
	}
}

var oddValues = []any{nil, true, -1.0, 0.0, 1e300, -1e300, 3.5, 1 << 40, "", "x", strings.Repeat("é", 300), []any{}, []any{1.0, "a", nil},
	map[string]any{}, map[string]any{"role": 7}, -2147483649.0, 0.000001}

func replaceRandom(rng *rand.Rand, v *any, depth int) {
	switch x := (*v).(type) {
	case map[string]any:
		if len(x) == 0 || depth > 4 {
			break
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		k := keys[rng.Intn(len(keys))]
		if rng.Intn(3) == 0 {
			x[k] = oddValues[rng.Intn(len(oddValues))]
			return
		}
		e := x[k]
		replaceRandom(rng, &e, depth+1)
		x[k] = e
		return
	case []any:
		if len(x) == 0 || depth > 4 {
			break
		}
		i := rng.Intn(len(x))
		replaceRandom(rng, &x[i], depth+1)
		return
	}
	*v = oddValues[rng.Intn(len(oddValues))]
}

// TestFuzz sends random, cut and mutated requests to every endpoint from
// several clients at once. No request may get a 500 (every bad input is
// a 4xx that names the problem) or go unanswered, and afterwards the
// server still generates and embeds. GGML_RS_SERVE_FUZZ_ITERS sets the
// number of requests (default 600).
func TestFuzz(t *testing.T) {
	iters := 600
	if s := os.Getenv("GGML_RS_SERVE_FUZZ_ITERS"); s != "" {
		iters, _ = strconv.Atoi(s)
	}
	_, url := newTestServer(t, Config{Parallel: 2, Context: 64, MaxBody: 64 << 10}, modelPath(t, "qwen3-small-q8_0"), miniLM(t))
	client := &http.Client{Timeout: 60 * time.Second}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < iters/4; i++ {
				s := fuzzSeeds[rng.Intn(len(fuzzSeeds))]
				body := s.body
				if rng.Intn(8) != 0 {
					body = mutate(rng, body)
				}
				method := s.method
				if rng.Intn(20) == 0 {
					method = []string{"GET", "POST", "PUT", "DELETE"}[rng.Intn(4)]
				}
				req, _ := http.NewRequest(method, url+s.path, strings.NewReader(body))
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %s %.80q: %v", method, s.path, body, err))
					mu.Unlock()
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s %s %.120q: %d %s", method, s.path, body, resp.StatusCode, b))
					mu.Unlock()
				}
			}
		}(int64(w))
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	code, b := post(t, url+"/api/generate", `{"model":"qwen3-small-q8_0","prompt":"hi","raw":true,"stream":false,"options":{"num_predict":3}}`)
	if code != 200 {
		t.Fatalf("generate after the fuzz: %d %s", code, b)
	}
	code, b = post(t, url+"/api/embed", `{"model":"all-minilm-l6-v2","input":"hi"}`)
	if code != 200 {
		t.Fatalf("embed after the fuzz: %d %s", code, b)
	}
}
