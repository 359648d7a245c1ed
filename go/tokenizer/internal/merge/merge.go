// Package merge is the merge loop of BPE-style tokenizers: a string is cut
// into symbols (one UTF-8 sequence each) and, while some adjacent pair of
// symbols may merge, the best pair (lowest key, leftmost on ties) becomes
// one symbol.
//
// Rescanning the symbols for the best pair after every merge is
// quadratic in the length of the string. Here the symbols are a doubly
// linked list and the candidate pairs wait in a priority queue ordered by
// (key, position): a 4-ary heap, and for long strings the initial pairs
// sorted beside it. A merge pushes the two pairs it creates; the pairs it
// destroys are dropped when they surface (lazy invalidation). A string of
// n bytes takes O(n log n) time, and the merges are exactly those of the
// rescanning loop, in the same order.
package merge

import (
	"math"
	"slices"
)

// Index is the integer type of symbol positions: int32 unless the string
// is longer than that can count.
type Index interface{ ~int32 | ~int }

// Kind says whether and how a pair may merge.
type Kind uint8

const (
	// None: the pair does not merge.
	None Kind = iota
	// Ranked: the pair merges in the order of its key.
	Ranked
	// FirstOnly: the pair merges only when it is the leftmost pair that
	// may merge (as a NaN score does in a "best so far" scan: the first
	// candidate is kept if it is NaN, and a NaN never beats another).
	// Callers that return it set Merger.FirstOnly.
	FirstOnly
)

// Lookup says whether the symbols pair[:mid] and pair[mid:] merge and
// with what key.
type Lookup func(pair string, mid int) (key uint32, kind Kind)

type sym[I Index] struct {
	start, n   I // bytes [start, start+n) of the string; n == 0: merged away
	prev, next I // neighbours, -1 at the ends
}

// entry is a candidate pair: the symbol left and its right neighbour,
// whose lengths summed to size when it was pushed. It is stale unless
// both are still there with those lengths: symbols only grow, and left's
// neighbour changes only when left grows.
// In byPos, key is 1 for a FirstOnly pair, else 0.
type entry[I Index] struct {
	key        uint32
	left, size I
}

// Merger runs the merge loop. Its zero value is ready; one Merger may be
// reused for many strings (not concurrently), which saves allocations.
type Merger struct {
	// FirstOnly is set when Lookup may return FirstOnly: pairs are then
	// also kept in position order.
	FirstOnly bool

	small merger[int32]
	big   *merger[int] // for strings of 2 GiB and more
	isBig bool
}

// Run cuts s into symbols (by the length of each UTF-8 lead byte alone,
// as llama.cpp's unicode_len_utf8, so invalid bytes stay bytes) and
// merges them. The result is read with Each.
func (m *Merger) Run(s string, lookup Lookup) {
	m.isBig = len(s) > math.MaxInt32-1
	if m.isBig {
		if m.big == nil {
			m.big = new(merger[int])
		}
		m.big.firstOnly = m.FirstOnly
		m.big.run(s, lookup)
		return
	}
	m.small.firstOnly = m.FirstOnly
	m.small.run(s, lookup)
}

// Each calls f with the symbols left after Run, in order.
func (m *Merger) Each(f func(sym string)) {
	if m.isBig {
		m.big.each(f)
		return
	}
	m.small.each(f)
}

// sortFrom is the number of initial pairs from which they are sorted
// rather than heaped: a heap larger than the caches is slow to pop, while
// sorted pairs are read in order.
var sortFrom = 1 << 14

// merger is Merger for one index type.
type merger[I Index] struct {
	firstOnly bool

	s    string
	syms []sym[I]
	// The Ranked pairs by (key, left): in a heap, except that many
	// initial pairs are sorted instead (see sortFrom) and read from head
	// on.
	sorted []entry[I]
	head   int
	heap   []entry[I]
	byPos  []entry[I] // all pairs by left (with FirstOnly)
}

