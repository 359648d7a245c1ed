package bpe

// eogNames: the tokens llama.cpp's vocabulary loader treats as ending
// generation (besides EOS), whatever their type; one that is not a control
// token becomes one (it is then not rendered), as there.
var eogNames = map[string]bool{
	"<|eot_id|>": true, "<|im_end|>": true, "<|end|>": true, "<|return|>": true, "<|call|>": true,
	"<|flush|>": true, "<|calls|>": true, "<end_of_turn>": true, "<|endoftext|>": true, "</s>": true,
	"<|eom_id|>": true, "<EOT>": true, "_<EOT>": true, "[EOT]": true, "[EOS]": true, "<|end_of_text|>": true,
	"<end_of_utterance>": true, "<eos>": true, "<turn|>": true, "<|tool_response>": true,
	"<｜end▁of▁sentence｜>": true, "[e~[": true,
}

// harmonyRendered: gpt-oss's (o200k_harmony's) markup tokens, which
// llama.cpp renders as text (user-defined) so that the channels of an
// answer can be told apart.
var harmonyRendered = map[string]bool{"<|channel|>": true, "<|message|>": true, "<|start|>": true, "<|constrain|>": true}

// markEOG sets the end-of-generation tokens and the type overrides of
// llama.cpp's loader: the eogNames become control tokens; the harmony
// markup becomes user-defined; and where <|return|> and <|call|> (or
// <|calls|> and <|flush|>) end generation, <|end|> does not (it ends a
// message of the analysis channel, not the answer) and is rendered.
func (t *Tokenizer) markEOG() {
	t.eog = map[int32]bool{}
	setType := func(id int32, typ int32) {
		if t.types == nil {
			t.types = make([]int32, len(t.tokens))
			for i := range t.types {
				t.types[i] = TypeNormal
			}
		} else if !t.ownTypes {
			t.types = append([]int32(nil), t.types...)
		}
		t.ownTypes = true
		t.types[id] = typ
	}
	var has = map[string]int32{}
	for i, s := range t.tokens {
		id := int32(i)
		if eogNames[s] {
			t.eog[id] = true
			has[s] = id
			if t.typ(id) != TypeControl {
				setType(id, TypeControl)
			}
		}
	}
	for i, s := range t.tokens {
		if harmonyRendered[s] {
			setType(int32(i), TypeUserDefined)
		}
	}
	_, ret := has["<|return|>"]
	_, call := has["<|call|>"]
	_, calls := has["<|calls|>"]
	_, flush := has["<|flush|>"]
	if end, ok := has["<|end|>"]; ok && ((ret && (call || calls)) || ((call || calls) && flush)) {
		delete(t.eog, end)
		setType(end, TypeUserDefined)
	}
}
