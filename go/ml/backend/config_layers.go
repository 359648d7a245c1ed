//go:build cgo

package backend

// The getters Ollama's model code reaches through a type assertion on the
// fs.Config its backend returns (fs/ggml's KV in Ollama): qwen3next and
// lfm2 read per-layer head counts, nemotronh also per-layer FFN lengths,
// newer models Uints. Same meaning as Ollama's.

// Uints is the prefixed key's u32 array, or the default.
func (kv *kvConfig) Uints(key string, d ...[]uint32) []uint32 { return get(kv, key, d) }

// HeadCount is attention.head_count per layer (block_count of them): a
// scalar applies to every layer, an array gives each layer its value
// (layers past its end get 1, or its value when it has one element); absent:
// 1.
func (kv *kvConfig) HeadCount() []uint64 { return kv.perLayer("attention.head_count", 1) }

// HeadCountKV is HeadCount for attention.head_count_kv (0 marks a layer
// without attention in the hybrid models).
func (kv *kvConfig) HeadCountKV() []uint64 { return kv.perLayer("attention.head_count_kv", 1) }

// FFNLength is HeadCount for feed_forward_length, whose default is 0.
func (kv *kvConfig) FFNLength() []uint64 { return kv.perLayer("feed_forward_length", 0) }

// perLayer spreads a u32 scalar or a u32/i32 array over the layers.
func (kv *kvConfig) perLayer(key string, def uint32) []uint64 {
	var vals []uint32
	if v, ok := lookup[uint32](kv, key); ok {
		vals = []uint32{v}
	} else if a, ok := lookup[[]uint32](kv, key); ok {
		vals = a
	} else if a, ok := lookup[[]int32](kv, key); ok {
		vals = make([]uint32, len(a))
		for i, v := range a {
			vals[i] = uint32(v) // Ollama's conversion: a negative count wraps
		}
	} else {
		vals = []uint32{def}
	}
	if len(vals) == 1 {
		def = vals[0]
	}
	out := make([]uint64, kv.Uint("block_count"))
	for i := range out {
		if i < len(vals) {
			out[i] = uint64(vals[i])
		} else {
			out[i] = uint64(def)
		}
	}
	return out
}
