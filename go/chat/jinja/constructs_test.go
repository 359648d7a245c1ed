package jinja

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"
)

// The construct cases (testdata/constructs.json: expressions, filters,
// tests, loops, macros, namespaces, whitespace control, methods, errors)
// rendered by llama.cpp's own engine (testdata/golden.json, written by
// `make jinja-golden` through llama-ref jinja). Ours must give the same
// output byte for byte, and fail where it fails (the messages differ).

type constructCase struct {
	Name     string          `json:"name"`
	Template string          `json:"template"`
	Vars     json.RawMessage `json:"vars"`
}

type constructResult struct {
	Name   string  `json:"name"`
	Output *string `json:"output"`
	Hex    string  `json:"output_hex"`
	Error  *string `json:"error"`
}

// orderedJSON decodes JSON into template values, keeping the key order of
// objects (as llama.cpp's ordered JSON does).
func orderedJSON(d *json.Decoder) (Value, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := NewObject()
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := orderedJSON(d)
				if err != nil {
					return nil, err
				}
				o.SetString(k.(string), v)
			}
			_, err := d.Token()
			return o, err
		case '[':
			a := &Array{}
			for d.More() {
				v, err := orderedJSON(d)
				if err != nil {
					return nil, err
				}
				a.Items = append(a.Items, v)
			}
			_, err := d.Token()
			return a, err
		}
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return Int(i), nil
		}
		f, err := t.Float64()
		return Float(f), err
	case string:
		return String(t), nil
	case bool:
		return Bool(t), nil
	case nil:
		return None{}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func TestConstructsMatchLlamaCpp(t *testing.T) {
	var cases struct{ Cases []constructCase }
	var golden struct{ Results []constructResult }
	for path, v := range map[string]any{"testdata/constructs.json": &cases, "testdata/golden.json": &golden} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if len(golden.Results) != len(cases.Cases) {
		t.Fatalf("%d golden results for %d cases: run make jinja-golden", len(golden.Results), len(cases.Cases))
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, c := range cases.Cases {
		g := golden.Results[i]
		if g.Name != c.Name {
			t.Fatalf("case %d: golden %q for case %q: run make jinja-golden", i, g.Name, c.Name)
		}
		d := json.NewDecoder(bytes.NewReader(c.Vars))
		d.UseNumber()
		vars, err := orderedJSON(d)
		if err != nil {
			t.Fatalf("%s: vars: %v", c.Name, err)
		}
		out, err := func() (string, error) {
			tmpl, err := Parse(c.Template)
			if err != nil {
				return "", err
			}
			return tmpl.Execute(vars.(*Object), now, DefaultLimits)
		}()
		switch {
		case g.Error != nil && err == nil:
			t.Errorf("%s: llama.cpp fails (%s); ours renders %q", c.Name, *g.Error, out)
		case g.Error == nil && err != nil:
			t.Errorf("%s: ours fails (%v); llama.cpp renders %q", c.Name, err, *g.Output)
		case g.Error == nil && hex.EncodeToString([]byte(out)) != g.Hex:
			want, _ := hex.DecodeString(g.Hex)
			t.Errorf("%s:\n ours      %q\n llama.cpp %q", c.Name, out, want)
		}
	}
}
