package ml

import (
	"os"
	"path/filepath"
	"slices"
)

// LibOllamaPath is, in Ollama, the directory its ggml backend libraries
// (libggml-cpu-*.so, cuda_v12/, rocm/, ...) are loaded from. ggml-rs links
// ggml statically into its own library (libggml_rs.a, built into the
// executable), so nothing is ever loaded from it: it holds the directory
// of the running executable (symlinks resolved), which is where Ollama
// fell back to when no library directory existed, or "" if that cannot be
// determined. It is kept so that code passing it on (for example to a
// subprocess's environment) works unchanged.
var LibOllamaPath string = func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if eval, err := filepath.EvalSymlinks(exe); err == nil {
		exe = eval
	}
	return filepath.Dir(exe)
}()

// LibraryPaths returns, as in Ollama, LibOllamaPath followed by the
// LibraryPath entries of the given devices, each directory once, in
// order of first appearance. The devices this project reports have no
// LibraryPath (their backends are built in), so for them it is just
// [LibOllamaPath].
func LibraryPaths(l []DeviceInfo) []string {
	paths := []string{LibOllamaPath}
	for _, d := range l {
		for _, dir := range d.LibraryPath {
			if !slices.Contains(paths, dir) {
				paths = append(paths, dir)
			}
		}
	}
	return paths
}
