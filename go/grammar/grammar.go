package grammar

import (
	"fmt"
	"sort"
)

// Grammar is a compiled GBNF grammar: its rules flattened into one element
// array (a stack entry is an index into it, as llama.cpp's is a pointer
// into its rules), and the stacks it starts from. It is immutable and
// safe for concurrent use; each sequence matches with its own State.
type Grammar struct {
	elems     []elem
	ruleStart []int32  // rule id -> index of its first element
	names     []string // rule id -> name
	root      uint32
	start     []stack // the initial stacks (advanced from the root's alternatives)
	// char sets, by the index of their first element: what a code point
	// must be in, compiled once (see charSet).
	sets map[int32]*charSet
}

// Compile parses GBNF text and prepares it for matching from rule root
// ("root" if empty). resolve maps token references written as <name> to
// token ids (nil: only <[id]> references are accepted). It refuses what
// llama.cpp refuses (syntax errors, undefined rules, a missing root, left
// recursion) and what exceeds the limits (MaxGrammarBytes, MaxRules,
// MaxElements, MaxNesting, and the repetition bound of llama.cpp).
func Compile(text, root string, resolve TokenResolver) (*Grammar, error) {
	if root == "" {
		root = "root"
	}
	p, err := parse(text, resolve)
	if err != nil {
		return nil, err
	}
	if len(p.rules) == 0 {
		return nil, &Error{Pos: -1, Msg: "empty grammar: no rules"}
	}
	rootID, ok := p.symbols[root]
	if !ok || int(rootID) >= len(p.rules) {
		return nil, &Error{Pos: -1, Msg: fmt.Sprintf("grammar does not contain a %q symbol", root)}
	}
	g := &Grammar{names: p.names, root: rootID, sets: map[int32]*charSet{}}
	g.ruleStart = make([]int32, len(p.rules))
	n := 0
	for _, r := range p.rules {
		n += len(r)
	}
	g.elems = make([]elem, 0, n)
	for i, r := range p.rules {
		g.ruleStart[i] = int32(len(g.elems))
		g.elems = append(g.elems, r...)
	}
	if i, bad := g.leftRecursion(); bad {
		return nil, &Error{Pos: -1, Msg: fmt.Sprintf("unsupported grammar, left recursion detected for nonterminal %q (rule %d)", g.names[i], i)}
	}
	for i := 0; i < len(g.elems); {
		t := g.elems[i].typ
		if t == tChar || t == tCharNot || t == tCharAny {
			cs := g.compileSet(int32(i))
			g.sets[int32(i)] = cs
			i = int(cs.next)
			continue
		}
		i++
	}
	// initial stacks: each alternative of root, advanced
	var a advancer
	a.g = g
	out := newStackSet()
	pos := g.ruleStart[rootID]
	for {
		var st stack
		if !g.isEnd(pos) {
			st = stack{pos}
		}
		if err := a.advance(st, out); err != nil {
			return nil, err
		}
		for !g.isEnd(pos) {
			pos++
		}
		if g.elems[pos].typ != tAlt {
			break
		}
		pos++
	}
	g.start = out.list
	return g, nil
}

// isEnd: pos ends an alternative.
func (g *Grammar) isEnd(pos int32) bool {
	t := g.elems[pos].typ
	return t == tEnd || t == tAlt
}

// Rules is the number of rules, synthesized ones included.
func (g *Grammar) Rules() int { return len(g.ruleStart) }

