package serve

import "testing"

// splitAll feeds text to a splitter cut into pieces of n bytes (0: whole)
// and returns the reasoning and the answer.
func splitAll(sp splitter, text string, n int) (string, string) {
	var th, co string
	for len(text) > 0 {
		k := len(text)
		if n > 0 {
			k = min(n, len(text))
		}
		t, c := sp.add(text[:k])
		th, co, text = th+t, co+c, text[k:]
	}
	t, c := sp.flush()
	return th + t, co + c
}

func TestSplitters(t *testing.T) {
	yes, no := true, false
	harmony := "<|channel|>analysis<|message|>The user greets. <|reply|> nicely<|end|><|start|>assistant<|channel|>final<|message|>Hello <b>there</b>!"
	for _, c := range []struct {
		name, template, prompt, text string
		think                        *bool
		thinking, content            string
		none                         bool
	}{
		{name: "qwen3 thinks", template: "{{'<think>'}}{{'</think>'}}", prompt: "<|im_start|>assistant\n",
			text: "<think>\nLet me see: 2<3.\n</think>\n\nThe answer is 4.", thinking: "Let me see: 2<3.\n", content: "The answer is 4."},
		{name: "qwen3 answers at once", template: "<think></think>", prompt: "x",
			text: "  The answer <think> is 4.", content: "  The answer <think> is 4."}, // as Ollama: kept untrimmed
		{name: "opened by the template", template: "<think></think>", prompt: "<|im_start|>assistant\n<think>\n",
			text: "reasoning </th></think>\n answer", thinking: "reasoning </th>", content: "answer"},
		{name: "cut in the middle of thinking", template: "<think></think>", prompt: "",
			text: "<think>still going </thi", thinking: "still going </thi"},
		{name: "thinking off", template: "<think></think>", prompt: "", think: &no,
			text: "<think>x</think>y", none: true},
		{name: "no thinking in the template", template: "{{ messages }}", text: "<think>x</think>y", none: true},
		{name: "gpt-oss", template: "<|start|>{{ '<|channel|>' }}<|message|>", prompt: "<|start|>assistant", think: &yes,
			text: harmony, thinking: "The user greets. <|reply|> nicely", content: "Hello <b>there</b>!"},
		{name: "gpt-oss without the analysis", template: "<|channel|><|message|>", prompt: "<|start|>assistant",
			text: "<|channel|>final<|message|>Just this.", content: "Just this."},
		{name: "gpt-oss tool header", template: "<|channel|><|message|>",
			text: "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}", content: "{\"a\":1}"},
	} {
		for _, n := range []int{0, 1, 2, 3, 7} {
			sp := newSplitter(styleOf(c.template), c.think, c.prompt, nil)
			if c.none {
				if sp != nil {
					t.Errorf("%s: a splitter", c.name)
				}
				break
			}
			if sp == nil {
				t.Fatalf("%s: no splitter", c.name)
			}
			th, co := splitAll(sp, c.text, n)
			if th != c.thinking || co != c.content {
				t.Errorf("%s, pieces of %d: thinking %q content %q; want %q and %q", c.name, n, th, co, c.thinking, c.content)
			}
		}
	}
}
