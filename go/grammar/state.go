package grammar

import (
	"errors"
	"fmt"
	"unsafe"
)

// Limits on the matcher's work, beyond which Accept and the masks return
// ErrTooComplex (llama.cpp has none: its stacks grow without bound).
const (
	// MaxStacks bounds the stacks of a state (distinct parse positions).
	MaxStacks = 1 << 14
	// MaxAdvance bounds the stacks one expansion of rule references may
	// visit (exponential or cyclic alternatives).
	MaxAdvance = 1 << 16
	// MaxStackDepth bounds the depth of one stack (nesting of rules).
	MaxStackDepth = 1 << 14
)

// ErrTooComplex: the grammar's parse state exceeds MaxStacks, MaxAdvance
// or MaxStackDepth.
var ErrTooComplex = errors.New("grammar: parse state too complex (too many alternatives or too deep)")

// stack is a pushdown stack of element positions, top last. Stacks are
// never modified once built (states share them).
type stack []int32

func (s stack) key() string {
	if len(s) == 0 {
		return ""
	}
	return unsafe.String((*byte)(unsafe.Pointer(&s[0])), len(s)*4)
}

type stackSet struct {
	list []stack
	seen map[string]struct{}
}

func newStackSet() *stackSet { return &stackSet{seen: map[string]struct{}{}} }

func (ss *stackSet) add(s stack) error {
	k := s.key()
	if _, ok := ss.seen[k]; ok {
		return nil
	}
	if len(ss.list) >= MaxStacks {
		return ErrTooComplex
	}
	ss.seen[k] = struct{}{}
	ss.list = append(ss.list, s)
	return nil
}

type advancer struct {
	g    *Grammar
	todo []stack
	seen map[string]struct{}
}

// advance is llama_grammar_advance_stack: expand the rule references on
// top of st until every stack is at a terminal (or empty), adding them
// to out.
func (a *advancer) advance(st stack, out *stackSet) error {
	g := a.g
	a.todo = append(a.todo[:0], st)
	if a.seen == nil {
		a.seen = map[string]struct{}{}
	} else {
		clear(a.seen)
	}
	for len(a.todo) > 0 {
		cur := a.todo[len(a.todo)-1]
		a.todo = a.todo[:len(a.todo)-1]
		k := cur.key()
		if _, ok := a.seen[k]; ok {
			continue
		}
		if len(a.seen) >= MaxAdvance || len(cur) > MaxStackDepth {
			return ErrTooComplex
		}
		a.seen[k] = struct{}{}
		if len(cur) == 0 {
			if err := out.add(cur); err != nil {
				return err
			}
			continue
		}
		pos := cur[len(cur)-1]
		switch e := g.elems[pos]; e.typ {
		case tRuleRef:
			sub := g.ruleStart[e.val]
			for {
				next := make(stack, len(cur)-1, len(cur)+1)
				copy(next, cur[:len(cur)-1])
				if !g.isEnd(pos + 1) {
					next = append(next, pos+1)
				}
				if !g.isEnd(sub) {
					next = append(next, sub)
				}
				a.todo = append(a.todo, next)
				for !g.isEnd(sub) {
					sub++
				}
				if g.elems[sub].typ != tAlt {
					break
				}
				sub++
			}
		case tChar, tCharNot, tCharAny, tToken, tTokenNot:
			if err := out.add(cur); err != nil {
				return err
			}
		default:
			panic(fmt.Sprintf("grammar: stack at element type %d", e.typ))
		}
	}
	return nil
}

// partial is llama_partial_utf8: the bits of an unfinished UTF-8 sequence
// and how many continuation bytes it still needs (-1: invalid).
type partial struct {
	v uint32
	n int32
}

// decodeUTF8 is llama.cpp's decode_utf8(src, partial_start): the complete
// code points of src continuing from p, and the partial sequence left at
// its end. ok is false where llama.cpp returns an invalid sequence (its
// code points are then none, and the token is never allowed). Like the C
// string it is in llama.cpp, src ends at a NUL byte.
func decodeUTF8(src []byte, p partial, cps []uint32) ([]uint32, partial, bool) {
	lookup := [16]int32{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4}
	pos := 0
	at := func(i int) byte {
		if i < len(src) {
			return src[i]
		}
		return 0
	}
	value, nRemain := p.v, p.n
	for at(pos) != 0 && nRemain > 0 {
		b := at(pos)
		if b>>6 != 2 {
			return cps, partial{0, -1}, false
		}
		value = value<<6 + uint32(b&0x3f)
		pos++
		nRemain--
	}
	if p.n > 0 && nRemain == 0 {
		cps = append(cps, value)
	}
	for at(pos) != 0 {
		first := at(pos)
		nRemain = lookup[first>>4] - 1
		if nRemain < 0 {
			return cps[:0], partial{0, nRemain}, false
		}
		value = uint32(first) & (uint32(1)<<(7-nRemain) - 1)
		pos++
		for at(pos) != 0 && nRemain > 0 {
			value = value<<6 + uint32(at(pos)&0x3f)
			pos++
			nRemain--
		}
		if nRemain == 0 {
			cps = append(cps, value)
		}
	}
	return cps, partial{value, nRemain}, true
}