// leftRecursion is llama_grammar_detect_left_recursion over all rules:
// a rule reachable from itself through leftmost references, where a
// reference may be skipped when its rule has an empty alternative. The
// walk is iterative and memoized (visited rules are not re-entered), so
// it is linear in the grammar where llama.cpp's recursion is exponential
// on some DAGs; the answer is the same (a cycle of the same edges).
func (g *Grammar) leftRecursion() (int, bool) {
	n := len(g.ruleStart)
	mayBeEmpty := make([]bool, n)
	for r := 0; r < n; r++ {
		atStart := true
		for pos := g.ruleStart[r]; ; pos++ {
			if g.isEnd(pos) {
				if atStart {
					mayBeEmpty[r] = true
					break
				}
				atStart = true
				if g.elems[pos].typ == tEnd {
					break
				}
			} else {
				atStart = false
			}
		}
	}
	// leftmost edges of each rule
	edges := make([][]uint32, n)
	for r := 0; r < n; r++ {
		recurse := true
		for pos := g.ruleStart[r]; ; pos++ {
			e := g.elems[pos]
			if e.typ == tRuleRef && recurse {
				edges[r] = append(edges[r], e.val)
				if !mayBeEmpty[e.val] {
					recurse = false
				}
			} else if g.isEnd(pos) {
				recurse = true
			} else {
				recurse = false
			}
			if e.typ == tEnd {
				break
			}
		}
	}
	const (
		white = 0
		grey  = 1
		black = 2
	)
	color := make([]uint8, n)
	type frame struct {
		r uint32
		k int
	}
	for s := 0; s < n; s++ {
		if color[s] != white {
			continue
		}
		st := []frame{{uint32(s), 0}}
		color[s] = grey
		for len(st) > 0 {
			f := &st[len(st)-1]
			if f.k < len(edges[f.r]) {
				to := edges[f.r][f.k]
				f.k++
				switch color[to] {
				case grey:
					return s, true
				case white:
					color[to] = grey
					st = append(st, frame{to, 0})
				}
				continue
			}
			color[f.r] = black
			st = st[:len(st)-1]
		}
	}
	return 0, false
}

// charSet is a compiled character set: sorted, merged inclusive ranges of
// code points, negated for [^...], plus an ASCII bitmap.
type charSet struct {
	neg    bool
	any    bool
	ranges [][2]uint32
	ascii  [2]uint64 // code points < 128 that match (negation applied)
	// inverted ranges ([z-a]): they match no code point
	inverted [][2]uint32
	next     int32 // the element after the set
}

func (g *Grammar) compileSet(pos int32) *charSet {
	cs := &charSet{neg: g.elems[pos].typ == tCharNot}
	var rs [][2]uint32
	p := pos
	for {
		e := g.elems[p]
		if g.elems[p+1].typ == tRngUpper {
			if e.val <= g.elems[p+1].val {
				rs = append(rs, [2]uint32{e.val, g.elems[p+1].val})
			} else {
				// matches no char, but llama.cpp's partial-UTF-8 test
				// compares it as written
				cs.inverted = append(cs.inverted, [2]uint32{e.val, g.elems[p+1].val})
			}
			p += 2
		} else if e.typ == tCharAny {
			cs.any = true
			p++
		} else {
			rs = append(rs, [2]uint32{e.val, e.val})
			p++
		}
		if g.elems[p].typ != tCharAlt {
			break
		}
	}
	cs.next = p
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	for _, r := range rs {
		if k := len(cs.ranges); k > 0 && r[0] <= cs.ranges[k-1][1]+1 && cs.ranges[k-1][1] != ^uint32(0) {
			if r[1] > cs.ranges[k-1][1] {
				cs.ranges[k-1][1] = r[1]
			}
			continue
		}
		cs.ranges = append(cs.ranges, r)
	}
	for c := uint32(0); c < 128; c++ {
		if cs.matchSlow(c) {
			cs.ascii[c>>6] |= 1 << (c & 63)
		}
	}
	return cs
}

// matchSlow is llama_grammar_match_char's verdict.
func (cs *charSet) matchSlow(c uint32) bool {
	found := cs.any
	if !found {
		i := sort.Search(len(cs.ranges), func(i int) bool { return cs.ranges[i][1] >= c })
		found = i < len(cs.ranges) && cs.ranges[i][0] <= c
	}
	return found != cs.neg
}

func (cs *charSet) match(c uint32) bool {
	if c < 128 {
		return cs.ascii[c>>6]&(1<<(c&63)) != 0
	}
	return cs.matchSlow(c)
}

// matchPartial is llama_grammar_match_partial_char: whether some
// completion of a partial UTF-8 sequence can match.
func (cs *charSet) matchPartial(p partial) bool {
	if p.n < 0 || (p.n == 1 && p.v < 2) {
		return false
	}
	low := p.v << (uint(p.n) * 6)
	high := low | (uint32(1)<<(uint(p.n)*6) - 1)
	if low == 0 {
		if p.n == 2 {
			low = 1 << 11
		} else if p.n == 3 {
			low = 1 << 16
		}
	}
	// llama.cpp walks the set in order and returns at the first element
	// that intersects [low, high] (or at '.', which is always true).
	if cs.any && !cs.neg {
		return true
	}
	for _, r := range cs.ranges {
		if r[0] <= high && low <= r[1] {
			return !cs.neg
		}
	}
	for _, r := range cs.inverted {
		if r[0] <= high && low <= r[1] {
			return !cs.neg
		}
	}
	return cs.neg
}
