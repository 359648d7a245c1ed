package grammar

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/ggml-rs/ggml-rs/go/gguf"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/bpe"
	"github.com/ggml-rs/ggml-rs/go/tokenizer/spm"
)

// Vocab is what the matcher knows of a vocabulary: each token's piece (the
// bytes llama.cpp's grammar sampler matches: llama_token_to_piece with
// special = true) and which tokens end generation, with what is derived
// from them once: the pieces decoded to code points and arranged in a
// trie, so that a mask walks each shared prefix once. Build it once per
// model; it is immutable and shared by all states.
type Vocab struct {
	pieces [][]byte
	eog    []bool

	nodes     []trieNode
	childCP   []uint32
	childNode []int32
	order     []int32   // trie tokens in trie (DFS) order
	rank      []int32   // token id -> index in order, -1 when not in the trie
	endP      []partial // by order index: the partial UTF-8 the piece ends in
	contStart []int32   // tokens whose piece starts with a UTF-8 continuation byte
}

type trieNode struct {
	firstChild, nChild int32
	// tokens ending here: order[endLo:endHi]; strictly below:
	// order[endHi:subHi]
	endLo, endHi, subHi int32
}

// NewVocab builds a vocabulary from the pieces of its tokens (by id) and
// its end-of-generation tokens.
func NewVocab(pieces [][]byte, eog []int32) *Vocab {
	v := &Vocab{pieces: pieces, eog: make([]bool, len(pieces))}
	for _, id := range eog {
		if id >= 0 && int(id) < len(pieces) {
			v.eog[id] = true
		}
	}
	type tok struct {
		id  int32
		cps []uint32
		p   partial
	}
	var toks []tok
	v.rank = make([]int32, len(pieces))
	for id, pc := range pieces {
		v.rank[id] = -1
		if v.eog[id] || len(pc) == 0 || pc[0] == 0 {
			continue // EOG: allowed by CanEnd only; empty: never
		}
		if pc[0]>>6 == 2 {
			v.contStart = append(v.contStart, int32(id))
			continue
		}
		cps, p, ok := decodeUTF8(pc, partial{}, nil)
		if !ok {
			continue // never allowed (llama.cpp: invalid sequence)
		}
		toks = append(toks, tok{int32(id), cps, p})
	}
	sort.Slice(toks, func(i, j int) bool {
		a, b := toks[i].cps, toks[j].cps
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return toks[i].id < toks[j].id
	})
	v.order = make([]int32, len(toks))
	v.endP = make([]partial, len(toks))
	for i, t := range toks {
		v.order[i] = t.id
		v.endP[i] = t.p
		v.rank[t.id] = int32(i)
	}
	// build the trie breadth-first so that children are contiguous
	type job struct {
		node   int32
		lo, hi int32
		depth  int
	}
	v.nodes = append(v.nodes, trieNode{})
	queue := []job{{0, 0, int32(len(toks)), 0}}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		i := j.lo
		for i < j.hi && len(toks[i].cps) == j.depth {
			i++
		}
		n := &v.nodes[j.node]
		n.endLo, n.endHi, n.subHi = j.lo, i, j.hi
		n.firstChild = int32(len(v.childCP))
		for i < j.hi {
			c := toks[i].cps[j.depth]
			k := i + 1
			for k < j.hi && toks[k].cps[j.depth] == c {
				k++
			}
			child := int32(len(v.nodes))
			v.nodes = append(v.nodes, trieNode{})
			v.childCP = append(v.childCP, c)
			v.childNode = append(v.childNode, child)
			queue = append(queue, job{child, i, k, j.depth + 1})
			i = k
		}
		n = &v.nodes[j.node]
		n.nChild = int32(len(v.childCP)) - n.firstChild
	}
	return v
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return len(v.pieces) }

// IsEOG reports whether id ends generation.
func (v *Vocab) IsEOG(id int32) bool { return id >= 0 && int(id) < len(v.eog) && v.eog[id] }

