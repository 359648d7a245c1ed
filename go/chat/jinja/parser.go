package jinja

import (
	"strconv"
	"strings"
)

// maxParseDepth bounds the nesting of blocks and expressions, so that a
// hostile template cannot exhaust the stack.
const maxParseDepth = 200

type parser struct {
	toks  []token
	cur   int
	src   string
	depth int
}

type parseError struct{ err error }

func (p *parser) fail(msg string, pos int) {
	panic(parseError{&Error{Kind: "parser", Msg: msg, Pos: pos, src: p.src}})
}

// parse builds the tree of a token list; errors are returned, never
// panicked out.
func parse(toks []token, src string) (body []node, err error) {
	p := &parser{toks: toks, src: src}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			body, err = nil, pe.err
		}
	}()
	for p.cur < len(p.toks) {
		body = append(body, p.parseAny())
	}
	return body, nil
}

func (p *parser) enter() {
	p.depth++
	if p.depth > maxParseDepth {
		p.fail("nesting deeper than "+strconv.Itoa(maxParseDepth)+" levels", p.peek(0).pos)
	}
}
func (p *parser) leave() { p.depth-- }

func (p *parser) peek(off int) token {
	if p.cur+off >= len(p.toks) {
		pos := 0
		if len(p.toks) > 0 {
			pos = p.toks[len(p.toks)-1].pos
		}
		return token{tokEOF, "", pos}
	}
	return p.toks[p.cur+off]
}

func (p *parser) next() token {
	if p.cur >= len(p.toks) {
		p.fail("Unexpected EOF", p.peek(0).pos)
	}
	t := p.toks[p.cur]
	p.cur++
	return t
}

func (p *parser) expect(t tokenType, what string) token {
	tk := p.peek(0)
	if tk.t != t {
		p.fail(what+" (Got "+tk.val+")", tk.pos)
	}
	p.cur++
	return tk
}

func (p *parser) expectIdent(name string) {
	tk := p.peek(0)
	if tk.t != tokIdent || tk.val != name {
		p.fail("Expected identifier: "+name, tk.pos)
	}
	p.cur++
}

func (p *parser) is(t tokenType) bool { return p.peek(0).t == t }
func (p *parser) isIdent(name string) bool {
	tk := p.peek(0)
	return tk.t == tokIdent && tk.val == name
}

func (p *parser) isStatement(names ...string) bool {
	if p.peek(0).t != tokOpenStatement || p.peek(1).t != tokIdent {
		return false
	}
	v := p.peek(1).val
	for _, n := range names {
		if n == v {
			return true
		}
	}
	return false
}

func (p *parser) base(tokIndex int) nodeBase {
	if tokIndex < len(p.toks) {
		return nodeBase{p.toks[tokIndex].pos}
	}
	return nodeBase{p.peek(0).pos}
}

func (p *parser) parseAny() node {
	start := p.cur
	switch p.peek(0).t {
	case tokComment:
		p.next()
		return &commentNode{p.base(start)}
	case tokText:
		return &stringLit{p.base(start), p.next().val}
	case tokOpenStatement:
		return p.parseStatement()
	case tokOpenExpression:
		p.expect(tokOpenExpression, "Expected {{")
		e := p.parseExpression()
		p.expect(tokCloseExpression, "Expected }}")
		return e
	}
	p.fail("Unexpected token type", p.peek(0).pos)
	return nil
}

// body parses statements until one of the named block statements.
func (p *parser) body(ends ...string) []node {
	var out []node
	for !p.isStatement(ends...) {
		out = append(out, p.parseAny())
	}
	return out
}

func (p *parser) endBlock(name string) {
	p.expect(tokOpenStatement, "Expected {%")
	p.expectIdent(name)
	p.expect(tokCloseStatement, "Expected %}")
}

