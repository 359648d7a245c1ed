package kvcache

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// MaxCapacity is the most tokens a cache holds (its cells keep int32
// positions, as llama.cpp's).
const MaxCapacity = math.MaxInt32

// cellBytes is the Go memory of one cell (a cached token's sequence and
// position).
const cellBytes = 8

// Size is the memory New(b, cfg) would take on a backend whose cache
// padding is pad (ml.CacheConfig.CachePadding; below 1: none), computed
// from the layers' shapes without allocating anything: the bytes of each
// layer's tensors (keys and values, or recurrent states; 0 for a layer
// that keeps nothing), which New puts on that layer's device, and the
// bytes of the cache's bookkeeping in Go memory (a cell per token). It
// refuses the capacities New refuses. Sums that would overflow are
// math.MaxUint64.
func Size(cfg Config, pad int) (layers []uint64, host uint64, err error) {
	if cfg.Capacity <= 0 || cfg.Capacity > MaxCapacity {
		return nil, 0, fmt.Errorf("kvcache: capacity %d must be 1 to %d tokens", cfg.Capacity, MaxCapacity)
	}
	if cfg.Rewind < 0 || cfg.Rewind > 63 {
		return nil, 0, fmt.Errorf("kvcache: rewind %d must be 0 to 63 tokens", cfg.Rewind)
	}
	pad = max(pad, 1)
	seqs := max(cfg.Sequences, 1)
	batch := cfg.MaxBatch
	if batch <= 0 {
		batch = 512
	}
	dtype := cfg.DType
	if dtype == ml.DTypeOther {
		dtype = ml.DTypeF16
	}
	streams := seqs
	if cfg.Unified {
		streams = 1
	}
	perStream := roundUp((cfg.Capacity+streams-1)/streams, pad)
	fullCells := uint64(streams) * uint64(perStream)
	swaCells := fullCells
	if cfg.CompactWindow {
		win := cfg.Window + batch
		if cfg.Unified {
			win = cfg.Window*seqs + batch
		}
		swaCells = uint64(streams) * uint64(min(roundUp(win, pad), perStream))
	}
	var anyFull, anySWA bool
	layers = make([]uint64, len(cfg.Layers))
	for i, l := range cfg.Layers {
		switch l.Kind {
		case Attention, SlidingWindow, Chunked:
			cells := fullCells
			if l.Kind.windowed() && cfg.CompactWindow {
				cells, anySWA = swaCells, true
			} else {
				anyFull = true
			}
			dims := uint64(max(l.KeyDim, 0))
			if !l.ValuesInKeys {
				dims += uint64(max(l.ValueDim, 0))
			}
			perCell := mul(uint64(max(l.KVHeads, 0)), dims)
			layers[i] = dtypeBytes(dtype, mul(cells, perCell))
		case Recurrent:
			rows := uint64(seqs) * uint64(1+cfg.Rewind)
			conv := mul(uint64(max(l.ConvWidth-1, 0)), uint64(max(l.ConvChannels, 0)))
			state := mul(mul(uint64(max(l.StateSize, 0)), uint64(max(l.stateRows(), 0))), uint64(max(l.StateHeads, 0)))
			layers[i] = mul(mul(rows, add(conv, state)), 4)
		}
	}
	if anyFull {
		host = add(host, mul(fullCells, cellBytes))
	}
	if anySWA {
		host = add(host, mul(swaCells, cellBytes))
	}
	return layers, host, nil
}

// dtypeBytes is the size of n elements of type t (whole blocks for the
// quantized types; 4 bytes an element for types it does not know).
func dtypeBytes(t ml.DType, n uint64) uint64 {
	switch t {
	case ml.DTypeF16:
		return mul(n, 2)
	case ml.DTypeQ80:
		return mul((n+31)/32, 34)
	case ml.DTypeQ40:
		return mul((n+31)/32, 18)
	case ml.DTypeMXFP4:
		return mul((n+31)/32, 17)
	}
	return mul(n, 4)
}

// mul and add saturate at math.MaxUint64.
func mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

func add(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}