// Piece is the bytes token id stands for in the grammar's eyes.
func (v *Vocab) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(v.pieces) {
		return nil
	}
	return v.pieces[id]
}

func (v *Vocab) pieceOf(id int32) string { return string(v.Piece(id)) }

// TrieNodes is the size of the vocabulary's trie.
func (v *Vocab) TrieNodes() int { return len(v.nodes) }

// Token types of GGUF's tokenizer.ggml.token_type.
const (
	typeUndefined   = 0
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// eogNames are the texts llama.cpp's vocabulary loader makes
// end-of-generation tokens.
var eogNames = map[string]bool{
	"<|eot_id|>": true, "<|im_end|>": true, "<|end|>": true, "<|return|>": true, "<|call|>": true,
	"<|flush|>": true, "<|calls|>": true, "<end_of_turn>": true, "<|endoftext|>": true, "</s>": true,
	"<|eom_id|>": true, "<EOT>": true, "_<EOT>": true, "[EOT]": true, "[EOS]": true, "<|end_of_text|>": true,
	"<end_of_utterance>": true, "<eos>": true, "<turn|>": true, "<|tool_response>": true,
	"<｜end▁of▁sentence｜>": true, "[e~[": true,
}

// fimNames: texts llama.cpp takes for the FIM pad, repo and separator
// tokens when the GGUF names none (they end generation too).
var fimNames = [3][]string{
	{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
	{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
	{"<|file_sep|>"},
}

// VocabFromGGUF builds the vocabulary of a GGUF's tokenizer metadata
// (tokenizer.ggml.model "gpt2": byte-level BPE, or "llama":
// SentencePiece) as llama.cpp's loader sees it: the pieces of
// llama_token_to_piece(special = true) (control, unknown and user-defined
// tokens give their text; normal ones their decoded bytes: GPT-2's byte
// alphabet mapped back, or "▁" as a space; byte tokens <0xNN> their
// byte; unused ones nothing), and its end-of-generation set (EOS, EOT,
// EOM, the FIM pad/repo/separator tokens and the texts llama.cpp lists).
// The TokenResolver tokenizes <name> references with special tokens, as
// llama.cpp's grammar parser does.
func VocabFromGGUF(f *gguf.File) (*Vocab, TokenResolver, error) {
	get := func(k string) any { v, _ := f.Get(k); return v }
	tokens, _ := get("tokenizer.ggml.tokens").([]string)
	if len(tokens) == 0 {
		return nil, nil, fmt.Errorf("grammar: no tokenizer.ggml.tokens")
	}
	model, _ := get("tokenizer.ggml.model").(string)
	types := make([]int32, len(tokens))
	if t, ok := get("tokenizer.ggml.token_type").([]int32); ok && len(t) == len(tokens) {
		copy(types, t)
	} else {
		for i := range types {
			types[i] = typeNormal
		}
	}
	texts := make([]string, len(tokens))
	for i, s := range tokens {
		if s == "" {
			s = "[EMPTY_" + strconv.Itoa(i) + "]"
		}
		texts[i] = s
	}
	id := func(k string) int32 {
		if v, ok := gguf.Int(get(k)); ok && v >= 0 && v < int64(len(tokens)) {
			return int32(v)
		}
		return -1
	}
	// raw: the token's piece is its text (llama.cpp's attr override to
	// CONTROL or USER_DEFINED for the tokens it recognises by text)
	raw := make([]bool, len(tokens))
	eog := map[int32]bool{}
	for i, s := range texts {
		if eogNames[s] {
			eog[int32(i)] = true
			raw[i] = true
		}
		switch s {
		case "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>":
			types[i] = typeUserDefined
		}
	}
	for k, key := range []string{"tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"} {
		t := id(key)
		if t < 0 {
			for i, s := range texts {
				for _, n := range fimNames[k] {
					if s == n && t < 0 {
						t = int32(i)
					}
				}
			}
		}
		if t >= 0 {
			eog[t] = true
			raw[t] = true
		}
	}
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if t := id(key); t >= 0 {
			eog[t] = true
		}
	}
	has := func(s string) (int32, bool) {
		for t := range eog {
			if texts[t] == s {
				return t, true
			}
		}
		return -1, false
	}
	_, ret := has("<|return|>")
	_, call := has("<|call|>")
	_, calls := has("<|calls|>")
	_, flush := has("<|flush|>")
	if end, ok := has("<|end|>"); ok && ((ret && (call || calls)) || ((call || calls) && flush)) {
		delete(eog, end)
		types[end], raw[end] = typeUserDefined, false
	}
	_, tr := has("<|tool_response>")
	_, pe := has("<|plamo:eos|>")
	if s, ok := has("</s>"); ok && (tr || pe) {
		delete(eog, s)
		types[s], raw[s] = typeNormal, false
	}

	pieces := make([][]byte, len(tokens))
	var resolve TokenResolver
	switch model {
	case "gpt2":
		runeByte := map[rune]byte{}
		for b := 0; b < 256; b++ {
			runeByte[bpe.ByteRune(byte(b))] = byte(b)
		}
		for i, s := range texts {
			pieces[i] = piece(types[i], raw[i], s, func(s string) []byte {
				var out []byte
				for _, r := range s {
					if b, ok := runeByte[r]; ok {
						out = append(out, b)
						continue
					}
					var u [4]byte
					n := copy(u[:], string(r))
					out = append(out, "[UNK_BYTE_0x"...)
					for _, c := range u[:n] {
						out = append(out, fmt.Sprintf("%02x", c)...)
					}
					out = append(out, s...)
					out = append(out, ']')
				}
				return out
			})
		}
		merges, _ := get("tokenizer.ggml.merges").([]string)
		pre, _ := get("tokenizer.ggml.pre").(string)
		if pre == "" {
			pre = "default"
		}
		if t, err := bpe.New(tokens, types, merges, pre); err == nil {
			resolve = oneToken(func(s string) []int32 { return t.Encode(s, true) })
		}
	case "llama":
		for i, s := range texts {
			pieces[i] = piece(types[i], raw[i], s, func(s string) []byte {
				return []byte(strings.ReplaceAll(s, "\u2581", " "))
			})
		}
		scores, _ := get("tokenizer.ggml.scores").([]float32)
		if t, err := spm.New(tokens, scores, types); err == nil {
			t.AddSpacePrefix = true
			if b, ok := get("tokenizer.ggml.add_space_prefix").(bool); ok {
				t.AddSpacePrefix = b
			}
			resolve = oneToken(func(s string) []int32 { return t.Encode(s, true) })
		}
	default:
		return nil, nil, fmt.Errorf("grammar: tokenizer model %q is not supported (gpt2 or llama)", model)
	}
	var eogIDs []int32
	for t := range eog {
		eogIDs = append(eogIDs, t)
	}
	sort.Slice(eogIDs, func(i, j int) bool { return eogIDs[i] < eogIDs[j] })
	return NewVocab(pieces, eogIDs), resolve, nil
}

func oneToken(enc func(string) []int32) TokenResolver {
	return func(s string) (int32, bool) {
		ids := enc(s)
		if len(ids) != 1 {
			return -1, false
		}
		return ids[0], true
	}
}

// piece is llama_vocab::token_to_piece with special = true.
func piece(typ int32, raw bool, text string, normal func(string) []byte) []byte {
	if raw {
		return []byte(text)
	}
	switch typ {
	case typeControl, typeUnknown, typeUserDefined:
		return []byte(text)
	case typeNormal:
		return normal(text)
	case typeByte:
		if len(text) >= 5 {
			if b, err := strconv.ParseUint(text[3:5], 16, 8); err == nil {
				return []byte{byte(b)}
			}
		}
		return []byte{0}
	}
	return nil
}

// EOG is the end-of-generation token ids, ascending.
func (v *Vocab) EOG() []int32 {
	var out []int32
	for i, e := range v.eog {
		if e {
			out = append(out, int32(i))
		}
	}
	return out
}
