// Package decoder is the runtime shared by the decoder-only text models
// (llama, qwen3, qwen3moe, gpt-oss, qwen3next, qwen35, qwen35moe): token
// embeddings, a stack of pre-norm blocks (a mixer — attention or a
// recurrent delta-net — and a feed-forward network, each with a residual),
// the output norm and head; batching of several sequences (split into
// ubatches the way llama.cpp does), keeping only the rows whose logits are
// wanted after the last mixer, and reusing a decode step's graph.
//
// An architecture package reads its hyperparameters and weights and fills
// a Model with blocks made of ml/nn's parts; this package runs it.
package decoder

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/ggml-rs/ggml-rs/go/kvcache"
	"github.com/ggml-rs/ggml-rs/go/ml"
	"github.com/ggml-rs/ggml-rs/go/ml/nn"
)

// Mixer is a block's token-mixing part: *nn.Attention or *nn.DeltaNet.
type Mixer interface {
	Forward(ctx ml.Context, x ml.Tensor, b *nn.Batch, layer int) ml.Tensor
}

// FFN is a block's feed-forward part: *nn.FFN or *nn.MoE.
type FFN interface {
	Forward(ctx ml.Context, x ml.Tensor) ml.Tensor
}

// Block is one layer: x += Mixer(rmsnorm(x)·AttnNorm); x +=
// FFN(rmsnorm(x)·FFNNorm). With AttnPostNorm and FFNPostNorm (Gemma's
// "sandwich" norms) each branch's output is RMS-normed again before its
// residual: x += rmsnorm(Mixer(…))·AttnPostNorm, likewise the FFN's.
// Without AttnNorm and FFNNorm (OLMo 2's post-norm blocks) the branches
// take x as it is. A block without a Mixer or without an FFN
// (Nemotron-H's layers are one or the other) skips that branch. Cache says
// what the layer keeps.
type Block struct {
	AttnNorm     ml.Tensor // optional
	Mixer        Mixer
	AttnPostNorm ml.Tensor // optional
	FFNNorm      ml.Tensor // optional
	FFN          FFN
	FFNPostNorm  ml.Tensor // optional
	Cache        kvcache.LayerSpec
}

// norm is RMSNorm(h)·w, or h without w.
func norm(ctx ml.Context, h, w ml.Tensor, eps float32) ml.Tensor {
	if w == nil {
		return h
	}
	return h.RMSNorm(ctx, w, eps)
}

// rest is the block after its mixer's output h (nil without a mixer):
// the mixer's residual, then the feed-forward branch with its own, x +
// post(FFN(rmsnorm(x)·FFNNorm)) (none without a feed-forward).
func (bl *Block) rest(ctx ml.Context, x, h ml.Tensor, eps float32) ml.Tensor {
	if h != nil {
		x = x.Add(ctx, norm(ctx, h, bl.AttnPostNorm, eps))
	}
	if bl.FFN == nil {
		return x
	}
	return x.Add(ctx, norm(ctx, bl.FFN.Forward(ctx, norm(ctx, x, bl.FFNNorm, eps)), bl.FFNPostNorm, eps))
}

// Stack runs a model's layers in place of the plain residual stream of
// Blocks (Gemma 3n's AltUp carries several hidden states per token): it
// maps the scaled token embeddings x [Hidden, n] of a batch and its token
// ids to the hidden states [Hidden, n] the output norm takes. The Blocks
// still say what each layer keeps in the cache, and hold the parts the
// Stack runs.
type Stack interface {
	Forward(ctx ml.Context, x, tokens ml.Tensor, b *nn.Batch) ml.Tensor
}

