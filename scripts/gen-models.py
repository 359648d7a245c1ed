#!/usr/bin/env python3
"""Deterministic random-weight GGUF models for parity tests and benchmarks.

Writes llama- and qwen3-architecture models with llama.cpp's tensor names and
metadata, in F16, Q8_0 and Q4_0 (2-D weight matrices in that type, norms in
F32), so that llama.cpp (tools/llama-ref) and our Go runner load the same
files. The weights come from numpy's PCG64 generator with a fixed seed per
model and tensor name: the same script and the same numpy/gguf versions
(scripts/gen-models-requirements.txt) give byte-identical files.

Tokenizers: llama gets a SentencePiece-style ("llama") vocabulary with the
256 byte tokens; qwen3 gets a GPT-2 byte-level BPE ("gpt2", pre "qwen2") with
merges. Parity runs feed token ids, so the vocabularies only need to be valid.

Usage: gen-models.py [-o DIR] [--size small|bench] [--arch llama,qwen3]
                     [--types f16,q8_0,q4_0]
Files: DIR/<arch>-<size>-<type>.gguf   (default DIR: .cache/models)
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT

SIZES = {
    # Small but realistically shaped: GQA 8/2 heads, SwiGLU, RMSNorm, RoPE.
    "small": dict(n_layer=4, d=256, n_head=8, n_kv=2, ffn=512, vocab=512, ctx=2048),
    # Large enough that prefill/decode time is dominated by matmuls, not
    # per-op overhead: a ~1B-class layer shape with fewer layers.
    "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=8, ffn=3072, vocab=8192, ctx=4096),
}
TYPES = {"f16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
         "q8_0": (QT.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
         "q4_0": (QT.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0)}


def rng_for(model: str, name: str) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(f"{model}/{name}".encode()).digest()[:8], "little")
    return np.random.Generator(np.random.PCG64(seed))


def spm_vocab(n: int):
    toks, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [
        gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for b in range(256):
        toks.append(f"<0x{b:02X}>"); scores.append(0.0); types.append(gguf.TokenType.BYTE)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    pieces = ["\u2581" + c for c in letters] + list(letters)
    pieces += ["\u2581" + a + b for a in letters for b in letters]
    pieces += ["\u2581" + a + b + c for a in letters for b in letters for c in letters]
    for p in pieces:
        if len(toks) >= n:
            break
        toks.append(p); scores.append(-float(len(toks))); types.append(gguf.TokenType.NORMAL)
    assert len(toks) == n, "vocabulary too large for the generated pieces"
    return toks, scores, types


def gpt2_bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    k = 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + k); k += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_vocab(n: int):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    b2u = gpt2_bytes_to_unicode()
    toks = [b2u[b] for b in range(256)]
    merges = []
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    sp = b2u[ord(" ")]
    cands = [(sp, c) for c in letters] + [(a, b) for a in letters for b in letters]
    cands += [(a + b, c) for a in letters for b in letters for c in letters]
    for a, b in cands:
        if len(toks) >= n - len(specials):
            break
        toks.append(a + b); merges.append(f"{a} {b}")
    toks += specials
    types = [gguf.TokenType.NORMAL] * (n - len(specials)) + [gguf.TokenType.CONTROL] * len(specials)
    assert len(toks) == n
    return toks, merges, types, n - 3, n - 1  # bos (<|endoftext|>), eos (<|im_end|>)


def write_model(path: str, arch: str, size: str, tname: str):
    h = SIZES[size]
    qtype, ftype = TYPES[tname]
    model = f"{arch}-{size}"
    d, nh, nkv, ffn, V, L = h["d"], h["n_head"], h["n_kv"], h["ffn"], h["vocab"], h["n_layer"]
    hd = d // nh

    w = gguf.GGUFWriter(path + ".tmp", arch)
    w.add_name(f"ggml-rs random {model} {tname}")
    w.add_file_type(int(ftype))
    w.add_context_length(h["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(L)
    w.add_feed_forward_length(ffn)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_layer_norm_rms_eps(1e-6 if arch == "qwen3" else 1e-5)
    w.add_rope_freq_base(1000000.0 if arch == "qwen3" else 10000.0)
    w.add_rope_dimension_count(hd)
    w.add_key_length(hd)
    w.add_value_length(hd)
    if arch == "llama":
        toks, scores, types = spm_vocab(V)
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(toks); w.add_token_scores(scores); w.add_token_types(types)
        w.add_bos_token_id(1); w.add_eos_token_id(2); w.add_unk_token_id(0)
        w.add_add_bos_token(True)
    else:
        toks, merges, types, bos, eos = bpe_vocab(V)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(toks); w.add_token_types(types); w.add_token_merges(merges)
        w.add_bos_token_id(bos); w.add_eos_token_id(eos)
        w.add_add_bos_token(False)

    def mat(name, rows, cols, std):
        x = rng_for(model, name).standard_normal((rows, cols), dtype=np.float32) * np.float32(std)
        if qtype == QT.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def norm(name, n):
        x = 1.0 + 0.1 * rng_for(model, name).standard_normal(n, dtype=np.float32)
        w.add_tensor(name, x.astype(np.float32))

    # Scales keep activations O(1) through the layers and give logits a spread
    # of a few units, so that the greedy choice is rarely a near-tie.
    mat("token_embd.weight", V, d, 1.0)
    for i in range(L):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", d)
        mat(p + "attn_q.weight", nh * hd, d, d ** -0.5)
        mat(p + "attn_k.weight", nkv * hd, d, d ** -0.5)
        mat(p + "attn_v.weight", nkv * hd, d, d ** -0.5)
        if arch == "qwen3":
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)
        mat(p + "attn_output.weight", d, nh * hd, (nh * hd) ** -0.5 * 0.5)
        norm(p + "ffn_norm.weight", d)
        mat(p + "ffn_gate.weight", ffn, d, d ** -0.5)
        mat(p + "ffn_up.weight", ffn, d, d ** -0.5)
        mat(p + "ffn_down.weight", d, ffn, ffn ** -0.5)
    norm("output_norm.weight", d)
    mat("output.weight", V, d, 3.0 * d ** -0.5)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".cache", "models"))
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--arch", default="llama,qwen3")
    ap.add_argument("--types", default="f16,q8_0,q4_0")
    ap.add_argument("-f", "--force", action="store_true", help="rewrite files that exist")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for arch in a.arch.split(","):
        for t in a.types.split(","):
            path = os.path.join(a.out, f"{arch}-{a.size}-{t}.gguf")
            if os.path.exists(path) and not a.force:
                print(f"gen-models: {path} exists"); continue
            write_model(path, arch, a.size, t)
            print(f"gen-models: wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
