package serve

import "strings"

// stopper holds back streamed text that could be the start of a stop
// sequence, and cuts the text at the first stop sequence it sees: the stop
// sequence itself is never sent (as Ollama and OpenAI do).
type stopper struct {
	stops []string
	held  string
}

// push takes new text and returns what can be sent now, and whether a
// stop sequence was found (the text after it is dropped).
func (s *stopper) push(text string) (out string, stopped bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	buf := s.held + text
	cut := -1
	for _, st := range s.stops {
		if i := strings.Index(buf, st); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		s.held = ""
		return buf[:cut], true
	}
	// Hold back the longest tail that begins some stop sequence.
	keep := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(buf)); n > keep; n-- {
			if strings.HasSuffix(buf, st[:n]) {
				keep = n
				break
			}
		}
	}
	s.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the text held back (the generation ended without a stop).
func (s *stopper) flush() string {
	out := s.held
	s.held = ""
	return out
}
