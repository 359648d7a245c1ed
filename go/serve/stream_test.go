package serve

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/model/decoder"
)

// TestStopper: the text sent is the text up to the first stop sequence
// (or all of it), whatever the pieces it arrives in.
func TestStopper(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := "ab#\n"
	for i := 0; i < 3000; i++ {
		var text strings.Builder
		for j := rng.Intn(30); j > 0; j-- {
			text.WriteByte(alphabet[rng.Intn(len(alphabet))])
		}
		stops := []string{"##", "a\nb", "bbb"}[:rng.Intn(4)]
		// The naive answer: cut at the earliest occurrence.
		want, wantStop := text.String(), false
		for _, s := range stops {
			if k := strings.Index(text.String(), s); k >= 0 && k < len(want) {
				want, wantStop = text.String()[:k], true
			}
		}
		st := stopper{stops: stops}
		var got strings.Builder
		stopped := false
		rest := text.String()
		for len(rest) > 0 && !stopped {
			n := 1 + rng.Intn(min(len(rest), 4))
			out, s := st.push(rest[:n])
			got.WriteString(out)
			rest, stopped = rest[n:], s
		}
		if !stopped {
			got.WriteString(st.flush())
		}
		if got.String() != want || stopped != wantStop {
			t.Fatalf("%q with stops %q: sent %q (stopped %v), want %q (%v)", text.String(), stops, got.String(), stopped, want, wantStop)
		}
	}
}

// TestDetok: the pieces streamed add up to the generated tokens' text as
// decoding them after the prompt gives it, on real vocabularies (byte-level
// BPE and SentencePiece, multi-byte characters split across tokens).
func TestDetok(t *testing.T) {
	for _, name := range []string{"qwen3-small-q8_0", "llama-small-q8_0"} {
		t.Run(name, func(t *testing.T) {
			m := openDecoder(t, name)
			tok, err := decoder.NewTokenizer(m.Backend().Config())
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(2))
			for trial := 0; trial < 200; trial++ {
				prompt := tok.Encode("Hello, wörld: ", true)
				var gen []int32
				if trial%2 == 0 {
					gen = tok.Encode(" ça va? 日本語のテキスト 🎉 fine", false)
				}
				for len(gen) < 30 {
					gen = append(gen, int32(rng.Intn(m.Vocab)))
				}
				d := decoder.NewTextStream(tok, prompt)
				var got strings.Builder
				for _, id := range gen {
					got.WriteString(d.Add(id))
				}
				got.WriteString(d.Flush())
				base := tok.Decode(prompt)
				full := tok.Decode(append(append([]int32(nil), prompt...), gen...))
				if want := decoder.ValidUTF8(strings.TrimPrefix(full, base)); got.String() != want && strings.HasPrefix(full, base) {
					t.Fatalf("trial %d: streamed %q, want %q", trial, got.String(), want)
				}
			}
		})
	}
}
