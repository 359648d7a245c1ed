package schema

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// The converter: the schema tree to GBNF rules, as llama.cpp's
// common_chat_schema_converter (common/json-schema-to-grammar.cpp) names,
// dedupes and writes them. Rules live in a map printed in byte order of
// their names (a std::map there).

const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

type builtinRule struct {
	content string
	deps    []string
}

var primitiveRules = map[string]builtinRule{
	"boolean":       {`("true" | "false")`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"integral-part": {`[0] | [1-9] [0-9]{0,15}`, nil},
	"number":        {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`, []string{"integral-part", "decimal-part"}},
	"integer":       {`("-"? integral-part)`, []string{"integral-part"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"`, []string{"string", "value"}},
	"array":         {`"[" space ( value ("," space value)* )? space "]"`, []string{"value"}},
	"uuid":          {`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\""`, nil},
	"char":          {`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	"string":        {`"\"" char* "\""`, []string{"char"}},
	"null":          {`"null"`, nil},
}

var stringFormatRules = map[string]builtinRule{
	"date":             {`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )`, nil},
	"time":             {`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":        {`date "T" time`, []string{"date", "time"}},
	"date-string":      {`"\"" date "\""`, []string{"date"}},
	"time-string":      {`"\"" time "\""`, []string{"time"}},
	"date-time-string": {`"\"" date-time "\""`, []string{"date-time"}},
}

func isReservedName(name string) bool {
	if name == "root" {
		return true
	}
	_, p := primitiveRules[name]
	_, f := stringFormatRules[name]
	return p || f
}

func isRuleNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// escapeRuleName replaces each run of characters outside [a-zA-Z0-9-]
// with one '-' (regex_replace of [^a-zA-Z0-9-]+).
func escapeRuleName(name string) string {
	var b strings.Builder
	run := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isRuleNameChar(c) {
			b.WriteByte(c)
			run = false
		} else if !run {
			b.WriteByte('-')
			run = true
		}
	}
	return b.String()
}

