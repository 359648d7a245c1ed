package safetensors

import (
	"testing"

	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
)

// TestOpenRefusesPipesAndDevices: a named pipe as the checkpoint is refused
// at once (open(2) of one would wait for a writer), and so is an endless
// device.
func TestOpenRefusesPipesAndDevices(t *testing.T) {
	testfile.RefusesNonRegular(t, func(path string) error { _, err := Open(path); return err })
}
