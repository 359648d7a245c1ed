// Package kvcache holds what a decoder remembers of its sequences between
// forward passes, over the github.com/ggml-rs/ggml-rs/go/ml API: the keys and values of attention
// layers (every token, or the last Window tokens for sliding-window
// layers) and the states of recurrent layers (a short convolution's last
// inputs and a gated delta-net's state matrix or a Mamba-2 scan's state),
// for several sequences at once.
//
// Attention layers share a pool of cells (one per cached token, any
// sequence), like llama.cpp's unified KV cache: a batch's tokens take free
// cells, Get returns views of the cells in use (rounded up to
// CacheConfig.CachePadding) and a mask that lets each token see the cells
// of its own sequence at its position or before (and, in a sliding-window
// layer, fewer than Window positions back; in a chunked one, from its
// chunk's first position, a multiple of Window). Windowed layers share
// the pool (llama.cpp's default, swa_full), or with Config.CompactWindow
// have a pool of their own, sized Window per sequence plus one batch,
// whose cells that fall out of every future token's window are reused:
// far less memory for long contexts, at the price of cutting back (and of
// bit-exactness with llama.cpp's default: reused cells change the order in
// which attention sums).
//
// Recurrent layers keep one state slot per sequence; a batch gathers its
// sequences' states (Rows), and the layer writes the new states back
// (SetRows). A recurrent state cannot be cut back to an earlier position:
// Truncate fails for a model with recurrent layers unless it keeps the
// whole sequence or forgets it, and a caller whose new prompt diverges from
// the cached one re-prefills it (see Truncate).
//
// Use per batch: Prepare (host side: cells, slots, positions, masks), then
// either StartForward (inputs of a new graph) or Reuse (the inputs of an
// earlier graph of the same layout, rewritten in place), then the layers'
// Put/Get and state calls while the graph is built, then Commit after a
// successful compute or Rollback after a failed one.
package kvcache

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ggml-rs/ggml-rs/go/ml"
)

// Kind is what a layer keeps.
type Kind int

const (
	// None: the layer keeps nothing (e.g. a layer the model skips).
	None Kind = iota
	// Attention: keys and values of every token.
	Attention
	// SlidingWindow: keys and values of the last Config.Window positions.
	SlidingWindow
	// Recurrent: a convolution state and a delta-net state per sequence.
	Recurrent
	// Chunked: keys and values of the positions of the token's own chunk
	// of Config.Window positions, up to its own (Llama 4's chunked
	// attention: a token at p sees p - p mod Window through p).
	Chunked
)

// windowed reports whether layers of kind k see only recent positions
// (fewer than Config.Window back), so a compact pool can keep them.
func (k Kind) windowed() bool { return k == SlidingWindow || k == Chunked }

func (k Kind) String() string {
	switch k {
	case Attention:
		return "attention"
	case SlidingWindow:
		return "sliding-window attention"
	case Recurrent:
		return "recurrent"
	case Chunked:
		return "chunked attention"
	}
	return "none"
}

// LayerSpec is one layer's kind and the shapes of what it keeps.
type LayerSpec struct {
	Kind Kind
	// Attention kinds: per-head key and value sizes and key/value heads.
	KeyDim, ValueDim, KVHeads int
	// ValuesInKeys: the values are the first ValueDim elements of each
	// key (multi-head latent attention's compressed KV, llama.cpp's K-only
	// cache); only keys are stored, and the values are views of them,
	// never in the PermutedV layout.
	ValuesInKeys bool
	// Recurrent: the convolution state is [ConvWidth-1, ConvChannels] and
	// the delta-net state [StateSize, StateSize, StateHeads] (F32) per
	// sequence, or [StateSize, StateRows, StateHeads] where StateRows is
	// set (Mamba-2's scan: d_state by the head's size); a layer with a
	// convolution only (LFM2's short convolutions) has StateSize and
	// StateHeads 0.
	ConvWidth, ConvChannels          int
	StateSize, StateRows, StateHeads int
}

// stateRows is the second dimension of a recurrent layer's state.
func (l LayerSpec) stateRows() int {
	if l.StateRows != 0 {
		return l.StateRows
	}
	return l.StateSize
}

