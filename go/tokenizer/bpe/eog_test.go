package bpe

import "testing"

// withTokens is the tiny vocabulary plus extra tokens of the given types.
func withTokens(t *testing.T, extra []string, types []int32) *Tokenizer {
	t.Helper()
	var tokens []string
	var ty []int32
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(ByteRune(byte(b))))
		ty = append(ty, TypeNormal)
	}
	tokens = append(tokens, extra...)
	ty = append(ty, types...)
	tk, err := New(tokens, ty, nil, "gpt2")
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestHarmonyTokens: gpt-oss's vocabulary as llama.cpp's loader reads it:
// <|return|> and <|call|> end generation, <|end|> does not (it closes the
// analysis message) and is rendered with the channel markup, so that the
// answer's channels can be parsed from the text.
func TestHarmonyTokens(t *testing.T) {
	names := []string{"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>", "<|endoftext|>"}
	types := make([]int32, len(names))
	for i := range types {
		types[i] = TypeControl
	}
	tk := withTokens(t, names, types)
	id := func(s string) int32 { return tk.vocab[s] }
	for s, want := range map[string]bool{"<|return|>": true, "<|call|>": true, "<|endoftext|>": true, "<|end|>": false, "<|channel|>": false} {
		if got := tk.IsEOG(id(s)); got != want {
			t.Errorf("IsEOG(%s) = %v, want %v", s, got, want)
		}
	}
	ids := []int32{id("<|channel|>"), 'a', id("<|message|>"), 'b', id("<|end|>"), id("<|start|>"), 'c', id("<|return|>")}
	if got, want := tk.Decode(ids), "<|channel|>a<|message|>b<|end|><|start|>c"; got != want {
		t.Errorf("Decode = %q, want %q (markup rendered, <|return|> not)", got, want)
	}
	// rendered markup is user-defined: found in plain text too
	if got := tk.Encode("<|channel|>x", false); len(got) != 2 || got[0] != id("<|channel|>") {
		t.Errorf("Encode of the markup: %v", got)
	}
}

// TestEOGNames: an end-of-turn token stored as a normal token ends
// generation and is not rendered (llama.cpp makes it a control token); a
// vocabulary with <|end|> but no <|return|> keeps <|end|> as an end.
func TestEOGNames(t *testing.T) {
	tk := withTokens(t, []string{"<|im_end|>", "<|end|>", "<end_of_turn>"}, []int32{TypeNormal, TypeControl, TypeControl})
	for _, s := range []string{"<|im_end|>", "<|end|>", "<end_of_turn>"} {
		if !tk.IsEOG(tk.vocab[s]) {
			t.Errorf("%s does not end generation", s)
		}
	}
	if tk.IsEOG('a') {
		t.Error("a byte token ends generation")
	}
	if got := tk.Decode([]int32{'x', tk.vocab["<|im_end|>"]}); got != "x" {
		t.Errorf("Decode = %q: <|im_end|> rendered", got)
	}
}
