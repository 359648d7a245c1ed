package ml

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestLibOllamaPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no executable path on this system:", err)
	}
	if eval, err := filepath.EvalSymlinks(exe); err == nil {
		exe = eval
	}
	if LibOllamaPath != filepath.Dir(exe) {
		t.Errorf("LibOllamaPath = %q, want the executable's directory %q", LibOllamaPath, filepath.Dir(exe))
	}
}

func TestLibraryPaths(t *testing.T) {
	if got := LibraryPaths(nil); !slices.Equal(got, []string{LibOllamaPath}) {
		t.Errorf("LibraryPaths(nil) = %q", got)
	}
	devs := []DeviceInfo{
		{LibraryPath: []string{"/a", LibOllamaPath}},
		{},
		{LibraryPath: []string{"/b", "/a"}},
	}
	if got, want := LibraryPaths(devs), []string{LibOllamaPath, "/a", "/b"}; !slices.Equal(got, want) {
		t.Errorf("LibraryPaths = %q, want %q", got, want)
	}
}
