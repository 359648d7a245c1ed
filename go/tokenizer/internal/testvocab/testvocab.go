// Package testvocab is for the tokenizer packages' tests: it loads the
// vocabularies of the GGUF files in $GGML_RS_VOCABS and $GGML_RS_MODELS
// (when set) and makes test text (English-like prose, long words, random
// mixes of scripts, white space, emoji and broken UTF-8).
package testvocab

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ggml-rs/ggml-rs/go/gguf"
)

// Vocab is a GGUF file's tokenizer.
type Vocab struct {
	Name   string // file name
	Model  string // tokenizer.ggml.model: "gpt2" or "llama"
	Pre    string // tokenizer.ggml.pre
	Tokens []string
	Types  []int32
	Scores []float32
	Merges []string
}

// RequireIfSet fails t when $GGML_RS_VOCABS is set (as make test sets it,
// after generating the vocabularies) but lacks the vocabulary a test
// wanted: there a missing fixture is a failure, not a weaker test.
func RequireIfSet(t testing.TB) {
	t.Helper()
	if dir := os.Getenv("GGML_RS_VOCABS"); dir != "" {
		t.Fatalf("$GGML_RS_VOCABS=%s has no GPT-2 vocabulary of 50k tokens with the gpt-2 or llama-bpe pre-tokenizer (make vocabs)", dir)
	}
}

// Load reads the tokenizers of the GGUF files in the directories named by
// $GGML_RS_VOCABS and $GGML_RS_MODELS (unset ones are skipped), once per
// distinct tokenizer, in file-name order.
func Load() ([]Vocab, error) {
	var files []string
	for _, env := range []string{"GGML_RS_VOCABS", "GGML_RS_MODELS"} {
		dir := os.Getenv(env)
		if dir == "" {
			continue
		}
		m, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
		if err != nil {
			return nil, err
		}
		sort.Strings(m)
		files = append(files, m...)
	}
	seen := map[[32]byte]bool{}
	var out []Vocab
	for _, f := range files {
		g, err := gguf.Open(f)
		if err != nil {
			return nil, err
		}
		v := Vocab{Name: filepath.Base(f)}
		v.Model, _ = get[string](g, "tokenizer.ggml.model")
		v.Pre, _ = get[string](g, "tokenizer.ggml.pre")
		v.Tokens, _ = get[[]string](g, "tokenizer.ggml.tokens")
		v.Types, _ = get[[]int32](g, "tokenizer.ggml.token_type")
		v.Scores, _ = get[[]float32](g, "tokenizer.ggml.scores")
		v.Merges, _ = get[[]string](g, "tokenizer.ggml.merges")
		if len(v.Tokens) == 0 || (v.Model != "gpt2" && v.Model != "llama") {
			continue
		}
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%s\x00%q\x00%v\x00%v\x00%q", v.Model, v.Pre, v.Tokens, v.Types, v.Scores, v.Merges)
		var key [32]byte
		copy(key[:], h.Sum(nil))
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, v)
	}
	return out, nil
}

func get[T any](g *gguf.File, key string) (T, bool) {
	v, ok := g.Get(key)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}

// SPMFromBPE makes a SentencePiece vocabulary of a byte-level BPE one's
// tokens (a large, realistic one where only small SPM vocabularies are at
// hand): "<unk>", "<s>", "</s>", the 256 byte tokens, then each token's
// bytes with spaces spelled "▁", scored by rank (earlier is better).
// byteOf maps the BPE vocabulary's runes back to bytes.
func SPMFromBPE(bpe Vocab, byteOf func(rune) (byte, bool)) (tokens []string, scores []float32, types []int32) {
	tokens = []string{"<unk>", "<s>", "</s>"}
	types = []int32{2, 3, 3}
	scores = []float32{0, 0, 0}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
		scores = append(scores, 0)
	}
	for i, s := range bpe.Tokens {
		if bpe.Types != nil && bpe.Types[i] != 1 {
			continue
		}
		var b []byte
		for _, r := range s {
			c, ok := byteOf(r)
			if !ok {
				b = utf8.AppendRune(b, r)
				continue
			}
			b = append(b, c)
		}
		tokens = append(tokens, strings.ReplaceAll(string(b), " ", "▁"))
		types = append(types, 1)
		scores = append(scores, -float32(i))
	}
	return tokens, scores, types
}

var words = strings.Fields(`the of and to a in is it you that he was for on are with as I his they be
at one have this from or had by hot word but what some we can out other were all there when up use your
how said an each she which do their time if will way about many then them write would like so these her
long make thing see him two has look more day could go come did number sound no most people my over know
water than call first who may down side been now find any new work part take get place made live where
after back little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too same tell
does set three want air well also play small end put home read hand port large spell add even land here
must big high such follow act why ask men change went light kind off need house picture try us again animal
point mother world near build self earth father head stand own page should country found answer school grow
study still learn plant cover food sun four between state keep eye never last let thought city tree cross
farm hard start might story saw far sea draw left late run don't while press close night real life few north
tokenization transformer quadratically internationalization antidisestablishmentarianism Mississippi`)

