package kvcache

import (
	"math"

	"ggmlrs/ml"
)

// cell is one cached token: its sequence (-1: free) and position.
type cell struct{ seq, pos int32 }

type evicted struct {
	i int
	c cell
}

// pool is the cells and the key/value tensors of the attention layers of
// one kind (full, or sliding-window with window > 0).
type pool struct {
	size   int
	window int
	cells  []cell
	ctxs   []ml.Context
	keys   []ml.Tensor // per layer of the model; nil for other layers
	values []ml.Tensor

	// The prepared batch: its cells, the history length its graph reads,
	// its mask [histLen, n], what it evicted; and the input tensors of the
	// graph built for it.
	loc     []int32
	mask    []float32
	histLen int
	taken   []int
	evicted []evicted

	locT, maskIn, maskT ml.Tensor
}

func (c *Cache) newPool(size, window int, layers []int) (*pool, error) {
	p := &pool{size: size, window: window, cells: make([]cell, size),
		keys: make([]ml.Tensor, len(c.cfg.Layers)), values: make([]ml.Tensor, len(c.cfg.Layers))}
	p.clear()
	for _, l := range layers {
		spec := c.cfg.Layers[l]
		ctx := c.b.NewContextSize(2).Layer(l)
		p.ctxs = append(p.ctxs, ctx)
		if err := catch(func() {
			p.keys[l] = ctx.Zeros(c.cfg.DType, spec.KeyDim, spec.KVHeads, size)
			if c.config.PermutedV {
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
	p.locT, p.maskIn, p.maskT = nil, nil, nil
}

func (p *pool) clear() {
	for i := range p.cells {
		p.cells[i] = cell{seq: -1}
	}
}

func (p *pool) free() int {
	n := 0
	for _, c := range p.cells {
		if c.seq < 0 {
			n++
		}
	}
	return n
}

// remove frees the cells of seq at position from and later.
func (p *pool) remove(seq, from int) {
	for i, c := range p.cells {
		if c.seq == int32(seq) && c.pos >= int32(from) {
			p.cells[i] = cell{seq: -1}
		}
	}
}

// prepare takes cells for the batch's tokens (after evicting, in a
// sliding-window pool, the cells no token of the batch's sequences can see
// any more) and computes the batch's slots and mask.
func (p *pool) prepare(u *Ubatch, seqOf []int, pos []int32, pad int) error {
	p.taken, p.evicted = p.taken[:0], p.evicted[:0]
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
	n := u.Len()
	for i := 0; i < len(p.cells) && len(p.taken) < n; i++ {
		if p.cells[i].seq < 0 {
			p.taken = append(p.taken, i)
		}
	}
	if len(p.taken) < n {
		p.taken = p.taken[:0]
		p.restore()
		return ErrNoRoom
	}
	p.loc = p.loc[:0]
	for t, i := range p.taken {
		p.cells[i] = cell{seq: int32(u.Seqs[seqOf[t]]), pos: pos[t]}
		p.loc = append(p.loc, int32(i))
	}
	last := 0
	for i, c := range p.cells {
		if c.seq >= 0 {
			last = i
		}
	}
	p.histLen = min(roundUp(last+1, pad), p.size)
	if cap(p.mask) < p.histLen*n {
		p.mask = make([]float32, p.histLen*n)
	}
	p.mask = p.mask[:p.histLen*n]
	ninf := float32(math.Inf(-1))
	for t := 0; t < n; t++ {
		s, at := int32(u.Seqs[seqOf[t]]), pos[t]
		row := p.mask[t*p.histLen : (t+1)*p.histLen]
		for j := range row {
			c := p.cells[j]
			if c.seq == s && c.pos <= at && (p.window == 0 || at-c.pos < int32(p.window)) {
				row[j] = 0
			} else {
				row[j] = ninf
			}
		}
	}
	return nil
}

func firstIndex(u *Ubatch, k int) int {
	i := 0
	for j := 0; j < k; j++ {
		i += u.Counts[j]
	}
	return i
}

func (p *pool) restore() {
	for _, e := range p.evicted {
		p.cells[e.i] = e.c
	}
	p.evicted = p.evicted[:0]
}

func (p *pool) commit() { p.taken, p.evicted = p.taken[:0], p.evicted[:0] }

func (p *pool) rollback() {
	for _, i := range p.taken {
		p.cells[i] = cell{seq: -1}
	}
	p.taken = p.taken[:0]
	p.restore()
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
