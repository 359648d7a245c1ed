// Package kvcache is a causal key/value cache for one sequence of decoder
// tokens, over the ggmlrs/ml API.
//
// Each layer's keys and values live in a tensor of that layer's context
// (so on the layer's device), allocated on the first Put. A batch's keys
// and values are written with SetRows at the batch's positions; Get
// returns views of the history (rounded up to CacheConfig.CachePadding)
// and a causal mask built on the host for the batch. When the backend
// asks for it (CacheConfig.PermutedV), values are stored transposed,
// [capacity, headDim, kvHeads], so attention reads them without a copy.
package kvcache

import (
	"fmt"
	"math"

	"ggmlrs/ml"
)

// Causal is a single-sequence causal cache. Use: StartForward once per
// batch (before the graph is built), then Put and Get once per layer.
type Causal struct {
	DType    ml.DType // element type of the stored keys and values (F16)
	config   ml.CacheConfig
	capacity int
	b        ml.Backend

	ctxs           []ml.Context
	keys, values   []ml.Tensor
	n              int // tokens stored (after the current batch commits)
	batch          int
	histLen        int
	curLoc, curMsk ml.Tensor
	// mskIn is the host-made F32 mask (curMsk may be its cast); gen counts
	// Resets and Closes, so a graph built for this cache can tell whether
	// its view of the cache is still valid (ReuseForward).
	mskIn ml.Tensor
	gen   int

	locBuf  []int32   // scratch of inputs
	maskBuf []float32 // scratch of inputs
}

