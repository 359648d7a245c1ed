package grammar

import (
	"math"
	"math/bits"
	"sort"
	"strings"
)

// Mask is a set of token ids, one bit per token.
type Mask []uint64

// Has reports whether id is in the mask.
func (m Mask) Has(id int32) bool {
	return id >= 0 && int(id>>6) < len(m) && m[id>>6]&(1<<(uint(id)&63)) != 0
}

func (m Mask) set(id int32) { m[id>>6] |= 1 << (uint(id) & 63) }

// Count is the number of tokens in the mask.
func (m Mask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// IDs lists the tokens in the mask, ascending.
func (m Mask) IDs() []int32 {
	var out []int32
	for i, w := range m {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, int32(i*64+b))
			w &= w - 1
		}
	}
	return out
}

// Allowed computes the tokens the grammar allows next, exactly as
// llama_grammar_apply_impl leaves them with a finite logit: an
// end-of-generation token where a stack is empty (CanEnd), any other
// token whose piece is non-empty, does not start with a NUL byte, is
// valid UTF-8 after the pending partial sequence, and matches a
// continuation of some stack. dst is reused when large enough.
func (s *State) Allowed(dst Mask) (Mask, error) {
	v := s.v
	n := (len(v.pieces) + 63) / 64
	if cap(dst) < n {
		dst = make(Mask, n)
	}
	dst = dst[:n]
	clear(dst)
	if s.CanEnd() {
		for i, e := range v.eog {
			if e {
				dst.set(int32(i))
			}
		}
	}
	if s.partial.n > 0 {
		// only tokens that continue the pending sequence can be valid
		cands := make([]cand, 0, len(v.contStart))
		for _, id := range v.contStart {
			if c, ok := s.candidate(id); ok {
				cands = append(cands, c)
			}
		}
		w := &walker{g: s.g, v: v, mask: dst}
		if err := w.acceptSlow(s.stacks, cands); err != nil {
			return nil, err
		}
		return dst, nil
	}
	w := &walker{g: s.g, v: v, mask: dst, sets: map[string]*wset{}}
	root, err := w.intern(s.stacks)
	if err != nil {
		return nil, err
	}
	if root.wide {
		// more than 64 stacks at a character: the per-token algorithm
		var cands []cand
		for _, id := range v.order {
			if c, ok := s.candidate(id); ok {
				cands = append(cands, c)
			}
		}
		if err := w.acceptSlow(s.stacks, cands); err != nil {
			return nil, err
		}
		return dst, nil
	}
	if err := w.walk(0, root, 0); err != nil {
		if err == errWide {
			clear(dst)
			return s.allowedSlow(dst)
		}
		return nil, err
	}
	return dst, nil
}

// allowedSlow is Allowed by the per-token algorithm (llama.cpp's), for
// tests and for states the trie walk does not handle.
func (s *State) allowedSlow(dst Mask) (Mask, error) {
	v := s.v
	n := (len(v.pieces) + 63) / 64
	if cap(dst) < n {
		dst = make(Mask, n)
	}
	dst = dst[:n]
	clear(dst)
	if s.CanEnd() {
		for i, e := range v.eog {
			if e {
				dst.set(int32(i))
			}
		}
	}
	var cands []cand
	for id := range v.pieces {
		if c, ok := s.candidate(int32(id)); ok {
			cands = append(cands, c)
		}
	}
	w := &walker{g: s.g, v: v, mask: dst}
	if err := w.acceptSlow(s.stacks, cands); err != nil {
		return nil, err
	}
	return dst, nil
}

// candidate decodes token id's piece after the pending partial sequence;
// ok is false for tokens that are never allowed here (EOG tokens are
// decided by CanEnd).
func (s *State) candidate(id int32) (cand, bool) {
	v := s.v
	pc := v.pieces[id]
	if v.eog[id] || len(pc) == 0 || pc[0] == 0 {
		return cand{}, false
	}
	cps, p, ok := decodeUTF8(pc, s.partial, nil)
	if !ok {
		return cand{}, false
	}
	return cand{id: id, cps: cps, p: p}, true
}

