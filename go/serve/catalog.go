package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/internal/regfile"
	"github.com/ggml-rs/ggml-rs/go/quantize"
)

// modelFile is a GGUF file the server can serve, as its header describes
// it (read once, when the file is named).
type modelFile struct {
	name     string // the file's name without .gguf
	path     string
	size     int64
	modified time.Time
	arch     string
	kvs      []gguf.KV
	params   uint64 // weights' element count
	fileType string // Q4_0, F16, ... ("" when the file does not say)
	template string // tokenizer.chat_template

	digestOnce sync.Once
	digest     string
}

// ModelName is a file's model name: its base name without .gguf.
func ModelName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".gguf")
}

// readModelFile reads a GGUF header.
func readModelFile(path string) (*modelFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := regfile.Check(path, st.Mode()); err != nil {
		return nil, err
	}
	g, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	f := &modelFile{name: ModelName(path), path: path, size: st.Size(), modified: st.ModTime(), kvs: g.KVs}
	if v, ok := g.Get("general.architecture"); ok {
		f.arch, _ = v.(string)
	}
	if f.arch == "" {
		return nil, fmt.Errorf("%s: no general.architecture", path)
	}
	if v, ok := g.Get("tokenizer.chat_template"); ok {
		f.template, _ = v.(string)
	}
	if v, ok := g.Get("general.file_type"); ok {
		if n, ok := gguf.Int(v); ok {
			f.fileType = quantize.FileType(n).String()
		}
	}
	for _, t := range g.Tensors {
		f.params += t.Elements()
	}
	return f, nil
}

// sha256 of the file, computed once, on first demand (Ollama's digest).
func (f *modelFile) sha256() string {
	f.digestOnce.Do(func() {
		r, err := os.Open(f.path)
		if err != nil {
			return
		}
		defer r.Close()
		h := sha256.New()
		if _, err := io.Copy(h, r); err == nil {
			f.digest = hex.EncodeToString(h.Sum(nil))
		}
	})
	return f.digest
}

// parameterSize is the weights' count as Ollama shows it ("7.6B", "494M").
func (f *modelFile) parameterSize() string {
	p := float64(f.params)
	switch {
	case p >= 1e9:
		return fmt.Sprintf("%.1fB", p/1e9)
	case p >= 1e6:
		return fmt.Sprintf("%.0fM", p/1e6)
	case p >= 1e3:
		return fmt.Sprintf("%.0fK", p/1e3)
	}
	return fmt.Sprint(f.params)
}

// catalog is the models the server knows: the files named on the command
// line and the GGUF files of the directories named there.
type catalog struct {
	files map[string]*modelFile
	names []string // sorted
}

// newCatalog reads each path: a GGUF file, or a directory whose *.gguf
// files are taken (files that are not readable GGUF models are skipped
// with a warning through warn; a named file that fails is an error). Two
// files of one name are an error.
func newCatalog(paths []string, warn func(string)) (*catalog, error) {
	c := &catalog{files: map[string]*modelFile{}}
	add := func(path string) error {
		f, err := readModelFile(path)
		if err != nil {
			return err
		}
		if old, dup := c.files[f.name]; dup {
			return fmt.Errorf("two models named %s: %s and %s", f.name, old.path, path)
		}
		c.files[f.name] = f
		return nil
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			if err := add(p); err != nil {
				return nil, err
			}
			continue
		}
		matches, err := filepath.Glob(filepath.Join(p, "*.gguf"))
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			if err := add(m); err != nil {
				warn(fmt.Sprintf("skipping %s: %v", m, err))
			}
		}
	}
	for n := range c.files {
		c.names = append(c.names, n)
	}
	sort.Strings(c.names)
	return c, nil
}

// lookup finds a model by the name a client gives: NAME, NAME:latest
// (Ollama's default tag), or the file's path.
func (c *catalog) lookup(name string) (*modelFile, bool) {
	if f, ok := c.files[name]; ok {
		return f, true
	}
	if n, ok := strings.CutSuffix(name, ":latest"); ok {
		if f, ok := c.files[n]; ok {
			return f, true
		}
	}
	for _, f := range c.files {
		if f.path == name {
			return f, true
		}
	}
	return nil, false
}
