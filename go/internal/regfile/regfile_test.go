package regfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
)

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	pipe := testfile.Fifo(t)
	for _, c := range []struct{ path, want string }{
		{pipe, "is not a regular file (a named pipe)"},
		{"/dev/zero", "/dev/zero is not a regular file (a character device)"},
		{t.TempDir(), "is not a regular file (a directory)"},
		{filepath.Join(t.TempDir(), "none"), "no such file"},
	} {
		err := testfile.Within(t, "Open("+c.path+")", func() error {
			f, err := Open(c.path)
			if err == nil {
				f.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): %v, want an error with %q", c.path, err, c.want)
		}
	}
	err := testfile.Within(t, "ReadFile(pipe)", func() error { _, err := ReadFile(pipe, 1<<20); return err })
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("ReadFile(pipe): %v", err)
	}
}

func TestReadFileBoundsTheSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(path, 10); err != nil || string(b) != "0123456789" {
		t.Errorf("ReadFile(limit 10): %q, %v", b, err)
	}
	if _, err := ReadFile(path, 9); err == nil || !strings.Contains(err.Error(), "is larger than the 9 bytes this reader accepts") {
		t.Errorf("ReadFile(limit 9): %v", err)
	}
	// A regular file reads as ever after the non-blocking open.
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 6); n != 4 || err != nil || string(buf) != "6789" {
		t.Errorf("ReadAt: %d %v %q", n, err, buf)
	}
}