// Allows reports whether token id is allowed next (the same verdict as
// Allowed, for one token: a sampler can check its pick first and compute
// the whole mask only when the pick is refused).
func (s *State) Allows(id int32) (bool, error) {
	v := s.v
	if id < 0 || int(id) >= len(v.pieces) {
		return false, nil
	}
	if v.eog[id] {
		return s.CanEnd(), nil
	}
	c, ok := s.candidate(id)
	if !ok {
		return false, nil
	}
	m := make(Mask, (len(v.pieces)+63)/64)
	w := &walker{g: s.g, v: v, mask: m}
	if err := w.acceptSlow(s.stacks, []cand{c}); err != nil {
		return false, err
	}
	return m.Has(id), nil
}

// Apply sets the logits of the tokens the grammar does not allow to -Inf
// (logits past the vocabulary too).
func (s *State) Apply(logits []float32) error {
	m, err := s.Allowed(nil)
	if err != nil {
		return err
	}
	ninf := float32(math.Inf(-1))
	for i := range logits {
		if !m.Has(int32(i)) {
			logits[i] = ninf
		}
	}
	return nil
}

type cand struct {
	id  int32
	cps []uint32
	off int
	p   partial
}

type walker struct {
	g    *Grammar
	v    *Vocab
	mask Mask
	a    advancer
	sets map[string]*wset
}

// acceptSlow marks the candidates some stack accepts: the complement of
// llama_grammar_reject_candidates.
func (w *walker) acceptSlow(stacks []stack, cands []cand) error {
	rest := cands
	for _, st := range stacks {
		if len(rest) == 0 {
			return nil
		}
		var err error
		rest, err = w.acceptByStack(st, rest)
		if err != nil {
			return err
		}
	}
	return nil
}

// acceptByStack is llama_grammar_reject_candidates_for_stack: it marks
// the candidates st accepts and returns the others.
func (w *walker) acceptByStack(st stack, cands []cand) ([]cand, error) {
	g := w.g
	var rest []cand
	if len(st) == 0 {
		for _, c := range cands {
			if c.off == len(c.cps) && c.p.n == 0 {
				w.mask.set(c.id)
			} else {
				rest = append(rest, c)
			}
		}
		return rest, nil
	}
	pos := st[len(st)-1]
	if t := g.elems[pos].typ; t == tToken || t == tTokenNot {
		for _, c := range cands {
			if c.off == len(c.cps) {
				if c.p.n == 0 {
					w.mask.set(c.id)
				} else {
					rest = append(rest, c)
				}
			} else if matchToken(g.elems[pos], c.id) {
				w.mask.set(c.id)
			} else {
				rest = append(rest, c)
			}
		}
		return rest, nil
	}
	cs := g.sets[pos]
	var next []cand
	for _, c := range cands {
		if c.off == len(c.cps) {
			if c.p.n == 0 || cs.matchPartial(c.p) {
				w.mask.set(c.id)
			} else {
				rest = append(rest, c)
			}
		} else if cs.match(c.cps[c.off]) {
			c.off++
			next = append(next, c)
		} else {
			rest = append(rest, c)
		}
	}
	if len(next) == 0 {
		return rest, nil
	}
	after := make(stack, len(st)-1, len(st))
	copy(after, st[:len(st)-1])
	if !g.isEnd(cs.next) {
		after = append(after, cs.next)
	}
	out := newStackSet()
	w.a.g = g
	if err := w.a.advance(after, out); err != nil {
		return nil, err
	}
	remaining := next
	for _, ns := range out.list {
		if len(remaining) == 0 {
			break
		}
		var err error
		remaining, err = w.acceptByStack(ns, remaining)
		if err != nil {
			return nil, err
		}
	}
	for _, c := range remaining {
		c.off--
		rest = append(rest, c)
	}
	return rest, nil
}

// wset is a set of stacks met during a trie walk, interned by content, with
// what the walk needs of it: its stacks at a character set, an ASCII
// table of which of them match each code point, its stacks at a token,
// and its successors by the subset of stacks a code point matched.
type wset struct {
	stacks  []stack
	charTop []int32 // indices into stacks
	sets    []*charSet
	tokTop  []elem
	ascii   [128]uint64
	after   []*stackSet // by charTop index, lazily
	trans   map[uint64]*wset
	wide    bool // more than 64 stacks at a character set
}