func (p *parser) parseStatement() node {
	p.enter()
	defer p.leave()
	p.expect(tokOpenStatement, "Expected {%")
	if p.peek(0).t != tokIdent {
		p.fail("Unknown statement", p.peek(0).pos)
	}
	start := p.cur
	name := p.next().val
	switch name {
	case "set":
		return p.parseSet(start)
	case "if":
		n := p.parseIf(start)
		p.endBlock("endif")
		return n
	case "macro":
		nameNode := p.parsePrimary()
		id, ok := nameNode.(*identNode)
		if !ok {
			p.fail("Macro name must be an identifier", nameNode.position())
		}
		args := p.parseArgs()
		p.expect(tokCloseStatement, "Expected %}")
		body := p.body("endmacro")
		p.endBlock("endmacro")
		return &macroNode{p.base(start), id.name, args, body}
	case "for":
		n := p.parseFor(start)
		p.endBlock("endfor")
		return n
	case "break":
		p.expect(tokCloseStatement, "Expected %}")
		return &breakNode{p.base(start)}
	case "continue":
		p.expect(tokCloseStatement, "Expected %}")
		return &continueNode{p.base(start)}
	case "call":
		var callerArgs []node
		if p.is(tokOpenParen) {
			callerArgs = p.parseArgs()
		}
		callee := p.parsePrimary()
		if _, ok := callee.(*identNode); !ok {
			p.fail("Expected identifier", callee.position())
		}
		args := p.parseArgs()
		p.expect(tokCloseStatement, "Expected %}")
		body := p.body("endcall")
		p.endBlock("endcall")
		return &callBlockNode{p.base(start), &callNode{p.base(start), callee, args}, callerArgs, body}
	case "filter":
		f := p.parsePrimary()
		if _, ok := f.(*identNode); ok && p.is(tokOpenParen) {
			f = p.parseCall(f)
		}
		p.expect(tokCloseStatement, "Expected %}")
		body := p.body("endfilter")
		p.endBlock("endfilter")
		return &filterBlockNode{p.base(start), f, body}
	case "generation", "endgeneration":
		// transformers' training markers: ignored
		p.cur++
		return &noopNode{p.base(start)}
	}
	p.fail("Unknown statement: "+name, p.toks[start].pos)
	return nil
}

func (p *parser) parseSet(start int) node {
	target := p.parseExpressionSequence(false)
	var value node
	var body []node
	if p.is(tokEquals) {
		p.cur++
		value = p.parseExpressionSequence(false)
	} else {
		p.expect(tokCloseStatement, "Expected %}")
		body = p.body("endset")
		p.expect(tokOpenStatement, "Expected {%")
		p.expectIdent("endset")
	}
	p.expect(tokCloseStatement, "Expected %}")
	return &setNode{p.base(start), target, value, body}
}

func (p *parser) parseIf(start int) node {
	test := p.parseExpression()
	p.expect(tokCloseStatement, "Expected %}")
	body := p.body("elif", "else", "endif")
	var alt []node
	switch {
	case p.isStatement("elif"):
		pos0 := p.cur
		p.cur += 2
		p.enter()
		alt = append(alt, p.parseIf(pos0))
		p.leave()
	case p.isStatement("else"):
		p.cur += 2
		p.expect(tokCloseStatement, "Expected %}")
		alt = p.body("endif")
	}
	return &ifNode{p.base(start), test, body, alt}
}

func (p *parser) parseFor(start int) node {
	loopVar := p.parseExpressionSequence(true)
	if !p.isIdent("in") {
		p.fail("Expected 'in'", p.peek(0).pos)
	}
	p.cur++
	iterable := p.parseExpression()
	p.expect(tokCloseStatement, "Expected %}")
	body := p.body("endfor", "else")
	var alt []node
	if p.isStatement("else") {
		p.cur += 2
		p.expect(tokCloseStatement, "Expected %}")
		alt = p.body("endfor")
	}
	return &forNode{p.base(start), loopVar, iterable, body, alt}
}

func (p *parser) parseExpressionSequence(primary bool) node {
	start := p.cur
	one := func() node {
		if primary {
			return p.parsePrimary()
		}
		return p.parseExpression()
	}
	items := []node{one()}
	tuple := p.is(tokComma)
	for p.is(tokComma) {
		p.cur++
		items = append(items, one())
	}
	if tuple {
		return &tupleLit{p.base(start), items}
	}
	return items[0]
}

