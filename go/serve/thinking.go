package serve

import (
	"encoding/json"
	"strings"
	"unicode"
)

// A model's reasoning, separated from its answer as Ollama does: the
// "thinking" field of /api/generate and /api/chat, OpenAI's "reasoning"
// (Ollama's name for it in its OpenAI API). Two styles, told from the chat
// template: <think>…</think> around the reasoning (Qwen3, Qwen3.5), and
// gpt-oss's harmony channels (analysis: reasoning; final: the answer).

// thinkStyle is how a model's template marks its reasoning.
type thinkStyle int

const (
	noThinking   thinkStyle = iota
	thinkTags               // <think> … </think>
	thinkHarmony            // <|channel|>analysis<|message|> … <|end|>
)

const (
	openThink  = "<think>"
	closeThink = "</think>"
)

// styleOf reads a chat template's style: harmony's markup, or both think
// tags, written in it.
func styleOf(template string) thinkStyle {
	switch {
	case strings.Contains(template, "<|channel|>") && strings.Contains(template, "<|message|>"):
		return thinkHarmony
	case strings.Contains(template, openThink) && strings.Contains(template, closeThink):
		return thinkTags
	}
	return noThinking
}

// splitter separates generated text into reasoning and answer as it
// streams: add takes the next piece and returns what it completes of each
// (text that may be the start of a tag is held back); flush returns what
// is held at the end.
type splitter interface {
	add(text string) (thinking, content string)
	flush() (thinking, content string)
}

// newSplitter is the splitter of a request, or nil: for the tag style,
// when thinking is on (the default for a model that can); for harmony,
// always (its markup is never part of the answer). prompt is the rendered
// prompt: a template that opens the reasoning itself (the prompt ends with
// <think>) starts the splitter inside it.
func newSplitter(style thinkStyle, think *bool, prompt string, ts *toolSet) splitter {
	switch style {
	case thinkTags:
		if think != nil && !*think {
			return nil
		}
		s := &tagSplitter{}
		if strings.HasSuffix(strings.TrimRightFunc(prompt, unicode.IsSpace), openThink) {
			s.state = tagsThinkingStart
		}
		return s
	case thinkHarmony:
		return &harmonySplitter{ts: ts}
	}
	return nil
}

