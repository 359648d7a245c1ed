package backend

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
	"github.com/ggml-rs/ggml-rs/go/ml"
)

// TestPipesAndDevicesAreRefused: through the C ABI, a named pipe as the
// model path is refused at once (open(2) of one would wait for a writer),
// and so is an endless device; a model whose path names a pipe by the time
// its weights are loaded is refused too.
func TestPipesAndDevicesAreRefused(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{testfile.Fifo(t), "not a regular file (a named pipe)"},
		{"/dev/zero", "not a regular file (a character device)"},
	} {
		err := testfile.Within(t, "New("+c.path+")", func() error {
			b, err := New(c.path, ml.BackendParams{})
			if err == nil {
				b.Close()
			}
			return err
		})
		var gerr *Error
		if !errors.As(err, &gerr) || gerr.Status != StatusIO || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%s): %v, want a StatusIO error with %q", c.path, err, c.want)
		}
	}

	m := newTinyModel(3)
	data, _ := m.file.encode()
	path := writeFile(t, data)
	b := openModelT(t, path, ml.BackendParams{AllocMemory: true})
	testfile.FifoAt(t, path)
	err := testfile.Within(t, "Load", func() error { return b.Load(context.Background(), nil) })
	if err == nil || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
		t.Errorf("Load of a path now naming a pipe: %v", err)
	}
}