func (w *walker) intern(stacks []stack) (*wset, error) {
	keys := make([]string, len(stacks))
	for i, s := range stacks {
		keys[i] = s.key()
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		var l [4]byte
		n := len(k)
		l[0], l[1], l[2], l[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		b.Write(l[:])
		b.WriteString(k)
	}
	key := b.String()
	if ws, ok := w.sets[key]; ok {
		return ws, nil
	}
	if len(w.sets) > MaxAdvance {
		return nil, ErrTooComplex
	}
	ws := &wset{stacks: stacks, trans: map[uint64]*wset{}}
	for i, st := range stacks {
		if len(st) == 0 {
			continue
		}
		pos := st[len(st)-1]
		e := w.g.elems[pos]
		if e.typ == tToken || e.typ == tTokenNot {
			ws.tokTop = append(ws.tokTop, e)
			continue
		}
		ws.charTop = append(ws.charTop, int32(i))
		ws.sets = append(ws.sets, w.g.sets[pos])
	}
	if len(ws.charTop) > 64 {
		ws.wide = true
	} else {
		for k, cs := range ws.sets {
			for c := 0; c < 128; c++ {
				if cs.ascii[c>>6]&(1<<(c&63)) != 0 {
					ws.ascii[c] |= 1 << k
				}
			}
		}
		ws.after = make([]*stackSet, len(ws.charTop))
	}
	w.sets[key] = ws
	return ws, nil
}

var errWide = &Error{Pos: -1, Msg: "wide state"}

// next is the set after a code point matched the charTop stacks in bits.
func (w *walker) next(ws *wset, bitsM uint64) (*wset, error) {
	if n, ok := ws.trans[bitsM]; ok {
		return n, nil
	}
	g := w.g
	union := newStackSet()
	for b := bitsM; b != 0; b &= b - 1 {
		k := bits.TrailingZeros64(b)
		if ws.after[k] == nil {
			st := ws.stacks[ws.charTop[k]]
			cs := ws.sets[k]
			after := make(stack, len(st)-1, len(st))
			copy(after, st[:len(st)-1])
			if !g.isEnd(cs.next) {
				after = append(after, cs.next)
			}
			out := newStackSet()
			w.a.g = g
			if err := w.a.advance(after, out); err != nil {
				return nil, err
			}
			ws.after[k] = out
		}
		for _, s := range ws.after[k].list {
			if err := union.add(s); err != nil {
				return nil, err
			}
		}
	}
	n, err := w.intern(union.list)
	if err != nil {
		return nil, err
	}
	if n.wide {
		return nil, errWide
	}
	ws.trans[bitsM] = n
	return n, nil
}

// walk marks the tokens of the trie below node that the stacks of ws
// accept, the first depth code points of each having been matched.
func (w *walker) walk(node int32, ws *wset, depth int) error {
	v := w.v
	nd := &v.nodes[node]
	// tokens whose code points end here (at the root: pieces that are
	// only the start of a UTF-8 sequence)
	for i := nd.endLo; i < nd.endHi; i++ {
		p := v.endP[i]
		ok := p.n == 0
		for k := 0; !ok && k < len(ws.sets); k++ {
			ok = ws.sets[k].matchPartial(p)
		}
		if ok {
			w.mask.set(v.order[i])
		}
	}
	for _, e := range ws.tokTop {
		if e.typ == tToken {
			if int(e.val) < len(v.rank) {
				if r := v.rank[e.val]; r >= nd.endHi && r < nd.subHi {
					w.mask.set(int32(e.val))
				}
			}
			continue
		}
		for i := nd.endHi; i < nd.subHi; i++ {
			if id := v.order[i]; uint32(id) != e.val {
				w.mask.set(id)
			}
		}
	}
	if len(ws.charTop) == 0 {
		return nil
	}
	for k := nd.firstChild; k < nd.firstChild+nd.nChild; k++ {
		c := v.childCP[k]
		var m uint64
		if c < 128 {
			m = ws.ascii[c]
		} else {
			for j, cs := range ws.sets {
				if cs.matchSlow(c) {
					m |= 1 << j
				}
			}
		}
		if m == 0 {
			continue
		}
		n, err := w.next(ws, m)
		if err != nil {
			return err
		}
		if err := w.walk(v.childNode[k], n, depth+1); err != nil {
			return err
		}
	}
	return nil
}
