package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// countingTokenizer counts what a model's tokenizer is asked to do: bytes
// in all, calls at once at most (each call lasting at least hold).
type countingTokenizer struct {
	decoder.Tokenizer
	hold time.Duration

	mu            sync.Mutex
	bytes, calls  int
	now, mostOnce int
}

func (c *countingTokenizer) Encode(text string, special bool) []int32 {
	c.mu.Lock()
	c.bytes += len(text)
	c.calls++
	c.now++
	c.mostOnce = max(c.mostOnce, c.now)
	c.mu.Unlock()
	time.Sleep(c.hold)
	defer func() { c.mu.Lock(); c.now--; c.mu.Unlock() }()
	return c.Tokenizer.Encode(text, special)
}

// countTokenizer loads the model and puts a counting tokenizer in front
// of the one the handlers use.
func countTokenizer(t *testing.T, s *Server, name string, hold time.Duration) *countingTokenizer {
	t.Helper()
	if err := s.Load(name); err != nil {
		t.Fatal(err)
	}
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	l := s.reg.models[name]
	c := &countingTokenizer{Tokenizer: l.tok, hold: hold}
	l.tok = c
	return c
}

// retained is the heap memory the process holds from the system.
func retained() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapSys - m.HeapReleased
}

func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestHugePrompt: prompts of 8 MB to a 256-token context, four at once
// through each generating endpoint, are refused with the context error
// without being tokenized (the tokenizer is asked for nothing), the
// server allocates a bounded multiple of the bodies for them, and the
// memory goes back to the system afterwards. A prompt that fits is still
// tokenized and served.
func TestHugePrompt(t *testing.T) {
	const name = "qwen3-small-q8_0"
	s, url := newTestServer(t, Config{Parallel: 2, Context: 256, MaxBody: 16 << 20, KeepAlive: time.Hour}, modelPath(t, name))
	tok := countTokenizer(t, s, name, 0)
	huge := strings.Repeat("many words ", 8<<20/11)
	hugeJSON, _ := json.Marshal(huge)
	bodies := map[string]string{
		"/api/generate":        fmt.Sprintf(`{"model":%q,"prompt":%s,"raw":true}`, name, hugeJSON),
		"/api/chat":            fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s}]}`, name, hugeJSON),
		"/v1/completions":      fmt.Sprintf(`{"model":%q,"prompt":%s}`, name, hugeJSON),
		"/v1/chat/completions": fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s}]}`, name, hugeJSON),
	}
	// The baseline: the test's own bodies live (until the end), nothing
	// else held.
	runtime.GC()
	debug.FreeOSMemory()
	before, alloc0 := retained(), allocated()
	n := 0
	for path, body := range bodies {
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			n++
			go func() {
				defer wg.Done()
				resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var e map[string]any
				json.NewDecoder(resp.Body).Decode(&e)
				if msg := fmt.Sprint(e["error"]); resp.StatusCode != 400 || !strings.Contains(msg, "does not fit the 256-token context") {
					t.Errorf("%s: %d %v, want 400 and the context error", path, resp.StatusCode, e)
				}
			}()
		}
		wg.Wait()
	}
	// Each body is decoded (the JSON decoder's buffer, the prompt's
	// string) and, for chats, rendered: several times its size (7.5 when
	// written), not the ~45 times that tokenizing it cost.
	if got, bound := allocated()-alloc0, uint64(n)*uint64(len(huge))*16; got > bound {
		t.Errorf("%d huge prompts allocated %d MB, more than %d MB", n, got>>20, bound>>20)
	}
	tok.mu.Lock()
	asked := tok.bytes
	tok.mu.Unlock()
	if asked > n*256*maxTokenBytesOf(s, name) {
		t.Errorf("the tokenizer was asked for %d bytes", asked)
	}
	// The memory goes back (the reclaim comes a second after the last
	// large request; without it the heap kept about twice its peak's live
	// memory for minutes).
	deadline := time.Now().Add(30 * time.Second)
	for retained() > before+32<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the heap holds %d MB from the system, %d MB before the huge prompts", retained()>>20, before>>20)
		}
		time.Sleep(100 * time.Millisecond)
	}
	runtime.KeepAlive(bodies)
	// A prompt that fits is tokenized and generated from.
	code, b := post(t, url+"/api/generate", fmt.Sprintf(`{"model":%q,"prompt":"many words","raw":true,"stream":false,"options":{"num_predict":2}}`, name))
	if code != 200 || tok.calls == 0 {
		t.Fatalf("a prompt that fits: %d %s (tokenized %d times)", code, b, tok.calls)
	}
}

func maxTokenBytesOf(s *Server, name string) int {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return s.reg.models[name].maxTokenBytes
}

// TestPrepSlots: many requests at once render and tokenize their prompts
// a few at a time (the prep slots), and all are served.
func TestPrepSlots(t *testing.T) {
	const name = "qwen3-small-q8_0"
	s, url := newTestServer(t, Config{Parallel: 4, Context: 256, KeepAlive: time.Hour}, modelPath(t, name))
	s.prep = make(slots, 2)
	tok := countTokenizer(t, s, name, 50*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, b := post(t, url+"/api/chat", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hello %d"}],"stream":false,"options":{"num_predict":1}}`, name, i))
			if code != 200 {
				t.Errorf("request %d: %d %s", i, code, b)
			}
		}()
	}
	wg.Wait()
	tok.mu.Lock()
	defer tok.mu.Unlock()
	if tok.calls != 8 || tok.mostOnce > 2 {
		t.Fatalf("%d prompts tokenized, %d at once at most; want 8, at most 2", tok.calls, tok.mostOnce)
	}
}
