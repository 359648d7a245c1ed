package grammar

import (
	"errors"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// toyVocab: single bytes (ASCII and the bytes of some multi-byte chars),
// whole multi-byte chars, partial sequences, words, an empty piece, a
// NUL-led piece, invalid UTF-8, and an EOG token (id 0).
func toyVocab() *Vocab {
	pieces := [][]byte{[]byte("</s>")}
	for c := byte(' '); c < 0x7f; c++ {
		pieces = append(pieces, []byte{c})
	}
	for _, s := range []string{"\n", "\t", "é", "日", "本", "ー", "😀", "ab", "abc", "true", "false", "null", "\": ", "{\"", "\"}", "12", "3.5",
		"今日", "は", "。", "\n-", "- ", "e4", "Nf3", "O-O", "\\u00", "\\n", "ét", "é,"} {
		pieces = append(pieces, []byte(s))
	}
	for _, s := range []string{"日", "😀", "é", "本"} {
		b := []byte(s)
		for i := 1; i < len(b); i++ {
			pieces = append(pieces, b[:i], b[i:])
		}
		pieces = append(pieces, append([]byte("a"), b[:1]...))
	}
	pieces = append(pieces, []byte{}, []byte{0, 'a'}, []byte{0xff}, []byte("a\x80b"), []byte("x\x00y"))
	return NewVocab(pieces, []int32{0})
}

// TestFastEqualsSlow: the trie walk and the per-token algorithm (the
// transcription of llama.cpp's) agree along random walks of the corpus.
func TestFastEqualsSlow(t *testing.T) {
	v := toyVocab()
	rng := rand.New(rand.NewSource(1))
	n := 0
	for _, c := range loadCorpus(t) {
		g, err := Compile(c.Text, "root", nil)
		if err != nil {
			continue
		}
		for walk := 0; walk < 20; walk++ {
			st := NewState(g, v)
			for step := 0; step < 40; step++ {
				fast, err := st.Allowed(nil)
				if err != nil {
					t.Fatal(err)
				}
				slow, err := st.allowedSlow(nil)
				if err != nil {
					t.Fatal(err)
				}
				n++
				if fnvIDs(fast.IDs()) != fnvIDs(slow.IDs()) {
					t.Fatalf("%s walk %d step %d: trie %v, per-token %v", c.Name, walk, step, fast.IDs(), slow.IDs())
				}
				ids := fast.IDs()
				for _, id := range ids {
					if ok, _ := st.Allows(id); !ok {
						t.Fatalf("%s: Allows(%d) false for an allowed token", c.Name, id)
					}
				}
				if len(ids) == 0 {
					break
				}
				id := ids[rng.Intn(len(ids))]
				if v.IsEOG(id) {
					break
				}
				if err := st.Accept(id); err != nil {
					t.Fatalf("%s: accept %d (%q): %v", c.Name, id, v.pieces[id], err)
				}
			}
		}
	}
	t.Logf("%d masks equal", n)
}

func TestApplyCloneAccept(t *testing.T) {
	v := toyVocab()
	g, err := Compile(`root ::= "ab" [0-9]+`, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(g, v)
	id := func(s string) int32 {
		for i, p := range v.pieces {
			if string(p) == s {
				return int32(i)
			}
		}
		t.Fatalf("no token %q", s)
		return -1
	}
	logits := make([]float32, v.Size()+3)
	if err := st.Apply(logits); err != nil {
		t.Fatal(err)
	}
	for i, l := range logits {
		want := i == int(id("a")) || i == int(id("ab"))
		if (l == 0) != want {
			t.Errorf("token %d (%q): logit %v", i, v.Piece(int32(i)), l)
		}
		if i >= v.Size() && !math.IsInf(float64(l), -1) {
			t.Errorf("logit %d past the vocabulary not -Inf", i)
		}
	}
	if err := st.Accept(id("c")); err == nil {
		t.Fatal("accepted a disallowed token")
	}
	if err := st.Accept(id("ab")); err != nil {
		t.Fatal(err)
	}
	if st.CanEnd() {
		t.Fatal("can end before a digit")
	}
	c := st.Clone()
	if err := c.Accept(id("12")); err != nil {
		t.Fatal(err)
	}
	if !c.CanEnd() || st.CanEnd() {
		t.Fatal("clone not independent")
	}
	if err := c.Accept(0); err != nil { // EOG where it can end
		t.Fatal(err)
	}
	if err := st.Accept(0); err == nil {
		t.Fatal("EOG accepted where the grammar cannot end")
	}
	if err := st.AcceptBytes([]byte("7")); err != nil || !st.CanEnd() {
		t.Fatal("AcceptBytes", err)
	}
	if err := st.AcceptBytes([]byte("x")); err == nil {
		t.Fatal("AcceptBytes of a non-matching text")
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"undefined", "root ::= a\n", `undefined rule`},
		{"no root", "a ::= \"x\"\n", `does not contain a "root"`},
		{"empty", "# nothing\n", "empty grammar"},
		{"left recursion", "root ::= root \"a\" | \"b\"\n", `left recursion detected for nonterminal "root"`},
		{"indirect left recursion", "root ::= a\na ::= b \"x\"\nb ::= \"\" | a\n", `left recursion`},
		{"unclosed group", "root ::= (\"a\"\n", "expecting ')'"},
		{"bad escape", "root ::= \"\\q\"\n", "unknown escape"},
		{"bad hex", "root ::= \"\\x4\"\n", "expecting 2 hex chars"},
		{"repetition", "root ::= \"a\"{2001}\n", "number of repetitions exceeds"},
		{"nested repetition", "root ::= (\"a\"{0,50}){0,50}\n", "exceeds sane defaults"},
		{"max below min", "root ::= \"a\"{5,3}\n", "below the minimum"},
		{"name token without vocab", "root ::= <foo>\n", "no vocab"},
		{"token id too big", "root ::= <[99999999999]>\n", "too big"},
		{"position", "root ::= \"a\"\nx ::= ?\n", "2:8: expecting preceding item"},
	}
	for _, c := range cases {
		_, err := Compile(c.text, "root", nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// TestHostile: inputs that would take llama.cpp unbounded time or memory
// are refused by the engine's limits (the error names the limit). The
// times are hang guards, about 15 times what each takes on a quiet 2-core
// machine (0.1 to 3 s), so a loaded CI machine does not fail them.
func TestHostile(t *testing.T) {
	check := func(name string, f func() error, want string, limit time.Duration) {
		t.Helper()
		start := time.Now()
		err := f()
		if d := time.Since(start); d > limit {
			t.Errorf("%s: %v (limit %v)", name, d, limit)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", name, err, want)
		}
	}
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := 0; i < 1_000_000; i++ {
		b.WriteString("r")
		b.WriteString(itoa(i))
		b.WriteString(" ::= \"x\"\n")
	}
	big := b.String()
	check("10^6 rules", func() error { _, err := Compile(big, "", nil); return err }, "MaxGrammarBytes", 15*time.Second)
	b.Reset()
	for i := 0; i < 70000; i++ {
		b.WriteString("r" + itoa(i) + "::=\"x\"\n")
	}
	b.WriteString("root ::= r0\n")
	check("70000 rules", func() error { _, err := Compile(b.String(), "", nil); return err }, "MaxRules", 20*time.Second)
	deep := "root ::= " + strings.Repeat("(", 100000) + "\"x\"" + strings.Repeat(")", 100000) + "\n"
	check("deep nesting", func() error { _, err := Compile(deep, "", nil); return err }, "MaxNesting", 15*time.Second)
	long := "root ::= \"" + strings.Repeat("a", 1<<20) + "\"{2000}\n"
	check("huge expansion", func() error { _, err := Compile(long, "", nil); return err }, "MaxElements", 20*time.Second)
	// not left-recursive by llama.cpp's test (b has no empty alternative
	// of its own), yet expanding root never reaches a terminal: the
	// stack grows without end in llama.cpp
	check("endless expansion", func() error {
		_, err := Compile("root ::= b root \"q\" | \"z\"\nb ::= c\nc ::= \"x\" |\n", "", nil)
		return err
	}, "too complex", 45*time.Second)
	// 2^n stacks after n "a": each a choice of closing "b" or "c"
	g, err := Compile("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"\n", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	check("exponential stacks", func() error {
		st := NewState(g, toyVocab())
		for i := 0; i < 40; i++ {
			if err := st.AcceptBytes([]byte("a")); err != nil {
				return err
			}
		}
		return nil
	}, "too complex", 60*time.Second)
	if !errors.Is(func() error {
		st := NewState(g, toyVocab())
		for i := 0; i < 40; i++ {
			if err := st.AcceptBytes([]byte("a")); err != nil {
				return err
			}
		}
		return nil
	}(), ErrTooComplex) {
		t.Error("not ErrTooComplex")
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
