package kvcache

import (
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// TestSizeMatchesNew checks Size against the tensors and cells New makes
// for the same configuration: pools shared or compact, streams per
// sequence or unified, recurrent states with rewind planes.
func TestSizeMatchesNew(t *testing.T) {
	b := newBackend(t)
	pad := b.(ml.BackendCacheConfig).CacheConfig().CachePadding
	for _, cfg := range []Config{
		{Layers: []LayerSpec{attn, swa, {Kind: None}}, Capacity: 1000, Sequences: 3, Window: 3},
		{Layers: []LayerSpec{attn, swa}, Capacity: 5000, Sequences: 2, Window: 40, MaxBatch: 16, CompactWindow: true},
		{Layers: []LayerSpec{swa, attn}, Capacity: 777, Sequences: 4, Window: 7, CompactWindow: true, Unified: true},
		{Layers: []LayerSpec{rec, attn, rec}, Capacity: 300, Sequences: 2, Rewind: 3},
		{Layers: []LayerSpec{attn}, Capacity: 100, DType: ml.DTypeF32},
		{Layers: []LayerSpec{latent, attn, latent}, Capacity: 300, Sequences: 2},
	} {
		c, err := New(b, cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		layers, host, err := Size(cfg, pad)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		var cells uint64
		for _, p := range []*pool{c.full, c.swa} {
			if p != nil {
				cells += uint64(len(p.cells))
			}
		}
		if host != cells*cellBytes {
			t.Errorf("%+v: host %d bytes, New made %d cells", cfg, host, cells)
		}
		for l := range cfg.Layers {
			var made uint64
			for _, x := range []ml.Tensor{poolTensor(c, l, true), poolTensor(c, l, false), recTensor(c, l, 0), recTensor(c, l, 1)} {
				if x != nil {
					made += tensorBytes(x)
				}
			}
			if layers[l] != made {
				t.Errorf("%+v: layer %d: Size says %d bytes, New made %d", cfg, l, layers[l], made)
			}
		}
		c.Close()
	}
	for _, n := range []int{0, -1, MaxCapacity + 1} {
		if _, _, err := Size(Config{Layers: []LayerSpec{attn}, Capacity: n}, 1); err == nil || !strings.Contains(err.Error(), "capacity") {
			t.Errorf("capacity %d: %v", n, err)
		}
		if _, err := New(b, Config{Layers: []LayerSpec{attn}, Capacity: n}); err == nil {
			t.Errorf("New took capacity %d", n)
		}
	}
}

func poolTensor(c *Cache, l int, keys bool) ml.Tensor {
	p := c.poolOf[l]
	if p == nil {
		return nil
	}
	if keys {
		return p.keys[l]
	}
	return p.values[l]
}

func recTensor(c *Cache, l, i int) ml.Tensor {
	if c.rec == nil {
		return nil
	}
	return c.rec.states[i][l]
}

// tensorBytes is the size of an F16 or F32 tensor.
func tensorBytes(x ml.Tensor) uint64 {
	n := uint64(1)
	for _, d := range x.Shape() {
		n *= uint64(d)
	}
	if x.DType() == ml.DTypeF16 {
		return 2 * n
	}
	return 4 * n
}
