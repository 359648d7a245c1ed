package serve

import "strings"

// chatml is the fallback template for a model without one: ChatML, as
// llama.cpp's default.
type chatml struct{}

func newRenderer(src string) (renderer, error) { return chatml{}, nil }

func (chatml) render(msgs []message, gen bool, bos, eos string, think *bool) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	if gen {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}
