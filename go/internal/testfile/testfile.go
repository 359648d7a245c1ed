// Package testfile has file helpers shared by tests: hashes of inputs
// checked against committed golden files, and named pipes for the tests
// that model paths naming one are refused without blocking.
package testfile

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"testing"
)

// SHA256 is the hex sha256 of the file at path; it fails the test if the
// file cannot be read.
func SHA256(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