// Config describes a cache.
type Config struct {
	Layers []LayerSpec
	// Capacity is the number of tokens the attention layers hold, all
	// sequences together (llama.cpp's n_ctx), rounded up to the backend's
	// padding.
	Capacity int
	// Sequences is the number of sequences held at once (default 1).
	Sequences int
	// Window is the sliding window in positions of SlidingWindow layers: a
	// token sees the cells of its sequence fewer than Window positions
	// back (itself included).
	Window int
	// MaxBatch is the largest batch (in tokens) that will be computed; it
	// sizes the compact sliding-window pool (default 512).
	MaxBatch int
	// CompactWindow gives sliding-window layers a pool of their own that
	// keeps only the last Window positions of each sequence.
	CompactWindow bool
	// Unified lets all sequences share one stream of Capacity cells (any
	// sequence may use any cell); by default each sequence slot has a
	// stream of Capacity/Sequences cells, as llama.cpp's default cache
	// (attention then sums over a sequence's cells in llama.cpp's order).
	Unified bool
	// DType is the type of stored keys and values (default F16).
	DType ml.DType
	// Rewind is how many of a batch's last tokens Cache.Rewind can take
	// back: recurrent layers keep that many more states per sequence (the
	// states before each of those tokens), which the batch's graph writes.
	// Speculative decoding rolls a sequence back past rejected draft tokens
	// with it. At most 63.
	Rewind int
}

// Cache is a multi-sequence cache for a decoder's layers. It is not safe
// for concurrent use; a decoder may compute several caches concurrently.
type Cache struct {
	b      ml.Backend
	cfg    Config
	config ml.CacheConfig

	full, swa *pool // nil when no layer of that kind
	rec       *recurrent
	poolOf    []*pool // per layer (nil for recurrent / none)

	lens    map[int]int // sequence -> tokens held (its next position)
	slotOf  map[int]int // sequence -> its slot (KV stream, recurrent state)
	slotSeq []int       // slot -> sequence (-1: free)
	gen     int         // counts Resets, removals and closes (graph reuse)

	// The prepared batch: its positions, its sequences' slots and the
	// slots it took.
	ub       *Ubatch
	pos      []int32
	seqOf    []int
	slots    []int
	newSlots []int
	prepared bool
	closed   bool
}

// ErrNoRoom is returned by Prepare when a batch does not fit.
var ErrNoRoom = errors.New("kvcache: the batch does not fit the cache")

