package main

import (
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
)

// TestModelPathMustBeARegularFile: every command that opens a model
// refuses a named pipe at once (open(2) of one waits for a writer, so the
// command used to hang) and an endless device, with one line on stderr.
func TestModelPathMustBeARegularFile(t *testing.T) {
	pipe := testfile.Fifo(t)
	for _, c := range []struct{ path, want string }{
		{pipe, "model file " + pipe + " is not a regular file (a named pipe)"},
		{"/dev/zero", "model file /dev/zero is not a regular file (a character device)"},
	} {
		for _, args := range [][]string{
			{"generate", c.path, "hi"},
			{"logits", c.path, "1"},
			{"embed", c.path, "hi"},
			{"inspect", c.path},
			{"bench", "-r", "1", c.path},
			{"tokenize", c.path, "hi"},
		} {
			type result struct {
				status int
				stderr string
			}
			r := testfile.Within(t, strings.Join(args, " "), func() result {
				status, _, stderr := capture(t, args...)
				return result{status, stderr}
			})
			first, _, _ := strings.Cut(r.stderr, "\n")
			if r.status != 1 || !strings.Contains(first, c.want) {
				t.Errorf("%v: status %d, stderr %q; want status 1 and %q", args, r.status, r.stderr, c.want)
			}
		}
	}
}
