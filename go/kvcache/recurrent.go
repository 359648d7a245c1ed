package kvcache

import (
	"fmt"

	"ggmlrs/ml"
)

func errorf(format string, a ...any) error { return fmt.Errorf("kvcache: "+format, a...) }

// recurrent holds the recurrent layers' states: per layer, the convolution
// states [(width-1)·channels, slots] and the delta-net states
// [size·size·heads, slots] (F32), one row per sequence slot (the cache
// assigns slots).
type recurrent struct {
	fresh  []bool // the slot's state is stale: read as zeros at its next use
	ctxs   []ml.Context
	states [2][]ml.Tensor // [0] conv, [1] delta-net; per layer of the model
	shapes [2][][]int     // per layer: the per-sequence shape of each state

	// The prepared batch: its sequences' slots, which of them start from
	// zero; and the input tensors of its graph.
	ids      []int32
	keep     []float32
	anyFresh bool

	idsT, keepT ml.Tensor
}

func (c *Cache) newRecurrent(layers []int) (*recurrent, error) {
	n := c.cfg.Sequences
	r := &recurrent{fresh: make([]bool, n)}
	for i := range r.states {
		r.states[i] = make([]ml.Tensor, len(c.cfg.Layers))
		r.shapes[i] = make([][]int, len(c.cfg.Layers))
	}
	r.clear()
	for _, l := range layers {
		spec := c.cfg.Layers[l]
		r.shapes[0][l] = []int{spec.ConvWidth - 1, spec.ConvChannels}
		r.shapes[1][l] = []int{spec.StateSize, spec.StateSize, spec.StateHeads}
		ctx := c.b.NewContextSize(2).Layer(l)
		r.ctxs = append(r.ctxs, ctx)
		if err := catch(func() {
			for i := range r.states {
				r.states[i][l] = ctx.Zeros(ml.DTypeF32, product(r.shapes[i][l]), n)
			}
		}); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func product(s []int) int {
	p := 1
	for _, d := range s {
		p *= d
	}
	return p
}

func (r *recurrent) close() {
	for _, ctx := range r.ctxs {
		ctx.Close()
	}
	r.ctxs = nil
	for i := range r.states {
		clear(r.states[i])
	}
	r.idsT, r.keepT = nil, nil
}

func (r *recurrent) clear() {
	for i := range r.fresh {
		r.fresh[i] = true
	}
}

// release marks slot s's states stale (its sequence is gone).
func (r *recurrent) release(s int) { r.fresh[s] = true }

// prepare records the slots of the batch's sequences.
func (r *recurrent) prepare(slots []int) {
	r.ids, r.keep, r.anyFresh = r.ids[:0], r.keep[:0], false
	for _, s := range slots {
		r.ids = append(r.ids, int32(s))
		k := float32(1)
		if r.fresh[s] {
			k, r.anyFresh = 0, true
		}
		r.keep = append(r.keep, k)
	}
}

func (r *recurrent) inputs(in ml.Context) {
	r.idsT = in.FromInts(r.ids, len(r.ids))
	r.keepT = nil
	if r.anyFresh {
		r.keepT = in.FromFloats(r.keep, 1, len(r.keep))
	}
}

func (r *recurrent) commit() {
	for _, s := range r.ids {
		r.fresh[s] = false
	}
}

// rollback: a failed graph may have written some of the batch's states;
// the cache forgets those sequences, which marks their slots stale.
func (r *recurrent) rollback() {}

// get gathers state `which` of layer for the batch's sequences, zeroing
// those that start fresh: [shape..., sequences].
func (r *recurrent) get(ctx ml.Context, layer, which int) ml.Tensor {
	all := r.states[which][layer]
	n := len(r.ids)
	g := all.Rows(ctx, r.idsT)
	if r.keepT != nil {
		g = g.Mul(ctx, r.keepT)
	}
	shape := append(append([]int{}, r.shapes[which][layer]...), n)
	return g.Reshape(ctx, shape...)
}

// set stores the batch's new states of layer ([shape..., sequences]).
func (r *recurrent) set(ctx ml.Context, layer, which int, st ml.Tensor) {
	all := r.states[which][layer]
	n := len(r.ids)
	rows := st.Reshape(ctx, product(r.shapes[which][layer]), n)
	ctx.Forward(all.SetRows(ctx, rows, r.idsT))
}