// English is about n bytes of English-like prose: words, punctuation,
// numbers, spaces and newlines.
func English(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for b.Len() < n {
		w := words[rng.Intn(len(words))]
		if rng.Intn(12) == 0 {
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
		switch r := rng.Intn(40); {
		case r == 0:
			b.WriteString(".\n\n")
		case r < 3:
			b.WriteString(". ")
		case r < 5:
			b.WriteString(", ")
		case r == 5:
			fmt.Fprintf(&b, " %d ", rng.Intn(100000))
		default:
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// LongWord is n random lowercase ASCII letters (no spaces).
func LongWord(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.Intn(26))
	}
	return string(b)
}

// alphabets are the material of Random.
var alphabets = []string{
	"abcdefghijklmnopqrstuvwxyz",
	"ABCDEFGHIJKLMNOPQRSTUVWXYZ",
	"0123456789",
	"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
	"    \t\n\r\u00a0\u2003\u3000\u2028\v\f",
	"àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿßĀāĂăĄąŒœŠšŸ",
	"абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГД",
	"αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔ",
	"日本語のテキストです中文字符汉字漢字한국어텍스트",
	"مرحبا بالعالم",
	"नमस्ते दुनिया",
	"😀😃😄😁👍👍🏽👨‍👩‍👧‍👦🇫🇷🏳️‍🌈❤️✨",
	"e\u0301a\u0308o\u0302\u0327\u20dd", // combining marks
	"▁▁▁ ▁",
	"'s't're've'm'll'd'S'T'RE",
}

// Random is a random mix of about n bytes: runs drawn from ASCII letters,
// digits, punctuation, white space (spaces, tabs, newlines, Unicode
// spaces), accented Latin, Cyrillic, Greek, CJK, Hangul, Arabic,
// Devanagari, emoji and combining marks, with contractions, long runs of
// one letter, long words, invalid UTF-8 bytes and the extra strings
// (special tokens, say) mixed in.
func Random(rng *rand.Rand, n int, extra []string) string {
	var b strings.Builder
	for b.Len() < n {
		switch k := rng.Intn(20); {
		case k == 0 && len(extra) > 0:
			b.WriteString(extra[rng.Intn(len(extra))])
		case k == 1: // a run of one character
			a := []rune(alphabets[rng.Intn(len(alphabets))])
			b.WriteString(strings.Repeat(string(a[rng.Intn(len(a))]), 1+rng.Intn(200)))
		case k == 2: // a long word
			b.WriteString(LongWord(rng, 1+rng.Intn(300)))
		case k == 3: // invalid or truncated UTF-8
			bad := []string{"\xff", "\xc3", "\xe6\x97", "\xf0\x9f\x98", "\x80\x80", "\xed\xa0\x80", "\xc0\xaf"}
			b.WriteString(bad[rng.Intn(len(bad))])
		case k == 4:
			b.WriteString(words[rng.Intn(len(words))])
		default:
			a := []rune(alphabets[rng.Intn(len(alphabets))])
			for m := 1 + rng.Intn(12); m > 0; m-- {
				b.WriteRune(a[rng.Intn(len(a))])
			}
		}
	}
	return b.String()
}

// Inputs are a differential test's inputs: the fixed strings; each unit
// repeated to about size bytes; prose and one long word of size bytes;
// then count random mixes (a fifth of them with -short) of up to size
// bytes with the extra strings (special tokens) among them.
func Inputs(rng *rand.Rand, size, count int, fixed, units, extra []string) []string {
	inputs := append([]string(nil), fixed...)
	for _, u := range units {
		inputs = append(inputs, strings.Repeat(u, size/len(u)))
	}
	inputs = append(inputs, English(rng, size), LongWord(rng, size))
	if testing.Short() {
		count /= 5
	}
	for range count {
		inputs = append(inputs, Random(rng, rng.Intn(size), extra))
	}
	return inputs
}

// MaxRatio bounds cpu(large)/cpu(small) in Scaling: 30 where linear
// work gives 10 and quadratic work 100.
const MaxRatio = 30

// Scaling measures the CPU time that encode spends on small and on large
// text, large ten times as long (the least of three runs each), logs the
// figures per MB, and fails t when large costs more than MaxRatio times
// as much as small (the ratio is scaled to lengths exactly ten times
// apart).
//
// The measure is the CPU time of the thread that runs encode (the
// goroutine is locked to it; see threadCPU), with the garbage collector
// off, so it counts the work encode does and not the time the thread
// waits for a core: wall-clock ratios went past the bound on a machine
// shared with other work (21.3 where 20 was allowed, 100 KB of prose at
// 4.6 ms), since a scheduler quantum alone can double a short run. Where
// threadCPU is not available it falls back to wall-clock time.
func Scaling(t testing.TB, name string, encode func(string), small, large string) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	clock, what := threadCPU, "thread CPU"
	if _, ok := threadCPU(); !ok {
		clock, what = wallClock, "wall-clock"
	}
	costOf := func(s string) time.Duration {
		best := time.Duration(math.MaxInt64)
		for range 3 {
			t0, _ := clock()
			encode(s)
			t1, _ := clock()
			best = min(best, t1-t0)
		}
		runtime.GC()
		return max(best, 1)
	}
	ts, tl := costOf(small), costOf(large)
	perMB := func(d time.Duration, s string) float64 { return d.Seconds() * 1e6 / float64(len(s)) }
	r := float64(tl) / float64(ts) * float64(len(small)) * 10 / float64(len(large))
	t.Logf("%s (%s time): %d bytes in %v (%.3g s/MB), %d bytes in %v (%.3g s/MB); ratio %.1f (linear 10, quadratic 100)",
		name, what, len(small), ts, perMB(ts, small), len(large), tl, perMB(tl, large), r)
	if r > MaxRatio {
		t.Errorf("%s: %d bytes cost %.1f times the %s time of %d (linear: 10, quadratic: 100)", name, len(large), r, what, len(small))
	}
}

// wallClock is the clock of Scaling where threadCPU is not available.
func wallClock() (time.Duration, bool) { return time.Duration(time.Now().UnixNano()), true }