func (p *parser) parseExpression() node {
	p.enter()
	defer p.leave()
	return p.parseIfExpression()
}

func (p *parser) parseIfExpression() node {
	a := p.parseOr()
	if p.isIdent("if") {
		start := p.cur
		p.cur++
		test := p.parseOr()
		if p.isIdent("else") {
			pos0 := p.cur
			p.cur++
			p.enter()
			no := p.parseIfExpression()
			p.leave()
			return &ternaryNode{p.base(pos0), test, a, no}
		}
		return &selectNode{p.base(start), a, test}
	}
	return a
}

func (p *parser) parseOr() node {
	left := p.parseAnd()
	for p.isIdent("or") {
		start := p.cur
		op := p.next()
		left = &binaryNode{p.base(start), op.val, left, p.parseAnd()}
	}
	return left
}

func (p *parser) parseAnd() node {
	left := p.parseNot()
	for p.isIdent("and") {
		start := p.cur
		op := p.next()
		left = &binaryNode{p.base(start), op.val, left, p.parseNot()}
	}
	return left
}

func (p *parser) parseNot() node {
	if p.isIdent("not") {
		start := p.cur
		p.next()
		p.enter()
		defer p.leave()
		return &unaryNode{p.base(start), "not", p.parseNot()}
	}
	return p.parseComparison()
}

func (p *parser) parseComparison() node {
	left := p.parseAdditive()
	for {
		start := p.cur
		var op string
		switch {
		case p.isIdent("not") && p.peek(1).t == tokIdent && p.peek(1).val == "in":
			op = "not in"
			p.cur += 2
		case p.isIdent("in"):
			op = p.next().val
		case p.is(tokComparison):
			op = p.next().val
		default:
			return left
		}
		left = &binaryNode{p.base(start), op, left, p.parseAdditive()}
	}
}

func (p *parser) parseAdditive() node {
	left := p.parseMultiplicative()
	for p.is(tokAdditive) {
		start := p.cur
		op := p.next()
		left = &binaryNode{p.base(start), op.val, left, p.parseMultiplicative()}
	}
	return left
}

func (p *parser) parseMultiplicative() node {
	left := p.parseTest()
	for p.is(tokMultiplicative) {
		start := p.cur
		op := p.next()
		left = &binaryNode{p.base(start), op.val, left, p.parseTest()}
	}
	return left
}

func (p *parser) parseTest() node {
	operand := p.parseFilter()
	for p.isIdent("is") {
		start := p.cur
		p.cur++
		negate := false
		if p.isIdent("not") {
			p.cur++
			negate = true
		}
		test := p.parsePrimary()
		if p.is(tokOpenParen) {
			test = p.parseCall(test)
		} else if p.is(tokNumber) || p.is(tokString) || p.is(tokOpenCurly) || p.is(tokOpenSquare) ||
			(p.is(tokIdent) && !p.isIdent("and") && !p.isIdent("or") && !p.isIdent("else")) {
			callPos := p.cur
			test = &callNode{p.base(callPos), test, []node{p.parseUnary()}}
		}
		operand = &testNode{p.base(start), operand, negate, test}
	}
	return operand
}

func (p *parser) parseFilter() node {
	operand := p.parseUnary()
	for p.is(tokPipe) {
		start := p.cur
		p.cur++
		f := p.parsePrimary()
		if p.is(tokOpenParen) {
			f = p.parseCall(f)
		}
		operand = &filterNode{p.base(start), operand, f}
	}
	return operand
}

func (p *parser) parseUnary() node {
	if p.is(tokUnary) {
		start := p.cur
		op := p.next()
		p.enter()
		defer p.leave()
		return &unaryNode{p.base(start), op.val, p.parseUnary()}
	}
	member := p.parseMember(p.parsePrimary())
	if p.is(tokOpenParen) {
		return p.parseCall(member)
	}
	return member
}