// State is the parse state of one sequence: the set of stacks and the
// partial UTF-8 sequence of the accepted tokens. Clone is cheap (stacks
// are shared, never modified).
type State struct {
	g       *Grammar
	v       *Vocab
	stacks  []stack
	partial partial
}

// NewState starts matching g over vocabulary v.
func NewState(g *Grammar, v *Vocab) *State {
	return &State{g: g, v: v, stacks: g.start}
}

// Clone returns an independent copy of s (for speculative decoding: accept
// draft tokens on a clone, keep the original to roll back).
func (s *State) Clone() *State {
	c := *s
	return &c
}

// CanEnd reports whether the grammar accepts the text so far: an
// end-of-generation token is allowed.
func (s *State) CanEnd() bool {
	for _, st := range s.stacks {
		if len(st) == 0 {
			return true
		}
	}
	return false
}

// Stacks is the number of parse positions (a measure of ambiguity).
func (s *State) Stacks() int { return len(s.stacks) }

// acceptChar is llama_grammar_accept_chr over a set of stacks.
func (s *State) acceptChar(a *advancer, stacks []stack, c uint32, out *stackSet) error {
	g := s.g
	for _, st := range stacks {
		if len(st) == 0 {
			continue
		}
		pos := st[len(st)-1]
		t := g.elems[pos].typ
		if t == tToken || t == tTokenNot {
			continue
		}
		cs := g.sets[pos]
		if !cs.match(c) {
			continue
		}
		next := make(stack, len(st)-1, len(st))
		copy(next, st[:len(st)-1])
		if !g.isEnd(cs.next) {
			next = append(next, cs.next)
		}
		if err := a.advance(next, out); err != nil {
			return err
		}
	}
	return nil
}

// Accept advances the state over token id, as llama_grammar_accept_impl
// does. It returns an error, leaving s unchanged, when the grammar does
// not allow id here (llama.cpp aborts or throws in some of these cases,
// and in others silently keeps a state no token can follow).
func (s *State) Accept(id int32) error {
	ok, err := s.Allows(id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("grammar: token %d (%q) is not allowed here", id, s.v.pieceOf(id))
	}
	if s.v.IsEOG(id) {
		return nil // allowed: the grammar can end; llama.cpp keeps the state
	}
	return s.acceptPiece(id, s.v.pieces[id])
}

// AcceptBytes advances the state over text not tied to a token (as
// llama_grammar_accept_str). It fails when no stack survives.
func (s *State) AcceptBytes(text []byte) error {
	cps, p, ok := decodeUTF8(text, s.partial, nil)
	if !ok {
		return fmt.Errorf("grammar: invalid UTF-8 in %q", text)
	}
	var a advancer
	a.g = s.g
	cur := s.stacks
	for _, c := range cps {
		out := newStackSet()
		if err := s.acceptChar(&a, cur, c, out); err != nil {
			return err
		}
		cur = out.list
		if len(cur) == 0 {
			return fmt.Errorf("grammar: %q does not match here", text)
		}
	}
	s.stacks, s.partial = cur, p
	return nil
}

// acceptPiece is llama_grammar_accept_token.
func (s *State) acceptPiece(id int32, piece []byte) error {
	g := s.g
	cps, p, _ := decodeUTF8(piece, s.partial, nil)
	var a advancer
	a.g = g
	out := newStackSet()
	for _, st := range s.stacks {
		if len(st) == 0 {
			continue
		}
		pos := st[len(st)-1]
		if t := g.elems[pos].typ; t == tToken || t == tTokenNot {
			if matchToken(g.elems[pos], id) {
				next := make(stack, len(st)-1, len(st))
				copy(next, st[:len(st)-1])
				if !g.isEnd(pos + 1) {
					next = append(next, pos+1)
				}
				if err := a.advance(next, out); err != nil {
					return err
				}
			}
			continue
		}
		cur := []stack{st}
		for _, c := range cps {
			next := newStackSet()
			if err := s.acceptChar(&a, cur, c, next); err != nil {
				return err
			}
			cur = next.list
			if len(cur) == 0 {
				break
			}
		}
		for _, c := range cur {
			if err := out.add(c); err != nil {
				return err
			}
		}
	}
	if len(out.list) == 0 {
		return fmt.Errorf("grammar: unexpected empty grammar stack after accepting piece %q (%d)", piece, id)
	}
	s.stacks, s.partial = out.list, p
	return nil
}

func matchToken(e elem, id int32) bool {
	if e.typ == tToken {
		return e.val == uint32(id)
	}
	return e.val != uint32(id)
}
