// Package testmodel finds the generated models tests run on: make test
// writes them and names their folder in GGML_RS_MODELS (and all-MiniLM in
// GGML_RS_MINILM), so a missing one fails there; run by hand without the
// variable, a test looks in the repository's .cache and skips what is not
// there.
package testmodel

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// root is the repository's root, from this file's place in it.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// find returns path, failing the test when env was set (make test) and
// the file is missing, skipping it otherwise.
func find(t testing.TB, path string, required bool) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if required {
			t.Fatalf("%s is missing (make models writes it; make test does)", path)
		}
		t.Skipf("%s is not there (make models writes it; make test does)", path)
	}
	return path
}

// Path is the generated model name (e.g. "qwen3-small-q8_0").
func Path(t testing.TB, name string) string {
	t.Helper()
	dir, required := os.LookupEnv("GGML_RS_MODELS")
	if !required {
		dir = filepath.Join(root(), ".cache", "models")
	}
	return find(t, filepath.Join(dir, name+".gguf"), required)
}

// MiniLM is the converted all-MiniLM-L6-v2.
func MiniLM(t testing.TB) string {
	t.Helper()
	path, required := os.LookupEnv("GGML_RS_MINILM")
	if !required {
		path = filepath.Join(root(), ".cache", "all-minilm-l6-v2.gguf")
	}
	return find(t, path, required)
}