// heldTail is the length of the longest suffix of s that is a proper
// prefix of one of tags (text that the next piece may complete into one).
func heldTail(s string, tags ...string) int {
	best := 0
	for _, tag := range tags {
		for n := min(len(tag)-1, len(s)); n > best; n-- {
			if strings.HasSuffix(s, tag[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

type tagState int

const (
	tagsLooking       tagState = iota // before anything but white space
	tagsThinkingStart                 // inside <think>, white space eaten
	tagsThinking
	tagsAnswerStart // after </think>, white space eaten
	tagsAnswer
)

// tagSplitter: text that begins (after white space) with <think> is
// reasoning up to </think>; the white space around the tags is dropped;
// text that does not begin with the tag is all answer.
type tagSplitter struct {
	state tagState
	buf   string
}

func (s *tagSplitter) add(text string) (thinking, content string) {
	s.buf += text
	var th, co strings.Builder
	for {
		switch s.state {
		case tagsLooking:
			t := strings.TrimLeftFunc(s.buf, unicode.IsSpace)
			switch {
			case strings.HasPrefix(t, openThink):
				s.buf, s.state = t[len(openThink):], tagsThinkingStart
				continue
			case t == "" || strings.HasPrefix(openThink, t):
				return th.String(), co.String() // not decided yet
			}
			s.state = tagsAnswer
			continue
		case tagsThinkingStart, tagsAnswerStart:
			t := strings.TrimLeftFunc(s.buf, unicode.IsSpace)
			if t == "" {
				s.buf = ""
				return th.String(), co.String()
			}
			s.buf = t
			if s.state == tagsThinkingStart {
				s.state = tagsThinking
			} else {
				s.state = tagsAnswer
			}
			continue
		case tagsThinking:
			if i := strings.Index(s.buf, closeThink); i >= 0 {
				th.WriteString(s.buf[:i])
				s.buf, s.state = s.buf[i+len(closeThink):], tagsAnswerStart
				continue
			}
			keep := heldTail(s.buf, closeThink)
			th.WriteString(s.buf[:len(s.buf)-keep])
			s.buf = s.buf[len(s.buf)-keep:]
			return th.String(), co.String()
		default: // tagsAnswer
			co.WriteString(s.buf)
			s.buf = ""
			return th.String(), co.String()
		}
	}
}

func (s *tagSplitter) flush() (thinking, content string) {
	b := s.buf
	s.buf = ""
	switch s.state {
	case tagsThinking, tagsThinkingStart:
		return b, ""
	case tagsLooking:
		return "", b
	}
	return "", b
}

// harmonySplitter reads gpt-oss's harmony format: messages
// "<|start|>assistant<|channel|>NAME<|message|>TEXT<|end|>" (the first one's
// header is in the prompt already, "<|start|>assistant"); the analysis
// channel is reasoning, the others (final, commentary) answer; headers
// and markup are dropped.
//
// With tools (ts), a message to a function (recipient "to=functions.NAME"
// in its channel or role header) is a call: its text is the arguments,
// up to <|call|> (the end of generation), <|end|> or the next message.
type harmonySplitter struct {
	inHeader  bool   // between <|start|> or <|channel|> and <|message|>
	header    string // the header so far
	channel   string // of the current message
	recipient string // of the current message's header ("to=...")
	buf       string

	ts       *toolSet
	callName string // the function the current message calls
	args     strings.Builder
	calls    []toolCall // completed, not yet taken
}

var harmonyTags = []string{"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>", "<|call|>"}

// takeCalls returns the calls completed since the last take.
func (s *harmonySplitter) takeCalls() []toolCall {
	c := s.calls
	s.calls = nil
	return c
}

// noteRecipient keeps a "to=" recipient written in the header so far.
func (s *harmonySplitter) noteRecipient() {
	for _, f := range strings.Fields(s.header) {
		if r, ok := strings.CutPrefix(f, "to="); ok {
			s.recipient = r
		}
	}
}

// endCall completes the current message's call; arguments that do not
// parse (or an unknown function) are answer text.
func (s *harmonySplitter) endCall(co *strings.Builder) {
	if s.callName == "" {
		return
	}
	args := s.args.String()
	if c, ok := s.ts.call(s.callName, json.RawMessage(args)); ok {
		s.calls = append(s.calls, c)
	} else {
		co.WriteString(args)
	}
	s.callName = ""
	s.args.Reset()
}

func (s *harmonySplitter) emit(th, co *strings.Builder, text string) {
	if s.channel == "analysis" {
		th.WriteString(text)
	} else {
		co.WriteString(text)
	}
}

func (s *harmonySplitter) add(text string) (thinking, content string) {
	s.buf += text
	var th, co strings.Builder
	for {
		i, tag := -1, ""
		for _, t := range harmonyTags {
			if j := strings.Index(s.buf, t); j >= 0 && (i < 0 || j < i) {
				i, tag = j, t
			}
		}
		if tag == "" {
			// no complete tag: emit all but what may start one
			keep := heldTail(s.buf, harmonyTags...)
			s.text(&th, &co, s.buf[:len(s.buf)-keep])
			s.buf = s.buf[len(s.buf)-keep:]
			return th.String(), co.String()
		}
		s.text(&th, &co, s.buf[:i])
		s.buf = s.buf[i+len(tag):]
		switch tag {
		case "<|start|>", "<|channel|>":
			if tag == "<|start|>" {
				s.endCall(&co)
				s.recipient = ""
			}
			if !s.inHeader {
				s.header = ""
			}
			s.inHeader = true
			if tag == "<|channel|>" {
				s.noteRecipient()
				s.header = "" // the channel name follows
			}
		case "<|constrain|>":
			// part of a header (a tool call's format): ignored
		case "<|message|>":
			s.noteRecipient()
			s.channel = ""
			if f := strings.Fields(s.header); len(f) > 0 {
				s.channel = f[0]
			}
			if name, ok := strings.CutPrefix(s.recipient, "functions."); ok && s.ts.parsed() && s.channel != "analysis" {
				s.callName = name
			}
			s.inHeader, s.header, s.recipient = false, "", ""
		case "<|end|>", "<|call|>":
			s.endCall(&co)
			s.channel, s.inHeader = "", false
		}
	}
}

// text routes text between tags: into the header while reading one, else
// to the current channel (text outside any message is answer).
func (s *harmonySplitter) text(th, co *strings.Builder, t string) {
	if t == "" {
		return
	}
	if s.inHeader {
		s.header += t
		return
	}
	if s.callName != "" {
		s.args.WriteString(t)
		return
	}
	s.emit(th, co, t)
}

func (s *harmonySplitter) flush() (thinking, content string) {
	var th, co strings.Builder
	s.text(&th, &co, s.buf)
	s.buf = ""
	s.endCall(&co)
	return th.String(), co.String()
}
