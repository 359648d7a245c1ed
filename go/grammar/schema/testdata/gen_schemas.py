#!/usr/bin/env python3
"""Writes schemas.json, the corpus of go/grammar/schema's golden test.

Each case is {"name", "schema"} (a JSON value; llama-ref converts its dump,
keys in order) or {"name", "text"} (the exact text: malformed JSON,
duplicate keys, number spellings). `make schema-golden` runs llama.cpp's
json_schema_to_grammar on every case into golden.json.

    python3 go/grammar/schema/testdata/gen_schemas.py
"""
import json
import os
import random

cases = []


def add(name, schema=None, text=None):
    assert all(c["name"] != name for c in cases), name
    c = {"name": name}
    if text is not None:
        c["text"] = text
    else:
        c["schema"] = schema
    cases.append(c)


def obj(props, required=None, **kw):
    s = {"type": "object", "properties": props}
    if required is not None:
        s["required"] = required
    s.update(kw)
    return s


# --- primitives and types --------------------------------------------------
add("empty", {})
for t in ["string", "number", "integer", "boolean", "null", "object", "array"]:
    add("type-" + t, {"type": t})
add("type-list-string-null", {"type": ["string", "null"]})
add("type-list-three", {"type": ["integer", "number", "null"]})
add("type-list-constraints", {"type": ["string", "integer"], "minLength": 2, "minimum": 3})
add("type-list-array-object", {"type": ["array", "object"], "items": {"type": "integer"}, "properties": {"a": {"type": "string"}}})
add("type-list-nested", {"type": [["string", "null"], "boolean"]})
add("type-list-with-const", {"type": ["string", "null"], "const": "x"})
add("type-list-empty", {"type": []})
add("type-list-unknown", {"type": ["string", "date"]})
add("type-empty-string", {"type": ""})
add("type-null-value", {"type": None, "minLength": 3})
add("type-number-value", {"type": 5})
add("type-unknown", {"type": "foo"})
add("type-any-description", {"description": "anything", "title": "T"})
add("schema-true", text="true")
add("schema-string", text='"string"')
add("schema-array", text="[]")
add("schema-null", text="null")
add("property-schema-bool", {"type": "object", "properties": {"a": True}})

# --- strings -----------------------------------------------------------------
add("string-minlength", {"type": "string", "minLength": 3})
add("string-maxlength", {"type": "string", "maxLength": 10})
add("string-min-max", {"type": "string", "minLength": 2, "maxLength": 5})
add("string-min1", {"type": "string", "minLength": 1})
add("string-max0", {"type": "string", "maxLength": 0})
add("string-max1", {"type": "string", "maxLength": 1})
add("string-exact", {"type": "string", "minLength": 4, "maxLength": 4})
add("string-min-gt-max", {"type": "string", "minLength": 5, "maxLength": 2})
add("string-minlength-float", text='{"type":"string","minLength":1.0}')
add("string-minlength-negative", {"type": "string", "minLength": -1})
add("string-minlength-text", {"type": "string", "minLength": "3"})
add("string-minlength-2pow32", text='{"type":"string","minLength":4294967296}')
add("string-minlength-2pow31", text='{"type":"string","minLength":2147483648}')
add("string-maxlength-2pow32plus5", text='{"type":"string","maxLength":4294967301}')
add("string-maxlength-huge", {"type": "string", "maxLength": 1000000000})
add("string-typeless-minlength", {"minLength": 2})
for f in ["date", "time", "date-time", "uuid", "uuid1", "uuid4", "uuid5", "uuid6", "email", "uri", "UUID"]:
    add("format-" + f, {"type": "string", "format": f})
