package main

import (
	"strings"
	"testing"
)

// TestServeRefusesRemote: serve listens on a loopback address only,
// unless -allow-remote is given (then it goes on, here to the missing
// model file).
func TestServeRefusesRemote(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		status, _, stderr := capture(t, "serve", "-addr", addr, "missing.gguf")
		if status != 2 || !strings.Contains(stderr, "-allow-remote") || !strings.Contains(stderr, "beyond this machine") {
			t.Errorf("-addr %s: status %d, stderr %q; want a refusal naming -allow-remote", addr, status, stderr)
		}
		status, _, stderr = capture(t, "serve", "-addr", addr, "-allow-remote", "missing.gguf")
		if status != 1 || !strings.Contains(stderr, "missing.gguf") {
			t.Errorf("-addr %s -allow-remote: status %d, stderr %q; want the missing model's error", addr, status, stderr)
		}
	}
}