func (m *merger[I]) run(s string, lookup Lookup) {
	m.s = s
	if cap(m.syms) < len(s) {
		// Room for the most symbols and initial pairs there can be.
		n := max(len(s), 2*cap(m.syms))
		m.syms = make([]sym[I], 0, n)
		m.sorted = make([]entry[I], 0, n)
	}
	m.syms = m.syms[:0]
	m.sorted, m.head = m.sorted[:0], 0
	m.heap = m.heap[:0]
	m.byPos = m.byPos[:0]
	for i := 0; i < len(s); {
		n := min(SymbolLen(s[i]), len(s)-i)
		k := I(len(m.syms))
		m.syms = append(m.syms, sym[I]{start: I(i), n: I(n), prev: k - 1, next: k + 1})
		i += n
	}
	if len(m.syms) == 0 {
		return
	}
	m.syms[len(m.syms)-1].next = -1
	if len(m.syms) == 1 {
		return
	}
	for k := range m.syms[:len(m.syms)-1] {
		m.add(I(k), lookup, false)
	}
	if len(m.sorted) >= sortFrom {
		slices.SortFunc(m.sorted, func(a, b entry[I]) int {
			if less(&a, &b, false) {
				return -1
			}
			return 1 // no two are equal
		})
	} else {
		m.heap = append(m.heap, m.sorted...)
		m.sorted = m.sorted[:0]
		heapify(m.heap, false)
	}
	heapify(m.byPos, true)
	for {
		var e entry[I]
		if m.firstOnly {
			// The leftmost pair: merged now if it is FirstOnly, else
			// the best Ranked pair (there is one) is.
			for len(m.byPos) > 0 && !m.valid(m.byPos[0]) {
				m.byPos = pop(m.byPos, true)
			}
			if len(m.byPos) == 0 {
				return
			}
			if e = m.byPos[0]; e.key == 1 {
				m.byPos = pop(m.byPos, true)
				m.merge(e.left, lookup)
				continue
			}
		}
		// The best of sorted and heap.
		switch {
		case m.head < len(m.sorted) && (len(m.heap) == 0 || less(&m.sorted[m.head], &m.heap[0], false)):
			e = m.sorted[m.head]
			m.head++
		case len(m.heap) > 0:
			e = m.heap[0]
			m.heap = pop(m.heap, false)
		default:
			return
		}
		if m.valid(e) {
			m.merge(e.left, lookup)
		}
	}
}

func (m *merger[I]) each(f func(sym string)) {
	if len(m.syms) == 0 {
		return
	}
	for k := I(0); k >= 0; k = m.syms[k].next {
		y := m.syms[k]
		f(m.s[y.start : y.start+y.n])
	}
}

// add looks up the pair of symbol k and its right neighbour and, if it
// may merge, adds it to the heaps (pushed when heap, else appended for a
// later heapify).
func (m *merger[I]) add(k I, lookup Lookup, heap bool) {
	if k < 0 || m.syms[k].next < 0 {
		return
	}
	l, r := m.syms[k], m.syms[m.syms[k].next]
	key, kind := lookup(m.s[l.start:r.start+r.n], int(l.n))
	if kind == None {
		return
	}
	e := entry[I]{key: key, left: k, size: l.n + r.n}
	if kind == Ranked {
		if heap {
			m.heap = push(m.heap, e, false)
		} else {
			m.sorted = append(m.sorted, e)
		}
	}
	if m.firstOnly {
		e.key = 0
		if kind == FirstOnly {
			e.key = 1
		}
		if heap {
			m.byPos = push(m.byPos, e, true)
		} else {
			m.byPos = append(m.byPos, e)
		}
	}
}

func (m *merger[I]) valid(e entry[I]) bool {
	l := m.syms[e.left]
	return l.n > 0 && l.next >= 0 && l.n+m.syms[l.next].n == e.size
}

// merge makes symbol k and its right neighbour one symbol and adds the
// pairs it forms with its neighbours.
func (m *merger[I]) merge(k I, lookup Lookup) {
	l := &m.syms[k]
	r := &m.syms[l.next]
	l.n += r.n
	r.n = 0
	l.next = r.next
	if l.next >= 0 {
		m.syms[l.next].prev = k
	}
	m.add(l.prev, lookup, true)
	m.add(k, lookup, true)
}

// The heaps are 4-ary (shallower than binary ones, and a node's children
// share a cache line or two): heap by (key, left), byPos by left alone.

func less[I Index](a, b *entry[I], byPos bool) bool {
	if byPos {
		return a.left < b.left
	}
	return a.key < b.key || a.key == b.key && a.left < b.left
}

func heapify[I Index](h []entry[I], byPos bool) {
	for i := (len(h) - 2) / 4; i >= 0; i-- {
		down(h, i, byPos)
	}
}

func pop[I Index](h []entry[I], byPos bool) []entry[I] {
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	down(h, 0, byPos)
	return h
}

func push[I Index](h []entry[I], e entry[I], byPos bool) []entry[I] {
	h = append(h, e)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !less(&e, &h[p], byPos) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
	return h
}

func down[I Index](h []entry[I], i int, byPos bool) {
	n := len(h)
	if n == 0 {
		return
	}
	e := h[i]
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		best := c
		for j := c + 1; j < min(c+4, n); j++ {
			if less(&h[j], &h[best], byPos) {
				best = j
			}
		}
		if !less(&h[best], &e, byPos) {
			break
		}
		h[i] = h[best]
		i = best
	}
	h[i] = e
}

// SymbolLen is the length of the UTF-8 sequence lead byte b starts, by its
// high bits alone (llama.cpp's unicode_len_utf8).
func SymbolLen(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	}
	return 4
}