// Model is a decoder ready to run.
type Model struct {
	Arch           string
	Hidden, Vocab  int
	Context        int     // the context length the model was trained for
	Eps            float32 // RMS norm epsilon of the block and output norms
	TokEmb         ml.Tensor
	OutNorm        ml.Tensor
	Output         ml.Tensor // the output head (the embeddings when tied)
	Blocks         []Block
	Window         int  // sliding window of SlidingWindow layers
	MultiPositions bool // positions are 4 rows (multi-section RoPE)
	// EmbedScale, when not 0, multiplies the token embeddings (Gemma:
	// √Hidden, as a float32).
	EmbedScale float32
	// SoftCap, when not 0, caps the logits: SoftCap·tanh(logits/SoftCap)
	// (final_logit_softcapping).
	SoftCap float32
	// RowsAfterNorm keeps the wanted rows after the output norm, not
	// before the last block's feed-forward: the last block computes every
	// row, as llama.cpp's Nemotron-H graph does (its matrix products then
	// take the kernels of the whole batch, and round as they do).
	RowsAfterNorm bool
	// Stack, when set, runs the layers (see Stack); the rows whose logits
	// are wanted are kept after it, before the output norm.
	Stack Stack
	// AttnTemp, when set, gives each token an attention temperature by
	// its position (nn.Batch.AttnScale) for the layers that use one.
	AttnTemp *AttnTemp

	// NextN makes the model a multi-token-prediction (MTP) head: each
	// token comes with a hidden state of the main model (Input.Hidden),
	// and the two are combined before the blocks.
	NextN *NextN

	// NoGraphReuse rebuilds every decode step's graph (for tests and
	// comparisons); by default a step of one token per sequence whose cache
	// layout is unchanged recomputes the previous step's graph with new
	// inputs, as llama.cpp does.
	NoGraphReuse bool

	b ml.Backend
	// mu guards last and makes compute+read of one forward atomic: outputs
	// live in the backend's shared compute buffers until its next compute,
	// and Forward may run concurrently on other caches.
	mu   sync.Mutex
	last *stepGraph
	// scratch: the logits memory of RunOptions.Scratch, one per ubatch.
	scratch []*[]float32
}

// NextN is the input of an MTP (NextN) head, as llama.cpp's graph_mtp:
// x = EHProj · [rmsnorm(embedding)·ENorm ; rmsnorm(hidden)·HNorm].
type NextN struct {
	ENorm, HNorm ml.Tensor // [Hidden]
	EHProj       ml.Tensor // [2·Hidden, Hidden]
}

// New makes a model over backend b (the architecture package fills the
// rest of the fields before use).
func New(b ml.Backend, arch string) *Model { return &Model{b: b, Arch: arch} }

// Backend is the model's backend.
func (m *Model) Backend() ml.Backend { return m.b }

// Recurrent reports whether some layer keeps a recurrent state.
func (m *Model) Recurrent() bool {
	for _, bl := range m.Blocks {
		if bl.Cache.Kind == kvcache.Recurrent {
			return true
		}
	}
	return false
}

// CacheOptions size a cache.
type CacheOptions struct {
	Capacity  int // tokens of all sequences together (attention layers)
	Sequences int // sequences held at once (default 1)
	MaxBatch  int // the largest ubatch that will be computed (default 512)
	// Rewind is how many of a batch's last tokens Cache.Rewind can take
	// back (kvcache.Config.Rewind), for speculative decoding.
	Rewind int
}

// NewCache makes a cache for the model.
func (m *Model) NewCache(o CacheOptions) (*kvcache.Cache, error) {
	return kvcache.New(m.b, m.cacheConfig(o))
}

// CacheSize is the memory NewCache(o) would take, computed from the
// layers' shapes without allocating anything (kvcache.Size): the bytes of
// each block's cache, on that block's device, and of the cache's
// bookkeeping in Go memory. It refuses the capacities NewCache refuses.
func (m *Model) CacheSize(o CacheOptions) (layers []uint64, host uint64, err error) {
	pad := 1
	if bc, ok := m.b.(ml.BackendCacheConfig); ok {
		pad = bc.CacheConfig().CachePadding
	}
	return kvcache.Size(m.cacheConfig(o), pad)
}

func (m *Model) cacheConfig(o CacheOptions) kvcache.Config {
	specs := make([]kvcache.LayerSpec, len(m.Blocks))
	for i, bl := range m.Blocks {
		specs[i] = bl.Cache
	}
	return kvcache.Config{Layers: specs, Capacity: o.Capacity, Sequences: o.Sequences,
		Window: m.Window, MaxBatch: o.MaxBatch, Rewind: o.Rewind}
}

