package llama

import (
	"hash/fnv"
	"log/slog"
	"math"
	"sync"

	"github.com/ggml-rs/ggml-rs/go/grammar"
	"github.com/ggml-rs/ggml-rs/go/grammar/schema"
)

// TokenData is a candidate token and its logit.
type TokenData struct {
	ID    int32
	Logit float32
}

// Grammar constrains a sequence's tokens (Ollama's sample.GrammarSampler
// holds one per request).
type Grammar struct {
	mu sync.Mutex
	s  *grammar.State
}

// NewGrammar compiles GBNF text for a vocabulary given as token ids and
// their pieces (the decoded text of each token) and its end-of-generation
// tokens. It returns nil when the grammar does not compile (the reason is
// logged), as Ollama's does.
func NewGrammar(text string, vocabIds []uint32, vocabValues []string, eogTokens []int32) *Grammar {
	v := vocabFor(vocabIds, vocabValues, eogTokens)
	g, err := grammar.Compile(text, "root", nil)
	if err != nil {
		slog.Error("llama: grammar does not compile", "error", err)
		return nil
	}
	return &Grammar{s: grammar.NewState(g, v)}
}

// Free releases the grammar (nothing to do: it is Go memory).
func (g *Grammar) Free() {}

// Apply sets the logits of the tokens the grammar does not allow next to
// -Inf. On a grammar error (its limits) every token is refused, so the
// sampler cannot leave the grammar.
func (g *Grammar) Apply(tokens []TokenData) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ninf := float32(math.Inf(-1))
	// A few candidates (after top-k) are checked one by one; many take the
	// whole mask at once.
	if len(tokens) <= 32 {
		for i := range tokens {
			if ok, err := g.s.Allows(tokens[i].ID); err != nil || !ok {
				tokens[i].Logit = ninf
			}
		}
		return
	}
	m, err := g.s.Allowed(nil)
	for i := range tokens {
		if err != nil || !m.Has(tokens[i].ID) {
			tokens[i].Logit = ninf
		}
	}
}

// Accept advances the grammar over token (an end-of-generation token where
// the grammar may end leaves it as it is). A token the grammar refuses is
// logged and ignored.
func (g *Grammar) Accept(token int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.s.Accept(token); err != nil {
		slog.Warn("llama: grammar refused an accepted token", "token", token, "error", err)
	}
}

// SchemaToGrammar converts a JSON schema to GBNF as llama.cpp's
// json_schema_to_grammar; nil when the schema is invalid.
func SchemaToGrammar(s []byte) []byte {
	g, err := schema.ToGrammar(s)
	if err != nil {
		slog.Debug("llama: invalid JSON schema", "error", err)
		return nil
	}
	return []byte(g)
}

// The vocabulary of the last grammar: Ollama builds the same pieces for
// every request of a model, and the trie is worth keeping.
var vocabCache struct {
	sync.Mutex
	key uint64
	n   int
	v   *grammar.Vocab
}

func vocabFor(ids []uint32, values []string, eog []int32) *grammar.Vocab {
	h := fnv.New64a()
	var buf [4]byte
	n := 0
	for i, id := range ids {
		if int(id)+1 > n {
			n = int(id) + 1
		}
		buf[0], buf[1], buf[2], buf[3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
		h.Write(buf[:])
		if i < len(values) {
			h.Write([]byte(values[i]))
		}
		h.Write([]byte{0xff})
	}
	for _, id := range eog {
		buf[0], buf[1], buf[2], buf[3] = byte(id), byte(id>>8), byte(id>>16), byte(id>>24)
		h.Write(buf[:])
	}
	key := h.Sum64()
	vocabCache.Lock()
	defer vocabCache.Unlock()
	if vocabCache.v != nil && vocabCache.key == key && vocabCache.n == n {
		return vocabCache.v
	}
	pieces := make([][]byte, n)
	for i, id := range ids {
		if i < len(values) {
			pieces[id] = []byte(values[i])
		}
	}
	v := grammar.NewVocab(pieces, eog)
	vocabCache.key, vocabCache.n, vocabCache.v = key, n, v
	return v
}
