package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ggml-rs/ggml-rs/go/internal/tinymodel"
	"github.com/ggml-rs/ggml-rs/go/model/llama"
)

// runnerChildEnv makes the test binary run the runner with the arguments
// it holds (one a line) instead of the tests: TestContextIsBounded runs
// commands in a child process to see what they allocate.
const runnerChildEnv = "GGML_RS_RUNNER_CHILD"

// childAddressSpace caps a child's address space, so that a command that
// tries a huge allocation fails at once instead of taking the machine's
// memory.
const childAddressSpace = 4 << 30

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(runnerChildEnv); ok {
		lim := syscall.Rlimit{Cur: childAddressSpace, Max: childAddressSpace}
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
			os.Stderr.WriteString("setrlimit: " + err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(run(strings.Split(args, "\n")))
	}
	os.Exit(m.Run())
}

// childRun is what a command run in a child process did.
type childRun struct {
	status         int
	stdout, stderr string
	maxRSS         int64 // KiB
	took           time.Duration
}

// runChild runs the runner's command line in a child process (at most two
// minutes).
func runChild(t *testing.T, args ...string) childRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), runnerChildEnv+"="+strings.Join(args, "\n"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	r := childRun{stdout: out.String(), stderr: errb.String(), took: time.Since(t0)}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v: still running after %v; stderr %q", args, r.took, r.stderr)
	}
	r.status = cmd.ProcessState.ExitCode()
	r.maxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	return r
}

// TestContextIsBounded: a -ctx past int32, or whose cache would not fit in
// memory, is refused with one line before anything big is allocated (it
// once died of Go's "cannot allocate" with a goroutine dump, or grew to
// gigabytes first); nonsense is refused too; a normal -ctx computes.
func TestContextIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wide.gguf")
	// 4 layers of 8 key/value heads of 32: 4 KiB of cache a token, so 10^9
	// tokens would need 3.7 TiB, more than any test machine has free.
	wide := tinymodel.TinyConfig{Layers: 4, Hidden: 256, Heads: 8, KVHeads: 8, FeedForward: 64}
	if _, err := tinymodel.WriteTiny(path, llama.Qwen3, wide, 3); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"logits", "-ctx", "2147483648"}, 2, "-ctx 2147483648: 1 to 2147483647 tokens"},
		{[]string{"logits", "-ctx", "1000000000"}, 1, "-ctx 1000000000 does not fit in memory: the cache of 1000000000 tokens needs"},
		{[]string{"logits", "-ctx", "0"}, 2, "-ctx 0"},
		{[]string{"logits", "-ctx", "-7"}, 2, "-ctx -7"},
		{[]string{"logits", "-batch", "4294967296"}, 2, "-batch 4294967296"},
		{[]string{"logits", "-seqs", "-ctx", "1500000000"}, 2, "at most 2147483647 tokens in all"},
		{[]string{"logits", "-seqs", "-ctx", "500000000"}, 1, "-ctx 500000000 does not fit in memory: the cache of 1000000000 tokens"},
		{[]string{"generate", "-n", "1", "-ctx", "1000000000"}, 1, "-ctx 1000000000 does not fit in memory"},
		{[]string{"serve", "-addr", "127.0.0.1:0", "-ctx", "2147483648"}, 1, "-ctx 2147483648"},
		{[]string{"serve", "-addr", "127.0.0.1:0", "-ctx", "1000000000"}, 1, "-ctx 1000000000"},
	} {
		args := append(append([]string{}, c.args...), "-threads", "1", path)
		switch c.args[0] {
		case "logits":
			args = append(args, "1,2,3", "4,5")
		case "generate":
			args = append(args, "hello")
		}
		r := runChild(t, args...)
		first, _, _ := strings.Cut(r.stderr, "\n")
		if r.status != c.status || !strings.Contains(first, c.want) || !strings.HasPrefix(first, "ggml-rs") {
			t.Errorf("%v: status %d, stderr %.300q; want status %d and a first line with %q", c.args, r.status, r.stderr, c.status, c.want)
		}
		// The error, perhaps a usage hint: no more.
		if n := strings.Count(r.stderr, "\n"); n > 2 || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("%v: %d lines on stderr: %.500s", c.args, n, r.stderr)
		}
		t.Logf("%v: status %d in %v, at most %d MiB resident", c.args, r.status, r.took.Round(time.Millisecond), r.maxRSS>>10)
		if r.maxRSS > 1<<20 || r.took > time.Minute {
			t.Errorf("%v: the refusal took %v and %d MiB", c.args, r.took, r.maxRSS>>10)
		}
	}
	// A context that fits computes, in the same child process setting.
	r := runChild(t, "logits", "-threads", "1", "-ctx", "64", path, "1,2,3")
	var res struct {
		NVocab int `json:"n_vocab"`
		Logits []float32
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); r.status != 0 || err != nil || res.NVocab != 300 || len(res.Logits) != 300 {
		t.Fatalf("-ctx 64: status %d, %v, n_vocab %d, %d logits; stderr %q", r.status, err, res.NVocab, len(res.Logits), r.stderr)
	}
}