add("format-typeless-date", {"format": "date"})
add("format-typeless-email", {"format": "email"})
add("format-not-string", {"type": "string", "format": 7})
add("format-not-string-typeless", {"format": True})
add("format-in-object", obj({"when": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"}, "id": {"type": "string", "format": "uuid"}}, ["when", "day", "id"]))
add("format-with-pattern", {"type": "string", "format": "date", "pattern": "^[0-9]{4}$"})
add("format-with-length", {"type": "string", "format": "uuid", "minLength": 3})
add("string-escapes-in-const", {"const": "quote \" backslash \\ newline \n cr \r tab \t ctl \u0001 del \u007f é 😀"})

# --- patterns ----------------------------------------------------------------
patterns = {
    "literal": "^abc$",
    "class-plus": "^[a-z]+$",
    "digit-escape": "^\\d+$",
    "dot": "^a.b$",
    "group-alt-plus": "^(a|b)+$",
    "noncapturing": "^(?:ab)*c$",
    "lookahead": "^(?=a)a$",
    "named-group": "^(?P<x>a)$",
    "repeat-exact": "^a{3}$",
    "repeat-range": "^a{2,5}$",
    "repeat-open": "^a{2,}$",
    "repeat-upto": "^a{,3}$",
    "repeat-zero-one": "^a{0,1}$",
    "repeat-one-open": "^a{1,}$",
    "phone": "^[0-9]{3}-[0-9]{4}$",
    "group-repeat": "^(ab){2}$",
    "group-repeat-twice": "^(ab){2}x(ab){3}$",
    "repeat-bad-number": "^x{a}$",
    "repeat-three-numbers": "^a{1,2,3}$",
    "repeat-negative": "^a{-1,3}$",
    "repeat-spaces": "^a{ 2 , 3 }$",
    "repeat-overflow": "^a{99999999999}$",
    "repeat-huge": "^a{1000000}$",
    "unanchored": "abc",
    "start-only": "^abc",
    "end-only": "abc$",
    "just-caret-dollar": "^$",
    "single-char": "^",
    "unbalanced-open": "^(a$",
    "unbalanced-close": "^a)$",
    "nothing-to-repeat": "^*a$",
    "nothing-to-repeat-curly": "^{2}a$",
    "unterminated-class": "^[abc$",
    "unterminated-curly": "^a{2$",
    "escaped-quotes": '^\\"q\\"$',
    "raw-quote": '^a"b$',
    "escaped-meta": "^\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\^\\$$",
    "class-hex": "^[\\x41-\\x5A]+$",
    "class-unicode-escape": "^[\\u00e0-\\u00ff]$",
    "class-bad-escape": "^[\\w]$",
    "class-negated": "^[^,]+$",
    "class-dash-escape": "^[a\\-z]$",
    "trailing-backslash": "^a\\$",
    "anchor-inside": "^a^b$",
    "dot-repeat": "^.{3,5}$",
    "alt-group-repeat": "^(a|b|c){2,3}-x$",
    "stray-bracket": "^a]$",
    "stray-brace": "^a}$",
    "e164": "^\\+?[1-9][0-9]{7,14}$",
    "email-like": "^[^@]+@[^@]+\\.[a-z]{2,}$",
    "unicode-literal": "^héllo wörld$",
    "alternation-top": "^a|b$",
    "empty-alt": "^(|a)$",
    "quantifier-chain": "^a+?$",
    "escape-slash": "^a\\/b$",
    "escape-n-t": "^a\\nb\\tc$",
    "escape-x": "^\\x41\\u0042$",
    "escape-bad-x": "^\\xZZ$",
    "literal-then-star": "^abc*$",
    "escape-then-star": "^a\\.*$",
    "dot-then-literal": "^a.bc.d$",
    "nested-groups": "^((a|b)(c|d))+$",
    "group-curly-dedupe": "^([0-9]){2}([0-9]){2}$",
    "slug": "^[a-z0-9]+(?:-[a-z0-9]+)*$",
    "hex-color": "^#[0-9a-fA-F]{6}$",
    "semver": "^(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)\\.(0|[1-9][0-9]*)$",
    "iso-date": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    "space-literal": "^hello world$",
    "revert-unsupported": "^(ab){2}\\d$",
    "revert-invalid": "^(ab){2})$",
    "backslash-literal": "^a\\\\b$",
}
for name, p in patterns.items():
    add("pattern-" + name, {"type": "string", "pattern": p})
add("pattern-depth-50", {"type": "string", "pattern": "^" + "(" * 50 + "a" + ")" * 50 + "$"})
add("pattern-depth-101", {"type": "string", "pattern": "^" + "(" * 101 + "a" + ")" * 101 + "$"})
add("pattern-not-string", {"type": "string", "pattern": 5})
add("pattern-typeless", {"pattern": "^[0-9]+$"})
add("pattern-empty", {"type": "string", "pattern": ""})
add("pattern-with-length", {"type": "string", "pattern": "^a+$", "maxLength": 3})
add("pattern-two-dots", obj({"a": {"type": "string", "pattern": "^.$"}, "b": {"type": "string", "pattern": "^..$"}}, ["a", "b"]))
add("pattern-two-warnings", obj({"a": {"type": "string", "pattern": "^\\d$"}, "b": {"type": "string", "pattern": "^\\w$"}}, ["a", "b"]))
add("pattern-two-errors", obj({"a": {"type": "string", "pattern": "^(a$"}, "b": {"type": "string", "pattern": "^*$"}}, ["a", "b"]))
add("pattern-error-and-warning", obj({"a": {"type": "string", "pattern": "^(a$"}, "b": {"type": "string", "pattern": "x"}}, ["a"]))
add("pattern-root-subrules", {"type": "string", "pattern": "^([a-z]){3}(x|y){2,4}$"})

# --- integers and numbers ----------------------------------------------------
I64MIN, I64MAX = -(2 ** 63), 2 ** 63 - 1
int_bounds = {
    "min0": {"minimum": 0}, "min1": {"minimum": 1}, "min5": {"minimum": 5}, "min9": {"minimum": 9},
    "min10": {"minimum": 10}, "min105": {"minimum": 105}, "min123456": {"minimum": 123456},
    "min-5": {"minimum": -5}, "min-123": {"minimum": -123}, "min-1": {"minimum": -1},
    "max0": {"maximum": 0}, "max9": {"maximum": 9}, "max100": {"maximum": 100}, "max-1": {"maximum": -1},
    "max-100": {"maximum": -100}, "max987654": {"maximum": 987654},
    "range0-9": {"minimum": 0, "maximum": 9}, "range1-10": {"minimum": 1, "maximum": 10},
    "range-10-10": {"minimum": -10, "maximum": 10}, "range-100--1": {"minimum": -100, "maximum": -1},
    "range15-250": {"minimum": 15, "maximum": 250}, "range0-1000000": {"minimum": 0, "maximum": 1000000},
    "range1-12": {"minimum": 1, "maximum": 12}, "range1900-2100": {"minimum": 1900, "maximum": 2100},
    "range-999-999": {"minimum": -999, "maximum": 999}, "range5-5": {"minimum": 5, "maximum": 5},
    "range42-42": {"minimum": 42, "maximum": 42}, "range10-5": {"minimum": 10, "maximum": 5},
    "range5--3": {"minimum": 5, "maximum": -3}, "range-3--7": {"minimum": -3, "maximum": -7},
    "range-full": {"minimum": I64MIN, "maximum": I64MAX},
    "min-i64min": {"minimum": I64MIN}, "max-i64max": {"maximum": I64MAX},
    "min-i64max": {"minimum": I64MAX}, "max-i64min": {"maximum": I64MIN},
    "min-i64min-plus1": {"minimum": I64MIN + 1}, "max-i64max-minus1": {"maximum": I64MAX - 1},
    "range-i64": {"minimum": I64MIN + 1, "maximum": I64MAX - 1},
    "excl-min0": {"exclusiveMinimum": 0}, "excl-max100": {"exclusiveMaximum": 100},
    "excl-both": {"exclusiveMinimum": -1, "exclusiveMaximum": 10},
    "min-and-excl": {"minimum": 3, "exclusiveMinimum": 7},
    "excl-min-i64max": {"exclusiveMinimum": I64MAX}, "excl-max-i64min": {"exclusiveMaximum": I64MIN},
    "max-uint64": {"maximum": 2 ** 64 - 1}, "min-2pow63": {"minimum": 2 ** 63},
}
for name, b in int_bounds.items():
    add("integer-" + name, dict({"type": "integer"}, **b))
add("integer-min-float", text='{"type":"integer","minimum":1.5,"maximum":9.9}')
add("integer-excl-float", text='{"type":"integer","exclusiveMinimum":2.5,"exclusiveMaximum":7.5}')
add("integer-min-float-negative", text='{"type":"integer","minimum":-2.5}')
add("integer-min-1e300", text='{"type":"integer","minimum":1e300}')
add("integer-excl-min-1e300", text='{"type":"integer","exclusiveMinimum":1e300}')
add("integer-max-neg-1e300", text='{"type":"integer","maximum":-1e300}')
add("integer-min-huge-int-text", text='{"type":"integer","minimum":100000000000000000000}')
add("integer-min-string", {"type": "integer", "minimum": "x"})
add("integer-max-null", {"type": "integer", "maximum": None})
add("number-with-bounds", {"type": "number", "minimum": 0, "maximum": 1})
add("integer-in-object", obj({"age": {"type": "integer", "minimum": 0, "maximum": 150}, "score": {"type": "integer", "minimum": -10}}, ["age"]))

# --- const and enum ------------------------------------------------------------
add("const-string", {"const": "hello"})
add("const-number-int", {"const": 42})
add("const-negative", {"const": -7})
add("const-null", {"const": None})
add("const-true", {"const": True})
add("const-object", {"const": {"b": [1, 2, {"c": None}], "a": "x"}})
add("const-array", {"const": [1, "two", 3.5]})
add("const-with-type", {"type": "integer", "const": "not an int"})
add("const-unicode", {"const": "日本語 ünï"})
add("const-numbers", text='{"const":[1.0,1e16,1e15,0.00001,0.0001,5e-324,-0,-0.0,1E2,0.1,1.5e300,123456789012345678901234,1e-400,-2e-330,1.7976931348623157e308]}')
add("const-number-overflow", text='{"const":1e400}')
add("const-number-overflow-negative", text='{"enum":[1,-1e309]}')
add("integer-min-overflow", text='{"type":"integer","minimum":1e999}')
add("const-float-spellings", text='{"enum":[1.10,2.50e1,3e-3,-4.0E+2,0.30000000000000004,100000000000000000000.0]}')
add("enum-strings", {"type": "string", "enum": ["red", "green", "blue"]})
add("enum-mixed", {"enum": ["a", 1, 2.5, True, None, [1], {"k": "v"}]})
add("enum-duplicates", {"enum": ["a", "a", "b"]})
add("enum-empty", {"enum": []})
add("enum-not-array", {"enum": "abc"})
add("enum-single", {"enum": ["only"]})
add("enum-quotes", {"enum": ['say "hi"', "back\\slash", "new\nline"]})
add("enum-large", {"enum": ["value-%d" % i for i in range(500)]})
add("enum-with-type-list", {"type": ["string", "null"], "enum": ["a", None]})
add("enum-and-const", {"enum": ["a"], "const": "b"})

# --- objects -------------------------------------------------------------------
add("object-all-required", obj({"a": {"type": "string"}, "b": {"type": "integer"}}, ["a", "b"]))
add("object-none-required", obj({"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}}))
add("object-some-required", obj({"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}, "d": {"type": "number"}}, ["c", "a"]))
add("object-required-unknown", obj({"a": {"type": "string"}}, ["a", "zzz"]))
add("object-required-not-array", obj({"a": {"type": "string"}}, "a"))
add("object-required-non-string", obj({"a": {"type": "string"}, "1": {"type": "string"}}, [1, "a"]))
add("object-additional-false", obj({"a": {"type": "string"}}, ["a"], additionalProperties=False))
add("object-additional-true", obj({"a": {"type": "string"}}, ["a"], additionalProperties=True))
add("object-additional-schema", obj({"a": {"type": "string"}}, [], additionalProperties={"type": "integer"}))
add("object-additional-empty-schema", obj({"a": {"type": "string"}}, ["a"], additionalProperties={}))
add("object-additional-only", {"type": "object", "additionalProperties": {"type": "string"}})
add("object-additional-only-true", {"type": "object", "additionalProperties": True})
add("object-additional-only-false", {"type": "object", "additionalProperties": False})
add("object-additional-only-any-schema", {"type": "object", "additionalProperties": {"description": "x"}})
add("object-additional-invalid", {"type": "object", "additionalProperties": 1})
add("object-additional-typeless", {"additionalProperties": {"type": "boolean"}})
add("object-additional-typeless-false", {"additionalProperties": False})
add("object-properties-not-object", {"type": "object", "properties": []})
add("object-empty-properties", {"type": "object", "properties": {}})
add("object-empty-properties-closed", {"type": "object", "properties": {}, "additionalProperties": False})
add("object-typeless-properties", {"properties": {"x": {"type": "number"}}, "required": ["x"]})
add("object-names-escaped", obj({"first name": {"type": "string"}, "a.b": {"type": "string"}, "ünï": {"type": "integer"}, "": {"type": "null"}, "x__y": {"type": "boolean"}}, ["first name", ""]))
add("object-names-reserved", obj({"root": {"type": "string"}, "string": {"type": "integer"}, "value": {}, "char": {"type": "string", "minLength": 1}, "date": {"type": "string", "format": "date"}, "space": {"type": "boolean"}}, ["root", "string"]))
add("object-star-property", obj({"*": {"type": "string"}, "a": {"type": "integer"}}, [], additionalProperties={"type": "number"}))
add("object-star-required", obj({"*": {"type": "string"}}, ["*"], additionalProperties=True))
add("object-name-collision", obj({"a-b": {"type": "string", "minLength": 2}, "a": obj({"b": {"type": "integer", "minimum": 3}}, ["b"])}, ["a-b", "a"]))
add("object-nested", obj({"user": obj({"name": {"type": "string"}, "address": obj({"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, ["city"])}, ["name"])}, ["user"]))
add("object-not-strings-trie", obj({"and": {"type": "string"}, "also": {"type": "string"}, "a": {"type": "string"}, "b": {"type": "string"}}, [], additionalProperties={"type": "integer"}))
add("object-not-strings-unicode", obj({"ä": {}, "äb": {}, "日本": {}, "]": {}, "\\": {}, "^x": {}, "a-b": {}, "\"q": {}}, [], additionalProperties=True))
add("object-not-strings-empty-name", obj({"": {"type": "string"}, "k": {"type": "string"}}, [], additionalProperties=True))
add("object-duplicate-keys", text='{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"a":{"type":"boolean"}},"required":["a"]}')
add("object-key-escapes", obj({"tab\there": {"type": "string"}, "quote\"d": {"type": "string"}, "nl\nx": {"type": "string"}, "ctl\u0001": {"type": "string"}}, ["quote\"d"]))
add("object-type-with-allof-and-props", {"type": "object", "properties": {"a": {"type": "string"}}, "allOf": [{"properties": {"b": {"type": "string"}}}]})

# --- arrays --------------------------------------------------------------------
add("array-items", {"type": "array", "items": {"type": "string"}})
add("array-min", {"type": "array", "items": {"type": "integer"}, "minItems": 2})
add("array-max", {"type": "array", "items": {"type": "integer"}, "maxItems": 3})
add("array-min-max", {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4})
add("array-exact", {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3})
add("array-min1", {"type": "array", "items": {"type": "string"}, "minItems": 1})
add("array-max0", {"type": "array", "items": {"type": "string"}, "maxItems": 0})
add("array-max1", {"type": "array", "items": {"type": "string"}, "maxItems": 1})
add("array-min2-max2-any", {"type": "array", "minItems": 2, "maxItems": 2})
add("array-no-items-min", {"type": "array", "minItems": 1})
add("array-min-gt-max", {"type": "array", "items": {"type": "string"}, "minItems": 4, "maxItems": 2})
add("array-prefix-items", {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}, {"const": "x"}]})
add("array-items-tuple", {"type": "array", "items": [{"type": "boolean"}, {"type": "null"}]})
add("array-items-and-prefix", {"type": "array", "items": {"type": "string"}, "prefixItems": [{"type": "integer"}]})
add("array-tuple-bad-minitems", {"type": "array", "prefixItems": [{"type": "integer"}], "minItems": -3})
add("array-tuple-empty", {"type": "array", "prefixItems": []})
add("array-prefix-not-array", {"type": "array", "prefixItems": {"type": "integer"}, "minItems": 1})
add("array-items-true", {"type": "array", "items": True})
add("array-min-negative", {"type": "array", "items": {"type": "string"}, "minItems": -1})
add("array-min-float", text='{"type":"array","items":{"type":"string"},"minItems":1.5}')
add("array-huge-counts", {"type": "array", "items": {"type": "integer"}, "minItems": 1000000, "maxItems": 2000000})
add("array-maxitems-2pow32", text='{"type":"array","items":{"type":"integer"},"maxItems":4294967296}')
add("array-typeless-items", {"items": {"type": "boolean"}, "maxItems": 2})
add("array-nested", {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}})
add("array-of-objects", {"type": "array", "items": obj({"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, ["id"]), "minItems": 1})
add("array-unique-items", {"type": "array", "items": {"type": "string"}, "uniqueItems": True})

# --- anyOf / oneOf / allOf -------------------------------------------------------
add("anyof-root", {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})
add("oneof-root", {"oneOf": [{"type": "number"}, {"type": "boolean"}]})
add("oneof-and-anyof", {"oneOf": [{"type": "number"}], "anyOf": [{"type": "string"}]})
add("anyof-in-property", obj({"v": {"anyOf": [{"type": "string", "maxLength": 3}, obj({"k": {"type": "integer"}}, ["k"])]}}, ["v"]))
add("anyof-nested", {"anyOf": [{"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "integer"}]})
add("anyof-empty", {"anyOf": []})
add("anyof-not-array", {"anyOf": {"type": "string"}})
add("anyof-bad-element", {"anyOf": [{"type": "string"}, 3]})
add("anyof-with-type", {"type": "string", "anyOf": [{"type": "integer"}]})
add("anyof-many", {"anyOf": [{"const": "v%d" % i} for i in range(300)]})
add("allof-objects", {"allOf": [obj({"a": {"type": "string"}}, ["a"]), obj({"b": {"type": "integer"}}, ["b"])]})
add("allof-with-anyof", {"allOf": [obj({"a": {"type": "string"}}, ["a"]), {"anyOf": [obj({"b": {"type": "integer"}}), obj({"c": {"type": "boolean"}})]}]})
add("allof-enum-intersection", {"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["b", "c", "d"]}]})
add("allof-enum-disjoint", {"allOf": [{"enum": ["a"]}, {"enum": ["b"]}]})
add("allof-enum-duplicates", {"allOf": [{"enum": ["x", "x"]}, obj({"p": {"type": "string"}})]})
add("allof-enum-and-anyof", {"allOf": [{"enum": [1, 2]}, {"anyOf": [{"enum": [2]}, {"enum": [1]}]}]})
add("allof-non-object-children", {"allOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]})
add("allof-string-type", {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 5}]})
add("allof-object-no-props", {"type": "object", "allOf": [obj({"a": {"type": "string"}}, ["a"])]})
add("allof-empty", {"allOf": []})
add("allof-duplicate-props", {"allOf": [obj({"a": {"type": "string"}}, ["a"]), obj({"a": {"type": "integer"}})]})
add("allof-ref", {"$defs": {"Base": obj({"id": {"type": "integer"}}, ["id"])}, "allOf": [{"$ref": "#/$defs/Base"}, obj({"name": {"type": "string"}}, ["name"])]})
add("allof-ref-chain", {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": obj({"x": {"type": "string"}}, ["x"])}, "allOf": [{"$ref": "#/$defs/A"}, obj({"y": {"type": "number"}})]})
add("allof-in-property", obj({"p": {"allOf": [obj({"a": {"type": "string"}}, ["a"]), obj({"b": {"type": "string"}})]}}, ["p"]))

# --- $ref -----------------------------------------------------------------------
add("ref-definitions", {"definitions": {"Foo": {"type": "string"}}, "type": "object", "properties": {"f": {"$ref": "#/definitions/Foo"}}, "required": ["f"]})
add("ref-defs", {"$defs": {"Foo": {"type": "integer", "minimum": 1}}, "type": "object", "properties": {"f": {"$ref": "#/$defs/Foo"}, "g": {"$ref": "#/$defs/Foo"}}, "required": ["f", "g"]})
add("ref-root", {"$defs": {"Node": obj({"v": {"type": "integer"}}, ["v"])}, "$ref": "#/$defs/Node"})
add("ref-recursive-tree", {"$defs": {"Tree": obj({"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}}, ["value"])}, "$ref": "#/$defs/Tree"})
add("ref-mutual", {"$defs": {"A": obj({"b": {"$ref": "#/$defs/B"}}), "B": obj({"a": {"$ref": "#/$defs/A"}})}, "type": "object", "properties": {"start": {"$ref": "#/$defs/A"}}})
add("ref-self-cycle", {"$defs": {"A": {"$ref": "#/$defs/A"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "required": ["a"]})
add("ref-array-index", {"$defs": {"list": [{"type": "string"}, {"type": "boolean"}]}, "type": "array", "items": {"$ref": "#/$defs/list/1"}})
add("ref-array-index-loose", {"$defs": {"list": [{"type": "string"}, {"type": "boolean"}]}, "type": "array", "items": {"$ref": "#/$defs/list/ 1x"}})
add("ref-array-index-out-of-range", {"$defs": {"list": [{"type": "string"}]}, "$ref": "#/$defs/list/5"})
add("ref-array-index-negative-zero", {"$defs": {"list": [{"type": "string"}]}, "$ref": "#/$defs/list/-0"})
add("ref-array-index-not-number", {"$defs": {"list": [{"type": "string"}]}, "$ref": "#/$defs/list/x"})
add("ref-not-found", {"$ref": "#/$defs/Missing"})
add("ref-through-scalar", {"$defs": {"A": 5}, "$ref": "#/$defs/A/b"})
add("ref-to-non-schema", {"$defs": {"A": 5}, "$ref": "#/$defs/A"})
add("ref-remote", {"$ref": "https://example.com/schemas/person.json"})
add("ref-relative-file", {"$ref": "other.json#/definitions/X"})
add("ref-hash-only", {"$ref": "#"})
add("ref-hash-slash", {"$ref": "#/"})
add("ref-not-string", {"$ref": 5})
add("ref-with-siblings", {"$defs": {"S": {"type": "string"}}, "$ref": "#/$defs/S", "type": "integer", "minimum": 3})
add("ref-chain", {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/C"}, "C": {"type": "boolean"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}, "required": ["x"]})
add("ref-to-property", {"type": "object", "properties": {"a": {"type": "string", "maxLength": 4}, "b": {"$ref": "#/properties/a"}}, "required": ["a", "b"]})
add("ref-name-escapes", {"$defs": {"My Model": {"type": "string"}, "x.y": {"type": "integer"}}, "type": "object", "properties": {"m": {"$ref": "#/$defs/My Model"}, "n": {"$ref": "#/$defs/x.y"}}})
add("ref-json-pointer-escape", {"$defs": {"a/b": {"type": "string"}}, "$ref": "#/$defs/a~1b"})
add("ref-error-inside-target", {"$defs": {"Bad": {"type": "string", "minLength": -2}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/Bad"}}})
add("ref-in-anyof-optional", {"$defs": {"Pet": obj({"name": {"type": "string"}}, ["name"])}, "type": "object", "properties": {"pet": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}]}}})
add("ref-collides-with-name", {"$defs": {"x": {"type": "integer"}}, "type": "object", "properties": {"ref-defs-x": {"type": "string"}, "y": {"$ref": "#/$defs/x"}}, "required": ["ref-defs-x", "y"]})

# --- real-world: Pydantic model_json_schema() ------------------------------------
add("pydantic-user", {"properties": {"name": {"title": "Name", "type": "string"}, "age": {"title": "Age", "type": "integer"}, "email": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Email"}, "tags": {"items": {"type": "string"}, "title": "Tags", "type": "array"}}, "required": ["name", "age"], "title": "User", "type": "object"})
add("pydantic-country", {"properties": {"name": {"title": "Name", "type": "string"}, "capital": {"title": "Capital", "type": "string"}, "languages": {"items": {"type": "string"}, "title": "Languages", "type": "array"}}, "required": ["name", "capital", "languages"], "title": "Country", "type": "object"})
add("pydantic-order", {
    "$defs": {
        "Item": {"properties": {"sku": {"title": "Sku", "type": "string"}, "quantity": {"exclusiveMinimum": 0, "title": "Quantity", "type": "integer"}, "price": {"minimum": 0, "title": "Price", "type": "number"}}, "required": ["sku", "quantity", "price"], "title": "Item", "type": "object"},
        "Status": {"enum": ["pending", "paid", "shipped", "cancelled"], "title": "Status", "type": "string"},
        "Address": {"properties": {"street": {"title": "Street", "type": "string"}, "city": {"title": "City", "type": "string"}, "postcode": {"pattern": "^[0-9]{5}$", "title": "Postcode", "type": "string"}}, "required": ["street", "city", "postcode"], "title": "Address", "type": "object"},
    },
    "properties": {
        "id": {"format": "uuid", "title": "Id", "type": "string"},
        "created": {"format": "date-time", "title": "Created", "type": "string"},
        "status": {"$ref": "#/$defs/Status", "default": "pending"},
        "items": {"items": {"$ref": "#/$defs/Item"}, "minItems": 1, "title": "Items", "type": "array"},
        "shipping": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
        "notes": {"anyOf": [{"maxLength": 200, "type": "string"}, {"type": "null"}], "default": None, "title": "Notes"},
        "metadata": {"additionalProperties": {"type": "string"}, "title": "Metadata", "type": "object"},
        "counts": {"additionalProperties": {"type": "integer"}, "title": "Counts", "type": "object"},
    },
    "required": ["id", "created", "items"], "title": "Order", "type": "object"})
add("pydantic-recursive", {"$defs": {"TreeNode": {"properties": {"name": {"title": "Name", "type": "string"}, "children": {"items": {"$ref": "#/$defs/TreeNode"}, "title": "Children", "type": "array"}}, "required": ["name"], "title": "TreeNode", "type": "object"}}, "$ref": "#/$defs/TreeNode"})
add("pydantic-literal-and-tuple", {"properties": {"kind": {"const": "point", "title": "Kind", "type": "string"}, "xy": {"maxItems": 2, "minItems": 2, "prefixItems": [{"type": "number"}, {"type": "number"}], "title": "Xy", "type": "array"}, "label": {"enum": ["a", "b"], "title": "Label", "type": "string"}}, "required": ["kind", "xy"], "title": "Point", "type": "object"})
add("pydantic-discriminated", {"$defs": {"Cat": {"properties": {"pet_type": {"const": "cat", "title": "Pet Type", "type": "string"}, "meows": {"title": "Meows", "type": "integer"}}, "required": ["pet_type", "meows"], "title": "Cat", "type": "object"}, "Dog": {"properties": {"pet_type": {"const": "dog", "title": "Pet Type", "type": "string"}, "barks": {"title": "Barks", "type": "number"}}, "required": ["pet_type", "barks"], "title": "Dog", "type": "object"}}, "properties": {"pet": {"discriminator": {"mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}, "propertyName": "pet_type"}, "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}], "title": "Pet"}, "n": {"title": "N", "type": "integer"}}, "required": ["pet", "n"], "title": "Model", "type": "object"})
add("pydantic-constrained", {"properties": {"username": {"maxLength": 20, "minLength": 3, "pattern": "^[a-z0-9_]+$", "title": "Username", "type": "string"}, "age": {"maximum": 130, "minimum": 0, "title": "Age", "type": "integer"}, "ratio": {"exclusiveMaximum": 1, "exclusiveMinimum": 0, "title": "Ratio", "type": "number"}, "birthday": {"format": "date", "title": "Birthday", "type": "string"}, "alarm": {"format": "time", "title": "Alarm", "type": "string"}, "website": {"format": "uri", "maxLength": 2083, "minLength": 1, "title": "Website", "type": "string"}, "ids": {"items": {"type": "integer"}, "title": "Ids", "type": "array", "uniqueItems": True}}, "required": ["username", "age", "ratio"], "title": "Profile", "type": "object"})
add("pydantic-optional-int-default", {"properties": {"limit": {"anyOf": [{"maximum": 100, "minimum": 1, "type": "integer"}, {"type": "null"}], "default": 10, "title": "Limit"}, "flags": {"anyOf": [{"items": {"type": "boolean"}, "type": "array"}, {"type": "null"}], "default": None, "title": "Flags"}}, "title": "Query", "type": "object"})
add("pydantic-dict-of-models", {"$defs": {"Score": {"properties": {"value": {"title": "Value", "type": "number"}}, "required": ["value"], "title": "Score", "type": "object"}}, "properties": {"scores": {"additionalProperties": {"$ref": "#/$defs/Score"}, "title": "Scores", "type": "object"}}, "required": ["scores"], "title": "Board", "type": "object"})
add("pydantic-enum-int", {"$defs": {"Level": {"enum": [1, 2, 3], "title": "Level", "type": "integer"}}, "properties": {"level": {"$ref": "#/$defs/Level"}}, "required": ["level"], "title": "Cfg", "type": "object"})
add("pydantic-any-field", {"properties": {"payload": {"title": "Payload"}, "extra": {"additionalProperties": True, "title": "Extra", "type": "object"}}, "required": ["payload"], "title": "Envelope", "type": "object"})

# --- real-world: OpenAI / tool-calling parameter schemas -----------------------------
add("tool-get-weather", {"type": "object", "properties": {"location": {"type": "string", "description": "City and country e.g. Bogotá, Colombia"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"], "additionalProperties": False})
add("tool-get-weather-strict", {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": ["string", "null"], "enum": ["celsius", "fahrenheit", None]}}, "required": ["location", "unit"], "additionalProperties": False})
add("tool-search", {"type": "object", "properties": {"query": {"type": "string", "minLength": 1}, "filters": {"type": "array", "items": {"type": "object", "properties": {"field": {"type": "string"}, "op": {"enum": ["eq", "lt", "gt", "contains"]}, "value": {"type": ["string", "number", "boolean"]}}, "required": ["field", "op", "value"]}}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}, "sort": {"type": "string", "enum": ["relevance", "date"]}}, "required": ["query"]})
add("tool-send-email", {"type": "object", "properties": {"to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1}, "cc": {"type": "array", "items": {"type": "string"}}, "subject": {"type": "string", "maxLength": 120}, "body": {"type": "string"}, "send_at": {"type": "string", "format": "date-time"}}, "required": ["to", "subject", "body"], "additionalProperties": False})
add("tool-create-event", {"type": "object", "properties": {"title": {"type": "string"}, "date": {"type": "string", "format": "date"}, "start": {"type": "string", "format": "time"}, "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 480}, "attendees": {"type": "array", "items": {"type": "object", "properties": {"email": {"type": "string"}, "optional": {"type": "boolean"}}, "required": ["email"]}}}, "required": ["title", "date", "start"]})
add("tool-sql-query", {"type": "object", "properties": {"sql": {"type": "string"}, "params": {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}}, "timeout_ms": {"type": "integer", "exclusiveMinimum": 0}}, "required": ["sql"]})
add("tool-run-code", {"type": "object", "properties": {"language": {"type": "string", "enum": ["python", "javascript", "bash"]}, "code": {"type": "string"}, "files": {"type": "object", "additionalProperties": {"type": "string"}}}, "required": ["language", "code"]})
add("tool-no-params", {"type": "object", "properties": {}})
add("tool-no-params-strict", {"type": "object", "properties": {}, "required": [], "additionalProperties": False})
add("openai-math-reasoning", {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "object", "properties": {"explanation": {"type": "string"}, "output": {"type": "string"}}, "required": ["explanation", "output"], "additionalProperties": False}}, "final_answer": {"type": "string"}}, "required": ["steps", "final_answer"], "additionalProperties": False})
add("openai-ui-recursive-hash", {"type": "object", "properties": {"type": {"type": "string", "enum": ["div", "button", "header"]}, "label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}, "required": ["type", "label", "children"], "additionalProperties": False})
add("openai-ui-recursive-defs", {"type": "object", "properties": {"ui": {"$ref": "#/$defs/ui"}}, "required": ["ui"], "additionalProperties": False, "$defs": {"ui": {"type": "object", "properties": {"type": {"type": "string", "enum": ["div", "button"]}, "children": {"type": "array", "items": {"$ref": "#/$defs/ui"}}}, "required": ["type", "children"], "additionalProperties": False}}})
add("openai-entities", {"type": "object", "properties": {"entities": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["person", "org", "place"]}, "confidence": {"type": "number"}}, "required": ["name", "kind", "confidence"], "additionalProperties": False}}}, "required": ["entities"], "additionalProperties": False})
add("tool-call-wrapper", {"type": "object", "properties": {"name": {"const": "get_weather"}, "arguments": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}, "required": ["name", "arguments"]})
add("tool-calls-anyof", {"type": "array", "items": {"anyOf": [{"type": "object", "properties": {"name": {"const": "a"}, "arguments": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}, "required": ["name", "arguments"]}, {"type": "object", "properties": {"name": {"const": "b"}, "arguments": {"type": "object", "properties": {}}}, "required": ["name", "arguments"]}]}, "minItems": 1})
add("json-schema-draft-keywords", {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://example.com/p", "title": "P", "description": "d", "type": "object", "properties": {"a": {"type": "string", "default": "x", "examples": ["y"], "deprecated": True, "readOnly": True}}, "required": ["a"]})

# --- size and depth (llama.cpp handles these; the Go limits are far above) --------------
deep = {"type": "string"}
for i in range(100):
    deep = {"type": "object", "properties": {"n": deep}, "required": ["n"]}
add("deep-objects-100", deep)
deep = {"type": "integer"}
for i in range(200):
    deep = {"type": "array", "items": deep}
add("deep-arrays-200", deep)
deep = {"type": "null"}
for i in range(60):
    deep = {"anyOf": [deep, {"type": "boolean"}]}
add("deep-anyof-60", deep)
add("many-optional-props-150", {"type": "object", "properties": {"p%d" % i: {"type": "integer"} for i in range(150)}})
add("many-required-props-500", {"type": "object", "properties": {"p%d" % i: {"type": "string"} for i in range(500)}, "required": ["p%d" % i for i in range(500)]})
add("many-defs-chain-100", {"$defs": {"D%d" % i: ({"$ref": "#/$defs/D%d" % (i + 1)} if i < 99 else {"type": "integer"}) for i in range(100)}, "$ref": "#/$defs/D0"})
add("long-property-name", obj({"k" * 3000: {"type": "string"}, "k" * 2999 + "x": {"type": "string"}}, [], additionalProperties=True))
add("large-enum-2000", {"enum": ["item-%04d" % i for i in range(2000)]})
add("name-collisions-suffix", {"anyOf": [{"type": "object", "properties": {"a": {"type": "string", "maxLength": i + 1}}, "required": ["a"]} for i in range(30)]})

# --- malformed JSON --------------------------------------------------------------------
for name, text in {
    "json-empty": "", "json-whitespace": "   ", "json-open-brace": "{", "json-missing-value": '{"type":}',
    "json-unterminated-array": "[1,2", "json-nul": "nul", "json-trailing-comma": '{"a":1,}',
    "json-single-quotes": "{'type':'string'}", "json-nan": '{"const":NaN}', "json-trailing-garbage": "{} x",
    "json-two-values": "{}{}", "json-comment": '{"type":"string"} // c', "json-leading-zero": '{"const":01}',
    "json-bad-escape": '{"const":"\\q"}', "json-lone-surrogate": '{"const":"\\ud800"}',
    "json-control-char": '{"const":"a\tb"}', "json-plus-number": '{"const":+1}', "json-dot-number": '{"const":.5}',
    "json-bom": "\ufeff{\"type\":\"boolean\"}", "json-surrounding-space": ' \n\t{"type":"null"}\r\n ',
    "json-surrogate-pair": '{"const":"\\ud83d\\ude00"}', "json-escaped-nul": '{"const":"a\\u0000b"}',
    "json-escaped-slash": '{"const":"a\\/b"}', "json-exponent-int": '{"const":1e2}', "json-big-negative": '{"const":-9223372036854775809}',
}.items():
    add(name, text=text)

# --- random combinations (seeded): the generator of a one-off check of 10,000
# such schemas against llama.cpp, all identical; $refs are kept out of allOf,
# where a reference back to an enclosing object recurses forever in llama.cpp
rng = random.Random(28)
R_NAMES = ["a", "b", "a-b", "root", "string", "x y", "ünï", "", "*", "value", "item", "c1", "kv", "a-kv", "dot", "char", "p"]
R_PATS = ["^abc$", "^[a-z]+$", "^(a|b){2,3}$", "^\\d$", "^.{1,3}$", "^a.b*c?$", "^(?:x|y)+z$", '^[^"]*$', "abc",
          "^(ab){2}(cd){2}$", "^\\.\\$$", "^a{,2}b{3,}$", "^(a$", "^*$", "^[0-9]{2}-[0-9]{2}$", '^"a"$', "^$", "^a|b|$"]


def r_val(d=0):
    r = rng.random()
    if r < 0.2:
        return rng.choice([0, 1, -1, 42, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1])
    if r < 0.35:
        return rng.choice([0.5, -1.25, 1e16, 1e-5, 3.0, 1e300])
    if r < 0.6:
        return rng.choice(["a", "b", 'x"y', "new\nline", "é", "", "\\"])
    if r < 0.7:
        return rng.choice([True, False, None])
    if d < 2 and r < 0.85:
        return [r_val(d + 1) for _ in range(rng.randint(0, 3))]
    if d < 2:
        return {rng.choice(R_NAMES): r_val(d + 1) for _ in range(rng.randint(0, 3))}
    return None


def r_schema(d, defs, in_allof):
    if d > 4:
        return rng.choice([{"type": "string"}, {"type": "integer"}, {}])
    k = rng.randint(0, 15)
    if k in (13, 15) and in_allof:
        k = 6
    if k == 0:
        return {}
    if k == 1:
        return {"type": rng.choice(["string", "number", "boolean", "null"])}
    if k == 2:
        s = {"type": "integer"}
        for key in rng.sample(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"], rng.randint(1, 2)):
            s[key] = rng.choice([0, 1, 5, 9, 10, 99, 100, 105, 999, 1000, 12345, -1, -5, -10, -99, -100, -12345, 2 ** 62, -2 ** 62, 7, 3.5, -2.5])
        return s
    if k == 3:
        s = {"type": "string"}
        c = rng.randint(0, 3)
        if c == 0:
            s["pattern"] = rng.choice(R_PATS)
        if c == 1:
            s["format"] = rng.choice(["date", "time", "date-time", "uuid", "email"])
        if c == 2:
            s["minLength"] = rng.randint(0, 3)
        if c == 3:
            s["maxLength"] = rng.randint(0, 5)
        return s
    if k == 4:
        return {"const": r_val()}
    if k == 5:
        return {"enum": [r_val() for _ in range(rng.randint(1, 4))]}
    if k in (6, 7, 8):
        props = {}
        for _ in range(rng.randint(0, 5)):
            props[rng.choice(R_NAMES)] = r_schema(d + 1, defs, in_allof)
        s = {"type": "object", "properties": props}
        if rng.random() < 0.7:
            s["required"] = rng.sample(list(props) + ["zz"], rng.randint(0, len(props)))
        r = rng.random()
        if r < 0.2:
            s["additionalProperties"] = False
        elif r < 0.35:
            s["additionalProperties"] = True
        elif r < 0.45:
            s["additionalProperties"] = r_schema(d + 1, defs, in_allof)
        if rng.random() < 0.1:
            del s["type"]
        return s
    if k == 9:
        s = {"type": "array", "items": r_schema(d + 1, defs, in_allof)}
        if rng.random() < 0.5:
            s["minItems"] = rng.randint(0, 3)
        if rng.random() < 0.5:
            s["maxItems"] = rng.randint(0, 4)
        return s
    if k == 10:
        return {"type": "array", "prefixItems": [r_schema(d + 1, defs, in_allof) for _ in range(rng.randint(1, 3))]}
    if k == 11:
        return {rng.choice(["anyOf", "oneOf"]): [r_schema(d + 1, defs, in_allof) for _ in range(rng.randint(1, 3))]}
    if k == 12:
        return {"allOf": [r_schema(d + 1, defs, True) for _ in range(rng.randint(1, 3))]}
    if k == 13:
        name = rng.choice(["A", "B", "C", "My Def"])
        if name not in defs:
            defs[name] = None
            defs[name] = r_schema(d + 1, defs, in_allof)
        return {"$ref": "#/$defs/" + name}
    if k == 14:
        return {"type": rng.sample(["string", "integer", "null", "array", "object"], rng.randint(1, 3))}
    return {"type": "object", "allOf": [{"$ref": "#/$defs/" + rng.choice(["A", "B"])}, r_schema(d + 1, defs, True)]}


for i in range(300):
    defs = {}
    s = r_schema(0, defs, False)
    for k, v in list(defs.items()):
        if v is None or "$ref" in v:
            defs[k] = {"type": "string"}
    for n in ["A", "B"]:
        defs.setdefault(n, {"type": "object", "properties": {"q": {"type": "integer"}}})
    s = dict(s)
    s["$defs"] = defs
    add("random-%03d" % i, s)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas.json")
with open(out, "w", encoding="utf-8") as f:
    f.write('{"cases": [\n')
    f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
    f.write("\n]}\n")
print(f"{len(cases)} cases -> {out}")
