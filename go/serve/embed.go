package serve

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/ggml-rs/ggml-rs/go/model/bert"
)

// embedder serves an embedding model: one batch of texts at a time (each
// batch computes every text together).
type embedder struct {
	mu sync.Mutex
	m  *bert.Model
}

// errTooLong is an input longer than the model's context with truncation
// off.
type errTooLong struct{ msg string }

func (e errTooLong) Error() string { return e.msg }

// tokenize returns the tokens of each text and their count. A text
// longer than the model's context is cut when truncate is set, and
// refused otherwise.
func (e *embedder) tokenize(texts []string, truncate bool) ([][]int32, int, error) {
	seqs := make([][]int32, len(texts))
	n := 0
	for i, t := range texts {
		ids, cut := e.m.Tokenize(t)
		if cut && !truncate {
			return nil, 0, errTooLong{fmt.Sprintf("input %d is longer than the model's %d-token context (truncate is off)", i, e.m.Context)}
		}
		seqs[i] = ids
		n += len(ids)
	}
	return seqs, n, nil
}

// embed returns the embedding of each token sequence (pooled and
// normalized as the model's metadata says: what `ggml-rs embed` prints).
func (e *embedder) embed(seqs [][]int32) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return e.m.Embed(seqs)
}
