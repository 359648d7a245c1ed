package kvcache

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ggml-rs/ggml-rs/go/ml"
	_ "github.com/ggml-rs/ggml-rs/go/ml/backend"
)

func seqs(lens ...int) []Sequence {
	var out []Sequence
	for i, n := range lens {
		t := make([]int32, n)
		for j := range t {
			t[j] = int32(100*i + j)
		}
		out = append(out, Sequence{Seq: i, Tokens: t})
	}
	return out
}

func TestSplitEqualAndSimple(t *testing.T) {
	shape := func(us []Ubatch) [][]int {
		var out [][]int
		for _, u := range us {
			out = append(out, slices.Clone(u.Counts))
			if err := u.Validate(); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	for _, c := range []struct {
		lens  []int
		max   int
		equal bool
		want  [][]int
	}{
		// llama.cpp's split_equal: as many tokens of each sequence, the
		// shortest remaining bounds a ubatch; the cap splits evenly.
		{[]int{23, 57}, 512, true, [][]int{{23, 23}, {34}}},
		{[]int{23, 57}, 7, true, [][]int{{3, 3}, {3, 3}, {3, 3}, {3, 3}, {3, 3}, {3, 3}, {3, 3}, {2, 2}, {7}, {7}, {7}, {7}, {6}}},
		// At least one token of each sequence, even past the cap.
		{[]int{2, 3}, 1, true, [][]int{{1, 1}, {1, 1}, {1}}},
		{[]int{5}, 2, true, [][]int{{2}, {2}, {1}}},
		// split_simple: tokens in order, cut where the cap falls.
		{[]int{3, 4}, 5, false, [][]int{{3, 2}, {2}}},
	} {
		got := shape(Split(seqs(c.lens...), c.max, c.equal))
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("Split(%v, %d, equal %v) = %v, want %v", c.lens, c.max, c.equal, got, c.want)
		}
	}
	// Equal splits keep each sequence's tokens in order.
	for _, u := range Split(seqs(23, 57), 7, true) {
		i := 0
		for k, n := range u.Counts {
			for j := 0; j < n; j++ {
				if u.Tokens[i]/100 != int32(u.Seqs[k]) {
					t.Fatalf("token %d of a ubatch is of sequence %d, want %d", i, u.Tokens[i]/100, u.Seqs[k])
				}
				i++
			}
		}
	}
}

func newBackend(t *testing.T) ml.Backend {
	t.Helper()
	b, err := ml.NewBackend("", ml.BackendParams{AllocMemory: true, NumThreads: 1, FlashAttention: ml.FlashAttentionEnabled})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

var (
	attn = LayerSpec{Kind: Attention, KeyDim: 8, ValueDim: 8, KVHeads: 2}
	swa  = LayerSpec{Kind: SlidingWindow, KeyDim: 8, ValueDim: 8, KVHeads: 2}
	// chunk: Llama 4's chunked attention over chunks of Config.Window.
	chunk = LayerSpec{Kind: Chunked, KeyDim: 8, ValueDim: 8, KVHeads: 2}
	rec   = LayerSpec{Kind: Recurrent, ConvWidth: 4, ConvChannels: 6, StateSize: 4, StateHeads: 2}
	// latent: multi-head latent attention's one cached head, whose values
	// are its keys' first 8 elements.
	latent = LayerSpec{Kind: Attention, KeyDim: 12, ValueDim: 8, KVHeads: 1, ValuesInKeys: true}
)

// prepare makes the batch one ubatch (sequence-major, as given) and runs
// Prepare, failing the test on an error.
func prepare(t *testing.T, c *Cache, b []Sequence) *Ubatch {
	t.Helper()
	u := &Ubatch{Equal: true, SeqTokens: len(b[0].Tokens)}
	for _, s := range b {
		u.Tokens = append(u.Tokens, s.Tokens...)
		u.Seqs = append(u.Seqs, s.Seq)
		u.Counts = append(u.Counts, len(s.Tokens))
		u.Equal = u.Equal && len(s.Tokens) == u.SeqTokens
	}
	if err := c.Prepare(u); err != nil {
		t.Fatal(err)
	}
	return u
}

// visible lists, per token of the prepared batch, the (sequence, position)
// of the cells its mask for layer shows.
func visible(c *Cache, layer int) [][][2]int32 {
	p := c.poolOf[layer]
	m := p.masks[p.maskOf[layer]]
	n := c.ub.Len()
	seqOf := c.ub.SeqOf()
	out := make([][][2]int32, n)
	for tk := 0; tk < n; tk++ {
		cells := p.cells[p.strm[seqOf[tk]]*p.streamSize:]
		for j, v := range m.data[tk*p.histLen : (tk+1)*p.histLen] {
			if v == 0 {
				out[tk] = append(out[tk], [2]int32{cells[j].seq, cells[j].pos})
			} else if !math.IsInf(float64(v), -1) {
				panic("mask value neither 0 nor -inf")
			}
		}
	}
	return out
}

func TestStreamsMasksAndPositions(t *testing.T) {
	b := newBackend(t)
	c, err := New(b, Config{Layers: []LayerSpec{attn, swa}, Capacity: 1024, Sequences: 2, Window: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Capacity() != 512 {
		t.Fatalf("capacity per sequence %d, want 512 (1024 over 2 streams)", c.Capacity())
	}
	prepare(t, c, seqs(2, 3))
	if got := c.Positions(); !slices.Equal(got, []int32{0, 1, 0, 1, 2}) {
		t.Fatalf("positions %v", got)
	}
	// Each sequence's cells start at its stream's first cell.
	if p := c.full; !slices.Equal(p.loc, []int32{0, 1, 512, 513, 514}) || p.histLen != 256 {
		t.Fatalf("cells %v, history %d", p.loc, p.histLen)
	}
	c.Commit()
	u := prepare(t, c, []Sequence{{Seq: 1, Tokens: []int32{7, 8}}, {Seq: 0, Tokens: []int32{9, 9}}})
	if got := c.Positions(); !slices.Equal(got, []int32{3, 4, 2, 3}) {
		t.Fatalf("positions %v", got)
	}
	// Full attention: a token sees its own sequence up to itself.
	full := visible(c, 0)
	if want := [][2]int32{{1, 0}, {1, 1}, {1, 2}, {1, 3}}; !slices.Equal(full[0], want) {
		t.Fatalf("sequence 1 at 3 sees %v, want %v", full[0], want)
	}
	if want := [][2]int32{{0, 0}, {0, 1}, {0, 2}, {0, 3}}; !slices.Equal(full[3], want) {
		t.Fatalf("sequence 0 at 3 sees %v, want %v", full[3], want)
	}
	// The window of 3: positions 2..4 for the token at 4.
	if want := [][2]int32{{1, 2}, {1, 3}, {1, 4}}; !slices.Equal(visible(c, 1)[1], want) {
		t.Fatalf("windowed token sees %v, want %v", visible(c, 1)[1], want)
	}
	if u.Seqs[0] != 1 {
		t.Fatal("batch order changed")
	}
	c.Commit()
	if c.Len(0) != 4 || c.Len(1) != 5 {
		t.Fatalf("lengths %d, %d", c.Len(0), c.Len(1))
	}
	// A third sequence does not fit two slots; nothing changes.
	err = c.Prepare(&Split([]Sequence{{Seq: 5, Tokens: []int32{1}}}, 512, true)[0])
	if err == nil {
		t.Fatal("a third sequence was accepted by a 2-sequence cache")
	}
	// Removing one frees its stream for another.
	c.Remove(0)
	prepare(t, c, []Sequence{{Seq: 5, Tokens: []int32{1}}})
	if c.full.loc[0] != 0 {
		t.Fatalf("the new sequence took cell %d, want its stream's first", c.full.loc[0])
	}
	c.Rollback()
	if c.Len(5) != 0 || len(c.Seqs()) != 1 {
		t.Fatalf("rollback kept sequence 5: %v", c.Seqs())
	}
}

func TestCapacityTruncateAndKeepPrefix(t *testing.T) {
	b := newBackend(t)
	c, err := New(b, Config{Layers: []LayerSpec{attn}, Capacity: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prepare(t, c, seqs(10))
	c.Commit()
	// Too many tokens: ErrNoRoom, nothing taken.
	long := seqs(600)
	err = c.Prepare(&Split(long, 1000, true)[0])
	if !errors.Is(err, ErrNoRoom) || c.Len(0) != 10 {
		t.Fatalf("err %v, length %d", err, c.Len(0))
	}
	held := seqs(10)[0].Tokens
	prompt := append(slices.Clone(held[:6]), 77, 78)
	if n := c.KeepPrefix(0, held, prompt); n != 6 || c.Len(0) != 6 {
		t.Fatalf("kept %d (length %d), want the 6-token common prefix", n, c.Len(0))
	}
	// The same prompt again: all but its last token are kept.
	if n := c.KeepPrefix(0, held[:6], held[:6]); n != 5 || c.Len(0) != 5 {
		t.Fatalf("kept %d of an identical prompt, want 5", n)
	}
	if err := c.Truncate(0, 2); err != nil || c.Len(0) != 2 {
		t.Fatalf("truncate: %v, length %d", err, c.Len(0))
	}
	for _, cl := range c.full.cells {
		if cl.seq == 0 && cl.pos >= 2 {
			t.Fatalf("a cell at position %d survived the truncation", cl.pos)
		}
	}
}

func TestRecurrentRule(t *testing.T) {
	b := newBackend(t)
	c, err := New(b, Config{Layers: []LayerSpec{rec, attn}, Capacity: 256, Sequences: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.CanTruncate() {
		t.Fatal("a cache with recurrent layers claims it can be cut back")
	}
	prepare(t, c, seqs(4, 4))
	if !c.rec.anyFresh || !slices.Equal(c.rec.keep, []float32{0, 0}) {
		t.Fatal("new sequences must start from zero states")
	}
	// Slots in order are read and written in place (views); others gathered.
	if c.rec.readBase != 0 || c.rec.writeBase != 0 {
		t.Fatalf("slots %v in order: bases %d, %d, want 0", c.rec.readIDs, c.rec.readBase, c.rec.writeBase)
	}
	// States zeroed first are not updated in place.
	if c.rec.inPlace() {
		t.Fatal("fresh sequences' states offered for an update in place")
	}
	c.Commit()
	prepare(t, c, []Sequence{{Seq: 1, Tokens: []int32{1}}})
	if c.rec.anyFresh || !slices.Equal(c.rec.readIDs, []int32{1}) || c.rec.readBase != 1 || c.rec.writeBase != 1 {
		t.Fatalf("sequence 1's state: ids %v fresh %v bases %d, %d", c.rec.readIDs, c.rec.anyFresh, c.rec.readBase, c.rec.writeBase)
	}
	if !c.rec.inPlace() {
		t.Fatal("a continuing sequence's own rows not offered for an update in place")
	}
	c.Commit()
	// Cutting back fails and changes nothing.
	if err := c.Truncate(1, 2); !errors.Is(err, ErrTruncate) || c.Len(1) != 5 {
		t.Fatalf("truncate: %v, length %d", err, c.Len(1))
	}
	held := seqs(4)[0].Tokens
	// A continuation keeps everything...
	if n := c.KeepPrefix(0, held, append(slices.Clone(held), 5, 6)); n != 4 || c.Len(0) != 4 {
		t.Fatalf("continuation kept %d", n)
	}
	// ...a divergent prompt keeps nothing: the sequence is prefilled again,
	// from zero states.
	if n := c.KeepPrefix(0, held, append(slices.Clone(held[:2]), 9)); n != 0 || c.Len(0) != 0 {
		t.Fatalf("divergent prompt kept %d", n)
	}
	prepare(t, c, []Sequence{{Seq: 0, Tokens: []int32{1, 2}}})
	if !slices.Equal(c.rec.keep, []float32{0}) || c.rec.inPlace() {
		t.Fatal("a re-prefilled sequence must start from zero states, not update its old ones")
	}
	// A failed compute forgets the batch's sequences (their states may be
	// half written).
	c.Rollback()
	if c.Len(0) != 0 || len(c.Seqs()) != 1 {
		t.Fatalf("after a rollback: %v", c.Seqs())
	}
	// Sequence 1 (slot 1) before a new sequence 0 (slot 0): gathered.
	prepare(t, c, []Sequence{{Seq: 1, Tokens: []int32{2}}, {Seq: 0, Tokens: []int32{2}}})
	if !slices.Equal(c.rec.readIDs, []int32{1, 0}) || c.rec.readBase != -1 || c.rec.writeBase != -1 {
		t.Fatalf("slots out of order: ids %v bases %d, %d, want gathered (-1)", c.rec.readIDs, c.rec.readBase, c.rec.writeBase)
	}
	if c.rec.inPlace() {
		t.Fatal("gathered states offered for an update in place")
	}
}

// Rewind: bad calls are errors that change nothing; a rewind forgets the
// last tokens and points each recurrent state at the plane the batch kept
// for it (the states' values are checked end to end by model/speculate's
// exactness test and the delta-net op's snapshot test).
func TestRewind(t *testing.T) {
	b := newBackend(t)
	if _, err := New(b, Config{Layers: []LayerSpec{rec}, Capacity: 16, Rewind: 64}); err == nil {
		t.Fatal("rewind 64 accepted")
	}
	plainCfg := Config{Layers: []LayerSpec{rec, attn}, Capacity: 256, Sequences: 2}
	c, err := New(b, plainCfg)
	if err != nil {
		t.Fatal(err)
	}
	prepare(t, c, seqs(4))
	c.Commit()
	if err := c.Rewind(0, 1); err == nil || !strings.Contains(err.Error(), "Config.Rewind 0") || c.Len(0) != 4 {
		t.Fatalf("a recurrent cache without planes to rewind: %v, length %d", err, c.Len(0))
	}
	c.Close()

	cfg := plainCfg
	cfg.Rewind = 3
	c, err = New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Rewind(1, 1); err == nil {
		t.Fatal("a rewind of a sequence the cache does not hold")
	}
	prepare(t, c, []Sequence{{Seq: 0, Tokens: []int32{1, 2}}, {Seq: 1, Tokens: []int32{1, 2}}})
	if c.StatesKept() != 2 || !slices.Equal(c.rec.writeIDs, []int32{0, 1, 2, 3}) || c.rec.writeBase != 0 {
		t.Fatalf("a batch of 2 tokens per sequence with rewind 3: keeps %d, writes rows %v", c.StatesKept(), c.rec.writeIDs)
	}
	c.Rollback()
	prepare(t, c, seqs(4))
	if c.StatesKept() != 4 || !slices.Equal(c.rec.writeIDs, []int32{0, 2, 4, 6}) || c.rec.writeBase != 0 {
		t.Fatalf("4 tokens with rewind 3: keeps %d, writes rows %v (base %d)", c.StatesKept(), c.rec.writeIDs, c.rec.writeBase)
	}
	c.Commit()
	for _, k := range []int{-1, 5} {
		if err := c.Rewind(0, k); err == nil || c.Len(0) != 4 {
			t.Fatalf("rewind %d of 4 tokens: %v, length %d", k, err, c.Len(0))
		}
	}
	if err := c.Rewind(0, 4); err == nil || c.Len(0) != 4 {
		t.Fatalf("rewind past the kept states: %v, length %d", err, c.Len(0))
	}
	if err := c.Rewind(0, 1); err != nil || c.Len(0) != 3 {
		t.Fatalf("rewind 1: %v, length %d", err, c.Len(0))
	}
	if err := c.Rewind(0, 2); err != nil || c.Len(0) != 1 {
		t.Fatalf("rewind 2 more: %v, length %d", err, c.Len(0))
	}
	if err := c.Rewind(0, 1); err == nil || c.Len(0) != 1 {
		t.Fatalf("rewind past the first kept state: %v, length %d", err, c.Len(0))
	}
	// The sequence continues at position 1 from plane 3 (state after its
	// first token), writing plane 0.
	prepare(t, c, []Sequence{{Seq: 0, Tokens: []int32{8}}})
	if !slices.Equal(c.Positions(), []int32{1}) || !slices.Equal(c.rec.readIDs, []int32{6}) || c.rec.writeBase != 0 || c.StatesKept() != 1 {
		t.Fatalf("after rewinds: positions %v, reads %v, writes from %d, keeps %d", c.Positions(), c.rec.readIDs, c.rec.writeBase, c.StatesKept())
	}
	// Read from one plane, written to another: never in place.
	if c.rec.inPlace() {
		t.Fatal("a rewound sequence's states offered for an update in place")
	}
	c.Commit()
	if err := c.Rewind(0, 1); err == nil {
		t.Fatal("rewind after a one-token batch")
	}
	// Another sequence's rewind point is its own.
	prepare(t, c, []Sequence{{Seq: 1, Tokens: []int32{1, 2}}})
	c.Commit()
	if err := c.Rewind(1, 1); err != nil || c.Len(1) != 1 || c.rec.plane[c.slotOf[1]] != 1 {
		t.Fatalf("sequence 1: %v", err)
	}
	prepare(t, c, []Sequence{{Seq: 0, Tokens: []int32{3}}, {Seq: 1, Tokens: []int32{3}}})
	if !slices.Equal(c.rec.readIDs, []int32{0, 3}) || c.rec.readBase != -1 || c.rec.writeBase != 0 {
		t.Fatalf("planes differ: reads %v (base %d), writes from %d", c.rec.readIDs, c.rec.readBase, c.rec.writeBase)
	}
	c.Commit()
}

// TestValuesInKeys checks a layer whose values are its keys' first
// elements: no value tensor, values that view the keys whatever layout the
// backend asks of stored values, and Put refusing values.
func TestValuesInKeys(t *testing.T) {
	b := newBackend(t)
	if _, err := New(b, Config{Layers: []LayerSpec{{Kind: Attention, KeyDim: 8, ValueDim: 12, KVHeads: 1, ValuesInKeys: true}}, Capacity: 64}); err == nil ||
		!strings.Contains(err.Error(), "values in keys") {
		t.Fatalf("values wider than the keys: %v", err)
	}
	c, err := New(b, Config{Layers: []LayerSpec{latent, attn}, Capacity: 64, Sequences: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.full.values[0] != nil || c.full.values[1] == nil {
		t.Fatal("the latent layer has a value tensor, or the other none")
	}
	prepare(t, c, seqs(3, 3))
	ctx := b.NewContext()
	defer ctx.Close()
	c.StartForward(ctx)
	for k := range 2 {
		key, value, _ := c.Get(ctx, 0, k)
		if !slices.Equal(key.Shape(), []int{12, 1, c.full.histLen}) || !slices.Equal(value.Shape(), []int{8, 1, c.full.histLen}) {
			t.Fatalf("sequence %d: keys %v, values %v", k, key.Shape(), value.Shape())
		}
		if value.Stride(1) != key.Stride(1) || value.Stride(2) != key.Stride(2) {
			t.Fatalf("values %v do not view the keys %v", value.Shape(), key.Shape())
		}
	}
	if kc, vc, _, n := c.Streams(ctx, 0, 0); n != 2 || vc.Dim(0) != 8 || vc.Stride(2) != kc.Stride(2) {
		t.Fatalf("streams: %d sequences, values %v", n, vc.Shape())
	}
	keys := ctx.Input().Zeros(ml.DTypeF32, 12, 1, 6)
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "keeps its values in its keys") {
				t.Fatalf("Put with values: %v", r)
			}
		}()
		c.Put(ctx, 0, keys, ctx.Input().Zeros(ml.DTypeF32, 8, 1, 6))
	}()
	c.Put(ctx, 0, keys, nil)
	c.Rollback()
}

// TestChunkedMask checks chunked layers' masks against the rule itself (a
// token at p sees its sequence's positions p - p mod W through p), beside
// a sliding window of the same size and full attention, in the shared pool
// and in a compact one whose evictions must never hide a visible cell:
// batches of varied sizes cross the chunks' edges, two sequences apart.
func TestChunkedMask(t *testing.T) {
	const w = 4
	rule := func(kind Kind, seq, at int32) [][2]int32 {
		var out [][2]int32
		for p := int32(0); p <= at; p++ {
			if kind == Chunked && p < at-at%w || kind == SlidingWindow && at-p >= w {
				continue
			}
			out = append(out, [2]int32{seq, p})
		}
		return out
	}
	for _, compact := range []bool{false, true} {
		b := newBackend(t)
		c, err := New(b, Config{Layers: []LayerSpec{attn, chunk, swa}, Capacity: 256, Sequences: 2, Window: w, MaxBatch: 8, CompactWindow: compact})
		if err != nil {
			t.Fatal(err)
		}
		for step, n := range []int{3, 1, 6, 2, 1, 5, 4, 1, 1, 7} {
			batch := []Sequence{{Seq: 0, Tokens: make([]int32, n)}, {Seq: 1, Tokens: make([]int32, n)}}
			if step%3 == 2 {
				batch = batch[:1] // sequence 0 runs ahead
			}
			prepare(t, c, batch)
			pos := c.Positions()
			seqOf := c.ub.SeqOf()
			for layer, kind := range []Kind{Attention, Chunked, SlidingWindow} {
				got := visible(c, layer)
				for tk := range got {
					slices.SortFunc(got[tk], func(a, b [2]int32) int { return int(a[1] - b[1]) })
					want := rule(kind, int32(c.ub.Seqs[seqOf[tk]]), pos[tk])
					if !slices.Equal(got[tk], want) {
						t.Fatalf("compact %v, step %d, %s: token at %d sees %v, want %v", compact, step, kind, pos[tk], got[tk], want)
					}
				}
			}
			c.Commit()
		}
		c.Close()
	}
}
