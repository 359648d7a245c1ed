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
	fresh []bool // the slot's state is stale: read as zeros at its next use
	// With checkpoints, slot s's saved states are row n+s of each state
	// tensor (n slots), and savedFresh[s] its fresh flag when saved.
	checkpoints bool
	savedFresh  []bool
	ctxs        []ml.Context
	states      [2][]ml.Tensor // [0] conv, [1] delta-net; per layer of the model
	shapes      [2][][]int     // per layer: the per-sequence shape of each state

	// The prepared batch: its sequences' slots, which of them start from
	// zero; and the input tensors of its graph.
	ids      []int32
	keep     []float32
	anyFresh bool
	// base is the first slot when the batch's slots are consecutive (one
	// sequence, or sequences in slot order): the graph then reads and
	// writes the states in place, through views, with no gather; else -1.
	base int

	idsT, keepT ml.Tensor
}

func (c *Cache) newRecurrent(layers []int) (*recurrent, error) {
	n := c.cfg.Sequences
	r := &recurrent{fresh: make([]bool, n), checkpoints: c.cfg.Checkpoints, savedFresh: make([]bool, n)}
	rows := n
	if r.checkpoints {
		rows = 2 * n
	}
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
				r.states[i][l] = ctx.Zeros(ml.DTypeF32, product(r.shapes[i][l]), rows)
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
	r.ids, r.keep, r.anyFresh, r.base = r.ids[:0], r.keep[:0], false, -1
	if len(slots) > 0 {
		r.base = slots[0]
	}
	for i, s := range slots {
		if s != r.base+i {
			r.base = -1
		}
		r.ids = append(r.ids, int32(s))
		k := float32(1)
		if r.fresh[s] {
			k, r.anyFresh = 0, true
		}
		r.keep = append(r.keep, k)
	}
}

func (r *recurrent) inputs(in ml.Context) {
	r.idsT, r.keepT = nil, nil
	if r.base < 0 {
		r.idsT = in.FromInts(r.ids, len(r.ids))
	}
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
	var g ml.Tensor
	if r.base >= 0 {
		g = r.rows(ctx, all, n)
	} else {
		g = all.Rows(ctx, r.idsT)
	}
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
	if r.base >= 0 {
		// In place: the copy runs after everything that reads the old
		// state (it needs the new one), and ggml splits it over threads
		// (SetRows of one sequence's row runs on one).
		ctx.Forward(rows.Copy(ctx, r.rows(ctx, all, n)))
		return
	}
	ctx.Forward(all.SetRows(ctx, rows, r.idsT))
}

// save copies slot s's states of every layer to its checkpoint row.
func (r *recurrent) save(b ml.Backend, s int) error {
	if err := r.copyRows(b, s, len(r.fresh)+s); err != nil {
		return err
	}
	r.savedFresh[s] = r.fresh[s]
	return nil
}

// restore copies slot s's checkpoint row back.
func (r *recurrent) restore(b ml.Backend, s int) error {
	if err := r.copyRows(b, len(r.fresh)+s, s); err != nil {
		return err
	}
	r.fresh[s] = r.savedFresh[s]
	return nil
}

// copyRows copies row from to row to of every state tensor, in one graph.
func (r *recurrent) copyRows(b ml.Backend, from, to int) error {
	return catch(func() {
		ctx := b.NewContext()
		defer ctx.Close()
		var outs []ml.Tensor
		for i := range r.states {
			for _, all := range r.states[i] {
				if all == nil {
					continue
				}
				st := all.Stride(1)
				src := all.View(ctx, from*st, all.Dim(0))
				dst := all.View(ctx, to*st, all.Dim(0))
				outs = append(outs, src.Copy(ctx, dst))
			}
		}
		ctx.Forward(outs...).Compute(outs...)
	})
}

// rows is the view of the n consecutive slots from r.base of all.
func (r *recurrent) rows(ctx ml.Context, all ml.Tensor, n int) ml.Tensor {
	stride := all.Stride(1)
	return all.View(ctx, r.base*stride, all.Dim(0), stride, n)
}
