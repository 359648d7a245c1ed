package schema

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The corpus test: every schema of testdata/schemas.json through ToGrammar,
// against llama.cpp's json_schema_to_grammar on the same text
// (testdata/golden.json, written by `make schema-golden`).
//
// A grammar must be the same text, byte for byte, and so must the warning
// llama.cpp prints. An error must be an error; where llama.cpp's message is
// its converter's ("JSON schema conversion failed: ..."), the same message.
// Malformed JSON is an error on both sides, with the JSON parser's own
// message (nlohmann's differs in wording, not in what it refuses).

type goldenCase struct {
	Name    string  `json:"name"`
	Input   string  `json:"input"`
	Grammar *string `json:"grammar"`
	Error   *string `json:"error"`
	Warning string  `json:"warning"`
}

type corpusCase struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Text   *string         `json:"text"`
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Results []goldenCase }
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return g.Results
}

func TestGoldenCorpus(t *testing.T) {
	golden := loadGolden(t)
	raw, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct{ Cases []corpusCase }
	if err := json.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	if len(corpus.Cases) != len(golden) {
		t.Fatalf("schemas.json has %d cases, golden.json %d: run make schema-golden", len(corpus.Cases), len(golden))
	}

	identical, errorsSame, errorsBoth := 0, 0, 0
	for i, g := range golden {
		c := corpus.Cases[i]
		if c.Name != g.Name {
			t.Fatalf("case %d: schemas.json has %q, golden.json %q: run make schema-golden", i, c.Name, g.Name)
		}
		// the input llama.cpp converted is the corpus case's: its text, or
		// its schema as common_json dumps it (which our dump must equal)
		if c.Text != nil {
			if *c.Text != g.Input {
				t.Errorf("%s: golden input differs from the corpus text: run make schema-golden", g.Name)
			}
		} else {
			v, err := parseJSON(string(c.Schema), DefaultMaxDepth)
			if err != nil {
				t.Errorf("%s: %v", g.Name, err)
			} else if d := v.dump(); d != g.Input {
				t.Errorf("%s: our dump of the schema differs from llama.cpp's:\n ours:   %s\n theirs: %s", g.Name, d, g.Input)
			}
		}

		res, err := Convert([]byte(g.Input), Options{})
		switch {
		case g.Grammar != nil:
			if err != nil {
				t.Errorf("%s: error %q, llama.cpp gives a grammar", g.Name, err)
				continue
			}
			if res.Grammar != *g.Grammar {
				t.Errorf("%s: grammar differs\n--- ours\n%s--- llama.cpp\n%s", g.Name, res.Grammar, *g.Grammar)
				continue
			}
			warning := ""
			if len(res.Warnings) > 0 {
				warning = "WARNING: JSON schema conversion was incomplete: " + strings.Join(res.Warnings, "; ") + "\n"
			}
			if warning != g.Warning {
				t.Errorf("%s: warning differs\n ours:   %q\n theirs: %q", g.Name, warning, g.Warning)
				continue
			}
			identical++
		default:
			if err == nil {
				t.Errorf("%s: a grammar, llama.cpp gives the error %q", g.Name, *g.Error)
				continue
			}
			errorsBoth++
			if strings.HasPrefix(*g.Error, "JSON schema conversion failed:") {
				if err.Error() != *g.Error {
					t.Errorf("%s: error differs\n ours:   %q\n theirs: %q", g.Name, err, *g.Error)
					continue
				}
				errorsSame++
			} else if !strings.HasPrefix(*g.Error, "[json.exception.") || !strings.HasPrefix(err.Error(), "invalid JSON") {
				t.Errorf("%s: error kinds differ\n ours:   %q\n theirs: %q", g.Name, err, *g.Error)
				continue
			}
			identical++
		}
	}
	t.Logf("%d of %d cases identical to llama.cpp (%d grammars, %d errors: %d with the same message, %d malformed JSON)",
		identical, len(golden), len(golden)-errorsBoth, errorsBoth, errorsSame, errorsBoth-errorsSame)
}
