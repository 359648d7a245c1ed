package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

func TestScanHexLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n", []string{""}},
		{"6869", []string{"hi"}},
		{"6869\n", []string{"hi"}},
		{"6869\r\n\n6a", []string{"hi", "", "j"}},
		{"6869\n\n", []string{"hi", ""}},
		{"00ff\n", []string{"\x00\xff"}},
	} {
		var got []string
		err := scanHexLines(strings.NewReader(c.in), "x", maxHexLine, func(s string) error {
			got = append(got, s)
			return nil
		})
		if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	err := scanHexLines(strings.NewReader("6869\nzz\n"), "x", maxHexLine, func(string) error { return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "x:2: not hex") {
		t.Errorf("bad hex: %v", err)
	}
	// The limit is on the hex digits of a line, its line end aside.
	for _, in := range []string{"01234567", "01234567\n", "01234567\r\n"} {
		if err := scanHexLines(strings.NewReader(in), "x", 8, func(string) error { return nil }); err != nil {
			t.Errorf("%q, limit 8: %v", in, err)
		}
	}
	for _, in := range []string{"0123456789", "0123456789\n", "01\n0123456789\n"} {
		err := scanHexLines(strings.NewReader(in), "x", 8, func(string) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "line longer than 8 B of hex") {
			t.Errorf("%q, limit 8: %v", in, err)
		}
	}
}

// endless reads as an endless line of hex digits and counts what was read.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// TestScanHexLinesEndlessLine: a line without end is an error once it
// passes the limit: what was read and allocated stays near the limit (the
// input used to be read whole, and so an endless one until Go's fatal
// out-of-memory).
func TestScanHexLinesEndlessLine(t *testing.T) {
	in := &endless{}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	go func() {
		done <- scanHexLines(in, "-", maxHexLine, func(string) error { return nil })
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("an endless line is still being read after 60 s")
	}
	runtime.ReadMemStats(&after)
	if err == nil || err.Error() != "-:1: line longer than 64.0 MiB of hex, the limit of tokenize -batch" {
		t.Fatalf("endless line: %v", err)
	}
	if in.n > maxHexLine+2 {
		t.Errorf("read %d bytes of a line limited to %d", in.n, maxHexLine)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*maxHexLine {
		t.Errorf("allocated %d MiB reading a line limited to %d MiB", alloc>>20, maxHexLine>>20)
	}
}

// TestTokenizeBatchStreams: tokenize -batch on an endless line through a
// pipe on stdin ends with an error (not out of memory), and its output
// keeps the format scripts/parity.py compares with tools/llama-ref.
func TestTokenizeBatchStreams(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	if _, err := tinymodel.WriteTiny(path, llama.Qwen3, tinymodel.DefaultTiny, 7); err != nil {
		t.Fatal(err)
	}
	model, _ := json.Marshal(path)

	// The exact bytes: no results, then two.
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	status, out, errs := capture(t, "tokenize", "-batch", empty, path)
	head := fmt.Sprintf(`{"model":%s,"n_vocab":%d,"results":[`, model, 300)
	if status != 0 || out != head+"]}\n" {
		t.Fatalf("empty batch: status %d, %q, %q", status, out, errs)
	}
	two := filepath.Join(dir, "two")
	os.WriteFile(two, []byte(hex.EncodeToString([]byte("hello world"))+"\n\n"), 0o644)
	status, out, errs = capture(t, "tokenize", "-batch", two, path)
	var r struct {
		Results []struct{ Plain, Special json.RawMessage }
	}
	if status != 0 || json.Unmarshal([]byte(out), &r) != nil || len(r.Results) != 2 {
		t.Fatalf("two texts: status %d, %q, %q", status, out, errs)
	}
	want := head
	for i, x := range r.Results {
		if i > 0 {
			want += ","
		}
		want += fmt.Sprintf("\n{\"plain\":%s,\"special\":%s}", x.Plain, x.Special)
	}
	if want += "]}\n"; out != want {
		t.Errorf("two texts:\n%q\nwant\n%q", out, want)
	}

	// An endless line on stdin.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	go func() {
		defer pw.Close()
		io.Copy(pw, &endless{}) // until the reader is closed
	}()
	oldIn := os.Stdin
	os.Stdin = pr
	defer func() { os.Stdin = oldIn }()
	type result struct {
		status int
		errs   string
	}
	done := make(chan result, 1)
	go func() {
		status, _, errs := capture(t, "tokenize", "-batch", "-", path)
		done <- result{status, errs}
	}()
	select {
	case res := <-done:
		if res.status != 1 || !strings.Contains(res.errs, "-:1: line longer than 64.0 MiB of hex") || strings.Contains(res.errs, "goroutine") {
			t.Errorf("endless line on stdin: status %d, stderr %q", res.status, res.errs)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("tokenize -batch - still reads an endless line after 60 s")
	}
}