// stepGraph is a computed graph kept for the next batch of the same
// layout (a decode step, a speculative verification, an MTP draft step):
// its inputs are rewritten and it is computed again.
type stepGraph struct {
	ctx           ml.Context
	cache         *kvcache.Cache
	window        kvcache.Window
	n             int  // tokens, every row read
	rowWise       bool // as RunOptions.RowWise
	tok, pos, hin ml.Tensor
	temp          ml.Tensor // the attention temperatures (Model.AttnTemp)
	out, hid      ml.Tensor // hid: the hidden states, when wanted
}

// ReleaseGraph frees the graph kept for the next decode step (Generate
// does this when it ends; callers of Forward do it when they are done).
func (m *Model) ReleaseGraph() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropGraph()
}

func (m *Model) dropGraph() {
	if m.last != nil {
		m.last.ctx.Close()
		m.last = nil
	}
}

// Forward runs tokens of sequence 0 (which follow those the cache holds
// of it) through the model in ubatches of at most 512 tokens and returns
// the logits of every token (all) or of the last one only: a row of Vocab
// values each.
func (m *Model) Forward(cache *kvcache.Cache, tokens []int32, all bool) ([][]float32, error) {
	out, err := m.ForwardBatch(cache, []kvcache.Sequence{{Seq: 0, Tokens: tokens}}, all, 512)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ForwardBatch runs a batch of sequences' tokens through the model, in
// ubatches of at most maxBatch tokens (cut as llama.cpp's split_equal: as
// many tokens of each sequence in a ubatch, at least one), and returns per
// sequence the logits of its every token (all) or of its last one.
func (m *Model) ForwardBatch(cache *kvcache.Cache, batch []kvcache.Sequence, all bool, maxBatch int) ([][][]float32, error) {
	in := make([]Input, len(batch))
	for i, s := range batch {
		in[i] = Input{Sequence: s}
	}
	out, err := m.Run(cache, in, RunOptions{All: all, MaxBatch: maxBatch})
	if err != nil {
		return nil, err
	}
	logits := make([][][]float32, len(out))
	for i, o := range out {
		logits[i] = o.Logits
	}
	return logits, nil
}

// Input is one sequence's tokens for Run and, for an MTP head (NextN),
// the main model's hidden state paired with each token (Hidden rows).
type Input struct {
	kvcache.Sequence
	Hidden [][]float32
}

// Output is what Run returns for one sequence: the logits of its every
// token (All) or of its last, and with RunOptions.Hidden the hidden state
// of every token (after the output norm: what the head reads and what an
// MTP head takes).
type Output struct {
	Logits [][]float32
	Hidden [][]float32
}

// RunOptions say what Run computes.
type RunOptions struct {
	All      bool // logits of every token, not only each sequence's last
	Hidden   bool // the hidden state of every token too
	MaxBatch int  // the largest ubatch (default 512)
	// RowWise computes every row bit for bit as a batch of that token
	// alone would (one-row matrix products, each token's attention over
	// the history one-token decoding would have: ml.RowWise,
	// kvcache.Ubatch.RowWise), at some cost in speed: speculative
	// decoding's verification, so that it emits plain decoding's tokens.
	RowWise bool
	// Scratch reads the logits into memory the model keeps and reuses:
	// the rows Run returns are valid until the next Run or ForwardBatch
	// on this model (a decode loop that samples each row at once, such
	// as the server's, then leaves no garbage per step).
	Scratch bool
}

// Run is ForwardBatch with hidden states in (an MTP head) or out.
func (m *Model) Run(cache *kvcache.Cache, batch []Input, o RunOptions) ([]Output, error) {
	if len(batch) == 0 {
		return nil, errors.New(m.Arch + ": empty batch")
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 512
	}
	index := map[int]int{}
	seqs := make([]kvcache.Sequence, len(batch))
	for i, s := range batch {
		if len(s.Tokens) == 0 {
			return nil, fmt.Errorf("%s: sequence %d has no tokens", m.Arch, s.Seq)
		}
		if _, dup := index[s.Seq]; dup {
			return nil, fmt.Errorf("%s: sequence %d appears twice in the batch", m.Arch, s.Seq)
		}
		index[s.Seq] = i
		for _, id := range s.Tokens {
			if id < 0 || int(id) >= m.Vocab {
				return nil, fmt.Errorf("%s: token id %d is outside the %d-token vocabulary", m.Arch, id, m.Vocab)
			}
		}
		if m.NextN != nil {
			if len(s.Hidden) != len(s.Tokens) {
				return nil, fmt.Errorf("%s: sequence %d has %d tokens but %d hidden states (an MTP head takes one per token)",
					m.Arch, s.Seq, len(s.Tokens), len(s.Hidden))
			}
			for _, h := range s.Hidden {
				if len(h) != m.Hidden {
					return nil, fmt.Errorf("%s: a hidden state of %d values, want %d", m.Arch, len(h), m.Hidden)
				}
			}
		} else if s.Hidden != nil {
			return nil, fmt.Errorf("%s: hidden-state inputs are for an MTP head", m.Arch)
		}
		seqs[i] = s.Sequence
	}
	out := make([]Output, len(batch))
	done := make([]int, len(batch)) // tokens of each sequence computed
	// Equal ubatches (as many tokens of each sequence) always: recurrent
	// layers need them, and they are what llama.cpp computes with one KV
	// stream per sequence (for one sequence they are the simple split).
	for u, ub := range kvcache.Split(seqs, o.MaxBatch, true) {
		// The rows whose logits are wanted: all, or each sequence's last;
		// and the hidden inputs in the ubatch's order.
		var rows []int32
		var hin []float32
		r := 0
		for k, s := range ub.Seqs {
			i := index[s]
			for j := 0; j < ub.Counts[k]; j++ {
				if o.All || done[i]+j == len(batch[i].Tokens)-1 {
					rows = append(rows, int32(r))
				}
				if m.NextN != nil {
					hin = append(hin, batch[i].Hidden[done[i]+j]...)
				}
				r++
			}
		}
		ub.RowWise = o.RowWise
		var buf *[]float32
		if o.Scratch {
			buf = m.scratchBuffer(u)
		}
		logits, hidden, err := m.forward(cache, &ub, rows, hin, o.Hidden, buf)
		if err != nil {
			return nil, err
		}
		// Hand the rows back to their sequences, in order.
		r, p := 0, 0
		for k, s := range ub.Seqs {
			i := index[s]
			for j := 0; j < ub.Counts[k]; j++ {
				if p < len(rows) && rows[p] == int32(r) {
					out[i].Logits = append(out[i].Logits, logits[p])
					p++
				}
				if o.Hidden {
					out[i].Hidden = append(out[i].Hidden, hidden[r])
				}
				r++
			}
			done[i] += ub.Counts[k]
		}
	}
	return out, nil
}

// forward computes one ubatch and returns the logits of the given rows
// and, with wantHidden, every row's hidden state; hin holds an MTP head's
// hidden inputs (Hidden values per row).
func (m *Model) forward(cache *kvcache.Cache, ub *kvcache.Ubatch, rows []int32, hin []float32, wantHidden bool, buf *[]float32) (logits, hidden [][]float32, err error) {
	if len(rows) == 0 {
		// Nothing is read: still compute (the cache must see the tokens).
		rows = []int32{int32(ub.Len() - 1)}
	}
	if err := cache.Prepare(ub); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", m.Arch, err)
	}
	done := false
	defer func() {
		if !done {
			cache.Rollback()
		}
	}()
	n := ub.Len()
	// Every row read: a graph the next batch of the same layout may reuse
	// (decode steps, speculative verifications, MTP draft steps).
	reusable := len(rows) == n && !m.NoGraphReuse
	if reusable {
		if lg, hd, ok, err := m.reuse(cache, ub, hin, wantHidden, buf); ok || err != nil {
			done = err == nil
			return lg, hd, err
		}
	}

	ctx := m.b.NewContext()
	keep := false
	defer func() {
		if !keep {
			ctx.Close()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = fmt.Errorf("%s: %w", m.Arch, e)
			} else {
				err = fmt.Errorf("%s: %v", m.Arch, p)
			}
		}
	}()
	ctx.SetBatchSize(n)
	if ub.RowWise {
		rw, ok := ctx.(ml.RowWise)
		if !ok {
			return nil, nil, fmt.Errorf("%s: the backend cannot compute row-wise", m.Arch)
		}
		rw.SetRowWise(true)
	}
	cache.StartForward(ctx)
	window := cache.Window()
	in := ctx.Input()
	tok := in.FromInts(ub.Tokens, n)
	pos := m.positions(in, cache.Positions())
	var hinT, temp ml.Tensor
	if m.AttnTemp != nil {
		temp = in.FromFloats(m.AttnTemp.Scales(cache.Positions()), 1, 1, n)
	}
	b := &nn.Batch{Positions: pos, AttnScale: temp, Tokens: n, Cache: cache}
	if ub.Equal {
		b.Seqs, b.SeqTokens = len(ub.Seqs), ub.SeqTokens
	} else {
		b.Seqs, b.SeqTokens = 1, n
	}
	var keepRows ml.Tensor
	if len(rows) < n {
		keepRows = in.FromInts(rows, len(rows))
	}

	x := m.TokEmb.Rows(ctx, tok)
	if m.EmbedScale != 0 {
		x = x.Scale(ctx, float64(m.EmbedScale))
	}
	if m.NextN != nil {
		hinT = in.FromFloats(hin, m.Hidden, n)
		h := hinT
		x = x.RMSNorm(ctx, m.NextN.ENorm, m.Eps).Concat(ctx, h.RMSNorm(ctx, m.NextN.HNorm, m.Eps), 0)
		x = m.NextN.EHProj.Mulmat(ctx, x)
	}
	var hid ml.Tensor
	pin, _ := ctx.(ml.NormLayers)
	blocks := m.Blocks
	if m.Stack != nil {
		blocks = nil // the stack runs them
		x = m.Stack.Forward(ctx, x, tok, b)
		if keepRows != nil {
			if wantHidden {
				hid = x.RMSNorm(ctx, m.OutNorm, m.Eps)
			}
			x = x.Rows(ctx, keepRows)
		}
	}
	for i, bl := range blocks {
		if pin != nil {
			pin.SetNormLayer(i)
		}
		var h ml.Tensor
		if bl.Mixer != nil {
			h = bl.Mixer.Forward(ctx, norm(ctx, x, bl.AttnNorm, m.Eps), b, i)
		}
		if keepRows != nil && i == len(blocks)-1 && !m.RowsAfterNorm {
			if wantHidden {
				// Every row's hidden state, from a feed-forward over all
				// rows; the logits below take the path of a batch
				// without hidden states, bit for bit.
				hid = bl.rest(ctx, x, h, m.Eps).RMSNorm(ctx, m.OutNorm, m.Eps)
			}
			// Only some rows' logits are wanted: the last feed-forward
			// (and the head) run on those alone, as llama.cpp's
			// inp_out_ids.
			if h != nil {
				h = h.Rows(ctx, keepRows)
			}
			x = x.Rows(ctx, keepRows)
		}
		x = bl.rest(ctx, x, h, m.Eps)
	}
	if pin != nil {
		pin.SetNormLayer(-1)
	}
	x = x.RMSNorm(ctx, m.OutNorm, m.Eps)
	if wantHidden && hid == nil {
		hid = x
	}
	if keepRows != nil && m.RowsAfterNorm {
		x = x.Rows(ctx, keepRows)
	}
	out := m.Output.Mulmat(ctx, x)
	if c := m.SoftCap; c != 0 {
		out = out.Scale(ctx, float64(1/c)).Tanh(ctx).Scale(ctx, float64(c))
	}
	outs := []ml.Tensor{out}
	if hid != nil {
		outs = append(outs, hid)
	}
	ctx.Forward(outs...)

	m.mu.Lock()
	defer m.mu.Unlock()
	ctx.Compute(outs...)
	cache.Commit()
	done = true
	logits = splitRows(readInto(out, buf), m.Vocab, len(rows))
	if hid != nil {
		hidden = splitRows(hid.Floats(), m.Hidden, n)
	}
	if reusable {
		m.dropGraph()
		m.last = &stepGraph{ctx: ctx, cache: cache, window: window, n: n, rowWise: ub.RowWise,
			tok: tok, pos: pos, temp: temp, hin: hinT, out: out, hid: hid}
		keep = true
	}
	return logits, hidden, nil
}

