package backend

import (
	"reflect"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// The per-layer getters Ollama's models assert on the config (qwen3next,
// lfm2, nemotronh): a scalar spreads over block_count layers, an array
// gives each layer its value and the default past its end (its value when
// it has one element), an i32 array counts as well, an absent key gives
// the default (1 for head counts, 0 for FFN lengths).
func TestPerLayerGetters(t *testing.T) {
	g := &ggufFile{}
	g.kv("general.architecture", "hy").
		kv("hy.block_count", uint32(5)).
		kv("hy.attention.head_count", uint32(8)).
		kv("hy.attention.head_count_kv", []uint32{0, 0, 0, 2}).
		kv("hy.feed_forward_length", []int32{64, 0, 32, 0, 16}).
		kv("hy.expert_counts", []uint32{4, 4})
	c := openConfig(t, g, ml.BackendParams{AllocMemory: false})
	type layered interface {
		HeadCount() []uint64
		HeadCountKV() []uint64
		FFNLength() []uint64
		Uints(string, ...[]uint32) []uint32
	}
	l, ok := c.(layered)
	if !ok {
		t.Fatalf("the config (%T) lacks the per-layer getters Ollama's models assert on", c)
	}
	for _, k := range []struct {
		name      string
		got, want any
	}{
		{"HeadCount", l.HeadCount(), []uint64{8, 8, 8, 8, 8}},
		{"HeadCountKV", l.HeadCountKV(), []uint64{0, 0, 0, 2, 1}},
		{"FFNLength", l.FFNLength(), []uint64{64, 0, 32, 0, 16}},
		{"Uints", l.Uints("expert_counts"), []uint32{4, 4}},
		{"Uints default", l.Uints("missing", []uint32{7}), []uint32{7}},
	} {
		if !reflect.DeepEqual(k.got, k.want) {
			t.Errorf("%s = %v, want %v", k.name, k.got, k.want)
		}
	}
	g2 := &ggufFile{}
	g2.kv("general.architecture", "d").kv("d.block_count", uint32(2))
	l2 := openConfig(t, g2, ml.BackendParams{}).(layered)
	if !reflect.DeepEqual(l2.HeadCountKV(), []uint64{1, 1}) || !reflect.DeepEqual(l2.FFNLength(), []uint64{0, 0}) {
		t.Errorf("defaults: %v %v", l2.HeadCountKV(), l2.FFNLength())
	}
}
