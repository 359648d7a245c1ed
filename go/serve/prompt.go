package serve

import (
	"ggmlrs/fs"
)

// message is one turn of a conversation.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// promptMaker turns a conversation into a model's prompt text with the
// model's chat template (tokenizer.chat_template) or, without one, the
// fallback (prompt_chat.go).
type promptMaker struct {
	r        renderer
	bos, eos string
}

// renderer renders a conversation; think is nil when the client did not
// say.
type renderer interface {
	render(msgs []message, addGenerationPrompt bool, bos, eos string, think *bool) (string, error)
}

func newPromptMaker(f *modelFile, c fs.Config) (*promptMaker, error) {
	tokens := c.Strings("tokenizer.ggml.tokens")
	token := func(key string) string {
		if v, ok := c.Value(key).(uint32); ok && int(v) < len(tokens) {
			return tokens[v]
		}
		return ""
	}
	r, err := newRenderer(f.template)
	if err != nil {
		return nil, err
	}
	return &promptMaker{r: r, bos: token("tokenizer.ggml.bos_token_id"), eos: token("tokenizer.ggml.eos_token_id")}, nil
}

// chat renders a conversation ending with the generation prompt.
func (p *promptMaker) chat(msgs []message, think *bool) (string, error) {
	return p.r.render(msgs, true, p.bos, p.eos, think)
}