// New makes a cache for layers layers holding up to capacity tokens
// (rounded up to the backend's padding).
func New(b ml.Backend, layers, capacity int) *Causal {
	c := &Causal{DType: ml.DTypeF16, b: b, config: ml.CacheConfig{CachePadding: 1}}
	if bc, ok := b.(ml.BackendCacheConfig); ok {
		c.config = bc.CacheConfig()
	}
	if c.config.CachePadding < 1 {
		c.config.CachePadding = 1
	}
	if c.config.MaskDType == ml.DTypeOther {
		c.config.MaskDType = ml.DTypeF32
	}
	c.capacity = roundUp(max(capacity, 1), c.config.CachePadding)
	c.ctxs = make([]ml.Context, layers)
	c.keys = make([]ml.Tensor, layers)
	c.values = make([]ml.Tensor, layers)
	return c
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Capacity is the number of tokens the cache holds.
func (c *Causal) Capacity() int { return c.capacity }

// Len is the number of tokens stored.
func (c *Causal) Len() int { return c.n }

// Reset forgets the stored tokens (the memory is kept).
func (c *Causal) Reset() { c.n = 0; c.gen++ }

// Close frees the cache's tensors.
func (c *Causal) Close() {
	c.gen++
	c.curLoc, c.curMsk, c.mskIn = nil, nil, nil
	for i, ctx := range c.ctxs {
		if ctx != nil {
			ctx.Close()
		}
		c.ctxs[i], c.keys[i], c.values[i] = nil, nil, nil
	}
}

// StartForward prepares a batch of n tokens that follow the stored ones:
// their slots and their mask, made in ctx's input context. The tokens
// count as stored once Commit is called (after a successful compute).
func (c *Causal) StartForward(ctx ml.Context, n int) error {
	if n <= 0 {
		return fmt.Errorf("kvcache: empty batch")
	}
	if c.n+n > c.capacity {
		return fmt.Errorf("kvcache: %d tokens exceed the context size %d", c.n+n, c.capacity)
	}
	c.batch = n
	c.histLen = min(roundUp(c.n+n, c.config.CachePadding), c.capacity)
	loc, mask := c.inputs(n)
	in := ctx.Input()
	c.curLoc = in.FromInts(loc, n)
	c.mskIn = in.FromFloats(mask, c.histLen, n)
	c.curMsk = c.mskIn
	if c.config.MaskDType != ml.DTypeF32 {
		c.curMsk = c.curMsk.Cast(ctx, c.config.MaskDType)
	}
	return nil
}

// inputs are the slots and the causal mask [histLen, n] of a batch of n.
// They are scratch buffers of the cache, valid until the next call: the
// ml API copies input data when a tensor is made or written, and reusing
// them keeps a prefill from making megabytes of garbage per batch (Go's
// collector then runs beside ggml's threads and slowed prefill by ~10%).
func (c *Causal) inputs(n int) (loc []int32, mask []float32) {
	if cap(c.locBuf) < n {
		c.locBuf = make([]int32, n)
	}
	loc = c.locBuf[:n]
	for i := range loc {
		loc[i] = int32(c.n + i)
	}
	if cap(c.maskBuf) < c.histLen*n {
		c.maskBuf = make([]float32, c.histLen*n)
	}
	mask = c.maskBuf[:c.histLen*n]
	ninf := float32(math.Inf(-1))
	for i := 0; i < n; i++ {
		row := mask[i*c.histLen : (i+1)*c.histLen]
		visible := min(c.n+i+1, len(row))
		clear(row[:visible])
		for j := visible; j < len(row); j++ {
			row[j] = ninf
		}
	}
	return loc, mask
}

// Window identifies the cache layout a graph built after StartForward
// reads (the history length its views cover, the cache's generation, the
// batch size) and holds that graph's slot and mask inputs.
type Window struct {
	HistLen, Gen, Batch int
	loc, mask           ml.Tensor
}

// Window is the current batch's window (valid after StartForward).
func (c *Causal) Window() Window { return Window{c.histLen, c.gen, c.batch, c.curLoc, c.mskIn} }

// ReuseForward prepares the next batch of n tokens for a graph that was
// built (after StartForward) for window w and computed: if the batch fits
// the same window, it
// rewrites the slots and the mask in place and returns true; the caller
// then rewrites its own inputs (tokens, positions), computes the same
// graph and calls Commit. Otherwise it changes nothing and returns false.
func (c *Causal) ReuseForward(w Window, n int) bool {
	if w.loc == nil || n != w.Batch || w.Gen != c.gen || c.n+n > c.capacity {
		return false
	}
	if min(roundUp(c.n+n, c.config.CachePadding), c.capacity) != w.HistLen {
		return false
	}
	c.batch, c.histLen = n, w.HistLen
	loc, mask := c.inputs(n)
	w.loc.FromInts(loc)
	w.mask.FromFloats(mask)
	return true
}

// Commit counts the current batch as stored.
func (c *Causal) Commit() { c.n += c.batch; c.batch = 0 }

// Positions returns the positions of the current batch's tokens.
func (c *Causal) Positions() []int32 {
	p := make([]int32, c.batch)
	for i := range p {
		p[i] = int32(c.n + i)
	}
	return p
}

// Put writes the batch's keys [kHeadDim, kvHeads, n] and values
// [vHeadDim, kvHeads, n] of layer into the cache.
func (c *Causal) Put(ctx ml.Context, layer int, key, value ml.Tensor) {
	kd, kvh, n := key.Dim(0), key.Dim(1), key.Dim(2)
	vd := value.Dim(0)
	if n != c.batch || value.Dim(2) != n {
		panic(fmt.Errorf("kvcache: layer %d batch of %d tokens, StartForward said %d", layer, n, c.batch))
	}
	if c.keys[layer] == nil {
		c.ctxs[layer] = c.b.NewContextSize(2).Layer(layer)
		c.keys[layer] = c.ctxs[layer].Zeros(c.DType, kd, kvh, c.capacity)
		if c.config.PermutedV {
			c.values[layer] = c.ctxs[layer].Zeros(c.DType, c.capacity, vd, kvh)
		} else {
			c.values[layer] = c.ctxs[layer].Zeros(c.DType, vd, kvh, c.capacity)
		}
	}
	kc := c.keys[layer].Reshape(ctx, kd*kvh, c.capacity)
	ctx.Forward(kc.SetRows(ctx, key.Reshape(ctx, kd*kvh, n), c.curLoc))
	if c.config.PermutedV {
		// Each value element is a one-element row of [1, capacity, vd*kvh].
		v := value.Reshape(ctx, vd*kvh, 1, n).Permute(ctx, 2, 0, 1, 3)
		vc := c.values[layer].Reshape(ctx, 1, c.capacity, vd*kvh)
		ctx.Forward(vc.SetRows(ctx, v, c.curLoc))
	} else {
		vc := c.values[layer].Reshape(ctx, vd*kvh, c.capacity)
		ctx.Forward(vc.SetRows(ctx, value.Reshape(ctx, vd*kvh, n), c.curLoc))
	}
}

// Get returns views of layer's history (the stored tokens and the
// current batch, padded): keys [kHeadDim, kvHeads, len], values
// [vHeadDim, kvHeads, len] (or [len, vHeadDim, kvHeads] when permuted),
// and the mask [len, n].
func (c *Causal) Get(ctx ml.Context, layer int) (key, value, mask ml.Tensor) {
	k, v := c.keys[layer], c.values[layer]
	key = k.View(ctx, 0, k.Dim(0), k.Stride(1), k.Dim(1), k.Stride(2), c.histLen)
	if c.config.PermutedV {
		value = v.View(ctx, 0, c.histLen, v.Stride(1), v.Dim(1), v.Stride(2), v.Dim(2))
	} else {
		value = v.View(ctx, 0, v.Dim(0), v.Stride(1), v.Dim(1), v.Stride(2), c.histLen)
	}
	return key, value, c.curMsk
}