// New allocates a cache (its tensors live in the layers' contexts, so on
// their devices, and count as their Cache memory).
func New(b ml.Backend, cfg Config) (*Cache, error) {
	c := &Cache{b: b, cfg: cfg, config: ml.CacheConfig{CachePadding: 1}, lens: map[int]int{}, slotOf: map[int]int{}}
	if bc, ok := b.(ml.BackendCacheConfig); ok {
		c.config = bc.CacheConfig()
	}
	if c.config.CachePadding < 1 {
		c.config.CachePadding = 1
	}
	if c.config.MaskDType == ml.DTypeOther {
		c.config.MaskDType = ml.DTypeF32
	}
	if c.cfg.Sequences <= 0 {
		c.cfg.Sequences = 1
	}
	if c.cfg.MaxBatch <= 0 {
		c.cfg.MaxBatch = 512
	}
	if c.cfg.DType == ml.DTypeOther {
		c.cfg.DType = ml.DTypeF16
	}
	if c.cfg.Capacity <= 0 || c.cfg.Capacity > MaxCapacity {
		return nil, fmt.Errorf("kvcache: capacity %d must be 1 to %d tokens", c.cfg.Capacity, MaxCapacity)
	}
	if c.cfg.Rewind < 0 || c.cfg.Rewind > 63 {
		return nil, fmt.Errorf("kvcache: rewind %d must be 0 to 63 tokens", c.cfg.Rewind)
	}
	c.slotSeq = make([]int, c.cfg.Sequences)
	for i := range c.slotSeq {
		c.slotSeq[i] = -1
	}
	c.poolOf = make([]*pool, len(cfg.Layers))
	var full, swa, rec []int
	for i, l := range cfg.Layers {
		switch l.Kind {
		case Attention, SlidingWindow, Chunked:
			if l.KeyDim <= 0 || l.ValueDim <= 0 || l.KVHeads <= 0 {
				return nil, fmt.Errorf("kvcache: layer %d: key dim %d, value dim %d and key/value heads %d must be positive", i, l.KeyDim, l.ValueDim, l.KVHeads)
			}
			if l.ValuesInKeys && l.ValueDim > l.KeyDim {
				return nil, fmt.Errorf("kvcache: layer %d: values in keys need value dim %d <= key dim %d", i, l.ValueDim, l.KeyDim)
			}
			if l.Kind == Attention {
				full = append(full, i)
			} else {
				swa = append(swa, i)
			}
		case Recurrent:
			convOnly := l.StateSize == 0 && l.StateHeads == 0
			if l.ConvWidth < 2 || l.ConvChannels <= 0 || l.StateRows < 0 || !convOnly && (l.StateSize <= 0 || l.stateRows() <= 0 || l.StateHeads <= 0) {
				return nil, fmt.Errorf("kvcache: layer %d: recurrent state shapes must be positive (conv width >= 2): %+v", i, l)
			}
			rec = append(rec, i)
		case None:
		default:
			return nil, fmt.Errorf("kvcache: layer %d: unknown kind %d", i, l.Kind)
		}
	}
	pad := c.config.CachePadding
	var err error
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if len(swa) > 0 && c.cfg.Window <= 0 {
		err = fmt.Errorf("kvcache: sliding-window and chunked layers need a positive window, got %d", c.cfg.Window)
		return nil, err
	}
	if !c.cfg.CompactWindow {
		full, swa = append(full, swa...), nil
		slices.Sort(full)
	}
	streams := c.cfg.Sequences
	if c.cfg.Unified {
		streams = 1
	}
	perStream := roundUp((c.cfg.Capacity+streams-1)/streams, pad)
	if len(full) > 0 {
		if c.full, err = c.newPool(perStream, 0, full); err != nil {
			return nil, err
		}
	}
	if len(swa) > 0 {
		win := c.cfg.Window + c.cfg.MaxBatch
		if c.cfg.Unified {
			win = c.cfg.Window*c.cfg.Sequences + c.cfg.MaxBatch
		}
		if c.swa, err = c.newPool(min(roundUp(win, pad), perStream), c.cfg.Window, swa); err != nil {
			return nil, err
		}
	}
	if len(rec) > 0 {
		if c.rec, err = c.newRecurrent(rec); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Capacity is the number of tokens the attention layers hold for one
// sequence (all sequences together when unified).
func (c *Cache) Capacity() int {
	if c.full != nil {
		return c.full.streamSize
	}
	return roundUp(c.cfg.Capacity, c.config.CachePadding)
}

// Sequences is the number of sequences the cache holds at once.
func (c *Cache) Sequences() int { return c.cfg.Sequences }

// Recurrent reports whether some layer keeps a recurrent state.
func (c *Cache) Recurrent() bool { return c.rec != nil }

// Len is the number of tokens held for sequence seq (its next position).
func (c *Cache) Len(seq int) int { return c.lens[seq] }

// Seqs lists the sequences the cache holds, in increasing order.
func (c *Cache) Seqs() []int {
	out := make([]int, 0, len(c.lens))
	for s := range c.lens {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Reset forgets every sequence (the memory is kept).
func (c *Cache) Reset() {
	c.abandon()
	for _, p := range c.pools() {
		p.clear()
	}
	if c.rec != nil {
		c.rec.clear()
	}
	clear(c.lens)
	clear(c.slotOf)
	for i := range c.slotSeq {
		c.slotSeq[i] = -1
	}
	c.gen++
}

// Remove forgets sequence seq.
func (c *Cache) Remove(seq int) {
	c.abandon()
	for _, p := range c.pools() {
		p.remove(seq, 0)
	}
	if s, ok := c.slotOf[seq]; ok {
		if c.rec != nil {
			c.rec.release(s)
		}
		c.slotSeq[s] = -1
		delete(c.slotOf, seq)
	}
	delete(c.lens, seq)
	c.gen++
}

// MaxRewind is Config.Rewind: how many of a batch's last tokens Rewind can
// take back.
func (c *Cache) MaxRewind() int { return c.cfg.Rewind }

// Rewind forgets the last k tokens of sequence seq, which its last batch
// computed: their attention cells, and for recurrent layers the states are
// those before them, kept by that batch (Config.Rewind). It fails,
// changing nothing, when the cache does not hold that many or has not kept
// those states (k larger than Config.Rewind or than the batch, or a batch
// since), or keeps a compact sliding-window pool (its cells older than the
// window are gone).
func (c *Cache) Rewind(seq, k int) error {
	have, ok := c.lens[seq]
	switch {
	case !ok:
		return fmt.Errorf("kvcache: rewind of sequence %d, which the cache does not hold", seq)
	case k < 0 || k > have:
		return fmt.Errorf("kvcache: rewind of %d token(s) of sequence %d, which holds %d", k, seq, have)
	case k == 0:
		return nil
	case c.swa != nil:
		return errors.New("kvcache: a compact sliding-window cache cannot rewind")
	}
	c.abandon()
	if c.rec != nil {
		if err := c.rec.rewind(c.slotOf[seq], k); err != nil {
			return fmt.Errorf("kvcache: sequence %d: %w", seq, err)
		}
	}
	for _, p := range c.pools() {
		p.remove(seq, have-k)
	}
	c.lens[seq] = have - k
	// No c.gen++: a graph reused after a rewind gets its cells, masks and
	// state rows rewritten by Reuse, which compares the rest of the
	// layout (history lengths, recurrent rows).
	return nil
}

// ErrTruncate is returned by Truncate when the cache cannot keep a prefix.
var ErrTruncate = errors.New("kvcache: the cache cannot be cut back to an earlier position")

// CanTruncate reports whether Truncate can keep any prefix of a sequence:
// false when a layer keeps a recurrent state (it holds the sequence's
// history folded into one state) or a compact sliding-window pool (it has
// dropped the cells older than the window).
func (c *Cache) CanTruncate() bool { return c.rec == nil && c.swa == nil }

// Truncate keeps the first n tokens of sequence seq and forgets the rest.
// It fails with ErrTruncate, changing nothing, when the cache cannot do
// that (see CanTruncate) and n is neither 0 (which forgets the sequence)
// nor its whole length: the rule for a prompt that diverges from the
// cached one is then to forget the sequence and prefill the prompt again.
func (c *Cache) Truncate(seq, n int) error {
	have := c.lens[seq]
	switch {
	case n < 0:
		return fmt.Errorf("kvcache: truncate to %d tokens", n)
	case n >= have:
		return nil
	case n == 0:
		c.Remove(seq)
		return nil
	case !c.CanTruncate():
		return ErrTruncate
	}
	c.abandon()
	for _, p := range c.pools() {
		p.remove(seq, n)
	}
	c.lens[seq] = n
	c.gen++
	return nil
}

// KeepPrefix prepares sequence seq, whose cached tokens are held, for a
// new prompt, and returns how many of the prompt's tokens the cache keeps
// (the rest are to be computed). It keeps the longest common prefix of
// held and prompt, less one token when that would be the whole prompt (its
// last token must be computed for its logits). A cache that cannot be cut
// back (CanTruncate false: recurrent states, a compact sliding window)
// keeps held only when the prompt continues it and otherwise forgets the
// sequence: the prompt is then prefilled from the start. (llama.cpp's
// server and Ollama keep recurrent-state checkpoints for this; not done
// here.)
func (c *Cache) KeepPrefix(seq int, held, prompt []int32) int {
	n := 0
	for n < len(held) && n < len(prompt) && held[n] == prompt[n] {
		n++
	}
	if n == len(prompt) {
		n--
	}
	if n < 0 {
		n = 0
	}
	if n < len(held) && c.Truncate(seq, n) != nil {
		c.Remove(seq)
		return 0
	}
	return n
}

// Close frees the cache's tensors.
func (c *Cache) Close() {
	if c.closed {
		return
	}
	c.closed = true
	c.gen++
	for _, p := range c.pools() {
		p.close()
	}
	if c.rec != nil {
		c.rec.close()
	}
}

func (c *Cache) pools() []*pool {
	var ps []*pool
	if c.full != nil {
		ps = append(ps, c.full)
	}
	if c.swa != nil {
		ps = append(ps, c.swa)
	}
	return ps
}

// Prepare takes cells (and state slots) for ubatch u, whose tokens follow
// what the cache holds of each sequence. It changes nothing visible until
// Commit; Rollback undoes it.
func (c *Cache) Prepare(u *Ubatch) error {
	if c.closed {
		return errors.New("kvcache: the cache is closed")
	}
	if err := u.Validate(); err != nil {
		return err
	}
	if c.rec != nil && !u.Equal {
		return fmt.Errorf("kvcache: a model with recurrent layers needs batches with as many tokens of every sequence")
	}
	c.abandon()
	// Each sequence's slot (its KV stream and recurrent state), new ones
	// taking free slots.
	c.slots, c.newSlots = c.slots[:0], c.newSlots[:0]
	for _, seq := range u.Seqs {
		s, ok := c.slotOf[seq]
		if !ok {
			s = slices.Index(c.slotSeq, -1)
			if s < 0 {
				c.undoSlots()
				return fmt.Errorf("kvcache: the batch's sequences exceed the %d the cache holds", c.cfg.Sequences)
			}
			c.slotSeq[s], c.slotOf[seq] = seq, s
			c.newSlots = append(c.newSlots, s)
		}
		c.slots = append(c.slots, s)
	}
	c.pos = c.pos[:0]
	for i, s := range u.Seqs {
		p0 := c.lens[s]
		for j := 0; j < u.Counts[i]; j++ {
			c.pos = append(c.pos, int32(p0+j))
		}
	}
	seqOf := u.SeqOf()
	c.seqOf = seqOf
	done := []*pool{}
	for _, p := range c.pools() {
		if err := p.prepare(u, c.slots, seqOf, c.pos, c.config.CachePadding); err != nil {
			for _, q := range done {
				q.rollback()
			}
			c.undoSlots()
			if errors.Is(err, ErrNoRoom) {
				return fmt.Errorf("%w: %d tokens of %d sequence(s) do not fit %d cells per sequence (-ctx)", ErrNoRoom, u.Len(), len(u.Seqs), p.streamSize)
			}
			return err
		}
		done = append(done, p)
	}
	if c.rec != nil {
		c.rec.prepare(c.slots, u.Counts[0])
	}
	c.ub = u
	c.prepared = true
	return nil
}

// undoSlots frees the slots the prepared batch took.
func (c *Cache) undoSlots() {
	for _, s := range c.newSlots {
		delete(c.slotOf, c.slotSeq[s])
		c.slotSeq[s] = -1
	}
	c.newSlots = c.newSlots[:0]
}

// abandon drops a prepared batch that was neither committed nor rolled back.
func (c *Cache) abandon() {
	if c.prepared {
		c.Rollback()
	}
}

// Positions are the positions of the prepared batch's tokens (valid until
// the next Prepare).
func (c *Cache) Positions() []int32 { return c.pos }

// StartForward makes the prepared batch's inputs (slots, masks, state
// slots) in ctx's input context, for a graph to be built.
func (c *Cache) StartForward(ctx ml.Context) {
	in := ctx.Input()
	n := c.ub.Len()
	for _, p := range c.pools() {
		p.locT = in.FromInts(p.loc, n)
		for _, m := range p.masks {
			m.in = in.FromFloats(m.data, p.histLen, n)
			m.t = m.in
			if c.config.MaskDType != ml.DTypeF32 {
				m.t = m.t.Cast(ctx, c.config.MaskDType)
			}
		}
	}
	if c.rec != nil {
		c.rec.inputs(in)
	}
}

// Window identifies the layout of the prepared batch (the composition of
// the batch, each pool's history length, the cache's generation) and holds
// the input tensors of the graph built for it.
type Window struct {
	gen      int
	seqs     []int
	counts   []int
	histLens [2]int
	rowHists [2][]int
	rec      recLayout
	loc      [2]ml.Tensor
	masks    [2][]ml.Tensor
	recRead  ml.Tensor
	recWrite ml.Tensor
	recKeep  ml.Tensor
}

// Window is the prepared batch's window (after StartForward).
func (c *Cache) Window() Window {
	w := Window{gen: c.gen, seqs: slices.Clone(c.ub.Seqs), counts: slices.Clone(c.ub.Counts)}
	for i, p := range []*pool{c.full, c.swa} {
		if p != nil {
			w.histLens[i], w.loc[i], w.rowHists[i] = p.histLen, p.locT, slices.Clone(p.rowHist)
			for _, m := range p.masks {
				w.masks[i] = append(w.masks[i], m.in)
			}
		}
	}
	if c.rec != nil {
		w.rec, w.recRead, w.recWrite, w.recKeep = c.rec.layout(), c.rec.readT, c.rec.writeT, c.rec.keepT
	}
	return w
}

// Reuse checks whether the prepared batch has the layout of window w (so
// the graph built for w computes it correctly) and, if so, writes the
// batch's inputs into w's input tensors and returns true; the caller then
// rewrites its own inputs (tokens, positions), computes that graph and
// calls Commit. Otherwise it changes nothing and returns false.
func (c *Cache) Reuse(w Window) bool {
	if !c.prepared || w.gen != c.gen || !slices.Equal(w.seqs, c.ub.Seqs) || !slices.Equal(w.counts, c.ub.Counts) {
		return false
	}
	for i, p := range []*pool{c.full, c.swa} {
		if p != nil && (p.histLen != w.histLens[i] || w.loc[i] == nil || !slices.Equal(p.rowHist, w.rowHists[i])) {
			return false
		}
	}
	// The recurrent states: read and written in place at the same rows,
	// or through ids (rewritten below).
	if c.rec != nil && (c.rec.layout() != w.rec || (w.rec.readBase < 0 && w.recRead == nil) || (w.rec.writeBase < 0 && w.recWrite == nil)) {
		return false
	}
	for i, p := range []*pool{c.full, c.swa} {
		if p != nil {
			w.loc[i].FromInts(p.loc)
			for j, m := range p.masks {
				w.masks[i][j].FromFloats(m.data)
			}
		}
	}
	if c.rec != nil {
		c.rec.reuse(w.recRead, w.recWrite, w.recKeep)
	}
	return true
}

// Commit counts the prepared batch as stored.
func (c *Cache) Commit() {
	if !c.prepared {
		return
	}
	for _, p := range c.pools() {
		p.commit()
	}
	if c.rec != nil {
		c.rec.commit()
	}
	for i, s := range c.ub.Seqs {
		c.lens[s] += c.ub.Counts[i]
	}
	c.newSlots = c.newSlots[:0]
	c.prepared = false
}

// Rollback undoes Prepare after a failed compute. Attention cells taken
// for the batch are freed; recurrent states and sliding-window cells the
// failed graph may have overwritten cannot be restored, so the batch's
// sequences are then forgotten (a caller prefills them again).
func (c *Cache) Rollback() {
	if !c.prepared {
		return
	}
	c.prepared = false
	for _, p := range c.pools() {
		p.rollback()
	}
	if c.rec != nil {
		c.rec.rollback()
	}
	c.undoSlots()
	if c.rec != nil || c.swa != nil {
		for _, s := range c.ub.Seqs {
			if _, ok := c.lens[s]; ok {
				c.Remove(s)
			}
		}
	}
}

// ---- per-layer calls while a graph is built ---------------------------------

func (c *Cache) attnPool(layer int) *pool {
	if layer < 0 || layer >= len(c.poolOf) || c.poolOf[layer] == nil {
		panic(fmt.Errorf("kvcache: layer %d keeps no keys and values", layer))
	}
	if !c.prepared {
		panic(errors.New("kvcache: no batch prepared"))
	}
	return c.poolOf[layer]
}

// Put writes the batch's keys [keyDim, kvHeads, n] and values [valueDim,
// kvHeads, n] of layer into the cache. A ValuesInKeys layer takes the keys
// only (value nil).
func (c *Cache) Put(ctx ml.Context, layer int, key, value ml.Tensor) {
	p := c.attnPool(layer)
	spec := c.cfg.Layers[layer]
	n := c.ub.Len()
	kd, kvh, vd := spec.KeyDim, spec.KVHeads, spec.ValueDim
	if spec.ValuesInKeys {
		if value != nil || key.Dim(0) != kd || key.Dim(1) != kvh || key.Dim(2) != n {
			panic(fmt.Errorf("kvcache: layer %d keeps its values in its keys: keys %v (want [%d %d %d]) and no values",
				layer, key.Shape(), kd, kvh, n))
		}
		kc := p.keys[layer].Reshape(ctx, kd*kvh, len(p.cells))
		ctx.Forward(kc.SetRows(ctx, key.Reshape(ctx, kd*kvh, n), p.locT))
		return
	}
	if value == nil {
		panic(fmt.Errorf("kvcache: layer %d: keys %v without values", layer, key.Shape()))
	}
	if key.Dim(0) != kd || key.Dim(1) != kvh || key.Dim(2) != n || value.Dim(0) != vd || value.Dim(1) != kvh || value.Dim(2) != n {
		panic(fmt.Errorf("kvcache: layer %d: keys %v and values %v, want [%d %d %d] and [%d %d %d]",
			layer, key.Shape(), value.Shape(), kd, kvh, n, vd, kvh, n))
	}
	size := len(p.cells)
	kc := p.keys[layer].Reshape(ctx, kd*kvh, size)
	ctx.Forward(kc.SetRows(ctx, key.Reshape(ctx, kd*kvh, n), p.locT))
	if c.config.PermutedV {
		// Each value element is a one-element row of [1, size, vd*kvh].
		v := value.Reshape(ctx, vd*kvh, 1, n).Permute(ctx, 2, 0, 1, 3)
		vc := p.values[layer].Reshape(ctx, 1, size, vd*kvh)
		ctx.Forward(vc.SetRows(ctx, v, p.locT))
	} else {
		vc := p.values[layer].Reshape(ctx, vd*kvh, size)
		ctx.Forward(vc.SetRows(ctx, value.Reshape(ctx, vd*kvh, n), p.locT))
	}
}

// Get returns layer's keys, values and mask for sequence k of the batch
// (its index in the batch's Seqs): views of its stream's cells in use
// (padded), keys [keyDim, kvHeads, len], values [valueDim, kvHeads, len]
// (or [len, valueDim, kvHeads] when the backend asks for PermutedV, except
// for a ValuesInKeys layer, whose values view its keys), and
// the mask [len, its tokens] for this layer's kind. With one sequence in
// the batch the mask covers the whole batch.
func (c *Cache) Get(ctx ml.Context, layer, k int) (key, value, mask ml.Tensor) {
	p := c.attnPool(layer)
	if k < 0 || k >= len(c.ub.Seqs) {
		panic(fmt.Errorf("kvcache: sequence index %d of a batch of %d", k, len(c.ub.Seqs)))
	}
	return p.views(ctx, layer, k, c.ub, c.permutedV(layer))
}

// permutedV reports whether layer's values are in the PermutedV layout.
func (c *Cache) permutedV(layer int) bool {
	return c.config.PermutedV && !c.cfg.Layers[layer].ValuesInKeys
}

// Streams is Get for the sequences first, first+1, ... of an equal batch
// whose streams follow one another (llama.cpp's get_k/get_v over a range
// of streams): count (at least 1) is how many sequences from first have
// consecutive streams, and key [keyDim, kvHeads, len, count], value
// [valueDim, kvHeads, len, count] and mask [len, tokens, 1, count] view
// them all, for one attention op over the count sequences. It returns
// count 0 (and nil tensors) where it cannot: a unified cache, PermutedV
// values, or a batch that is not equal.
func (c *Cache) Streams(ctx ml.Context, layer, first int) (key, value, mask ml.Tensor, count int) {
	p := c.attnPool(layer)
	u := c.ub
	if first < 0 || first >= len(u.Seqs) {
		panic(fmt.Errorf("kvcache: sequence index %d of a batch of %d", first, len(u.Seqs)))
	}
	if p.unified || c.permutedV(layer) || !u.Equal {
		return nil, nil, nil, 0
	}
	count = 1
	for first+count < len(u.Seqs) && p.strm[first+count] == p.strm[first]+count {
		count++
	}
	kt, vt, vd := p.keys[layer], p.values[layer], p.valueDims[layer]
	off, stride := p.strm[first]*p.streamSize, p.streamSize
	key = kt.View(ctx, off*kt.Stride(2), kt.Dim(0), kt.Stride(1), kt.Dim(1), kt.Stride(2), p.histLen, stride*kt.Stride(2), count)
	if vd > 0 {
		value = kt.View(ctx, off*kt.Stride(2), vd, kt.Stride(1), kt.Dim(1), kt.Stride(2), p.histLen, stride*kt.Stride(2), count)
	} else {
		value = vt.View(ctx, off*vt.Stride(2), vt.Dim(0), vt.Stride(1), vt.Dim(1), vt.Stride(2), p.histLen, stride*vt.Stride(2), count)
	}
	mt := p.masks[p.maskOf[layer]].t
	t := u.SeqTokens
	mask = mt.View(ctx, first*t*mt.Stride(1), mt.Dim(0), mt.Stride(1), t, t*mt.Stride(1), 1, t*mt.Stride(1), count)
	return key, value, mask, count
}

// RowWise reports whether the prepared batch asks for row-wise attention
// (Ubatch.RowWise): each token attends through GetRow.
func (c *Cache) RowWise() bool { return c.prepared && c.ub.RowWise }

// GetRow is Get for token t of a RowWise batch alone: the keys and values
// of its sequence's cells up to the history length a one-token batch
// would have had, and its mask row [that length, 1].
func (c *Cache) GetRow(ctx ml.Context, layer, t int) (key, value, mask ml.Tensor) {
	p := c.attnPool(layer)
	if !c.RowWise() || t < 0 || t >= c.ub.Len() {
		panic(fmt.Errorf("kvcache: row %d of a batch of %d (row-wise %v)", t, c.ub.Len(), c.RowWise()))
	}
	return p.rowViews(ctx, layer, t, c.seqOf, c.permutedV(layer))
}

// ConvState is layer's convolution state for the batch's sequences:
// [convWidth-1, channels, sequences] (zero for a sequence's first batch).
func (c *Cache) ConvState(ctx ml.Context, layer int) ml.Tensor {
	return c.recurrentOf(layer).get(ctx, layer, 0)
}

// SetConvState stores the batch's new convolution states [convWidth-1,
// channels, sequences] of layer.
func (c *Cache) SetConvState(ctx ml.Context, layer int, state ml.Tensor) {
	c.recurrentOf(layer).set(ctx, layer, 0, state)
}

// SetConvStates stores the convolution states after each of the batch's
// last StatesKept() tokens (states[j]: j tokens before the last, [convWidth-1,
// channels, sequences], any strides).
func (c *Cache) SetConvStates(ctx ml.Context, layer int, states []ml.Tensor) {
	c.recurrentOf(layer).setPlanes(ctx, layer, 0, states)
}

// DeltaState is layer's delta-net state for the batch's sequences:
// [stateSize, stateSize or StateRows, heads, sequences] (zero for a sequence's first
// batch).
func (c *Cache) DeltaState(ctx ml.Context, layer int) ml.Tensor {
	return c.recurrentOf(layer).get(ctx, layer, 1)
}

// DeltaStateInPlace is DeltaState, and whether writing the new states
// over it is what SetDeltaState would do: the batch reads and writes the
// same rows of the cache, through a view (its sequences' rows follow one
// another), none starts afresh, and one state is kept per sequence. A
// fused kernel may then update the states where they are
// (ml.GatedDeltaNetInPlace); otherwise pass the new ones to SetDeltaState.
func (c *Cache) DeltaStateInPlace(ctx ml.Context, layer int) (ml.Tensor, bool) {
	r := c.recurrentOf(layer)
	return r.get(ctx, layer, 1), r.inPlace()
}

// SetDeltaState stores the batch's new delta-net states [stateSize,
// stateSize, heads, sequences] of layer, or [.., sequences·m] with the
// states of the batch's last m = StatesKept(tokens) tokens (the sequences'
// states after the last token first, then one token before, ...); the
// same for SetConvState.
func (c *Cache) SetDeltaState(ctx ml.Context, layer int, state ml.Tensor) {
	c.recurrentOf(layer).set(ctx, layer, 1, state)
}

// StatesKept is how many states of each sequence's last tokens a
// recurrent layer passes to SetConvState and SetDeltaState for the
// prepared batch (1 unless Config.Rewind asks for more).
func (c *Cache) StatesKept() int {
	if c.rec == nil || !c.prepared {
		return 1
	}
	return c.rec.m
}

func (c *Cache) recurrentOf(layer int) *recurrent {
	if c.rec == nil || layer < 0 || layer >= len(c.cfg.Layers) || c.cfg.Layers[layer].Kind != Recurrent {
		panic(fmt.Errorf("kvcache: layer %d keeps no recurrent state", layer))
	}
	if !c.prepared {
		panic(errors.New("kvcache: no batch prepared"))
	}
	return c.rec
}
