// Package grammar constrains sampling with GBNF grammars exactly as
// llama.cpp's llama_grammar (the grammar sampler of the pinned llama.cpp)
// does: the same language, the same refusals, and the same set of allowed
// tokens at every step. It is pure Go (no cgo) and holds:
//
//   - Compile: GBNF text (grammars/README.md of llama.cpp: rules,
//     alternatives, groups, * + ? {m} {m,} {m,n}, literals with \x \u \U
//     \t \n \r \\ \" \[ \] \- escapes, character classes, ranges and [^...],
//     '.', token references <[id]> and <name> and their negation !<...>,
//     comments; a newline ends a rule except inside parentheses or after
//     '|') to a *Grammar. Like llama.cpp it refuses syntax errors,
//     undefined rules, a missing root, left recursion (its test: a rule
//     reached again through leftmost references, skipping rules that have
//     an empty alternative) and repetitions beyond its threshold (2000,
//     also for the product of nested counts). Errors are *Error, with the
//     line and column where there is one.
//   - Vocab: per vocabulary, once: each token's piece (llama_token_to_piece
//     with special = true, what llama.cpp's sampler matches; VocabFromGGUF
//     derives them and the end-of-generation set from GGUF metadata as
//     llama.cpp's loader does) decoded to code points and arranged in a
//     trie.
//   - State: one per sequence: the set of pushdown stacks and the pending
//     partial UTF-8 sequence. Allowed returns the mask of allowed tokens,
//     Apply sets the other logits to -Inf, Allows checks one token, Accept
//     advances over a token (refusing one the mask would not allow),
//     AcceptBytes over text, CanEnd tells whether an end-of-generation token
//     is allowed, and Clone copies a state in O(stacks) (the stacks are
//     shared and never modified), for speculative decoding.
//
// How it matches llama.cpp. The stacks and their expansion are those of
// llama_grammar_advance_stack (element positions in one array of rules in
// place of pointers), acceptance that of llama_grammar_accept_token, and a
// token is allowed iff llama_grammar_reject_candidates would keep it: an
// EOG token iff some stack is empty; no token whose piece is empty, starts
// with a NUL byte or is not UTF-8 (llama.cpp's lenient decoder, which also
// ends a piece at a NUL byte); a token whose piece ends inside a UTF-8
// sequence iff a completion can match (llama_grammar_match_partial_char,
// whose test for [^...] classes is conservative); at a token reference, a
// token by its id, even after part of its piece matched characters, as
// there. Where llama.cpp's pieces are walked token by token, ours walk the
// vocabulary's trie once per step, carrying sets of stacks interned per
// step with their transitions, so each shared prefix is matched once; a
// state with a pending partial sequence only checks the tokens that start
// with a continuation byte, and a state with more than 64 stacks at a
// character falls back to the per-token algorithm. The golden test
// (make grammar-golden, tools/llama-ref/grammar.cpp) compares the masks
// with llama.cpp's along random walks, texts and byte-split texts over
// four vocabularies; see docs/notes/grammar.md for counts and speed.
//
// Limits (beyond them Compile returns an *Error, the matcher
// ErrTooComplex; llama.cpp has none but the repetition threshold, and
// grows or recurses without bound): MaxGrammarBytes of text (a 10^6-rule
// file is refused before parsing), MaxRules rules, MaxElements elements
// after expanding repetitions, MaxNesting nested parentheses (the parser
// recurses only there), MaxStacks stacks in a state, MaxAdvance stacks
// visited by one expansion of rule references (exponential or endless
// expansions, e.g. a rule that is not left-recursive by llama.cpp's test
// but never reaches a terminal), and MaxStackDepth.
//
// Kept differences: Accept refuses a token the mask does not allow
// (llama.cpp accepts some such tokens into a dead state or aborts); a
// repetition {m,n} with n < m is refused (llama.cpp loops on ~2^64 rule
// copies); left recursion is found by a linear search where llama.cpp's
// recursion can take exponential time; lazy grammars and trigger
// patterns (llama_sampler_init_grammar_lazy_patterns) are not here.
package grammar
