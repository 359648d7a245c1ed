// Package rpcserver starts a ggml-rs RPC server on 127.0.0.1 for tests.
package rpcserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Start runs target/release/ggml-rs-rpc-server (found from the go module
// root, repo's ../target) with args on a free port, waits until it accepts
// and returns its endpoint and a function giving its output so far; the
// server is killed when the test ends. Without the binary the test is
// skipped, or fails under make test (GGML_RS_MODELS set), which builds it.
func Start(t testing.TB, args ...string) (endpoint string, output func() string) {
	t.Helper()
	server, err := filepath.Abs(filepath.Join(moduleRoot(t), "..", "target", "release", "ggml-rs-rpc-server"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(server); err != nil {
		if os.Getenv("GGML_RS_MODELS") != "" {
			t.Fatalf("no RPC server binary: %v", err)
		}
		t.Skipf("no RPC server binary (%v): run cargo build --release", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	endpoint = fmt.Sprintf("127.0.0.1:%d", port)
	srv := exec.Command(server, append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)...)
	out := &lockedBuffer{}
	srv.Stdout, srv.Stderr = out, out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", endpoint, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RPC server did not start: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return endpoint, out.String
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no go.mod above %s", dir)
		}
	}
}

// lockedBuffer collects the server's output, which exec copies from
// another goroutine while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RunChild starts a server with serverArgs and runs the tests matching
// pattern again in a child process of this test binary, with the server
// as its only remote device (GGML_RS_RPC_SERVERS) and childEnv=1 set so
// the child knows it is one. It fails the test if the child fails, and
// returns the server's and the child's output.
func RunChild(t testing.TB, pattern, childEnv string, serverArgs ...string) (server, child string) {
	t.Helper()
	endpoint, srvOut := Start(t, serverArgs...)
	cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.v")
	cmd.Env = append(os.Environ(), "GGML_RS_RPC_SERVERS="+endpoint, childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s with an RPC device at %s: %v\n%s\nserver:\n%s", pattern, endpoint, err, out, srvOut())
	}
	return srvOut(), string(out)
}
