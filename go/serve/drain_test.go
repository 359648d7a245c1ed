package serve

import (
	"bufio"
	"fmt"
	"github.com/ggml-rs/ggml-rs/go/gguf"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRefusalBeforeBody: a client that sends its body in parts, slowly,
// and is refused before the server read it (a body over -max-body, JSON
// nested too deep, no API key) can send it all and then reads the
// refusal's status line: the server reads what is left of the body
// instead of closing the connection on it (which resets it).
func TestRefusalBeforeBody(t *testing.T) {
	const key = "k"
	_, url := newTestServer(t, Config{MaxBody: 64 << 10, APIKey: key}, headerOnlyModel(t, "tiny"))
	addr := strings.TrimPrefix(url, "http://")
	deep := strings.Repeat("[", 20000) // deeper than encoding/json's 10000
	cases := []struct {
		name, auth, start string
		size              int
		status            int
	}{
		{"too large", key, `{"model":"tiny","prompt":"`, 1 << 20, http.StatusRequestEntityTooLarge},
		{"too deep", key, deep, 1 << 20, http.StatusBadRequest},
		{"no key", "", `{"model":"tiny","prompt":"`, 1 << 20, http.StatusUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(60 * time.Second))
			auth := ""
			if c.auth != "" {
				auth = "Authorization: Bearer " + c.auth + "\r\n"
			}
			fmt.Fprintf(conn, "POST /api/generate HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", auth, c.size)
			body := c.start + strings.Repeat("x", c.size-len(c.start))
			// 16 parts, 100 ms apart: the last ones come well after the
			// server has answered (net/http waits 500 ms before closing).
			part := c.size / 16
			for i := 0; i < 16; i++ {
				if _, err := conn.Write([]byte(body[i*part : (i+1)*part])); err != nil {
					t.Fatalf("writing part %d of the body: %v (the server reset the connection)", i, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
		})
	}
}

// headerOnlyModel writes a GGUF file with a header and no tensors: enough
// for the catalog (listing, /api/show, refusals before loading).
func headerOnlyModel(t *testing.T, name string) string {
	t.Helper()
	b := gguf.NewBuilder()
	if err := b.Add("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}
