package kvcache

import (
	"fmt"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

func errorf(format string, a ...any) error { return fmt.Errorf("kvcache: "+format, a...) }

// recurrent holds the recurrent layers' states: per layer, the convolution
// states [(width-1)·channels, rows] and the delta-net states
// [size·size·heads, rows] (F32). With n sequence slots and P planes
// (1 + Config.Rewind), row j·n+s of a state tensor is slot s's state j
// tokens before the end of its last batch (plane 0: after it); a
// sequence's current state is in plane[s] (0 unless it was rewound).
type recurrent struct {
	n, planes int
	fresh     []bool // the slot's state is stale: read as zeros at its next use
	plane     []int  // the plane holding the slot's current state
	written   []int  // planes the slot's last batch wrote (what Rewind may use)
	ctxs      []ml.Context
	states    [2][]ml.Tensor // [0] conv, [1] delta-net; per layer of the model
	shapes    [2][][]int     // per layer: the per-sequence shape of each state
	// zeroInPlace: per layer, fresh states are zeroed by a copy into the
	// state tensor (see get).
	zeroInPlace []bool

	// The prepared batch: its slots, which of them start from zero, the
	// planes it writes (m: min(tokens per sequence, planes)), the rows it
	// reads and writes; and the input tensors of its graph.
	slots    []int
	keep     []float32
	anyFresh bool
	m        int
	readIDs  []int32 // per sequence: plane·n + slot
	writeIDs []int32 // per plane j < m and sequence: j·n + slot
	// readBase and writeBase are the first rows read and written when the
	// batch's rows are consecutive (one sequence, or sequences in slot
	// order, all at the same plane): the graph then reads and writes the
	// states in place, through views, with no gather; else -1.
	readBase, writeBase int

	readT, writeT, keepT ml.Tensor
}

// layout is what a graph built for a batch depends on of the recurrent
// states (Cache.Reuse compares it).
type recLayout struct {
	anyFresh            bool
	m                   int
	readBase, writeBase int
}

func (r *recurrent) layout() recLayout {
	return recLayout{r.anyFresh, r.m, r.readBase, r.writeBase}
}

func (c *Cache) newRecurrent(layers []int) (*recurrent, error) {
	n := c.cfg.Sequences
	r := &recurrent{n: n, planes: 1 + c.cfg.Rewind, fresh: make([]bool, n), plane: make([]int, n), written: make([]int, n)}
	for i := range r.states {
		r.states[i] = make([]ml.Tensor, len(c.cfg.Layers))
		r.shapes[i] = make([][]int, len(c.cfg.Layers))
	}
	r.zeroInPlace = make([]bool, len(c.cfg.Layers))
	r.clear()
	for _, l := range layers {
		spec := c.cfg.Layers[l]
		r.shapes[0][l] = []int{spec.ConvWidth - 1, spec.ConvChannels}
		r.shapes[1][l] = []int{spec.StateSize, spec.stateRows(), spec.StateHeads}
		// Convolution-only layers (LFM2) and Mamba-2's (StateRows set).
		r.zeroInPlace[l] = product(r.shapes[1][l]) == 0 || spec.StateRows != 0
		ctx := c.b.NewContextSize(2).Layer(l)
		r.ctxs = append(r.ctxs, ctx)
		if err := catch(func() {
			for i := range r.states {
				if product(r.shapes[i][l]) > 0 { // no delta-net state: a convolution only
					r.states[i][l] = ctx.Zeros(ml.DTypeF32, product(r.shapes[i][l]), n*r.planes)
				}
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
	r.readT, r.writeT, r.keepT = nil, nil, nil
}

func (r *recurrent) clear() {
	for s := range r.fresh {
		r.release(s)
	}
}

// release marks slot s's states stale (its sequence is gone).
func (r *recurrent) release(s int) { r.fresh[s], r.plane[s], r.written[s] = true, 0, 0 }

// rewind makes slot s's state the one k tokens further back, if kept.
func (r *recurrent) rewind(s, k int) error {
	if r.plane[s]+k >= r.written[s] {
		return errorf("cannot rewind %d more token(s): the states of %d token(s) of the last batch are kept (Config.Rewind %d)",
			k, r.written[s]-r.plane[s]-1, r.planes-1)
	}
	r.plane[s] += k
	return nil
}

// prepare records the rows of the batch's sequences (each of tokens
// tokens).
func (r *recurrent) prepare(slots []int, tokens int) {
	n := len(slots)
	r.slots = append(r.slots[:0], slots...)
	r.keep, r.anyFresh = r.keep[:0], false
	r.m = min(tokens, r.planes)
	r.readIDs, r.writeIDs = r.readIDs[:0], r.writeIDs[:0]
	for _, s := range slots {
		r.readIDs = append(r.readIDs, int32(r.plane[s]*r.n+s))
		k := float32(1)
		if r.fresh[s] {
			k, r.anyFresh = 0, true
		}
		r.keep = append(r.keep, k)
	}
	for j := 0; j < r.m; j++ {
		for _, s := range slots {
			r.writeIDs = append(r.writeIDs, int32(j*r.n+s))
		}
	}
	r.readBase, r.writeBase = consecutive(r.readIDs), consecutive(r.writeIDs[:n])
	if r.planes > 1 {
		// A rewind moves a sequence's read plane: gathered reads keep the
		// graph's layout the same from one verification to the next
		// (graph reuse), at the price of a copy of the states.
		r.readBase = -1
	}
}

// consecutive is ids[0] when ids count up by one from it, else -1.
func consecutive(ids []int32) int {
	for i, id := range ids {
		if id != ids[0]+int32(i) {
			return -1
		}
	}
	return int(ids[0])
}

func (r *recurrent) inputs(in ml.Context) {
	r.readT, r.writeT, r.keepT = nil, nil, nil
	if r.readBase < 0 {
		r.readT = in.FromInts(r.readIDs, len(r.readIDs))
	}
	if r.writeBase < 0 {
		r.writeT = in.FromInts(r.writeIDs, len(r.writeIDs))
	}
	if r.anyFresh {
		r.keepT = in.FromFloats(r.keep, 1, len(r.keep))
	}
}

// reuse writes the prepared batch's ids into the input tensors of an
// earlier graph of the same layout.
func (r *recurrent) reuse(readT, writeT, keepT ml.Tensor) {
	if readT != nil {
		readT.FromInts(r.readIDs)
	}
	if writeT != nil {
		writeT.FromInts(r.writeIDs)
	}
	if keepT != nil {
		keepT.FromFloats(r.keep)
	}
}

func (r *recurrent) commit() {
	for _, s := range r.slots {
		r.fresh[s], r.plane[s], r.written[s] = false, 0, r.m
	}
}

// rollback: a failed graph may have written some of the batch's states;
// the cache forgets those sequences, which marks their slots stale.
func (r *recurrent) rollback() {}

// state is the tensor of state `which` (0: convolution, 1: delta net) of
// layer; a panic for a layer without one.
func (r *recurrent) state(layer, which int) ml.Tensor {
	all := r.states[which][layer]
	if all == nil {
		panic(errorf("layer %d has no %s state", layer, [2]string{"convolution", "delta-net"}[which]))
	}
	return all
}

// get gathers state `which` of layer for the batch's sequences, zeroing
// those that start fresh: [shape..., sequences].
func (r *recurrent) get(ctx ml.Context, layer, which int) ml.Tensor {
	all := r.state(layer, which)
	n := len(r.slots)
	var g ml.Tensor
	if r.readBase >= 0 {
		g = rows(ctx, all, r.readBase, n)
	} else {
		g = all.Rows(ctx, r.readT)
	}
	switch {
	case r.keepT == nil:
	case r.readBase >= 0 && r.zeroInPlace[layer]:
		// A convolution-only layer (LFM2) or a Mamba-2 layer zeroes its
		// fresh sequences' rows in place, as llama.cpp's build_rs does: the
		// copy into the state tensor stays on the state's device, and
		// bounds where ggml's scheduler spreads the neighbouring ops as
		// llama.cpp's does (docs/notes/lfm2.md). The delta-net layers keep
		// the product: their reads come elsewhere in llama.cpp's graph
		// than here.
		g = g.Mul(ctx, r.keepT).Copy(ctx, g)
	default:
		g = g.Mul(ctx, r.keepT)
	}
	shape := append(append([]int{}, r.shapes[which][layer]...), n)
	return g.Reshape(ctx, shape...)
}

// inPlace reports whether get returns a view of the very rows set would
// write, with nothing to zero: the prepared batch's states may be updated
// where they are.
func (r *recurrent) inPlace() bool {
	return r.m == 1 && r.readBase >= 0 && r.readBase == r.writeBase && !r.anyFresh
}

// set stores the batch's new states of layer: [shape..., sequences], or
// [shape..., sequences·m] with the states of the last m tokens (see
// nn.RecurrentCache.StatesKept).
func (r *recurrent) set(ctx ml.Context, layer, which int, st ml.Tensor) {
	all := r.state(layer, which)
	n := len(r.slots)
	size := product(r.shapes[which][layer])
	m := st.Dim(len(r.shapes[which][layer]))
	if m%n != 0 || (m/n != 1 && m/n != r.m) {
		panic(errorf("layer %d: %d states for %d sequences: want one or %d per sequence", layer, m, n, r.m))
	}
	m /= n
	if r.writeBase >= 0 {
		// In place: the copy runs after everything that reads the old
		// state (it needs the new one), and ggml splits it over threads
		// (SetRows of one sequence's row runs on one). Plane j's rows
		// start j·n rows (n slots) after plane 0's.
		stride := all.Stride(1)
		dst := all.View(ctx, r.writeBase*stride, all.Dim(0), stride, n, r.n*stride, m)
		ctx.Forward(st.Reshape(ctx, size, n, m).Copy(ctx, dst))
		return
	}
	ids := r.writeT
	if m < r.m {
		ids = ids.View(ctx, 0, n)
	}
	ctx.Forward(all.SetRows(ctx, st.Reshape(ctx, size, n*m), ids))
}

// setPlanes stores state `which` of layer after each of the batch's last
// m tokens (states[j]: j tokens before the last; [shape..., sequences],
// any strides), each straight into its plane.
func (r *recurrent) setPlanes(ctx ml.Context, layer, which int, states []ml.Tensor) {
	all := r.state(layer, which)
	n := len(r.slots)
	if len(states) != r.m {
		panic(errorf("layer %d: %d states per sequence, want %d", layer, len(states), r.m))
	}
	shape := append(append([]int{}, r.shapes[which][layer]...), n)
	for j, st := range states {
		if r.writeBase >= 0 {
			ctx.Forward(st.Copy(ctx, rows(ctx, all, r.writeBase+j*r.n, n).Reshape(ctx, shape...)))
			continue
		}
		ids := r.writeT.View(ctx, j*n*r.writeT.Stride(0), n)
		ctx.Forward(all.SetRows(ctx, st.Contiguous(ctx).Reshape(ctx, product(r.shapes[which][layer]), n), ids))
	}
}

// rows is the view of the n consecutive rows from row `from` of all.
func rows(ctx ml.Context, all ml.Tensor, from, n int) ml.Tensor {
	stride := all.Stride(1)
	return all.View(ctx, from*stride, all.Dim(0), stride, n)
}
