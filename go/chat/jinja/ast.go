package jinja

// The syntax tree, as llama.cpp's (common/jinja/runtime.h): statements and
// expressions are one kind of node, each with its byte position.
type node interface{ position() int }

type nodeBase struct{ pos int }

func (n nodeBase) position() int { return n.pos }

type (
	// statements
	commentNode  struct{ nodeBase }
	noopNode     struct{ nodeBase }
	breakNode    struct{ nodeBase }
	continueNode struct{ nodeBase }
	setNode      struct {
		nodeBase
		target node
		value  node // nil: a block set, body is the value
		body   []node
	}
	ifNode struct {
		nodeBase
		test      node
		body, alt []node
	}
	forNode struct {
		nodeBase
		loopVar   node
		iterable  node
		body, alt []node
	}
	macroNode struct {
		nodeBase
		name string
		args []node
		body []node
	}
	callBlockNode struct {
		nodeBase
		call       *callNode
		callerArgs []node
		body       []node
	}
	filterBlockNode struct {
		nodeBase
		filter node
		body   []node
	}

	// expressions
	stringLit struct {
		nodeBase
		val string
	}
	intLit struct {
		nodeBase
		val int64
	}
	floatLit struct {
		nodeBase
		val float64
	}
	identNode struct {
		nodeBase
		name string
	}
	arrayLit struct {
		nodeBase
		items []node
	}
	tupleLit struct {
		nodeBase
		items []node
	}
	objectLit struct {
		nodeBase
		keys, vals []node
	}
	binaryNode struct {
		nodeBase
		op          string
		left, right node
	}
	unaryNode struct {
		nodeBase
		op string
		x  node
	}
	memberNode struct {
		nodeBase
		object, prop node
		computed     bool
	}
	callNode struct {
		nodeBase
		callee node
		args   []node
	}
	filterNode struct {
		nodeBase
		operand, filter node
	}
	testNode struct {
		nodeBase
		operand node
		negate  bool
		test    node
	}
	ternaryNode struct {
		nodeBase
		cond, yes, no node
	}
	selectNode struct {
		nodeBase
		lhs, test node
	}
	sliceNode struct {
		nodeBase
		start, stop, step node // nil when left out
	}
	kwargNode struct {
		nodeBase
		key node
		val node
	}
	spreadNode struct {
		nodeBase
		x node
	}
	blankNode struct{ nodeBase }
)