// reuse computes the batch on the previous batch's graph if it has its
// layout (tokens, row-wise mode, hidden states wanted, the cache's window);
// ok is false when a new graph is needed.
func (m *Model) reuse(cache *kvcache.Cache, ub *kvcache.Ubatch, hin []float32, wantHidden bool, buf *[]float32) (logits, hidden [][]float32, ok bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.last
	if g == nil || g.cache != cache || g.n != ub.Len() || g.rowWise != ub.RowWise || (g.hid != nil) != wantHidden || !cache.Reuse(g.window) {
		return nil, nil, false, nil
	}
	defer func() {
		if p := recover(); p != nil {
			m.dropGraph()
			err = fmt.Errorf("%s: %v", m.Arch, p)
		}
	}()
	g.tok.FromInts(ub.Tokens)
	g.pos.FromInts(m.positionData(cache.Positions()))
	if g.temp != nil {
		g.temp.FromFloats(m.AttnTemp.Scales(cache.Positions()))
	}
	if g.hin != nil {
		g.hin.FromFloats(hin)
	}
	outs := []ml.Tensor{g.out}
	if g.hid != nil {
		outs = append(outs, g.hid)
	}
	g.ctx.Compute(outs...)
	cache.Commit()
	logits = splitRows(readInto(g.out, buf), m.Vocab, ub.Len())
	if g.hid != nil {
		hidden = splitRows(g.hid.Floats(), m.Hidden, ub.Len())
	}
	return logits, hidden, true, nil
}

