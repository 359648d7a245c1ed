// Package schema converts JSON schemas to GBNF grammars, producing the same
// text as llama.cpp's json_schema_to_grammar (common/json-schema-to-grammar.cpp
// of the pinned llama.cpp), which llama-server runs for json_schema and
// response_format: the same rules, rule names, dedupe suffixes, rule
// order (sorted by name), literal escapes, integer digit ranges and regex
// translation, and the same error messages. It writes GBNF text only;
// grammar-constrained sampling is the GBNF engine's job (go/grammar).
//
//	g, err := schema.ToGrammar([]byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))
//
// What is converted, as llama.cpp does it:
//
//   - type (string, number, integer, boolean, null, object, array, and a
//     list of types: one alternative per type); a schema without a type is
//     decided by its keywords (properties, allOf, items, string keywords),
//     else it is any JSON value;
//   - properties in schema order, required ones first, then the optional
//     ones in any subset but in order; additionalProperties false, true or
//     a schema (the keys then exclude the named properties);
//   - enum and const (values written as compact JSON), anyOf / oneOf,
//     allOf (object members merged, enums intersected);
//   - $ref into the same document ("#/$defs/X", "#/definitions/X", any
//     JSON pointer without escapes, array indices), recursive references
//     as recursive rules; other references ("#", URLs, files) are errors;
//   - items, prefixItems (or an items array) as a tuple, minItems,
//     maxItems; minLength, maxLength; format date, time, date-time, uuid
//     (and uuid1..uuid5), other formats ignored;
//   - minimum, maximum, exclusiveMinimum, exclusiveMaximum of integers as
//     digit-range rules (fractional bounds rounded inwards); number
//     bounds are ignored;
//   - pattern: regular expressions anchored with ^ and $ become rules
//     (groups, alternation, classes, ., * + ? {m,n}); one with no grammar
//     equivalent (\d, lookarounds, an unanchored pattern) accepts any
//     string with a warning (Result.Warnings), one that is not a regular
//     expression is an error.
//
// JSON() is the grammar of llama-server's response_format
// {"type": "json_object"} (the conversion of {}: any JSON value) and
// OllamaJSON the one of Ollama's format: "json" (a JSON object).
//
// Input is parsed as llama.cpp's common_json (nlohmann's ordered_json)
// parses it: key order kept, a repeated key in its first place with its
// last value, integers that overflow 64 bits read as floats, a float that
// overflows refused. Hostile input is bounded (Options, ErrLimit): 4 MiB of
// schema, nesting and recursion through the schema and its $refs 1000
// levels deep, 16 MiB of grammar, and 1,000,000 units of work. These turn
// into errors the inputs on which llama.cpp overflows its stack (an allOf
// that reaches back to an enclosing object, a property name of 100 kB with
// additionalProperties) or runs for an exponential time (allOf members
// sharing $refs, level upon level). docs/notes/json-schema.md has the
// corpus result against llama.cpp.
package schema
