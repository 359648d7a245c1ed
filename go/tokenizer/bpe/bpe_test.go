package bpe

import (
	"slices"
	"testing"
)

func TestPreTokenizers(t *testing.T) {
	cases := []struct {
		pre, in string
		want    []string
	}{
		{"gpt2", "Hello world", []string{"Hello", " world"}},
		{"gpt2", "I'm  here!!\n", []string{"I", "'m", " ", " here", "!!", "\n"}},
		{"gpt2", "a   b", []string{"a", "  ", " b"}},
		{"gpt2", "x 12345 ", []string{"x", " 12345", " "}},
		{"gpt2", "ÆØ über", []string{"ÆØ", " über"}},
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "I'M 12345", []string{"I", "'M", " ", "123", "45"}},
		{"llama-bpe", "a,b\n\n c", []string{"a", ",b", "\n\n", " c"}},
		{"llama-bpe", "x  \n  y", []string{"x", "  \n", " ", " y"}},
		{"llama-bpe", "hi!!\n", []string{"hi", "!!\n"}},
		{"llama-bpe", "  ", []string{"  "}},
		{"qwen2", "abc 123", []string{"abc", " ", "1", "2", "3"}},
		{"qwen2", "日本語テキスト", []string{"日本語テキスト"}},
	}
	for _, c := range cases {
		f, ok := Pre(c.pre)
		if !ok {
			t.Fatalf("unknown %s", c.pre)
		}
		if got := f(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.pre, c.in, got, c.want)
		}
	}
}

// tiny is a byte-level vocabulary: 256 bytes, a few merges, specials.
func tiny(t testing.TB, pre string) *Tokenizer {
	var tokens []string
	var types []int32
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(ByteRune(byte(b))))
		types = append(types, TypeNormal)
	}
	merges := []string{"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d"}
	for _, m := range merges {
		tokens = append(tokens, string([]rune(m)[0:0])+joinMerge(m))
		types = append(types, TypeNormal)
	}
	tokens = append(tokens, "<s>", "</s>")
	types = append(types, TypeControl, TypeControl)
	tk, err := New(tokens, types, merges, pre)
	if err != nil {
		t.Fatal(err)
	}
	tk.BOS, tk.EOS, tk.AddBOS = int32(len(tokens)-2), int32(len(tokens)-1), true
	return tk
}

func joinMerge(m string) string {
	out := []rune{}
	for _, r := range m {
		if r != ' ' {
			out = append(out, r)
		}
	}
	return string(out)
}

func TestEncodeMerges(t *testing.T) {
	tk := tiny(t, "gpt2")
	ids := tk.Encode("hello world", false)
	var got []string
	for _, id := range ids {
		got = append(got, tk.Token(id))
	}
	if want := []string{"hello", "Ġworld"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	ids = tk.Encode("<s>hello</s>", true)
	if ids[0] != tk.BOS || ids[1] != tk.BOS || ids[len(ids)-1] != tk.EOS || len(ids) != 4 {
		t.Fatalf("specials: %v", ids)
	}
	if !tk.IsEOG(tk.EOS) || tk.IsEOG(ids[2]) {
		t.Fatal("IsEOG")
	}
}

func TestRoundTrip(t *testing.T) {
	for _, pre := range []string{"gpt2", "llama-bpe", "qwen2"} {
		tk := tiny(t, pre)
		for _, s := range []string{"", " ", "hello world", "  leading and trailing  ", "tabs\tand\nnewlines\r\n\n",
			"naïve café — 日本語 😀", "it's 2024: 12345678!", "\u00a0nbsp\u2003em", "hello</s>world"} {
			if got := tk.Decode(tk.Encode(s, false)); got != s {
				t.Errorf("%s: %q round-trips to %q", pre, s, got)
			}
		}
		// Specials are not rendered.
		if got := tk.Decode(tk.Encode("hi</s>", true)); got != "hi" {
			t.Errorf("%s: specials decode to %q", pre, got)
		}
	}
}
