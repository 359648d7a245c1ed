package schema

import (
	"math"
	"strconv"
	"strings"
)

// The schema tree the converter walks: the subset of JSON schema that
// llama.cpp's common_chat_schema_from_json (common/json-schema.cpp) keeps,
// built with the same precedence of keywords and the same errors.

type nodeKind uint8

const (
	kAny nodeKind = iota
	kRef
	kAnyOf
	kAllOf
	kConst
	kEnum
	kNull
	kBoolean
	kNumber
	kInteger
	kString
	kArray
	kTuple
	kObject
)

type strFormat uint8

const (
	fmtNone strFormat = iota
	fmtUUID
	fmtDate
	fmtTime
	fmtDateTime
)

type property struct {
	name     string
	schema   *node
	required bool
}

type node struct {
	kind nodeKind

	ref    string // kRef
	target *node  // kRef, set once the whole document is built

	children []*node // kAnyOf, kAllOf; kTuple items

	value  *jvalue   // kConst
	values []*jvalue // kEnum

	minimum, maximum int64 // kInteger, inclusive; MinInt64/MaxInt64 when unbounded

	pattern              string // kString
	format               strFormat
	minLength, maxLength int32 // maxLength -1: unbounded

	items              *node // kArray
	minItems, maxItems int32 // maxItems -1: unbounded

	properties []property // kObject, in schema order
	additional *node      // kObject; nil: no additional properties
}

// errSchema is a builder error: llama.cpp's runtime_error
// "JSON schema error at PATH: MSG", which json_schema_to_grammar wraps.
type errSchema struct{ msg string }

func (e errSchema) Error() string { return e.msg }

type builder struct {
	root    *jvalue
	refs    map[string]*node
	pending []*node
	lim     *limits
	depth   int
}

func (b *builder) fail(path, msg string) {
	panic(errSchema{"JSON schema error at " + path + ": " + msg})
}

func (b *builder) getCount(s *jvalue, key, path string, def int32) int32 {
	if !s.contains(key) {
		return def
	}
	v := s.at(key)
	if !v.isInteger() || v.getInt() < 0 {
		b.fail(path, key+" must be a non-negative integer")
	}
	return v.getInt()
}

