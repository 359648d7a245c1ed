package grammar

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

// The golden files (make grammar-golden) hold llama.cpp's allowed-token
// sets along token sequences; TestGolden replays them through ours.

type goldenMask struct {
	N   int     `json:"n"`
	H   string  `json:"h"`
	IDs []int32 `json:"ids"`
}

type goldenSeq struct {
	Kind        string       `json:"kind"`
	Tokens      []int32      `json:"tokens"`
	Masks       []goldenMask `json:"masks"`
	AcceptError *int         `json:"accept_error"`
	Stopped     string       `json:"stopped"`
}

type goldenGrammar struct {
	Name      string      `json:"name"`
	Error     bool        `json:"error"`
	Sequences []goldenSeq `json:"sequences"`
}

type golden struct {
	Vocab     string          `json:"vocab"`
	NVocab    int             `json:"n_vocab"`
	PiecesFNV string          `json:"pieces_fnv"`
	EOG       []int32         `json:"eog"`
	Grammars  []goldenGrammar `json:"grammars"`
}

type corpusEntry struct {
	Name  string   `json:"name"`
	File  string   `json:"file"`
	Text  string   `json:"text"`
	Texts []string `json:"texts"`
	Bench bool     `json:"bench"`
}

func loadCorpus(t testing.TB) []corpusEntry {
	b, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Grammars []corpusEntry `json:"grammars"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for i, g := range c.Grammars {
		if g.File != "" {
			b, err := os.ReadFile(filepath.Join("testdata", g.File))
			if err != nil {
				t.Fatal(err)
			}
			c.Grammars[i].Text = string(b)
		}
	}
	return c.Grammars
}

// vocabPath is the GGUF of a golden vocabulary: "" and a skip reason when
// its environment variable is unset; a test failure when it is set and
// the file is missing.
func vocabPath(t testing.TB, name string) string {
	env, file := "", ""
	switch name {
	case "smollm2":
		env = "GGML_RS_SMOLLM2"
	case "gpt2":
		env, file = "GGML_RS_VOCABS", "gpt2-gpt-2.gguf"
	case "qwen3-small":
		env, file = "GGML_RS_MODELS", "qwen3-small-q8_0.gguf"
	case "llama-small":
		env, file = "GGML_RS_MODELS", "llama-small-q8_0.gguf"
	default:
		t.Fatalf("unknown golden vocabulary %q", name)
	}
	dir := os.Getenv(env)
	if dir == "" {
		t.Skipf("%s unset: vocabulary %s not available", env, name)
	}
	p := dir
	if file != "" {
		p = filepath.Join(dir, file)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is set but vocabulary %s is missing: %v", env, name, err)
	}
	return p
}

var vocabCache sync.Map // path -> *loadedVocab

type loadedVocab struct {
	v   *Vocab
	res TokenResolver
}

func loadVocab(t testing.TB, path string) (*Vocab, TokenResolver) {
	if lv, ok := vocabCache.Load(path); ok {
		return lv.(*loadedVocab).v, lv.(*loadedVocab).res
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	v, res, err := VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	vocabCache.Store(path, &loadedVocab{v, res})
	return v, res
}

func fnvIDs(ids []int32) string {
	h := uint64(1469598103934665603)
	var b [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		for _, c := range b {
			h ^= uint64(c)
			h *= 1099511628211
		}
	}
	return fmt.Sprintf("%016x", h)
}

func piecesFNV(v *Vocab) string {
	h := uint64(1469598103934665603)
	var b [4]byte
	for _, p := range v.pieces {
		binary.LittleEndian.PutUint32(b[:], uint32(len(p)))
		for _, c := range append(b[:], p...) {
			h ^= uint64(c)
			h *= 1099511628211
		}
	}
	return fmt.Sprintf("%016x", h)
}

func TestGolden(t *testing.T) {
	corpus := loadCorpus(t)
	byName := map[string]corpusEntry{}
	for _, c := range corpus {
		byName[c.Name] = c
	}
	files, _ := filepath.Glob("testdata/golden-*.json")
	if len(files) < 4 {
		t.Fatalf("golden files missing (make grammar-golden): %v", files)
	}
	total := struct{ masks, seqs, grammars, refusals int }{}
	var mu sync.Mutex
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var gd golden
		if err := json.Unmarshal(b, &gd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		t.Run(gd.Vocab, func(t *testing.T) {
			v, res := loadVocab(t, vocabPath(t, gd.Vocab))
			if v.Size() != gd.NVocab {
				t.Fatalf("vocabulary size %d, llama.cpp %d", v.Size(), gd.NVocab)
			}
			if got := piecesFNV(v); got != gd.PiecesFNV {
				t.Errorf("token pieces differ from llama.cpp's token_to_piece (hash %s, llama.cpp %s)", got, gd.PiecesFNV)
			}
			if got := fmt.Sprint(v.EOG()); got != fmt.Sprint(gd.EOG) {
				t.Errorf("EOG tokens %s, llama.cpp %v", got, gd.EOG)
			}
			masks, seqs, refusals := 0, 0, 0
			for _, gg := range gd.Grammars {
				c, ok := byName[gg.Name]
				if !ok {
					t.Fatalf("grammar %q of the golden file is not in corpus.json", gg.Name)
				}
				g, err := Compile(c.Text, "root", res)
				if gg.Error {
					if err == nil {
						t.Errorf("%s: llama.cpp refuses the grammar, ours compiles it", gg.Name)
					} else {
						refusals++
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: llama.cpp accepts the grammar, ours refuses it: %v", gg.Name, err)
					continue
				}
				for si, sq := range gg.Sequences {
					n, err := replaySeq(g, v, sq)
					masks += n
					seqs++
					if err != nil {
						t.Errorf("%s: sequence %d (%s, tokens %v): %v", gg.Name, si, sq.Kind, sq.Tokens, err)
					}
				}
			}
			t.Logf("%s: %d masks equal to llama.cpp's over %d sequences; %d refusals as llama.cpp's", gd.Vocab, masks, seqs, refusals)
			mu.Lock()
			total.masks += masks
			total.seqs += seqs
			total.refusals += refusals
			total.grammars += len(gd.Grammars)
			mu.Unlock()
		})
	}
	t.Logf("total: %d masks equal over %d sequences, %d refusals equal, %d grammar×vocabulary pairs", total.masks, total.seqs, total.refusals, total.grammars)
}

// replaySeq replays one golden sequence; it returns how many masks
// matched and the first difference.
func replaySeq(g *Grammar, v *Vocab, sq goldenSeq) (int, error) {
	st := NewState(g, v)
	var m Mask
	for step, want := range sq.Masks {
		var err error
		m, err = st.Allowed(m)
		if err != nil {
			return step, fmt.Errorf("step %d: %v", step, err)
		}
		ids := m.IDs()
		if len(ids) != want.N || fnvIDs(ids) != want.H {
			return step, fmt.Errorf("step %d (after %v): %d tokens allowed, llama.cpp %d%s", step, sq.Tokens[:step], len(ids), want.N, diffIDs(ids, want.IDs))
		}
		if v.Size() <= 1024 {
			// the per-token algorithm (the fallback of wide states)
			// too, where it is cheap
			slow, err := st.allowedSlow(nil)
			if err != nil {
				return step, err
			}
			if fnvIDs(slow.IDs()) != want.H {
				return step, fmt.Errorf("step %d: the per-token algorithm differs from llama.cpp", step)
			}
		}
		if step >= len(sq.Tokens) {
			break
		}
		tok := sq.Tokens[step]
		err = st.Accept(tok)
		if sq.AcceptError != nil && *sq.AcceptError == step {
			if err == nil {
				return step + 1, fmt.Errorf("step %d: llama.cpp's accept of %d throws, ours accepts", step, tok)
			}
			return step + 1, nil
		}
		if err != nil {
			return step + 1, fmt.Errorf("step %d: accept %d: %v", step, tok, err)
		}
	}
	return len(sq.Masks), nil
}

func diffIDs(got, want []int32) string {
	if want == nil && len(got) > 16 {
		return ""
	}
	return fmt.Sprintf(": ours %v, llama.cpp %v", head(got), want)
}

func head(ids []int32) []int32 {
	if len(ids) > 16 {
		return ids[:16]
	}
	return ids
}
