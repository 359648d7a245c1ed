#!/usr/bin/env python3
"""Decoding speed with and without a JSON-schema grammar, ggml-rs against
llama.cpp, end to end: `ggml-rs generate -temp 0 [-grammar G]` and
`llama-ref greedy [-grammar G]` (llama.cpp's grammar sampler, used as its
common sampler uses it), the same model, prompt and GBNF text (llama.cpp's
json_schema_to_grammar of SCHEMA, through `llama-ref schema`), the four runs
alternating round by round.

    python3 bench-grammar.py [-r ROUNDS] [-n TOKENS] GGML_RS LLAMA_REF MODEL.gguf...

Decode rate: tokens sampled over the time from the prompt's logits to the
last token (both programs measure it so). Prints a Markdown table of
medians: each program's rate without and with the grammar, the grammar's
cost (with/without) on each side, and ours/llama.cpp with the grammar.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

PROMPT = "Here is a JSON object describing a cat, with its name, age and colors:\n"
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "colors": {"type": "array", "items": {"type": "string"}, "minItems": 6}},
          "required": ["name", "age", "colors"]}


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"bench-grammar: {' '.join(args[:3])}...: exit {p.returncode}: {p.stderr[-500:]}")
    return p


def ours(binary, model, n, grammar):
    args = [binary, "generate", "-temp", "0", "-n", str(n), "-threads", "2", model, "-p", PROMPT]
    if grammar:
        args[2:2] = ["-grammar", grammar]
    m = re.search(r"decode:\s+(\d+) tokens in ([\d.]+) s", run(args).stderr)
    return int(m[1]) / float(m[2]), int(m[1])


def ref(binary, model, tokens, n, grammar):
    args = [binary, "greedy", "-n", str(n), "-t", "2", model, *map(str, tokens)]
    if grammar:
        args[2:2] = ["-grammar", grammar]
    d = json.loads(run(args).stdout)
    return len(d["tokens"]) / d["decode_s"], len(d["tokens"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("-n", "--tokens", type=int, default=64)
    ap.add_argument("ggml_rs")
    ap.add_argument("llama_ref")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = os.path.join(tmp, "cases.json")
        with open(cases, "w") as f:
            json.dump({"cases": [{"name": "cat", "schema": SCHEMA}]}, f)
        gbnf = json.loads(run([a.llama_ref, "schema", cases]).stdout)["results"][0]["grammar"]
        grammar = os.path.join(tmp, "cat.gbnf")
        with open(grammar, "w") as f:
            f.write(gbnf)
        print("| model | ggml-rs | ggml-rs, grammar | llama.cpp | llama.cpp, grammar | grammar's cost: ours | llama.cpp | ours/llama.cpp, grammar |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for model in a.models:
            tokens = json.loads(run([a.ggml_rs, "tokenize", "-special", model, PROMPT]).stdout)["tokens"]
            rates = {k: [] for k in ("o", "og", "r", "rg")}
            counts = {}
            for r in range(a.rounds + 1):  # round 0 warms up
                for k, f in (("o", lambda: ours(a.ggml_rs, model, a.tokens, None)),
                             ("og", lambda: ours(a.ggml_rs, model, a.tokens, grammar)),
                             ("r", lambda: ref(a.llama_ref, model, tokens, a.tokens, None)),
                             ("rg", lambda: ref(a.llama_ref, model, tokens, a.tokens, grammar))):
                    rate, count = f()
                    counts[k] = count
                    if r:
                        rates[k].append(rate)
            m = {k: statistics.median(v) for k, v in rates.items()}
            print(f"| {os.path.basename(model)} ({counts['og']}/{counts['rg']} tokens constrained) | {m['o']:.1f} | {m['og']:.1f} | "
                  f"{m['r']:.1f} | {m['rg']:.1f} | {m['og'] / m['o']:.3f} | {m['rg'] / m['r']:.3f} | {m['og'] / m['rg']:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
