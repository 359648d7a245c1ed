package safetensors

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// write makes a safetensors file from a header and data section.
func write(t *testing.T, header string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.safetensors")
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	b = append(b, data...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRead(t *testing.T) {
	data := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))
	data = binary.LittleEndian.AppendUint32(data, math.Float32bits(-2))
	data = binary.LittleEndian.AppendUint16(data, 0x3c00) // f16 1
	data = binary.LittleEndian.AppendUint16(data, 0xc000) // f16 -2
	data = binary.LittleEndian.AppendUint16(data, 0x3f80) // bf16 1
	data = binary.LittleEndian.AppendUint64(data, 7)
	path := write(t, `{"__metadata__":{"format":"pt"},
		"b.h":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},
		"a.f":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},
		"c.bf":{"dtype":"BF16","shape":[],"data_offsets":[12,14]},
		"d.i":{"dtype":"I64","shape":[1],"data_offsets":[14,22]}}`, data)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata["format"] != "pt" || len(f.Tensors) != 4 || f.Tensors[0].Name != "a.f" {
		t.Fatalf("metadata %v, tensors %+v", f.Metadata, f.Tensors)
	}
	for _, c := range []struct {
		name string
		want []float32
	}{{"a.f", []float32{1.5, -2}}, {"b.h", []float32{1, -2}}, {"c.bf", []float32{1}}} {
		tt, ok := f.Tensor(c.name)
		if !ok {
			t.Fatalf("no tensor %s", c.name)
		}
		got, err := f.Float32s(tt)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) || got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1] {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	d, _ := f.Tensor("d.i")
	if _, err := f.Float32s(d); err == nil || !strings.Contains(err.Error(), "I64") {
		t.Errorf("I64 as floats: %v", err)
	}
}

func TestBadFiles(t *testing.T) {
	for _, c := range []struct {
		header string
		data   int
		want   string
	}{
		{`[1]`, 0, "not a JSON object"},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 8, "needs 8 bytes"},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, "outside"},
		{`{"a":{"dtype":"X9","shape":[2],"data_offsets":[0,8]}}`, 8, "unknown dtype"},
		{`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, 8, "bad shape"},
		{`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "overlap"},
	} {
		_, err := Open(write(t, c.header, make([]byte, c.data)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.header, err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "short")
	os.WriteFile(path, []byte{1, 2}, 0o644)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short file: %v", err)
	}
	os.WriteFile(path, binary.LittleEndian.AppendUint64(nil, 1<<40), 0o644)
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("huge header: %v", err)
	}
}
