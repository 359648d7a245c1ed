package bert_test

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/convert"
	"github.com/ggml-rs/ggml-rs/go/internal/testfile"
)

// setConfig sets key of dir's config.json to the JSON text raw.
func setConfig(t *testing.T, dir, key, raw string) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg[key] = json.RawMessage(raw)
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConvertRefusesAbsurdSizes: sizes in config.json that are negative,
// not integers, too large for GGUF, or not those of the tensors there are
// are errors before anything is sized from them (a vocab_size of 2e9 used
// to allocate 2e9 token strings, a num_hidden_layers of 2e9 a tensor table
// of 2e9 layers), and so are inputs that are not regular files or are too
// large to read whole.
func TestConvertRefusesAbsurdSizes(t *testing.T) {
	c := tinyConfig{hidden: 8, layers: 1, heads: 2, ff: 16, ctx: 8}
	ts := tinyWeights(c, 1)
	set := func(key, raw string) func(string) {
		return func(dir string) { setConfig(t, dir, key, raw) }
	}
	for _, tc := range []struct {
		name string
		edit func(dir string)
		want string
	}{
		{"huge vocab", set("vocab_size", "2000000000"), `tensor "bert.embeddings.word_embeddings.weight" has shape [14 8], config.json's vocab_size and hidden_size imply [2000000000 8]`},
		{"more vocab than int32", set("vocab_size", "1099511627776"), "vocab_size 1099511627776 is more than 2147483647"},
		{"huge layers", set("num_hidden_layers", "2000000000"), "config.json's num_hidden_layers is 2000000000, model.safetensors has 1 layers"},
		{"more layers than int32", set("num_hidden_layers", "9223372036854775807"), "num_hidden_layers 9223372036854775807 is more than"},
		{"huge hidden", set("hidden_size", "2000000000"), "has shape [14 8], config.json's vocab_size and hidden_size imply [14 2000000000]"},
		{"huge ff", set("intermediate_size", "2000000000"), "config.json's intermediate_size and hidden_size imply [2000000000 8]"},
		{"huge context", set("max_position_embeddings", "2000000000"), "config.json's max_position_embeddings and hidden_size imply [2000000000 8]"},
		{"huge token types", set("type_vocab_size", "2000000000"), "config.json's type_vocab_size and hidden_size imply [2000000000 8]"},
		{"huge heads", set("num_attention_heads", "2000000000"), "hidden_size 8 is not a multiple of num_attention_heads 2000000000"},
		{"negative", set("vocab_size", "-14"), "must all be positive"},
		{"fraction", set("num_hidden_layers", "1.5"), "cannot unmarshal number 1.5"},
		{"exponent", set("vocab_size", "1e30"), "cannot unmarshal number 1e30"},
		{"beyond int64", set("hidden_size", "99999999999999999999"), "cannot unmarshal number 99999999999999999999"},
		{"string", set("hidden_size", `"8"`), "cannot unmarshal string"},
		{"layer gap", func(dir string) {
			bad := append(tinyWeights(c, 1), randTensor(rand.New(rand.NewSource(1)), "encoder.layer.1000000000.output.dense.bias", 0, 8))
			writeSafetensors(t, filepath.Join(dir, "model.safetensors"), bad)
			setConfig(t, dir, "num_hidden_layers", "1000000001")
		}, "model.safetensors has layers up to 1000000000 but only 2 of them"},
		{"config.json too large", func(dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
			os.WriteFile(filepath.Join(dir, "config.json"), append(b, make([]byte, 16<<20)...), 0o644)
		}, "config.json is larger than the 16777216 bytes this reader accepts"},
		{"config.json a pipe", func(dir string) { testfile.FifoAt(t, filepath.Join(dir, "config.json")) }, "config.json is not a regular file (a named pipe)"},
		{"config.json a device", func(dir string) {
			os.Remove(filepath.Join(dir, "config.json"))
			os.Symlink("/dev/zero", filepath.Join(dir, "config.json"))
		}, "config.json is not a regular file (a character device)"},
		{"vocab.txt a pipe", func(dir string) { testfile.FifoAt(t, filepath.Join(dir, "vocab.txt")) }, "vocab.txt is not a regular file (a named pipe)"},
		{"tokenizer_config.json a pipe", func(dir string) { testfile.FifoAt(t, filepath.Join(dir, "tokenizer_config.json")) }, "tokenizer_config.json is not a regular file (a named pipe)"},
		{"model.safetensors a pipe", func(dir string) { testfile.FifoAt(t, filepath.Join(dir, "model.safetensors")) }, "model.safetensors is not a regular file (a named pipe)"},
	} {
		dir := writeTiny(t, c, ts, "")
		tc.edit(dir)
		err := testfile.Within(t, tc.name, func() error { _, err := convert.BERT(dir, convert.BERTOptions{}); return err })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