// float64ToInt64 is the (int64_t) cast of a double as x86-64 does it: out of
// range or NaN gives INT64_MIN.
func float64ToInt64(d float64) int64 {
	if math.IsNaN(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(d)
}

func (b *builder) getBound(s *jvalue, key, path string, roundUp bool) int64 {
	v := s.at(key)
	if v.isInteger() {
		return v.getInt64()
	}
	if !v.isNumber() {
		b.fail(path, key+" must be a number")
	}
	d := v.getFloat()
	if roundUp {
		return float64ToInt64(math.Ceil(d))
	}
	return float64ToInt64(math.Floor(d))
}

func (b *builder) getFormat(s *jvalue, path string) strFormat {
	if !s.contains("format") {
		return fmtNone
	}
	v := s.at("format")
	if !v.isString() {
		b.fail(path, "format must be a string")
	}
	switch f := v.s; {
	case f == "date":
		return fmtDate
	case f == "time":
		return fmtTime
	case f == "date-time":
		return fmtDateTime
	case f == "uuid" || (len(f) == 5 && strings.HasPrefix(f, "uuid") && f[4] >= '1' && f[4] <= '5'):
		return fmtUUID
	}
	return fmtNone
}

// stoull is std::stoull's parse: leading white space, an optional sign (a
// '-' negates modulo 2^64), then decimal digits, the rest ignored; ok is
// false where stoull throws (no digits, or out of range).
func stoull(s string) (uint64, bool) {
	i := 0
	for i < len(s) && (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == i {
		return 0, false
	}
	u, err := strconv.ParseUint(s[i:j], 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		u = -u
	}
	return u, true
}

func (b *builder) resolveRef(ref, path string) *jvalue {
	target := b.root
	tokens := strings.Split(ref[1:], "/")
	for _, sel := range tokens[1:] {
		switch {
		case target.isObject() && target.contains(sel):
			target = target.at(sel)
		case target.isArray():
			idx, ok := stoull(sel)
			if !ok {
				idx = uint64(len(target.arr))
			}
			if idx >= uint64(len(target.arr)) {
				b.fail(path, "cannot resolve $ref "+ref+", "+sel+" is out of range")
			}
			target = target.arr[idx]
		default:
			b.fail(path, "cannot resolve $ref "+ref+", "+sel+" not found")
		}
	}
	return target
}

func (b *builder) buildRef(v *jvalue, path string) *node {
	if !v.isString() {
		b.fail(path, "$ref must be a string")
	}
	ref := v.s
	if !strings.HasPrefix(ref, "#/") {
		b.fail(path, "unsupported $ref "+ref+", only references into the same document are supported")
	}
	if _, ok := b.refs[ref]; !ok {
		b.refs[ref] = nil // reserved: a cycle back to this $ref stops here
		b.refs[ref] = b.buildNode(b.resolveRef(ref, path), ref)
	}
	n := &node{kind: kRef, ref: ref}
	b.pending = append(b.pending, n)
	return n
}

func (b *builder) buildAlternatives(kind nodeKind, alts *jvalue, path string) *node {
	if !alts.isArray() {
		b.fail(path, "must be an array of schemas")
	}
	if len(alts.arr) == 0 {
		b.fail(path, "must not be empty")
	}
	n := &node{kind: kind}
	for i, alt := range alts.arr {
		n.children = append(n.children, b.buildNode(alt, path+"/"+strconv.Itoa(i)))
	}
	return n
}

func (b *builder) buildObject(s *jvalue, path string) *node {
	n := &node{kind: kObject}
	required := map[string]bool{}
	if s.contains("required") && s.at("required").isArray() {
		for _, name := range s.at("required").arr {
			if name.isString() {
				required[name.s] = true
			}
		}
	}
	if s.contains("properties") {
		props := s.at("properties")
		if !props.isObject() {
			b.fail(path, "properties must be an object")
		}
		for i, name := range props.keys {
			n.properties = append(n.properties, property{name, b.buildNode(props.vals[i], path+"/properties/"+name), required[name]})
		}
	}
	if s.contains("additionalProperties") {
		add := s.at("additionalProperties")
		switch {
		case add.isBoolean():
			if add.b {
				n.additional = &node{kind: kAny}
			}
		case add.isObject():
			n.additional = b.buildNode(add, path+"/additionalProperties")
		default:
			b.fail(path, "additionalProperties must be a boolean or a schema")
		}
	} else if !s.contains("properties") {
		n.additional = &node{kind: kAny} // {"type": "object"} on its own accepts any object
	}
	return n
}

func (b *builder) buildArray(s *jvalue, path string) *node {
	n := &node{kind: kArray}
	if s.contains("items") || s.contains("prefixItems") {
		key := "prefixItems"
		if s.contains("items") {
			key = "items"
		}
		items := s.at(key)
		if items.isArray() {
			t := &node{kind: kTuple}
			for i, item := range items.arr {
				t.children = append(t.children, b.buildNode(item, path+"/"+key+"/"+strconv.Itoa(i)))
			}
			return t
		}
		n.items = b.buildNode(items, path+"/"+key)
	} else {
		n.items = &node{kind: kAny}
	}
	n.minItems = b.getCount(s, "minItems", path, 0)
	n.maxItems = b.getCount(s, "maxItems", path, -1)
	return n
}

func (b *builder) buildString(s *jvalue, path string) *node {
	n := &node{kind: kString}
	if s.contains("pattern") {
		p := s.at("pattern")
		if !p.isString() {
			b.fail(path, "pattern must be a string")
		}
		n.pattern = p.s
	}
	n.format = b.getFormat(s, path)
	n.minLength = b.getCount(s, "minLength", path, 0)
	n.maxLength = b.getCount(s, "maxLength", path, -1)
	return n
}

func (b *builder) buildInteger(s *jvalue, path string) *node {
	n := &node{kind: kInteger, minimum: math.MinInt64, maximum: math.MaxInt64}
	if s.contains("minimum") {
		n.minimum = b.getBound(s, "minimum", path, true)
	} else if s.contains("exclusiveMinimum") {
		n.minimum = b.getBound(s, "exclusiveMinimum", path, false) + 1 // wraps as the C++ does
	}
	if s.contains("maximum") {
		n.maximum = b.getBound(s, "maximum", path, false)
	} else if s.contains("exclusiveMaximum") {
		n.maximum = b.getBound(s, "exclusiveMaximum", path, true) - 1
	}
	return n
}

func (b *builder) buildNode(s *jvalue, path string) *node {
	b.depth++
	defer func() { b.depth-- }()
	b.lim.enter(b.depth)
	b.lim.step()

	if !s.isObject() {
		b.fail(path, "schema must be an object")
	}
	if s.contains("$ref") {
		return b.buildRef(s.at("$ref"), path)
	}
	if s.contains("oneOf") || s.contains("anyOf") {
		key := "anyOf"
		if s.contains("oneOf") {
			key = "oneOf"
		}
		return b.buildAlternatives(kAnyOf, s.at(key), path+"/"+key)
	}

	typ := &jvalue{k: jNull}
	if s.contains("type") {
		typ = s.at("type")
	}
	if typ.isArray() {
		// {"type": ["a", "b"], ...} is {"anyOf": [{"type": "a", ...}, {"type": "b", ...}]}
		if len(typ.arr) == 0 {
			b.fail(path, "type must not be empty")
		}
		n := &node{kind: kAnyOf}
		for i, t := range typ.arr {
			n.children = append(n.children, b.buildNode(s.withKey("type", t), path+"/type/"+strconv.Itoa(i)))
		}
		return n
	}
	if s.contains("const") {
		return &node{kind: kConst, value: s.at("const")}
	}
	if s.contains("enum") {
		vals := s.at("enum")
		if !vals.isArray() || len(vals.arr) == 0 {
			b.fail(path, "enum must be a non-empty array")
		}
		return &node{kind: kEnum, values: vals.arr}
	}
	if !typ.isNull() && !typ.isString() {
		b.fail(path, "type must be a string or an array of strings")
	}

	typeName := ""
	if typ.isString() {
		typeName = typ.s
	}
	hasProperties := s.contains("properties") || (s.contains("additionalProperties") && !s.at("additionalProperties").isTrue())

	if typeName == "" {
		// without a type the structural keywords decide
		switch {
		case hasProperties:
			return b.buildObject(s, path)
		case s.contains("allOf"):
			return b.buildAlternatives(kAllOf, s.at("allOf"), path+"/allOf")
		case s.contains("items") || s.contains("prefixItems"):
			return b.buildArray(s, path)
		case s.contains("pattern") || s.contains("minLength") || s.contains("maxLength") || b.getFormat(s, path) != fmtNone:
			return b.buildString(s, path)
		}
		return &node{kind: kAny}
	}
	switch typeName {
	case "object":
		if !hasProperties && s.contains("allOf") {
			return b.buildAlternatives(kAllOf, s.at("allOf"), path+"/allOf")
		}
		return b.buildObject(s, path)
	case "string":
		if s.contains("allOf") {
			return b.buildAlternatives(kAllOf, s.at("allOf"), path+"/allOf")
		}
		return b.buildString(s, path)
	case "array":
		return b.buildArray(s, path)
	case "integer":
		return b.buildInteger(s, path)
	case "number":
		return &node{kind: kNumber}
	case "boolean":
		return &node{kind: kBoolean}
	case "null":
		return &node{kind: kNull}
	}
	b.fail(path, "unrecognized type "+typeName)
	return nil
}

// buildDocument is common_chat_schema_from_json.
func buildDocument(root *jvalue, lim *limits) *node {
	b := &builder{root: root, refs: map[string]*node{}, lim: lim}
	n := b.buildNode(root, "#")
	for _, r := range b.pending {
		r.target = b.refs[r.ref]
	}
	return n
}