func (p *parser) parseCall(callee node) node {
	p.enter()
	defer p.leave()
	start := p.cur
	var expr node = &callNode{p.base(start), callee, p.parseArgs()}
	expr = p.parseMember(expr)
	if p.is(tokOpenParen) {
		return p.parseCall(expr)
	}
	return expr
}

func (p *parser) parseArgs() []node {
	p.expect(tokOpenParen, "Expected (")
	var args []node
	for !p.is(tokCloseParen) {
		var arg node
		if tk := p.peek(0); tk.t == tokMultiplicative && tk.val == "*" {
			start := p.cur
			p.cur++
			arg = &spreadNode{p.base(start), p.parseExpression()}
		} else {
			arg = p.parseExpression()
			if p.is(tokEquals) {
				start := p.cur
				p.cur++
				arg = &kwargNode{p.base(start), arg, p.parseExpression()}
			}
		}
		args = append(args, arg)
		if p.is(tokComma) {
			p.cur++
		}
	}
	p.expect(tokCloseParen, "Expected )")
	return args
}

func (p *parser) parseMember(object node) node {
	start := p.cur
	for p.is(tokDot) || p.is(tokOpenSquare) {
		op := p.next()
		computed := op.t == tokOpenSquare
		var prop node
		if computed {
			prop = p.parseMemberArgs()
			p.expect(tokCloseSquare, "Expected ]")
		} else {
			prop = p.parsePrimary()
		}
		object = &memberNode{p.base(start), object, prop, computed}
	}
	return object
}

func (p *parser) parseMemberArgs() node {
	start := p.cur
	var slices []node
	isSlice := false
	for !p.is(tokCloseSquare) {
		if p.is(tokColon) {
			slices = append(slices, nil)
			p.cur++
			isSlice = true
		} else {
			slices = append(slices, p.parseExpression())
			if p.is(tokColon) {
				p.cur++
				isSlice = true
			}
		}
	}
	if isSlice {
		s := &sliceNode{nodeBase: p.base(start)}
		if len(slices) > 0 {
			s.start = slices[0]
		}
		if len(slices) > 1 {
			s.stop = slices[1]
		}
		if len(slices) > 2 {
			s.step = slices[2]
		}
		return s
	}
	if len(slices) == 0 {
		return &blankNode{p.base(start)}
	}
	return slices[0]
}

func (p *parser) parsePrimary() node {
	p.enter()
	defer p.leave()
	start := p.cur
	t := p.next()
	switch t.t {
	case tokNumber:
		if strings.Contains(t.val, ".") {
			f, err := strconv.ParseFloat(t.val, 64)
			if err != nil {
				p.fail("bad number "+t.val, t.pos)
			}
			return &floatLit{p.base(start), f}
		}
		i, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			p.fail("bad number "+t.val, t.pos)
		}
		return &intLit{p.base(start), i}
	case tokString:
		val := t.val
		for p.is(tokString) {
			val += p.next().val
		}
		return &stringLit{p.base(start), val}
	case tokIdent:
		return &identNode{p.base(start), t.val}
	case tokOpenParen:
		e := p.parseExpressionSequence(false)
		p.expect(tokCloseParen, "Expected )")
		return e
	case tokOpenSquare:
		var items []node
		for !p.is(tokCloseSquare) {
			items = append(items, p.parseExpression())
			if p.is(tokComma) {
				p.cur++
			}
		}
		p.cur++
		return &arrayLit{p.base(start), items}
	case tokOpenCurly:
		o := &objectLit{nodeBase: p.base(start)}
		for !p.is(tokCloseCurly) {
			k := p.parseExpression()
			p.expect(tokColon, "Expected :")
			o.keys = append(o.keys, k)
			o.vals = append(o.vals, p.parseExpression())
			if p.is(tokComma) {
				p.cur++
			}
		}
		p.cur++
		return o
	}
	p.fail("Unexpected token: "+t.val, t.pos)
	return nil
}
