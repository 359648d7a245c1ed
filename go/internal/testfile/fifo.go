package testfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Patience is how long refusing a named pipe may take in a test.
const Patience = 5 * time.Second

// Fifo makes a named pipe in a fresh directory and returns its path (see
// FifoAt).
func Fifo(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pipe")
	FifoAt(t, path)
	return path
}

// FifoAt makes a named pipe at path, replacing what is there. At the
// test's end it opens the pipe for writing without blocking, which
// releases a reader still blocked in open(2) (a regression), so that the
// test fails instead of hanging.
func FifoAt(t testing.TB, path string) {
	t.Helper()
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
}

// Within runs f and returns its result; it fails the test at once if f
// takes longer than Patience (f's goroutine is left to finish).
func Within[T any](t testing.TB, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(Patience):
		t.Fatalf("%s still waits after %v", what, Patience)
	}
	panic("unreachable")
}

// RefusesNonRegular checks that open refuses a named pipe at once (an
// open(2) of one waits for a writer) and an endless device, each with the
// "is not a regular file (...)" message.
func RefusesNonRegular(t *testing.T, open func(path string) error) {
	t.Helper()
	for _, c := range []struct{ path, want string }{
		{Fifo(t), "is not a regular file (a named pipe)"},
		{"/dev/zero", "/dev/zero is not a regular file (a character device)"},
	} {
		err := Within(t, "opening "+c.path, func() error { return open(c.path) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("opening %s: %v, want an error with %q", c.path, err, c.want)
		}
	}
}