// AttnTemp is llama.cpp's attention temperature by position (Llama 4,
// Mistral 3): token p's queries are multiplied by
// ln(⌊(p + Offset)/Floor⌋ + 1)·Scale + 1.
type AttnTemp struct {
	Scale, Offset float32
	Floor         int
}

// Scales are the temperatures of positions pos, computed as llama.cpp
// does (float32 position and quotient, the logarithm in float64).
func (t *AttnTemp) Scales(pos []int32) []float32 {
	out := make([]float32, len(pos))
	for i, p := range pos {
		q := float32(float32(p)+t.Offset) / float32(t.Floor)
		out[i] = float32(float64(math.Log(math.Floor(float64(q))+1)*float64(t.Scale)) + 1)
	}
	return out
}

// positions makes the positions input: one row, or for multi-section
// RoPE four (time, height, width, extra; a text token has its position
// in the first three and 0 in the fourth).
func (m *Model) positions(in ml.Context, pos []int32) ml.Tensor {
	d := m.positionData(pos)
	return in.FromInts(d, len(d))
}

func (m *Model) positionData(pos []int32) []int32 {
	if !m.MultiPositions {
		return pos
	}
	n := len(pos)
	d := make([]int32, 4*n)
	for r := 0; r < 3; r++ {
		copy(d[r*n:], pos)
	}
	return d
}

// scratchBuffer is the reused logits memory of a Run's u-th ubatch.
func (m *Model) scratchBuffer(u int) *[]float32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.scratch) <= u {
		m.scratch = append(m.scratch, new([]float32))
	}
	return m.scratch[u]
}

// floatsInto is a backend tensor that reads into caller memory.
type floatsInto interface {
	FloatsInto(dst []float32) []float32
}

// readInto reads t's values into *buf (kept for the next call) when buf is
// set and the backend can, else into new memory.
func readInto(t ml.Tensor, buf *[]float32) []float32 {
	if f, ok := t.(floatsInto); ok && buf != nil {
		*buf = f.FloatsInto(*buf)
		return *buf
	}
	return t.Floats()
}

func splitRows(all []float32, vocab, rows int) [][]float32 {
	out := make([][]float32, rows)
	for r := range out {
		out[r] = slices.Clip(all[r*vocab : (r+1)*vocab])
	}
	return out
}
