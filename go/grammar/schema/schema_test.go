package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func TestJSON(t *testing.T) {
	// llama-server's response_format {"type": "json_object"} is the
	// conversion of {}: the golden "empty" case
	var empty *goldenCase
	for _, g := range loadGolden(t) {
		if g.Name == "empty" {
			empty = &g
			break
		}
	}
	if empty == nil || empty.Grammar == nil {
		t.Fatal("no golden grammar for the empty schema")
	}
	if got := JSON(); got != *empty.Grammar {
		t.Fatalf("JSON() differs from llama.cpp's conversion of {}:\n%s\n%s", got, *empty.Grammar)
	}
	if !strings.HasPrefix(JSON(), "array ::=") || !strings.Contains(JSON(), "\nroot ::= value\n") {
		t.Fatalf("JSON():\n%s", JSON())
	}
}

func TestDotall(t *testing.T) {
	s := []byte(`{"type":"string","pattern":"^a.b$"}`)
	r, err := Convert(s, Options{})
	if err != nil || !strings.Contains(r.Grammar, `dot ::= [^\x0A\x0D]`) {
		t.Fatalf("default: %v\n%s", err, r.Grammar)
	}
	r, err = Convert(s, Options{Dotall: true})
	if err != nil || !strings.Contains(r.Grammar, `dot ::= [\U00000000-\U0010FFFF]`) || !strings.Contains(r.Grammar, `root ::= "\"" ("a" dot "b") "\""`) {
		t.Fatalf("dotall: %v\n%s", err, r.Grammar)
	}
}

