package spm

import (
	"fmt"
	"slices"
	"testing"
)

func tiny(t testing.TB) *Tokenizer {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{TypeUnknown, TypeControl, TypeControl}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, TypeByte)
	}
	words := []string{"▁", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "hell", "hello", "▁hello", "▁w", "or", "▁wor", "ld", "▁world", "é", "▁▁"}
	scores := make([]float32, len(tokens))
	for i, w := range words {
		tokens = append(tokens, w)
		types = append(types, TypeNormal)
		scores = append(scores, float32(len([]rune(w)))-float32(i)/100) // longer pieces win
	}
	tk, err := New(tokens, scores, types)
	if err != nil {
		t.Fatal(err)
	}
	tk.BOS, tk.EOS = 1, 2
	return tk
}

func TestEncode(t *testing.T) {
	tk := tiny(t)
	ids := tk.Encode("hello world", true)
	var got []string
	for _, id := range ids {
		got = append(got, tk.tokens[id])
	}
	if want := []string{"<s>", "▁hello", "▁world"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	// Byte fallback: "ß" is not in the vocabulary.
	ids = tk.Encode("ß", false)
	got = got[:0]
	for _, id := range ids {
		got = append(got, tk.tokens[id])
	}
	if want := []string{"▁", "<0xC3>", "<0x9F>"}; !slices.Equal(got, want) {
		t.Fatalf("byte fallback: got %q, want %q", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	tk := tiny(t)
	for _, s := range []string{"", "hello world", " leading", "trailing  ", "two  spaces", "tab\tnew\nline",
		"naïve café 日本語 😀", "héllo"} {
		if got := tk.Decode(tk.Encode(s, true)); got != s {
			t.Errorf("%q round-trips to %q", s, got)
		}
	}
	if got := tk.Decode(tk.Encode("hi</s>there", true)); got != "hi there" && got != "hithere" {
		t.Errorf("specials: %q", got)
	}
}
