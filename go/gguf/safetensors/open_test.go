package safetensors

import (
	"strings"
	"testing"

	"ggmlrs/internal/testfile"
)

// TestOpenRefusesPipesAndDevices: a named pipe as the checkpoint is refused
// at once (open(2) of one would wait for a writer), and so is an endless
// device.
func TestOpenRefusesPipesAndDevices(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{testfile.Fifo(t), "is not a regular file (a named pipe)"},
		{"/dev/zero", "/dev/zero is not a regular file (a character device)"},
	} {
		err := testfile.Within(t, "Open("+c.path+")", func() error { _, err := Open(c.path); return err })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): %v, want an error with %q", c.path, err, c.want)
		}
	}
}
