package kvcache

import (
	"math"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// cell is one cached token: its sequence (-1: free) and position.
type cell struct{ seq, pos int32 }

type evicted struct {
	i int
	c cell
}

// pool is the cells and the key/value tensors of a set of attention
// layers, cut into streams: one per sequence slot (llama.cpp's default,
// non-unified cache: each sequence's cells start at its stream's first
// cell, so attention sums over them in the order llama.cpp does), or a
// single stream that all sequences share (unified). A pool whose window
// is positive evicts the cells no future token can see (a compact
// sliding-window pool). Its layers read through masks, one per distinct
// window among them (0: none).
type pool struct {
	streams, streamSize int
	unified             bool
	window              int // evict cells older than this (0: never)
	cells               []cell
	ctxs                []ml.Context
	keys                []ml.Tensor // per layer of the model: [keyDim, kvHeads, streams·streamSize]; nil for other layers
	values              []ml.Tensor // the same, [valueDim, ...] or PermutedV; nil where the values are in the keys
	valueDims           []int       // per layer: the values' size where they are in the keys (0: stored)
	masks               []*mask
	maskOf              []int // per layer of the model: index into masks

	// The prepared batch: its cells, the streams of its sequences, the
	// history length its graph reads (per stream), what it evicted; and
	// the slot input of the graph built for it.
	loc     []int32
	strm    []int
	histLen int
	rowHist []int // with Ubatch.RowWise: per token, a one-token batch's history length
	taken   []int
	evicted []evicted

	locT ml.Tensor
}

// mask is one attention mask [histLen, n] of the prepared batch (row t:
// token t over the cells of its sequence's stream): a token sees the
// cells of its sequence at its position or before, fewer than window
// positions back when window > 0 (chunked: in its chunk of window
// positions, a multiple of window and after). in is its F32 input, t the tensor
// attention reads (in, or in cast to the backend's mask type).
type mask struct {
	window  int
	chunked bool // window is a chunk: positions from at - at mod window
	data    []float32
	in, t   ml.Tensor
}

func (c *Cache) newPool(perStream, window int, layers []int) (*pool, error) {
	streams := c.cfg.Sequences
	if c.cfg.Unified {
		streams = 1
	}
	size := streams * perStream
	p := &pool{streams: streams, streamSize: perStream, unified: c.cfg.Unified, window: window, cells: make([]cell, size),
		keys: make([]ml.Tensor, len(c.cfg.Layers)), values: make([]ml.Tensor, len(c.cfg.Layers)),
		valueDims: make([]int, len(c.cfg.Layers)), maskOf: make([]int, len(c.cfg.Layers))}
	p.clear()
	for _, l := range layers {
		spec := c.cfg.Layers[l]
		w, chunked := 0, spec.Kind == Chunked
		if spec.Kind.windowed() {
			w = c.cfg.Window
		}
		p.maskOf[l] = -1
		for i, m := range p.masks {
			if m.window == w && m.chunked == chunked {
				p.maskOf[l] = i
			}
		}
		if p.maskOf[l] < 0 {
			p.masks = append(p.masks, &mask{window: w, chunked: chunked})
			p.maskOf[l] = len(p.masks) - 1
		}
		ctx := c.b.NewContextSize(2).Layer(l)
		p.ctxs = append(p.ctxs, ctx)
		if err := catch(func() {
			p.keys[l] = ctx.Zeros(c.cfg.DType, spec.KeyDim, spec.KVHeads, size)
			if spec.ValuesInKeys {
				p.valueDims[l] = spec.ValueDim
			} else if c.config.PermutedV {
				p.values[l] = ctx.Zeros(c.cfg.DType, size, spec.ValueDim, spec.KVHeads)
			} else {
				p.values[l] = ctx.Zeros(c.cfg.DType, spec.ValueDim, spec.KVHeads, size)
			}
		}); err != nil {
			p.close()
			return nil, err
		}
		c.poolOf[l] = p
	}
	return p, nil
}

func (p *pool) close() {
	for _, ctx := range p.ctxs {
		ctx.Close()
	}
	p.ctxs = nil
	clear(p.keys)
	clear(p.values)
	p.locT = nil
	for _, m := range p.masks {
		m.in, m.t = nil, nil
	}
}

func (p *pool) clear() {
	for i := range p.cells {
		p.cells[i] = cell{seq: -1}
	}
}

// stream is the stream of sequence slot s.
func (p *pool) stream(slot int) int {
	if p.unified {
		return 0
	}
	return slot
}

// remove frees the cells of seq at position from and later.
func (p *pool) remove(seq, from int) {
	for i, c := range p.cells {
		if c.seq == int32(seq) && c.pos >= int32(from) {
			p.cells[i] = cell{seq: -1}
		}
	}
}

// prepare takes cells in each sequence's stream for the batch's tokens
// (after evicting, in a compact sliding-window pool, the cells no token of
// the batch's sequences can see any more) and computes the batch's slots
// and masks. slots are the batch's sequences' slots.
func (p *pool) prepare(u *Ubatch, slots []int, seqOf []int, pos []int32, pad int) error {
	p.taken, p.evicted, p.strm = p.taken[:0], p.evicted[:0], p.strm[:0]
	for _, s := range slots {
		p.strm = append(p.strm, p.stream(s))
	}
	if p.window > 0 {
		for k, s := range u.Seqs {
			// The first token of s in the batch sees positions above
			// first-window; later tokens see less of the past.
			first := pos[firstIndex(u, k)]
			for i, c := range p.cells {
				if c.seq == int32(s) && c.pos <= first-int32(p.window) {
					p.evicted = append(p.evicted, evicted{i, c})
					p.cells[i] = cell{seq: -1}
				}
			}
		}
	}
	p.loc = p.loc[:0]
	t := 0
	for k, n := range u.Counts {
		base := p.strm[k] * p.streamSize
		for i := base; i < base+p.streamSize && n > 0; i++ {
			if p.cells[i].seq < 0 {
				p.cells[i] = cell{seq: int32(u.Seqs[k]), pos: pos[t]}
				p.taken = append(p.taken, i)
				p.loc = append(p.loc, int32(i))
				n--
				t++
			}
		}
		if n > 0 {
			p.rollback()
			return ErrNoRoom
		}
	}
	// The history length: the longest stream's used cells, padded (the
	// same for all of the batch's streams, as llama.cpp's get_n_kv).
	p.histLen = 0
	for _, s := range p.strm {
		last := 0
		for i, c := range p.cells[s*p.streamSize : (s+1)*p.streamSize] {
			if c.seq >= 0 {
				last = i
			}
		}
		p.histLen = max(p.histLen, min(roundUp(last+1, pad), p.streamSize))
	}
	p.rowHist = p.rowHist[:0]
	if u.RowWise {
		p.rowHistory(u, pad)
	}
	for _, m := range p.masks {
		m.fill(p, u, seqOf, pos)
	}
	return nil
}

// rowHistory sets rowHist: for each token of the batch, the history
// length a batch of that token alone would have had: its stream's last
// cell in use then (before this batch, or taken by this batch's tokens of
// its sequence up to it), padded.
func (p *pool) rowHistory(u *Ubatch, pad int) {
	taken := map[int]bool{}
	for _, i := range p.taken {
		taken[i] = true
	}
	t := 0
	for k, n := range u.Counts {
		base := p.strm[k] * p.streamSize
		last := 0
		for i, c := range p.cells[base : base+p.streamSize] {
			if c.seq >= 0 && !taken[base+i] {
				last = i
			}
		}
		for j := 0; j < n; j++ {
			last = max(last, int(p.loc[t])-base)
			p.rowHist = append(p.rowHist, min(roundUp(last+1, pad), p.streamSize))
			t++
		}
	}
}

func (m *mask) fill(p *pool, u *Ubatch, seqOf []int, pos []int32) {
	n := u.Len()
	if cap(m.data) < p.histLen*n {
		m.data = make([]float32, p.histLen*n)
	}
	m.data = m.data[:p.histLen*n]
	ninf := float32(math.Inf(-1))
	for t := 0; t < n; t++ {
		k := seqOf[t]
		s, at := int32(u.Seqs[k]), pos[t]
		cells := p.cells[p.strm[k]*p.streamSize:]
		row := m.data[t*p.histLen : (t+1)*p.histLen]
		for j := range row {
			c := cells[j]
			if c.seq == s && c.pos <= at && m.sees(c.pos, at) {
				row[j] = 0
			} else {
				row[j] = ninf
			}
		}
	}
}

// sees reports whether a token at position at sees the cell of its
// sequence at pos <= at through the mask's window or chunk.
func (m *mask) sees(pos, at int32) bool {
	switch {
	case m.window == 0:
		return true
	case m.chunked:
		return pos >= at-at%int32(m.window)
	}
	return at-pos < int32(m.window)
}

func firstIndex(u *Ubatch, k int) int {
	i := 0
	for j := 0; j < k; j++ {
		i += u.Counts[j]
	}
	return i
}

func (p *pool) commit() { p.taken, p.evicted = p.taken[:0], p.evicted[:0] }

func (p *pool) rollback() {
	for _, i := range p.taken {
		p.cells[i] = cell{seq: -1}
	}
	p.taken = p.taken[:0]
	for _, e := range p.evicted {
		p.cells[e.i] = e.c
	}
	p.evicted = p.evicted[:0]
}

// views are layer's keys, values and mask for sequence k of the batch:
// its stream's first histLen cells and its tokens' mask rows.
func (p *pool) views(ctx ml.Context, layer, k int, u *Ubatch, permutedV bool) (key, value, msk ml.Tensor) {
	key, value = p.cellViews(ctx, layer, p.strm[k]*p.streamSize, p.histLen, permutedV)
	mt := p.masks[p.maskOf[layer]].t
	if len(u.Seqs) == 1 {
		return key, value, mt
	}
	first, n := firstIndex(u, k), u.Counts[k]
	return key, value, mt.View(ctx, first*mt.Stride(1), mt.Dim(0), mt.Stride(1), n)
}

// rowViews is views for token t of a RowWise batch: the cells of its
// sequence's stream up to its own history length, and its mask row.
func (p *pool) rowViews(ctx ml.Context, layer, t int, seqOf []int, permutedV bool) (key, value, msk ml.Tensor) {
	h := p.rowHist[t]
	key, value = p.cellViews(ctx, layer, p.strm[seqOf[t]]*p.streamSize, h, permutedV)
	mt := p.masks[p.maskOf[layer]].t
	return key, value, mt.View(ctx, t*mt.Stride(1), h, mt.Stride(1), 1)
}

// cellViews are layer's keys [keyDim, kvHeads, n] and values of the n
// cells from off: [valueDim, kvHeads, n], or [n, valueDim, kvHeads] when
// permutedV; for values kept in the keys, the keys' first valueDim
// elements.
func (p *pool) cellViews(ctx ml.Context, layer, off, n int, permutedV bool) (key, value ml.Tensor) {
	kt, vt := p.keys[layer], p.values[layer]
	key = kt.View(ctx, off*kt.Stride(2), kt.Dim(0), kt.Stride(1), kt.Dim(1), kt.Stride(2), n)
	switch {
	case p.valueDims[layer] > 0:
		value = kt.View(ctx, off*kt.Stride(2), p.valueDims[layer], kt.Stride(1), kt.Dim(1), kt.Stride(2), n)
	case permutedV:
		value = vt.View(ctx, off*vt.Stride(0), n, vt.Stride(1), vt.Dim(1), vt.Stride(2), vt.Dim(2))
	default:
		value = vt.View(ctx, off*vt.Stride(2), vt.Dim(0), vt.Stride(1), vt.Dim(1), vt.Stride(2), n)
	}
	return key, value
}

// catch runs f, turning a panic of the ml API into an error.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = errorf("%v", r)
			}
		}
	}()
	f()
	return nil
}
