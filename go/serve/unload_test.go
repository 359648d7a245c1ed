package serve

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// gateEngine makes the loaded model's engine wait at every sampling until
// gate is closed, and end generations only at num_predict (no EOG), with
// a letter of text per token; entered gets a value at the first wait.
func gateEngine(t *testing.T, s *Server, name string) (gate, entered chan struct{}) {
	t.Helper()
	if err := s.Load(name); err != nil {
		t.Fatal(err)
	}
	s.reg.mu.Lock()
	e := s.reg.models[name].eng
	s.reg.mu.Unlock()
	gate, entered = make(chan struct{}), make(chan struct{}, 1)
	// Set while the engine is idle: its next request's submit orders
	// these writes before its reads.
	e.tok = noEOG{byteDecoder{}}
	e.observe = func(*genRequest, []float32) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-gate
	}
	return gate, entered
}

// psModels is /api/ps's list: name and expires_at.
func psModels(t *testing.T, url string) map[string]time.Time {
	t.Helper()
	resp, err := http.Get(url + "/api/ps")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ps struct {
		Models []struct {
			Name      string    `json:"name"`
			ExpiresAt time.Time `json:"expires_at"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&ps); err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, m := range ps.Models {
		out[m.Name] = m.ExpiresAt
	}
	return out
}

// refs is how many requests use the model.
func refs(s *Server, name string) int {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if l := s.reg.models[name]; l != nil {
		return l.refs
	}
	return 0
}

// TestUnloadWhileStreaming: keep_alive 0 with no prompt while three
// streams run marks the model to unload, as Ollama does: the streams
// finish normally (every token, done_reason "length"), /api/ps lists the
// model meanwhile with expires_at now, and once the last stream ends the
// model is unloaded. A request that comes after the unload request keeps
// the model loaded with its own keep_alive.
func TestUnloadWhileStreaming(t *testing.T) {
	const name = "qwen3-small-q8_0"
	s, url := newTestServer(t, Config{Parallel: 4, Context: 256, KeepAlive: time.Hour}, modelPath(t, name))
	stream := func(done chan<- string, keep string) {
		body := fmt.Sprintf(`{"model":%q,"prompt":"x","raw":true,"keep_alive":%s,"options":{"num_predict":20}}`, name, keep)
		code, b := post(t, url+"/api/generate", body)
		ls := lines(t, b)
		var last map[string]any
		if len(ls) > 0 {
			last = ls[len(ls)-1]
		}
		if code != 200 || last["done_reason"] != "length" || last["eval_count"] != 20.0 || len(ls) != 21 {
			done <- fmt.Sprintf("%d, %d lines, last %v", code, len(ls), last)
			return
		}
		done <- ""
	}
	gate, entered := gateEngine(t, s, name)
	done := make(chan string, 3)
	for range 3 {
		go stream(done, `"1h"`)
	}
	deadline := time.Now().Add(60 * time.Second)
	for refs(s, name) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests use the model, want 3", refs(s, name))
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-entered
	before := time.Now()
	code, b := post(t, url+"/api/generate", fmt.Sprintf(`{"model":%q,"keep_alive":0}`, name))
	if code != 200 || !strings.Contains(string(b), `"done_reason":"unload"`) {
		t.Fatalf("unload: %d %s", code, b)
	}
	exp, listed := psModels(t, url)[name+":latest"]
	if !listed || exp.Before(before.Add(-time.Second)) || exp.After(time.Now().Add(time.Second)) {
		t.Fatalf("while the streams run, /api/ps: listed %v, expires_at %v (want now, %v)", listed, exp, before)
	}
	close(gate)
	for range 3 {
		if msg := <-done; msg != "" {
			t.Fatalf("a stream did not finish normally: %s", msg)
		}
	}
	for len(psModels(t, url)) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the streams ended and the model is still loaded")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Unload asked for, then a request with its own keep_alive: that one
	// wins, as in Ollama.
	gate, entered = gateEngine(t, s, name)
	go stream(done, `"1h"`)
	<-entered
	if code, b := post(t, url+"/api/generate", fmt.Sprintf(`{"model":%q,"keep_alive":0}`, name)); code != 200 {
		t.Fatalf("unload: %d %s", code, b)
	}
	go stream(done, `"1h"`)
	for refs(s, name) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests use the model, want 2", refs(s, name))
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(gate)
	for range 2 {
		if msg := <-done; msg != "" {
			t.Fatalf("a stream did not finish normally: %s", msg)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if exp, listed := psModels(t, url)[name+":latest"]; !listed || exp.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("after a later request with keep_alive 1h: listed %v, expires_at %v", listed, exp)
	}
}