func TestWarnings(t *testing.T) {
	r, err := Convert([]byte(`{"type":"object","properties":{"a":{"type":"string","pattern":"^\\d+$"},"b":{"type":"string","pattern":"abc"}}}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`pattern ^\d+$ is not supported (unsupported escape: \d), accepting any string`,
		`pattern abc is not supported (not anchored with '^' and '$'), accepting any string`,
	}
	if fmt.Sprint(r.Warnings) != fmt.Sprint(want) {
		t.Fatalf("warnings %q", r.Warnings)
	}
}

// expectLimit converts s and wants an ErrLimit error, quickly (each takes
// under a second here; the bound leaves room for a loaded machine).
func expectLimit(t *testing.T, name string, s []byte, opts Options) {
	t.Helper()
	start := time.Now()
	_, err := Convert(s, opts)
	el := time.Since(start)
	if !errors.Is(err, ErrLimit) {
		t.Errorf("%s: want ErrLimit, got %v", name, err)
		return
	}
	if el > 30*time.Second {
		t.Errorf("%s: %v to refuse", name, el)
	}
	t.Logf("%s (%d bytes): %v in %v", name, len(s), err, el.Round(time.Millisecond))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestHostile(t *testing.T) {
	// JSON nested past MaxDepth
	expectLimit(t, "nested arrays", []byte(strings.Repeat("[", 1_000_000)), Options{})
	expectLimit(t, "nested objects", []byte(strings.Repeat(`{"a":`, 200_000)), Options{})

	// schemas nested past MaxDepth
	var deep any = map[string]any{"type": "string"}
	for range 600 {
		deep = map[string]any{"type": "object", "properties": map[string]any{"n": deep}}
	}
	expectLimit(t, "nested schemas", mustJSON(deep), Options{})

	// a $ref chain longer than MaxDepth
	defs := map[string]any{}
	for i := range 3000 {
		if i == 2999 {
			defs[fmt.Sprint("D", i)] = map[string]any{"type": "integer"}
		} else {
			defs[fmt.Sprint("D", i)] = map[string]any{"$ref": fmt.Sprint("#/$defs/D", i+1)}
		}
	}
	expectLimit(t, "ref chain", mustJSON(map[string]any{"$defs": defs, "$ref": "#/$defs/D0"}), Options{})

	// an allOf through a $ref to itself: a stack overflow in llama.cpp
	expectLimit(t, "allOf ref cycle", []byte(`{"$defs":{"A":{"$ref":"#/$defs/A"}},"allOf":[{"$ref":"#/$defs/A"}]}`), Options{})

	// allOf of two $refs to the next level, 40 levels: 2^40 visits in
	// llama.cpp (22 levels take it 20 s on this machine)
	d := map[string]any{}
	for i := range 40 {
		var p any = map[string]any{"type": "string"}
		if i < 39 {
			next := fmt.Sprint("#/$defs/L", i+1)
			p = map[string]any{"allOf": []any{map[string]any{"$ref": next}, map[string]any{"$ref": next}}}
		}
		d[fmt.Sprint("L", i)] = map[string]any{"type": "object", "properties": map[string]any{"p": p}, "required": []string{"p"}}
	}
	expectLimit(t, "exponential allOf", mustJSON(map[string]any{"$defs": d, "$ref": "#/$defs/L0"}), Options{})

	// input over MaxInputBytes
	expectLimit(t, "input size", []byte(`{"enum":["`+strings.Repeat("x", DefaultMaxInputBytes)+`"]}`), Options{})

	// a grammar over MaxGrammarBytes: long optional property names appear
	// in several rules each
	props := map[string]any{}
	for i := range 1500 {
		props[fmt.Sprintf("%s%04d", strings.Repeat("p", 2000), i)] = map[string]any{"type": "integer"}
	}
	expectLimit(t, "grammar size", mustJSON(map[string]any{"type": "object", "properties": props, "additionalProperties": true}), Options{})
	// a 1 MB name with additional properties: a trie 1M deep in the key
	// rule (a stack overflow in llama.cpp), about 20 MB of grammar
	expectLimit(t, "long name", mustJSON(map[string]any{"type": "object", "properties": map[string]any{strings.Repeat("k", 1<<20): map[string]any{}}, "additionalProperties": true}), Options{})
	expectLimit(t, "grammar size (small limit)", []byte(`{"enum":["`+strings.Repeat("x", 5000)+`"]}`), Options{MaxGrammarBytes: 4096})

	// rule-name collisions: allOf members with the same property name and
	// different schemas name their rules x, x0, x1, ... probing from 0
	var members []any
	for i := range 4000 {
		members = append(members, map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"const": i}}})
	}
	expectLimit(t, "name collisions", mustJSON(map[string]any{"allOf": members}), Options{})
}

// Large but legitimate inputs convert in linear time.
func TestLargeLinear(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    []byte
	}{
		{"pattern of 1M quantifiers", []byte(`{"type":"string","pattern":"^a` + strings.Repeat("*", 1_000_000) + `$"}`)},
		{"enum of 100k", mustJSON(map[string]any{"enum": func() []string {
			v := make([]string, 100_000)
			for i := range v {
				v[i] = fmt.Sprint("v", i)
			}
			return v
		}()})},
		{"3000 optional properties", mustJSON(map[string]any{"type": "object", "properties": func() map[string]any {
			m := map[string]any{}
			for i := range 3000 {
				m[fmt.Sprint("p", i)] = map[string]any{"type": "integer"}
			}
			return m
		}()})},
		{"property name of 100 kB", mustJSON(map[string]any{"type": "object", "properties": map[string]any{strings.Repeat("k", 100_000): map[string]any{}}, "additionalProperties": true})},
	} {
		start := time.Now()
		r, err := Convert(tc.s, Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if el := time.Since(start); el > 30*time.Second {
			t.Errorf("%s: %v", tc.name, el)
		}
		t.Logf("%s: %d bytes of grammar in %v", tc.name, len(r.Grammar), time.Since(start).Round(time.Millisecond))
	}
}

func TestInvalidInput(t *testing.T) {
	for _, s := range []string{
		"{\"const\":\"\xff\"}",           // not UTF-8
		"{\"const\":\"\xed\xa0\x80\"}",   // a UTF-8 surrogate
		"{\"const\":\"\xc0\xaf\"}",       // overlong
		"{\"const\":\"\\udc00\"}",        // lone low surrogate
		"{\"const\":\"\\ud800\\u0041\"}", // high surrogate, no low one
		"{\"a\":1}\x00",
	} {
		if _, err := ToGrammar([]byte(s)); err == nil || !strings.HasPrefix(err.Error(), "invalid JSON") {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// Mutations of every corpus input: errors, never a panic (Convert turns an
// internal panic into an "internal error", which this rejects too).
func TestMutations(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []byte(`{}[]":,-0123456789.eE \\^$()|*+?abnul`)
	n := 0
	for _, g := range loadGolden(t) {
		for range 25 {
			b := []byte(g.Input)
			for range 1 + rng.Intn(4) {
				if len(b) == 0 {
					b = append(b, alphabet[rng.Intn(len(alphabet))])
					continue
				}
				i := rng.Intn(len(b))
				switch rng.Intn(3) {
				case 0:
					b[i] = alphabet[rng.Intn(len(alphabet))]
				case 1:
					b = append(b[:i], b[i+1:]...)
				default:
					b = append(b[:i], append([]byte{alphabet[rng.Intn(len(alphabet))]}, b[i:]...)...)
				}
			}
			_, err := ToGrammar(b)
			if err != nil && strings.Contains(err.Error(), "internal error") {
				t.Errorf("%s mutated to %q: %v", g.Name, b, err)
			}
			n++
		}
	}
	t.Logf("%d mutated schemas", n)
}

func FuzzConvert(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":105}},"additionalProperties":{"type":"string","pattern":"^(a|b){2,3}$"}}`))
	f.Add([]byte(`{"$defs":{"A":{"allOf":[{"$ref":"#/$defs/A"}]}},"$ref":"#/$defs/A"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := Convert(b, Options{MaxSteps: 200_000})
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatal(err)
		}
	})
}