// formatLiteral quotes s as a GBNF literal, escaping \r \n " and \.
func formatLiteral(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

const intMax = math.MaxInt32

// buildRepetition is build_repetition: item repeated min..max times
// (max intMax: unbounded), with an optional separator between items.
func buildRepetition(item string, min, max int32, sep string) string {
	hasMax := max != intMax
	if max == 0 {
		return ""
	}
	if min == 0 && max == 1 {
		return item + "?"
	}
	if sep == "" {
		if min == 1 && !hasMax {
			return item + "+"
		}
		if min == 0 && !hasMax {
			return item + "*"
		}
		m := ""
		if hasMax {
			m = strconv.Itoa(int(max))
		}
		return item + "{" + strconv.Itoa(int(min)) + "," + m + "}"
	}
	innerMin := int32(0)
	if min != 0 {
		innerMin = min - 1
	}
	innerMax := max
	if hasMax {
		innerMax = max - 1
	}
	result := item + " " + buildRepetition("("+sep+" "+item+")", innerMin, innerMax, "")
	if min == 0 {
		result = "(" + result + ")?"
	}
	return result
}

type converter struct {
	dotall   bool
	rules    map[string]string
	journal  *[]string // rules added while a pattern is converted, to undo on failure
	refsBusy map[string]bool
	errors   []string
	warnings []string
	lim      *limits
	depth    int
}

func newConverter(dotall bool, lim *limits) *converter {
	c := &converter{dotall: dotall, rules: map[string]string{}, refsBusy: map[string]bool{}, lim: lim}
	c.rules["space"] = spaceRule
	lim.grow(len("space") + len(spaceRule))
	return c
}

func (c *converter) setRule(key, rule string) {
	if _, ok := c.rules[key]; !ok {
		if c.journal != nil {
			*c.journal = append(*c.journal, key)
		}
		c.lim.grow(len(key) + len(rule) + 6)
	}
	c.rules[key] = rule
}

func (c *converter) addRule(name, rule string) string {
	esc := escapeRuleName(name)
	if old, ok := c.rules[esc]; !ok || old == rule {
		c.setRule(esc, rule)
		return esc
	}
	i := 0
	for {
		old, ok := c.rules[esc+strconv.Itoa(i)]
		if !ok || old == rule {
			break
		}
		c.lim.step()
		i++
	}
	key := esc + strconv.Itoa(i)
	c.setRule(key, rule)
	return key
}

func (c *converter) addPrimitive(name string, rule builtinRule) string {
	n := c.addRule(name, rule.content)
	for _, dep := range rule.deps {
		r, ok := primitiveRules[dep]
		if !ok {
			r, ok = stringFormatRules[dep]
			if !ok {
				c.errors = append(c.errors, "Rule "+dep+" not known")
				continue
			}
		}
		if _, ok := c.rules[dep]; !ok {
			c.addPrimitive(dep, r)
		}
	}
	return n
}

func (c *converter) generateUnionRule(name string, alts []*node) string {
	rules := make([]string, len(alts))
	sep := "-"
	if name == "" {
		sep = "alternative-"
	}
	for i, alt := range alts {
		rules[i] = c.visit(alt, name+sep+strconv.Itoa(i))
	}
	return strings.Join(rules, " | ")
}

func (c *converter) visitPattern(pattern, name string) string {
	var added []string
	c.journal = &added
	rule, perr := c.patternToRule(pattern, name)
	c.journal = nil
	if perr == nil {
		return rule
	}
	for _, k := range added { // revert the rules
		delete(c.rules, k)
	}
	if perr.invalid {
		c.errors = append(c.errors, "Invalid pattern "+pattern+": "+perr.msg)
		return ""
	}
	c.warnings = append(c.warnings, "pattern "+pattern+" is not supported ("+perr.msg+"), accepting any string")
	return c.addRule(name, c.addPrimitive("string", primitiveRules["string"]))
}

// notStrings is _not_strings: a JSON string that is none of strings, by a
// trie of their code points (children in code point order).
func (c *converter) notStrings(strs []string) string {
	type tnode struct {
		keys     []rune
		children map[rune]int
		terminal bool
	}
	nodes := []tnode{{children: map[rune]int{}}}
	for _, w := range strs {
		cur := 0
		for _, r := range w { // the words are valid UTF-8 (parsed JSON)
			if ch, ok := nodes[cur].children[r]; ok {
				cur = ch
				continue
			}
			nodes = append(nodes, tnode{children: map[rune]int{}})
			nodes[cur].children[r] = len(nodes) - 1
			nodes[cur].keys = append(nodes[cur].keys, r)
			cur = len(nodes) - 1
		}
		nodes[cur].terminal = true
	}
	for i := range nodes {
		k := nodes[i].keys
		sort.Slice(k, func(a, b int) bool { return k[a] < k[b] })
	}

	charRule := c.addPrimitive("char", primitiveRules["char"])
	var out strings.Builder
	out.WriteString(`["] ( `)
	// the recursive visit of the trie, with an explicit stack: a frame is a
	// node and the index of its next child
	type frame struct{ n, i int }
	stack := []frame{{0, 0}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		nd := &nodes[f.n]
		if f.i < len(nd.keys) {
			r := nd.keys[f.i]
			if f.i > 0 {
				out.WriteString(" | ")
			}
			f.i++
			out.WriteByte('[')
			out.WriteString(string(r))
			out.WriteByte(']')
			child := nd.children[r]
			if len(nodes[child].keys) > 0 {
				out.WriteString(" (")
				stack = append(stack, frame{child, 0})
			} else {
				out.WriteString(" " + charRule + "+")
			}
			continue
		}
		if len(nd.keys) > 0 {
			out.WriteString(` | [^"`)
			for _, r := range nd.keys {
				out.WriteString(string(r))
			}
			out.WriteString("] " + charRule + "*")
		}
		stack = stack[:len(stack)-1]
		if len(stack) > 0 {
			out.WriteString(")")
		}
	}
	out.WriteString(" )")
	if !nodes[0].terminal {
		out.WriteString("?")
	}
	out.WriteString(` ["]`)
	return out.String()
}

func (c *converter) resolveRef(n *node) string {
	fragment := n.ref
	if i := strings.IndexByte(n.ref, '#'); i >= 0 {
		fragment = n.ref[i+1:]
	}
	refName := "ref" + escapeRuleName(fragment)
	if _, ok := c.rules[refName]; !ok && !c.refsBusy[n.ref] {
		if n.target == nil {
			c.errors = append(c.errors, "Unresolved $ref "+n.ref)
			return ""
		}
		c.refsBusy[n.ref] = true
		refName = c.visit(n.target, refName)
		delete(c.refsBusy, n.ref)
	}
	return refName
}

type propRef struct {
	name   string
	schema *node
}

func joinName(name, part string) string {
	if name == "" {
		return part
	}
	return name + "-" + part
}

func (c *converter) buildObjectRule(props []propRef, required map[string]bool, name string, additional *node) string {
	var requiredProps, optionalProps, propNames []string
	kvNames := map[string]string{}
	for _, p := range props {
		propRule := c.visit(p.schema, joinName(name, p.name))
		kvNames[p.name] = c.addRule(joinName(name, p.name)+"-kv", formatLiteral(dumpStringValue(p.name))+` space ":" space `+propRule)
		if required[p.name] {
			requiredProps = append(requiredProps, p.name)
		} else {
			optionalProps = append(optionalProps, p.name)
		}
		propNames = append(propNames, p.name)
	}
	if additional != nil {
		subName := joinName(name, "additional")
		var valueRule string
		if additional.kind != kAny {
			valueRule = c.visit(additional, subName+"-value")
		} else {
			valueRule = c.addPrimitive("value", primitiveRules["value"])
		}
		var keyRule string
		if len(propNames) == 0 {
			keyRule = c.addPrimitive("string", primitiveRules["string"])
		} else {
			keyRule = c.addRule(subName+"-k", c.notStrings(propNames))
		}
		kvNames["*"] = c.addRule(subName+"-kv", keyRule+` ":" space `+valueRule)
		optionalProps = append(optionalProps, "*")
	}

	if len(requiredProps) == 0 && len(optionalProps) == 0 {
		return `"{" space "}"`
	}

	var rule strings.Builder
	rule.WriteString(`"{" space `)
	for i, p := range requiredProps {
		if i > 0 {
			rule.WriteString(` "," space `)
		}
		rule.WriteString(kvNames[p])
	}

	if len(optionalProps) > 0 {
		rule.WriteString(" (")
		if len(requiredProps) > 0 {
			rule.WriteString(` "," space ( `)
		}
		// get_recursive_refs(optional[j:], true) depends on j only (and is
		// idempotent: it adds the same rules each time), so it is computed
		// once per j; llama.cpp recomputes it, in O(n^2) per call
		memo := map[int]string{}
		var recursiveRefs func(j int, firstIsOptional bool) string
		recursiveRefs = func(j int, firstIsOptional bool) string {
			if j >= len(optionalProps) {
				return ""
			}
			if firstIsOptional {
				if r, ok := memo[j]; ok {
					return r
				}
			}
			c.lim.step()
			k := optionalProps[j]
			kv := kvNames[k]
			commaRef := `( "," space ` + kv + " )"
			var res string
			if firstIsOptional {
				if k == "*" {
					res = commaRef + "*"
				} else {
					res = commaRef + "?"
				}
			} else {
				res = kv
				if k == "*" {
					res += " " + commaRef + "*"
				}
			}
			if j+1 < len(optionalProps) {
				res += " " + c.addRule(joinName(name, k)+"-rest", recursiveRefs(j+1, true))
			}
			if firstIsOptional {
				memo[j] = res
			}
			return res
		}
		for i := range optionalProps {
			if i > 0 {
				rule.WriteString(" | ")
			}
			rule.WriteString(recursiveRefs(i, false))
		}
		if len(requiredProps) > 0 {
			rule.WriteString(" )")
		}
		rule.WriteString(" )?")
	}
	rule.WriteString(` space "}"`)
	return rule.String()
}

// dumpStringValue is json(s).dump().
func dumpStringValue(s string) string {
	var b strings.Builder
	dumpString(&b, s)
	return b.String()
}

func (c *converter) visitPrimitive(ruleName, typ string) string {
	name := typ
	if ruleName == "root" {
		name = "root"
	}
	return c.addPrimitive(name, primitiveRules[typ])
}

func (c *converter) visitAllOf(n *node, name, ruleName string) string {
	required := map[string]bool{}
	var props []propRef
	enumCounts := map[string]int{}
	depth := 0
	var addComponent func(comp *node, isRequired bool)
	addComponent = func(comp *node, isRequired bool) {
		// a $ref to a $ref to itself loops here in llama.cpp (a stack
		// overflow); the depth bound makes it an error
		depth++
		defer func() { depth-- }()
		c.lim.enter(c.depth + depth)
		c.lim.step()
		switch comp.kind {
		case kRef:
			if comp.target != nil {
				addComponent(comp.target, isRequired)
			}
		case kObject:
			for _, p := range comp.properties {
				props = append(props, propRef{p.name, p.schema})
				if isRequired {
					required[p.name] = true
				}
			}
		case kEnum:
			for _, v := range comp.values {
				enumCounts[formatLiteral(v.dump())]++
			}
		}
	}
	for _, child := range n.children {
		if child.kind == kAnyOf {
			for _, alt := range child.children {
				addComponent(alt, false)
			}
		} else {
			addComponent(child, true)
		}
	}
	if len(enumCounts) > 0 {
		var inter []string
		for lit, cnt := range enumCounts {
			if cnt == len(n.children) {
				inter = append(inter, lit)
			}
		}
		if len(inter) > 0 {
			sort.Strings(inter) // a std::map<std::string, size_t> there
			return c.addRule(ruleName, "("+strings.Join(inter, " | ")+")")
		}
	}
	return c.addRule(ruleName, c.buildObjectRule(props, required, name, nil))
}

func (c *converter) visit(n *node, name string) string {
	c.depth++
	defer func() { c.depth-- }()
	c.lim.enter(c.depth)
	c.lim.step()

	ruleName := name
	if isReservedName(name) {
		ruleName = name + "-"
	} else if name == "" {
		ruleName = "root"
	}
	subName := name
	if name != "" {
		subName += "-"
	}

	switch n.kind {
	case kRef:
		return c.addRule(ruleName, c.resolveRef(n))
	case kAnyOf:
		return c.addRule(ruleName, c.generateUnionRule(name, n.children))
	case kAllOf:
		return c.visitAllOf(n, name, ruleName)
	case kConst:
		return c.addRule(ruleName, formatLiteral(n.value.dump()))
	case kEnum:
		vals := make([]string, len(n.values))
		for i, v := range n.values {
			vals[i] = formatLiteral(v.dump())
		}
		return c.addRule(ruleName, "("+strings.Join(vals, " | ")+")")
	case kObject:
		if len(n.properties) == 0 && n.additional != nil && n.additional.kind == kAny {
			return c.addRule(ruleName, c.addPrimitive("object", primitiveRules["object"]))
		}
		props := make([]propRef, len(n.properties))
		required := map[string]bool{}
		for i, p := range n.properties {
			props[i] = propRef{p.name, p.schema}
			if p.required {
				required[p.name] = true
			}
		}
		return c.addRule(ruleName, c.buildObjectRule(props, required, name, n.additional))
	case kTuple:
		var rule strings.Builder
		rule.WriteString(`"[" space `)
		for i, item := range n.children {
			if i > 0 {
				rule.WriteString(` "," space `)
			}
			rule.WriteString(c.visit(item, subName+"tuple-"+strconv.Itoa(i)))
		}
		rule.WriteString(` space "]"`)
		return c.addRule(ruleName, rule.String())
	case kArray:
		if n.items.kind == kAny && n.minItems == 0 && n.maxItems < 0 {
			return c.visitPrimitive(ruleName, "array")
		}
		itemRule := c.visit(n.items, subName+"item")
		max := n.maxItems
		if max < 0 {
			max = intMax
		}
		return c.addRule(ruleName, `"[" space `+buildRepetition(itemRule, n.minItems, max, `"," space`)+` space "]"`)
	case kString:
		if n.pattern != "" {
			return c.visitPattern(n.pattern, ruleName)
		}
		if n.format == fmtUUID {
			return c.visitPrimitive(ruleName, "uuid")
		}
		if n.format != fmtNone {
			prim := "date-time-string"
			switch n.format {
			case fmtDate:
				prim = "date-string"
			case fmtTime:
				prim = "time-string"
			}
			return c.addRule(ruleName, c.addPrimitive(prim, stringFormatRules[prim]))
		}
		if n.minLength > 0 || n.maxLength >= 0 {
			charRule := c.addPrimitive("char", primitiveRules["char"])
			max := n.maxLength
			if max < 0 {
				max = intMax
			}
			return c.addRule(ruleName, `"\"" `+buildRepetition(charRule, n.minLength, max, "")+` "\""`)
		}
		return c.visitPrimitive(ruleName, "string")
	case kInteger:
		if n.minimum == math.MinInt64 && n.maximum == math.MaxInt64 {
			return c.visitPrimitive(ruleName, "integer")
		}
		var out strings.Builder
		out.WriteString("(")
		buildMinMaxInt(n.minimum, n.maximum, &out, 16, true)
		out.WriteString(")")
		return c.addRule(ruleName, out.String())
	case kNumber:
		return c.visitPrimitive(ruleName, "number")
	case kBoolean:
		return c.visitPrimitive(ruleName, "boolean")
	case kNull:
		return c.visitPrimitive(ruleName, "null")
	case kAny:
		return c.addRule(ruleName, c.addPrimitive("value", primitiveRules["value"]))
	}
	return ""
}

// errConversion is check_errors' invalid_argument.
type errConversion struct{ msg string }

func (e errConversion) Error() string { return e.msg }

func (c *converter) checkErrors() {
	if len(c.errors) > 0 {
		panic(errConversion{"JSON schema conversion failed:\n" + strings.Join(c.errors, "\n")})
	}
}

func (c *converter) formatGrammar() string {
	names := make([]string, 0, len(c.rules))
	size := 0
	for k, v := range c.rules {
		names = append(names, k)
		size += len(k) + len(v) + 6
	}
	sort.Strings(names)
	var b strings.Builder
	b.Grow(size)
	for _, k := range names {
		b.WriteString(k)
		b.WriteString(" ::= ")
		b.WriteString(c.rules[k])
		b.WriteByte('\n')
	}
	return b.String()
}
