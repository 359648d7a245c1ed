#!/usr/bin/env python3
"""Deterministic random-weight GGUF models for parity tests and benchmarks.

Writes models of these llama.cpp architectures with llama.cpp's tensor names,
shapes and metadata (as its converter writes them), in F16, Q8_0 and Q4_0, so
that llama.cpp (tools/llama-ref) and our Go runner load the same files:

  llama, qwen3   dense transformers (GQA, SwiGLU, RMSNorm, RoPE; llama with
                 Llama 3.1's rope_freqs factors, qwen3 with per-head q/k
                 norms)
  qwen3moe       qwen3 attention with a softmax-routed mixture of experts
  gpt-oss        llama.cpp's LLM_ARCH_OPENAI_MOE: q/k/v/o biases, attention
                 sinks, sliding-window layers alternating with full ones,
                 YaRN RoPE, MoE with router and expert biases (SwiGLU-OAI)
  qwen3next      hybrid: gated delta-net layers, full attention every 4th
                 layer (gated Q, q/k norms, partial RoPE), MoE plus a
                 sigmoid-gated shared expert
  qwen35         the same hybrid with interleaved multi-section RoPE, a dense
                 FFN, separate beta/alpha projections, tied embeddings and
                 one MTP (nextn) block after the main stack
  qwen35moe      qwen35 with qwen3next's MoE + shared expert, and an MTP block
  gemma3         Gemma 3's text decoder: embeddings scaled by sqrt(d), q/k
                 norms, post-attention and post-FFN norms, GeGLU, five
                 sliding-window layers in six (7 layers: both kinds, and a
                 window of 16 that the 32- and 128-token prompts cross),
                 queries wider than d, one KV head, an output head of its
                 own (as the published 270M Q4_K_M file), final logit
                 soft-capping
  gemma2         Gemma 2's text decoder: as gemma3 without q/k norms, with
                 sliding-window layers alternating with global ones (even
                 layers sliding), attention scores soft-capped
                 (attn_logit_softcapping; 10 in the small models so that
                 the cap bends their scores, 50 as the real ones in the
                 bench model), the final logits too (30), the output head
                 tied to the embeddings (as llama.cpp always reads it)
  olmo2          OLMo 2: post-norm blocks (no pre-norms; post-attention and
                 post-FFN norms), q/k RMS norms over the whole projections,
                 NeoX RoPE, SwiGLU, multi-head attention
  olmo3          OLMo 3, as llama.cpp's converter writes it (architecture
                 olmo2): olmo2 with GQA, three sliding-window layers in
                 every four (window 16) and YaRN on the global layers
  lfm2           LFM2: short-convolution layers (in_proj to b, c, x; c *
                 conv(b * x), 3 taps over the carried state; out_proj)
                 between attention layers (per-head q/k norms, NeoX RoPE),
                 which a per-layer head_count_kv of 0 marks; the output norm
                 named token_embd_norm as llama.cpp's converter writes it
  lfm2moe        LFM2-MoE (LFM2-8B-A1B-like): lfm2's mixers, the first
                 layers' feed-forwards dense, the rest experts routed by a
                 sigmoid with a selection bias (exp_probs_b), the kept
                 weights normalised
  deepseek2      DeepSeek-V2-Lite-like: multi-head latent attention as
                 llama.cpp's converter writes it (attn_kv_b split into
                 attn_k_b and attn_v_b, key_length_mla/value_length_mla,
                 one cached head of kv_lora_rank + rope values), queries by
                 attn_q (q_lora_rank 0), YaRN x4 with its log multiplier,
                 one leading dense layer, then softmax-routed experts
                 (no expert_gating_func: llama.cpp's default) beside 2
                 shared experts
  deepseek2mha   deepseek2 as llama.cpp's converter wrote it before MLA
                 caching (architecture deepseek2): attn_kv_b whole, no
                 *_mla keys, every head a KV head; llama.cpp runs it as
                 multi-head attention over decompressed keys and values
  glm4moelite    GLM-4.7-Flash-like, architecture deepseek2 for llama.cpp:
                 low-rank queries (attn_q_a, its norm, attn_q_b), values
                 wider than the keys' non-rotary part, sigmoid routing with
                 a selection bias, normalised weights scaled by 1.8, one
                 shared expert, no YaRN
  nomic-bert     nomic-embed-text-like encoder for embeddings: BERT's
                 post-norm layers with a fused QKV projection, NeoX RoPE (no
                 position embeddings), SwiGLU, no biases but the norms', mean
                 pooling; a WordPiece vocabulary
  nomic-bert-moe nomic-embed-text-v2-moe-like: nomic-bert's attention
                 (with biases), GELU feed-forwards with biases, and GELU
                 experts (8, top 2, softmax-routed) in every second layer
  mistral3       Mistral 3's text decoder (Ministral 3): llama's blocks
                 (normal RoPE) with YaRN whose magnitude has its own log
                 multiplier, and Llama 4's attention temperature by
                 position (an original context of 16 in the small models,
                 so that the prompts cross several of its steps); queries
                 wider than d
  nemotron_h     Nemotron-H (Nemotron Nano 2-like): each layer one of
                 Mamba-2 (in_proj to z, x|B|C, dt; a causal conv over
                 x|B|C; the selective scan with per-head decay and skip;
                 silu(z) gating and a grouped RMS norm), attention without
                 RoPE, or a ReLU² feed-forward without a gate, by a
                 per-layer head_count_kv and feed_forward_length
  nemotron_h_moe Nemotron 3-like: nemotron_h with mixtures of ReLU²
                 experts (sigmoid routing with a selection bias, in a
                 latent size in the small models) beside a shared expert
                 in place of the feed-forwards
  gemma3n        Gemma 3n's text decoder (E2B-like): gemma3's layers with
                 AltUp (4 hidden states per token, predicted and
                 corrected by routed coefficients), Laurel's low-rank
                 residual, per-layer inputs of 256 per layer, values
                 RMS-normed, sparse gate activations on the first 10
                 layers, and the last 2 of 22 layers sharing the cache of
                 earlier ones (llama.cpp fixes those counts; layers 4, 9,
                 14, 19 and 21 global, the others sliding, window 16);
                 feed_forward_length per layer as the converter writes it
  llama4         Llama 4's text decoder (Scout-like): chunked attention on
                 three layers in four (llama.cpp fixes the chunk at 8192),
                 there RoPE with Llama 3.1's frequency factors and
                 unweighted RMS norms of queries and keys; no RoPE and the
                 attention temperature on every fourth; dense and MoE
                 layers alternating (top-1 of 16 experts chosen by the
                 router's logits, their sigmoids scaling the expert's
                 input, beside a shared expert)

Weight matrices (2-D, and the 3-D expert stacks) are in the file's type, the
MoE routers (ffn_gate_inp) too, which llama.cpp's converter would keep in F32
(llama.cpp runs them in any type; the test then covers quantized routers);
norms, biases, 1-D vectors (the shared-expert gate), conv kernels, the
delta-net A/dt tensors and the attention sinks are F32, as the converter
writes them. The weights
come from numpy's PCG64 generator with a fixed seed per model and tensor
name: the same script and the same numpy/gguf versions
(scripts/gen-models-requirements.txt) give byte-identical files.

Tokenizers: llama gets a SentencePiece-style ("llama") vocabulary with the
256 byte tokens, gemma3 one shaped like Gemma's (no space prefix, its
control tokens, user-defined newline runs and a user-defined </s>); the others get a GPT-2 byte-level BPE ("gpt2"; pre qwen2,
qwen35 or gpt-4o) with merges. Parity runs feed token ids, so the
vocabularies only need to be valid.

Ollama's layout (--layout ollama): for gpt-oss, qwen3next, qwen35 and
qwen35moe, the file Ollama's converter writes for the same checkpoint,
from the same tensor bytes as the llama.cpp-layout file (which is written
first when missing): Ollama's architecture names (gptoss; qwen35moe for
Qwen3-Next), tensor names and keys, no MTP layers (stray mtp.* tensors
instead); write_ollama_model lists every difference. qwen3moe has one
layout only: Ollama's converter does not convert Qwen3-MoE checkpoints, and
the qwen3moe files it serves are llama.cpp's. llama.cpp's loader rejects
every Ollama-layout file: gptoss is no architecture it knows (as gpt-oss,
it lacks expert_feed_forward_length and post_attention_norm); qwen35 and
qwen35moe have 3 rope sections, not 4, then no ssm_dt.bias, then attention
tensors it sizes by layer 0's head_count_kv (0), then more tensors than it
loads (mtp.*); Qwen3-Next's qwen35moe has no rope sections, then no
ssm_dt.bias, ssm_beta or ssm_alpha.

Usage: gen-models.py [-o DIR] [--size small|bench] [--arch A,B,...]
                     [--types f16,q8_0,q4_0] [--layout llama.cpp|ollama]
Files: DIR/<arch>-<size>-<type>.gguf   (default DIR: .cache/models)
       DIR/<arch>-<size>-<type>-ollama.gguf   (--layout ollama; <arch> is
       llama.cpp's name, e.g. qwen3next-small-f16-ollama.gguf holds arch
       qwen35moe)
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
TYPES = {"f32": (QT.F32, gguf.LlamaFileType.ALL_F32),
         "f16": (QT.F16, gguf.LlamaFileType.MOSTLY_F16),
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


def gemma_vocab(n: int):
    """A SentencePiece vocabulary laid out like Gemma's: <pad> <eos> <bos>
    <unk> <mask> first, the turn markers as control tokens, newline runs and
    </s> user-defined (llama.cpp's loader makes </s> a control token), then
    the byte tokens and pieces."""
    T = gguf.TokenType
    head = [("<pad>", T.CONTROL), ("<eos>", T.CONTROL), ("<bos>", T.CONTROL), ("<unk>", T.UNKNOWN),
            ("<mask>", T.USER_DEFINED), ("<start_of_turn>", T.CONTROL), ("<end_of_turn>", T.CONTROL),
            ("</s>", T.USER_DEFINED), ("<s>", T.USER_DEFINED), ("\n", T.USER_DEFINED), ("\n\n", T.USER_DEFINED),
            ("\n\n\n", T.USER_DEFINED)]
    toks = [t for t, _ in head]
    types = [ty for _, ty in head]
    scores = [-1000.0] * len(head)
    for b in range(256):
        toks.append(f"<0x{b:02X}>"); scores.append(0.0); types.append(T.BYTE)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    pieces = ["\u2581" + c for c in letters] + list(letters) + ["\u2581"]
    pieces += ["\u2581" + a + b for a in letters for b in letters]
    # (three-letter pieces only reach the bench models' 8192 tokens)
    pieces += ["\u2581" + a + b + c for a in letters for b in letters for c in letters]
    for p in pieces:
        if len(toks) >= n:
            break
        toks.append(p); scores.append(-float(len(toks))); types.append(T.NORMAL)
    assert len(toks) == n, "vocabulary too large for the generated pieces"
    return toks, scores, types


def add_gemma_tokenizer(w, n: int):
    """Writes gemma_vocab(n) as Gemma's SentencePiece tokenizer: <bos> 2,
    <eos> 1, <unk> 3, <pad> 0, BOS added, no space prefix."""
    toks, scores, types = gemma_vocab(n)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks); w.add_token_scores(scores); w.add_token_types(types)
    w.add_bos_token_id(2); w.add_eos_token_id(1); w.add_unk_token_id(3); w.add_pad_token_id(0)
    w.add_add_bos_token(True); w.add_add_eos_token(False)
    w.add_add_space_prefix(False)


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
    qwen = arch in ("qwen2", "qwen3")
    w.add_layer_norm_rms_eps(1e-6 if qwen else 1e-5)
    w.add_rope_freq_base(1000000.0 if qwen else 10000.0)
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

    def bias(name, n, std):
        w.add_tensor(name, (rng_for(model, name).standard_normal(n, dtype=np.float32) * np.float32(std)).astype(np.float32))

    # Scales keep activations O(1) through the layers and give logits a spread
    # of a few units, so that the greedy choice is rarely a near-tie.
    mat("token_embd.weight", V, d, 1.0)
    for i in range(L):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", d)
        mat(p + "attn_q.weight", nh * hd, d, d ** -0.5)
        mat(p + "attn_k.weight", nkv * hd, d, d ** -0.5)
        mat(p + "attn_v.weight", nkv * hd, d, d ** -0.5)
        if arch == "qwen2":  # Qwen2's biases, large as real ones are (keys' most)
            bias(p + "attn_q.bias", nh * hd, 0.5)
            bias(p + "attn_k.bias", nkv * hd, 2.0)
            bias(p + "attn_v.bias", nkv * hd, 0.2)
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
    if arch == "llama":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(hd, 10000.0, h["ctx"] // 32))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def llama3_rope_factors(dim, base, orig_ctx, factor=8.0, low=1.0, high=4.0):
    """Llama 3.1's RoPE frequency factors (rope_freqs.weight, one per rotated
    pair; the pair's frequency is divided by it): 1 for wavelengths below
    orig_ctx/high, factor above orig_ctx/low, a smooth blend between. The
    models take an original context of ctx/32 (64 for small) so that the
    factors reach dimensions that positions below 128 turn by a radian or
    more, where ignoring them changes the logits."""
    out = []
    for i in range(dim // 2):
        wavelen = 2 * np.pi * base ** (2 * i / dim)
        if wavelen < orig_ctx / high:
            out.append(1.0)
        elif wavelen > orig_ctx / low:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


# --- the MoE and hybrid architectures ------------------------------------------

# Shapes per architecture and size. Small: a few MB, d 128-192, so that the Go
# tests generate and run them quickly, yet shaped like the real models: the
# attention is wider than d (q dimension up to 4 d), GQA, the expert FFN
# narrower than d. Bench: d 1024 and 8 main layers, so that prefill and decode
# time go to matmuls. Keys:
#   n_layer main blocks (+ nextn MTP blocks after them), d, n_head/n_kv/hd
#   (attention head dimension), n_rot (rotary dims), sections (rope
#   dimension_sections, in rotary pairs, summing to n_rot/2), n_expert/n_used/
#   ffe (expert FFN length), shexp (shared-expert FFN length), ffn (dense FFN
#   length), ssm_state (delta-net head dimension, keys and values), nk/nv
#   (delta-net key/value heads), swa (sliding window), tied (no output.weight).
COMMON = {"small": dict(vocab=512, ctx=2048), "bench": dict(vocab=8192, ctx=4096)}
NEW_ARCHS = {
    # Qwen3-30B-A3B-like: q dimension 2 d, full rotary, 64 experts top-8.
    "qwen3moe": {
        "small": dict(n_layer=4, d=128, n_head=8, n_kv=2, hd=32, n_expert=64, n_used=8, ffe=32),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=4, hd=128, n_expert=64, n_used=8, ffe=128),
    },
    # gpt-oss-20b-like: d not a power of two, head_dim 64, 32 experts top-4,
    # sliding window small enough that 32- and 128-token prompts cross it.
    "gpt-oss": {
        "small": dict(n_layer=4, d=192, n_head=6, n_kv=2, hd=64, n_expert=32, n_used=4, ffe=32, swa=16),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=2, hd=64, n_expert=32, n_used=4, ffe=256, swa=128),
    },
    # Qwen3-Next-like: 2 value heads per key head, partial rotary (16 of 64).
    "qwen3next": {
        "small": dict(n_layer=8, d=128, n_head=4, n_kv=2, hd=64, n_rot=16, ssm_state=32, nk=2, nv=4,
                      n_expert=48, n_used=6, ffe=32, shexp=64),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=2, hd=64, n_rot=16, ssm_state=64, nk=8, nv=16,
                      n_expert=48, n_used=6, ffe=128, shexp=512),
    },
    # Qwen3.5 dense (27B-like head ratio: 3 value heads per key head), tied
    # embeddings as the small Qwen3.5 models, one MTP block.
    "qwen35": {
        "small": dict(n_layer=8, nextn=1, d=128, n_head=8, n_kv=2, hd=64, n_rot=16, sections=[3, 3, 2, 0],
                      ssm_state=32, nk=2, nv=6, ffn=384, tied=True),
        "bench": dict(n_layer=8, nextn=1, d=1024, n_head=16, n_kv=4, hd=64, n_rot=16, sections=[3, 3, 2, 0],
                      ssm_state=128, nk=4, nv=12, ffn=3072, tied=True),
    },
    # Qwen3.5-35B-A3B-like: GQA 8 (16/2 there), 2 value heads per key head.
    "qwen35moe": {
        "small": dict(n_layer=8, nextn=1, d=128, n_head=8, n_kv=1, hd=64, n_rot=16, sections=[3, 3, 2, 0],
                      ssm_state=64, nk=2, nv=4, n_expert=32, n_used=4, ffe=32, shexp=64),
        "bench": dict(n_layer=8, nextn=1, d=1024, n_head=16, n_kv=2, hd=64, n_rot=16, sections=[3, 3, 2, 0],
                      ssm_state=128, nk=4, nv=8, n_expert=32, n_used=4, ffe=192, shexp=512),
    },
    # Gemma 3 270M-like (d 640, 4 heads of 256, one KV head: queries wider
    # than d): 7 layers so that the default pattern of 6 gives sliding
    # layers on both sides of a global one (5), a window of 16 that the
    # 32- and 128-token sequences cross; output.weight as the published
    # 270M Q4_K_M file (tied heads: qwen35's models); a final logit
    # soft-cap (Gemma 2's, and the key llama.cpp reads for Gemma 3 too).
    "gemma3": {
        "small": dict(n_layer=7, d=128, n_head=4, n_kv=1, hd=64, ffn=384, swa=16, softcap=30.0),
        "bench": dict(n_layer=8, d=1152, n_head=4, n_kv=1, hd=256, ffn=6912, swa=512),
    },
    # Gemma 2 2B-like head ratios (8 heads of 256 over 4 KV heads in d
    # 2304: queries wider than d); 6 layers, alternating sliding (window
    # 16) and global. The small model's attention cap (10) is below the
    # real 50 so that its scores, a few units wide, are bent by it; the
    # bench model keeps 50 and leaves final_logit_softcapping to its
    # default (30).
    # OLMo 2 7B-like (multi-head attention, head = d/heads) and OLMo 3
    # (GQA, sliding window 3 layers in 4, YaRN x8 with an attention factor
    # on the global layers): 8 layers so that layers 3 and 7 are global.
    "olmo2": {
        "small": dict(n_layer=4, d=128, n_head=4, n_kv=4, hd=32, ffn=384),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=16, hd=64, ffn=2816),
    },
    "olmo3": {
        "small": dict(n_layer=8, d=128, n_head=4, n_kv=2, hd=32, ffn=384, swa=16,
                      yarn=dict(factor=8.0, orig_ctx=256, attn_factor=1.2)),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=4, hd=64, ffn=2816, swa=512,
                      yarn=dict(factor=8.0, orig_ctx=512, attn_factor=1.2)),
    },
    # Ministral 3 3B-like: head 128 over d 3072 (here 4 heads of 64 over
    # d 128), GQA, YaRN x16 with yarn_log_multiplier 1 and the attention
    # temperature 0.1 (llama_4_scaling_beta); the bench model's head tied
    # to the embeddings as the 3B's, the small one's its own as the 8B's
    # and 14B's (tied, its greedy continuation repeats one token).
    "mistral3": {
        "small": dict(n_layer=4, d=128, n_head=4, n_kv=2, hd=64, ffn=384,
                      yarn=dict(factor=16.0, orig_ctx=16, log_mul=1.0, temp=0.1)),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=4, hd=128, ffn=3072, tied=True,
                      yarn=dict(factor=16.0, orig_ctx=512, log_mul=1.0, temp=0.1)),
    },
    # LFM2-350M-like: attention on layers 2 and 5 of 6 (there 6 of 16),
    # the others short convolutions of 3 taps; GQA. The bench model's head
    # tied as the real ones; the small one's its own (tied, its greedy
    # continuation repeats one token).
    "lfm2": {
        "small": dict(n_layer=6, d=128, n_head=4, n_kv=2, hd=32, ffn=384, attn_layers=(2, 5), l_cache=3),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=8, hd=64, ffn=4608, attn_layers=(2, 5, 7), l_cache=3,
                      tied=True),
    },
    # LFM2-8B-A1B-like: lfm2's layer pattern, 2 leading dense layers, then
    # 32 experts top-4 (small: 16 top-4), each narrower than d.
    "lfm2moe": {
        "small": dict(n_layer=6, d=128, n_head=4, n_kv=2, hd=32, ffn=384, attn_layers=(2, 5), l_cache=3,
                      n_expert=16, n_used=4, ffe=64, dense_lead=2),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=8, hd=64, ffn=4608, attn_layers=(2, 5, 7), l_cache=3,
                      n_expert=32, n_used=4, ffe=512, dense_lead=2, tied=True),
    },
    # DeepSeek-V2-Lite-like (27 layers, d 2048, 16 heads of 128+64, kv_lora
    # 512, 64 experts top-6 + 2 shared there): queries by attn_q; YaRN x4
    # over an original context of 32 (x40 over 4096 there) with
    # mscale_all_dim 0.707 (written as 0.1 times it).
    "deepseek2": {
        "small": dict(n_layer=4, d=128, n_head=4, n_kv=1, hd=64, n_rot=32, q_lora=0, kv_lora=64, vd=32, ffn=384,
                      dense_lead=1, n_expert=16, n_used=4, ffe=64, n_shared=2,
                      yarn=dict(factor=4.0, orig_ctx=32, log_mul=0.0707)),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=1, hd=192, n_rot=64, q_lora=0, kv_lora=512, vd=128, ffn=4096,
                      dense_lead=1, n_expert=64, n_used=6, ffe=256, n_shared=2,
                      yarn=dict(factor=4.0, orig_ctx=4096, log_mul=0.0707)),
    },
    # The same shapes in the older layout (attn_kv_b whole).
    "deepseek2mha": {
        "small": dict(n_layer=4, d=128, n_head=4, n_kv=4, hd=64, n_rot=32, q_lora=0, kv_lora=64, vd=32, ffn=384,
                      dense_lead=1, n_expert=16, n_used=4, ffe=64, n_shared=2,
                      yarn=dict(factor=4.0, orig_ctx=32, log_mul=0.0707)),
    },
    # GLM-4.7-Flash-like (47 layers, d 2048, 20 heads of 192+64 with values
    # of 256, q_lora 768, kv_lora 512, 64 experts top-4 + 1 shared there).
    "glm4moelite": {
        "small": dict(n_layer=4, d=128, n_head=4, n_kv=1, hd=64, n_rot=32, q_lora=96, kv_lora=64, vd=64, ffn=384,
                      dense_lead=1, n_expert=16, n_used=4, ffe=64, n_shared=1, scale=1.8),
        "bench": dict(n_layer=8, d=1024, n_head=16, n_kv=1, hd=192, n_rot=64, q_lora=768, kv_lora=512, vd=256,
                      ffn=4096, dense_lead=1, n_expert=64, n_used=4, ffe=256, n_shared=1, scale=1.8),
    },
    # Llama 4 Scout-like (48 layers, d 5120, 40 heads of 128 over 8 KV
    # heads, 16 experts top-1 beside a shared one there): chunked attention
    # (llama.cpp's fixed 8192) on three layers in four, RoPE with Llama
    # 3.1's frequency factors (x16) and L2-normed queries and keys on
    # those, the attention temperature on the fourth; the small model's
    # MoE on every second layer (Maverick's interleave), the bench model's
    # on all (Scout's).
    "llama4": {
        "small": dict(n_layer=8, d=128, n_head=8, n_kv=2, hd=32, ffn=384, n_expert=16, n_used=1, ffe=64,
                      moe_step=2),
        "bench": dict(n_layer=8, d=1024, n_head=8, n_kv=2, hd=128, ffn=4096, n_expert=16, n_used=1, ffe=1024,
                      moe_step=1),
    },
    "gemma2": {
        "small": dict(n_layer=6, d=128, n_head=4, n_kv=2, hd=64, ffn=384, swa=16, softcap=30.0, attn_softcap=10.0, tied=True),
        "bench": dict(n_layer=8, d=1152, n_head=8, n_kv=4, hd=128, ffn=6912, swa=512, attn_softcap=50.0, tied=True),
    },
}
DELTA_NET = ("qwen3next", "qwen35", "qwen35moe")
FULL_ATTN_INTERVAL = 4  # layers 3, 7, ... are full attention, the others delta-net


def write_new_model(path: str, arch: str, size: str, tname: str):
    h = dict(COMMON[size], **NEW_ARCHS[arch][size])
    qtype, ftype = TYPES[tname]
    model = f"{arch}-{size}"
    d, nh, nkv, hd, V, L = h["d"], h["n_head"], h["n_kv"], h["hd"], h["vocab"], h["n_layer"]
    n_next = h.get("nextn", 0)
    n_rot = h.get("n_rot", hd)
    E, ffe, shexp = h.get("n_expert", 0), h.get("ffe", 0), h.get("shexp", 0)
    qwen = arch not in ("gpt-oss", "llama4")  # eps 1e-6 (gemma too)
    olmo = arch in ("olmo2", "olmo3")
    qk_norm = arch not in ("gpt-oss", "gemma2", "mistral3", "llama4") and not olmo  # lfm2: its attention layers'
    gemma = arch in ("gemma2", "gemma3")
    lfm = arch in ("lfm2", "lfm2moe")
    mla = arch in ("deepseek2", "deepseek2mha", "glm4moelite")
    absorbed = arch != "deepseek2mha"  # attn_k_b and attn_v_b, not attn_kv_b

    # OLMo 3's checkpoints are olmo2 files for llama.cpp, GLM-4.7-Flash's deepseek2.
    w = gguf.GGUFWriter(path + ".tmp", "olmo2" if olmo else "deepseek2" if mla else arch)
    w.add_name(f"ggml-rs random {model} {tname}")
    w.add_file_type(int(ftype))
    w.add_context_length(h["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(L + n_next)
    # The dense-equivalent length (what the converters write from the HF
    # intermediate_size); the experts' own length is expert_feed_forward_length.
    w.add_feed_forward_length(h["ffn"] if "ffn" in h else (ffe if arch == "gpt-oss" else ffe * h["n_used"]))
    w.add_head_count(nh)
    if "attn_layers" in h:
        # Per layer; 0 marks a short-convolution layer (LFM2).
        w.add_head_count_kv([nkv if i in h["attn_layers"] else 0 for i in range(L)])
        w.add_shortconv_l_cache(h["l_cache"])
    else:
        w.add_head_count_kv(nkv)
    if mla:
        if absorbed:
            # The cached latent head, then each head's sizes.
            w.add_key_length(h["kv_lora"] + n_rot)
            w.add_value_length(h["kv_lora"])
            w.add_key_length_mla(hd)
            w.add_value_length_mla(h["vd"])
        else:
            w.add_key_length(hd)
            w.add_value_length(h["vd"])
        w.add_q_lora_rank(h["q_lora"])
        w.add_kv_lora_rank(h["kv_lora"])
        w.add_leading_dense_block_count(h["dense_lead"])
        w.add_expert_shared_count(h["n_shared"])
        w.add_expert_weights_scale(h.get("scale", 1.0))
        if arch == "glm4moelite":
            w.add_expert_weights_norm(True)
            w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    else:
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_rope_dimension_count(n_rot)
    w.add_layer_norm_rms_eps(1e-6 if qwen else 1e-5)
    w.add_rope_freq_base({"qwen3moe": 1e6, "gpt-oss": 150000.0, "gemma3": 1e6, "gemma2": 10000.0, "olmo2": 500000.0, "mistral3": 1e6, "lfm2": 1e6, "lfm2moe": 1e6,
                        "olmo3": 500000.0, "deepseek2": 10000.0, "deepseek2mha": 10000.0, "glm4moelite": 1e6,
                        "llama4": 500000.0}.get(arch, 1e7))
    if E:
        w.add_expert_count(E)
        w.add_expert_used_count(h["n_used"])
        w.add_expert_feed_forward_length(ffe)
    if shexp:
        w.add_expert_shared_feed_forward_length(shexp)
    if arch == "lfm2moe":
        w.add_leading_dense_block_count(h["dense_lead"])
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    if arch == "llama4":
        # The checkpoint's attention_chunk_size, as the converter writes it.
        w.add_sliding_window(8192)
        w.add_interleave_moe_layer_step(h["moe_step"])
    if arch == "gpt-oss":
        w.add_sliding_window(h["swa"])
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(32.0)
        w.add_rope_scaling_orig_ctx_len(4096)
    if olmo and "swa" in h:
        # The pattern (every 4th layer global) is llama.cpp's default.
        w.add_sliding_window(h["swa"])
    if "yarn" in h:
        y = h["yarn"]
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(y["factor"])
        w.add_rope_scaling_orig_ctx_len(y["orig_ctx"])
        if "attn_factor" in y:
            w.add_rope_scaling_attn_factors(y["attn_factor"])
        if "log_mul" in y:
            w.add_rope_scaling_yarn_log_mul(y["log_mul"])
            w.add_rope_scaling_yarn_beta_fast(32.0)
            w.add_rope_scaling_yarn_beta_slow(1.0)
        if "temp" in y:
            w.add_attn_temperature_scale(y["temp"])
    if gemma:
        # The pattern (every 6th layer global) and the local RoPE base
        # (10000) are llama.cpp's defaults, as in the real files.
        w.add_sliding_window(h["swa"])
        if "softcap" in h:
            w.add_final_logit_softcapping(h["softcap"])
        if "attn_softcap" in h:
            w.add_attn_logit_softcapping(h["attn_softcap"])
    if arch in DELTA_NET:
        w.add_ssm_conv_kernel(4)
        w.add_ssm_state_size(h["ssm_state"])
        w.add_ssm_group_count(h["nk"])
        w.add_ssm_time_step_rank(h["nv"])
        w.add_ssm_inner_size(h["ssm_state"] * h["nv"])
        w.add_full_attention_interval(FULL_ATTN_INTERVAL)
    if "sections" in h:
        w.add_rope_dimension_sections(h["sections"])
    if n_next:
        w.add_nextn_predict_layers(n_next)
    if gemma:
        add_gemma_tokenizer(w, V)
    else:
        toks, merges, types, bos, eos = bpe_vocab(V)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre({"gpt-oss": "gpt-4o", "qwen35": "qwen35", "qwen35moe": "qwen35"}.get(arch, "qwen2"))
        w.add_token_list(toks); w.add_token_types(types); w.add_token_merges(merges)
        w.add_bos_token_id(bos); w.add_eos_token_id(eos)
        w.add_add_bos_token(False)

    def mat(name, shape, std):
        """A weight matrix (numpy shape: ggml's ne reversed; 3-D: experts
        first) in the file's type."""
        x = rng_for(model, name).standard_normal(shape, dtype=np.float32) * np.float32(std)
        if qtype == QT.F32:
            w.add_tensor(name, x)
        elif qtype == QT.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def f32(name, shape, std, mean=0.0):
        x = np.float32(mean) + np.float32(std) * rng_for(model, name).standard_normal(shape, dtype=np.float32)
        w.add_tensor(name, x.astype(np.float32))

    def norm(name, n):
        f32(name, n, 0.1, 1.0)

    def attention(p, gated):
        """Attention projections; gated: Qwen3-Next's joint query+gate
        projection (2 x head_dim per head, query first) and q/k norms."""
        mat(p + "attn_q.weight", ((2 if gated else 1) * nh * hd, d), d ** -0.5)
        mat(p + "attn_k.weight", (nkv * hd, d), d ** -0.5)
        mat(p + "attn_v.weight", (nkv * hd, d), d ** -0.5)
        mat(p + "attn_output.weight", (d, nh * hd), (nh * hd) ** -0.5 * 0.5)
        if olmo:
            norm(p + "attn_q_norm.weight", nh * hd)
            norm(p + "attn_k_norm.weight", nkv * hd)
        if qk_norm:
            norm(p + "attn_q_norm.weight", hd)
            norm(p + "attn_k_norm.weight", hd)

    def latent_attention(p):
        """DeepSeek 2's attention as llama.cpp's converter writes it: queries
        of n_head x (nope + rope) by attn_q or low rank (q_a, its norm,
        q_b); the compressed KV and the shared rotary key (kv_a_mqa), its
        norm; kv_b_proj split per head into attn_k_b {nope, kv_lora} and
        attn_v_b {kv_lora, v}."""
        qr, kvr, vd, nope = h["q_lora"], h["kv_lora"], h["vd"], hd - n_rot
        if qr:
            mat(p + "attn_q_a.weight", (qr, d), d ** -0.5)
            norm(p + "attn_q_a_norm.weight", qr)
            mat(p + "attn_q_b.weight", (nh * hd, qr), qr ** -0.5)
        else:
            mat(p + "attn_q.weight", (nh * hd, d), d ** -0.5)
        mat(p + "attn_kv_a_mqa.weight", (kvr + n_rot, d), d ** -0.5)
        norm(p + "attn_kv_a_norm.weight", kvr)
        if absorbed:
            mat(p + "attn_k_b.weight", (nh, kvr, nope), nope ** -0.5)
            mat(p + "attn_v_b.weight", (nh, vd, kvr), kvr ** -0.5)
        else:
            # Per head, its nope key rows then its value rows (of the
            # same spread as the split tensors' above).
            mat(p + "attn_kv_b.weight", (nh * (nope + vd), kvr), kvr ** -0.5)
        mat(p + "attn_output.weight", (d, nh * vd), (nh * vd) ** -0.5 * 0.5)

    def moe(p):
        # The router's spread (logits with sd 2) keeps the k-th and (k+1)-th
        # experts apart, so that rounding rarely swaps them.
        mat(p + "ffn_gate_inp.weight", (E, d), 2.0 * d ** -0.5)
        mat(p + "ffn_gate_exps.weight", (E, ffe, d), d ** -0.5)
        mat(p + "ffn_up_exps.weight", (E, ffe, d), d ** -0.5)
        mat(p + "ffn_down_exps.weight", (E, d, ffe), ffe ** -0.5)
        if shexp:
            f32(p + "ffn_gate_inp_shexp.weight", d, d ** -0.5)
            mat(p + "ffn_gate_shexp.weight", (shexp, d), d ** -0.5)
            mat(p + "ffn_up_shexp.weight", (shexp, d), d ** -0.5)
            mat(p + "ffn_down_shexp.weight", (d, shexp), shexp ** -0.5)

    def dense_ffn(p):
        ffn = h["ffn"]
        mat(p + "ffn_gate.weight", (ffn, d), d ** -0.5)
        mat(p + "ffn_up.weight", (ffn, d), d ** -0.5)
        mat(p + "ffn_down.weight", (d, ffn), ffn ** -0.5)

    def delta_net(p):
        """A gated delta-net layer as llama.cpp loads it: fused q|k|v and z
        projections, a depthwise conv (kernel 4) over q|k|v, per value head a
        decay gate g = softplus(alpha + dt_bias) * ssm_a and beta =
        sigmoid(b), a gated RMSNorm (ssm_norm, head_dim) and ssm_out."""
        S, nk, nv = h["ssm_state"], h["nk"], h["nv"]
        key_dim, value_dim = S * nk, S * nv
        mat(p + "attn_qkv.weight", (2 * key_dim + value_dim, d), d ** -0.5)
        mat(p + "attn_gate.weight", (value_dim, d), d ** -0.5)
        # Depthwise kernel: 4 taps with sd 0.5 keep the variance.
        f32(p + "ssm_conv1d.weight", (2 * key_dim + value_dim, 4), 0.5)
        # As the real initialisation: A in [1, 16] and dt = softplus(dt_bias)
        # log-uniform in [1e-3, 1e-1]. The converter writes A_log as
        # ssm_a = -exp(A_log), which llama.cpp multiplies by softplus(alpha +
        # dt_bias): a decay exp(g) in (0, 1) per token and head, so the
        # recurrent state stays bounded.
        r = rng_for(model, p + "ssm_a")
        w.add_tensor(p + "ssm_a", (-np.exp(r.uniform(0.0, np.log(16.0), nv))).astype(np.float32))
        r = rng_for(model, p + "ssm_dt.bias")
        dt = np.exp(r.uniform(np.log(1e-3), np.log(1e-1), nv))
        w.add_tensor(p + "ssm_dt.bias", (dt + np.log(-np.expm1(-dt))).astype(np.float32))
        if arch == "qwen3next":
            # Per key head: beta for its nv/nk value heads, then alpha.
            mat(p + "ssm_ba.weight", (2 * nv, d), 0.5 * d ** -0.5)
        else:
            mat(p + "ssm_beta.weight", (nv, d), d ** -0.5)
            mat(p + "ssm_alpha.weight", (nv, d), 0.5 * d ** -0.5)
        norm(p + "ssm_norm.weight", S)
        mat(p + "ssm_out.weight", (d, value_dim), value_dim ** -0.5 * 0.5)

    # Scales keep activations O(1) through the layers and give logits a spread
    # of a few units (sd about 3), so that the greedy choice is rarely a
    # near-tie. With tied embeddings the table is also the output head, so it
    # takes the output's scale (the first layer's norm rescales its input).
    tied = h.get("tied", False)
    # Gemma multiplies the embeddings by sqrt(d): a table of sd d^-0.5
    # gives its layers inputs of sd 1. Tied (Gemma 2), a table of 0.3·d^-0.5
    # and the output norm (mean 10, below) give the logits their spread: a
    # table as large as the layers' outputs would keep the input embedding
    # in the last hidden state, and each token would predict itself.
    emb_sd = (0.3 if tied else 1.0) * d ** -0.5 if gemma else 3.0 * d ** -0.5 if tied else 1.0
    mat("token_embd.weight", (V, d), emb_sd)
    for i in range(L + n_next):
        p = f"blk.{i}."
        if olmo:
            # Post-norm blocks: no attn_norm or ffn_norm.
            attention(p, False)
            norm(p + "post_attention_norm.weight", d)
            dense_ffn(p)
            norm(p + "post_ffw_norm.weight", d)
            continue
        norm(p + "attn_norm.weight", d)
        if mla:
            latent_attention(p)
            norm(p + "ffn_norm.weight", d)
            if i < h["dense_lead"]:
                dense_ffn(p)
            else:
                moe(p)
                sh = ffe * h["n_shared"]
                mat(p + "ffn_gate_shexp.weight", (sh, d), d ** -0.5)
                mat(p + "ffn_up_shexp.weight", (sh, d), d ** -0.5)
                mat(p + "ffn_down_shexp.weight", (d, sh), sh ** -0.5)
                if arch == "glm4moelite":
                    # The selection bias, comparable to the sigmoid's spread.
                    f32(p + "exp_probs_b.bias", E, 0.1)
        elif arch == "mistral3":
            attention(p, False)
            norm(p + "ffn_norm.weight", d)
            dense_ffn(p)
        elif arch == "llama4":
            attention(p, False)
            norm(p + "ffn_norm.weight", d)
            if (i + 1) % h["moe_step"] == 0:
                moe(p)
                mat(p + "ffn_gate_shexp.weight", (ffe, d), d ** -0.5)
                mat(p + "ffn_up_shexp.weight", (ffe, d), d ** -0.5)
                mat(p + "ffn_down_shexp.weight", (d, ffe), ffe ** -0.5)
            else:
                dense_ffn(p)
        elif lfm:
            if i in h["attn_layers"]:
                attention(p, False)
            else:
                # The kernel's 3 taps with sd 0.5 keep the variance; b*x
                # (two projections of sd 1) too.
                mat(p + "shortconv.in_proj.weight", (3 * d, d), d ** -0.5)
                f32(p + "shortconv.conv.weight", (d, h["l_cache"]), 0.5)
                mat(p + "shortconv.out_proj.weight", (d, d), d ** -0.5)
            norm(p + "ffn_norm.weight", d)
            if arch == "lfm2moe" and i >= h["dense_lead"]:
                moe(p)
                # The selection bias: comparable to the sigmoid's spread,
                # so that it changes some choices.
                f32(p + "exp_probs_b.bias", E, 0.1)
            else:
                dense_ffn(p)
        elif arch == "qwen3moe":
            attention(p, False)
            norm(p + "ffn_norm.weight", d)
            moe(p)
        elif gemma:
            # The norms as the converters store them: Gemma's (1 + w).
            attention(p, False)
            norm(p + "post_attention_norm.weight", d)
            norm(p + "ffn_norm.weight", d)
            dense_ffn(p)
            norm(p + "post_ffw_norm.weight", d)
        elif arch == "gpt-oss":
            attention(p, False)
            f32(p + "attn_q.bias", nh * hd, 0.1)
            f32(p + "attn_k.bias", nkv * hd, 0.1)
            f32(p + "attn_v.bias", nkv * hd, 0.1)
            f32(p + "attn_output.bias", d, 0.02)
            f32(p + "attn_sinks.weight", nh, 1.0)
            norm(p + "post_attention_norm.weight", d)
            moe(p)
            f32(p + "ffn_gate_inp.bias", E, 0.5)
            f32(p + "ffn_gate_exps.bias", (E, ffe), 0.1)
            f32(p + "ffn_up_exps.bias", (E, ffe), 0.1)
            f32(p + "ffn_down_exps.bias", (E, d), 0.02)
        else:
            norm(p + "post_attention_norm.weight", d)
            if i >= L or (i + 1) % FULL_ATTN_INTERVAL == 0:
                attention(p, True)
            else:
                delta_net(p)
            if E:
                moe(p)
            else:
                dense_ffn(p)
            if i >= L:
                # The MTP block: eh_proj maps [enorm(embedding); hnorm(hidden)]
                # (2 d) to d; shared_head_norm before the shared output head.
                mat(p + "nextn.eh_proj.weight", (d, 2 * d), (2 * d) ** -0.5)
                norm(p + "nextn.enorm.weight", d)
                norm(p + "nextn.hnorm.weight", d)
                norm(p + "nextn.shared_head_norm.weight", d)
    if arch == "llama4":
        # Llama 3.1's frequency factors (x16 as Scout's, over an original
        # context of ctx/32), one tensor for every layer.
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(n_rot, 500000.0, h["ctx"] // 32, factor=16.0))
    if gemma and tied:
        f32("output_norm.weight", d, 1.0, 10.0)
    elif lfm:
        norm("token_embd_norm.weight", d)  # llama.cpp's name for LFM2's output norm
    else:
        norm("output_norm.weight", d)
    if not tied:
        mat("output.weight", (V, d), 3.0 * d ** -0.5)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


# nomic-embed-text-v1.5-like (12 layers, d 768, 12 heads, ff 3072, RoPE
# base 1000 there).
NOMIC = {"small": dict(n_layer=4, d=128, n_head=4, ffn=384, vocab=512, ctx=2048)}
# nomic-embed-text-v2-moe-like (12 layers, d 768, experts of 3072 in every
# second layer from layer 1, 8 of them top-2, with biased QKV there).
NOMIC_MOE = {"small": dict(NOMIC["small"], n_expert=8, n_used=2, moe_every=2)}


def wordpiece_vocab(n: int):
    """A WordPiece vocabulary laid out as BERT's: [PAD] [UNK] [CLS] [SEP]
    [MASK] (control), then letters, their ## continuations and pairs."""
    T = gguf.TokenType
    toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    types = [T.CONTROL] * len(toks)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    pieces = list(letters) + ["##" + c for c in letters] + list(".,!?'-") + [a + b for a in letters for b in letters]
    pieces += ["##" + a + b for a in letters for b in letters]
    for p in pieces[:n - len(toks)]:
        toks.append(p); types.append(T.NORMAL)
    assert len(toks) == n
    return toks, types


def write_nomic_bert(path: str, arch: str, size: str, tname: str):
    moe = arch == "nomic-bert-moe"
    h = (NOMIC_MOE if moe else NOMIC)[size]
    qtype, ftype = TYPES[tname]
    model = f"{arch}-{size}"
    d, nh, L, ff, V = h["d"], h["n_head"], h["n_layer"], h["ffn"], h["vocab"]
    w = gguf.GGUFWriter(path + ".tmp", arch)
    w.add_name(f"ggml-rs random {model} {tname}")
    w.add_file_type(int(ftype))
    w.add_context_length(h["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(L)
    w.add_feed_forward_length(ff)
    w.add_head_count(nh)
    w.add_layer_norm_eps(1e-12)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_rope_freq_base(1000.0)
    if moe:
        w.add_expert_count(h["n_expert"])
        w.add_expert_used_count(h["n_used"])
        w.add_moe_every_n_layers(h["moe_every"])
    toks, types = wordpiece_vocab(V)
    w.add_tokenizer_model("bert")
    w.add_token_list(toks); w.add_token_types(types)
    w.add_token_type_count(2)
    # [CLS] and [SEP] as BOS and EOS, as llama.cpp's converter writes them.
    w.add_bos_token_id(2); w.add_eos_token_id(3); w.add_unk_token_id(1); w.add_pad_token_id(0); w.add_mask_token_id(4)
    w.add_add_bos_token(True); w.add_add_eos_token(True)

    def mat(name, shape, std):
        x = rng_for(model, name).standard_normal(shape, dtype=np.float32) * np.float32(std)
        if qtype == QT.F16:
            w.add_tensor(name, x.astype(np.float16))
        elif qtype == QT.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def f32(name, shape, std, mean=0.0):
        x = np.float32(mean) + np.float32(std) * rng_for(model, name).standard_normal(shape, dtype=np.float32)
        w.add_tensor(name, x.astype(np.float32))

    # Embeddings in the file's type (the converter keeps token_types F32).
    mat("token_embd.weight", (V, d), 1.0)
    f32("token_types.weight", (2, d), 0.1)
    f32("token_embd_norm.weight", d, 0.1, 1.0)
    f32("token_embd_norm.bias", d, 0.1)
    for i in range(L):
        p = f"blk.{i}."
        mat(p + "attn_qkv.weight", (3 * d, d), d ** -0.5)
        if moe:
            f32(p + "attn_qkv.bias", 3 * d, 0.1)
        mat(p + "attn_output.weight", (d, d), d ** -0.5)
        f32(p + "attn_output_norm.weight", d, 0.1, 1.0)
        f32(p + "attn_output_norm.bias", d, 0.1)
        if moe and i % h["moe_every"] == 1:
            # GELU experts (no gate) and their softmax router, whose
            # spread keeps the kept experts apart from the others.
            E = h["n_expert"]
            mat(p + "ffn_gate_inp.weight", (E, d), 2.0 * d ** -0.5)
            mat(p + "ffn_up_exps.weight", (E, ff, d), d ** -0.5)
            mat(p + "ffn_down_exps.weight", (E, d, ff), ff ** -0.5)
        elif moe:
            mat(p + "ffn_up.weight", (ff, d), d ** -0.5)
            f32(p + "ffn_up.bias", ff, 0.1)
            mat(p + "ffn_down.weight", (d, ff), ff ** -0.5)
            f32(p + "ffn_down.bias", d, 0.02)
        else:
            mat(p + "ffn_up.weight", (ff, d), d ** -0.5)
            mat(p + "ffn_gate.weight", (ff, d), d ** -0.5)
            mat(p + "ffn_down.weight", (d, ff), ff ** -0.5)
        f32(p + "layer_output_norm.weight", d, 0.1, 1.0)
        f32(p + "layer_output_norm.bias", d, 0.1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


# Nemotron-H-like (Nemotron Nano 2 9B: 56 layers, d 4480, Mamba-2 with 128
# heads of 80 and state 128 in 8 groups, GQA 40/8 attention without RoPE,
# ReLU² feed-forwards): one kind per layer, by the pattern (M Mamba-2, *
# attention, - feed-forward), ending in a feed-forward as the real ones.
NEMOTRON_H = {
    "small": dict(pattern="M-M*-M*-", d=128, n_head=4, n_kv=2, hd=32, ffn=384,
                  inner=256, ssm_heads=8, state=32, groups=2, conv=4, vocab=512, ctx=2048),
    "bench": dict(pattern="M-M*M-M-", d=1024, n_head=16, n_kv=4, hd=64, ffn=4096,
                  inner=2048, ssm_heads=32, state=64, groups=4, conv=4, vocab=8192, ctx=4096),
}
# Nemotron 3-like (nemotron_h_moe): E marks a mixture of ReLU² experts
# (sigmoid routing with a selection bias, weights normalised and scaled by
# 2.5 as Nano's routed_scaling_factor) beside a shared expert; the small
# model's experts work in a latent size (Super's latent MoE), the bench
# model's in d (Nano's).
NEMOTRON_H_MOE = {
    "small": dict(NEMOTRON_H["small"], pattern="MEM*EM*E", n_expert=16, n_used=4, ffe=64, shexp=128, latent=64),
    "bench": dict(NEMOTRON_H["bench"], pattern="MEM*EMEE", n_expert=32, n_used=4, ffe=512, shexp=1024, latent=0),
}


def write_nemotron_h(path: str, arch: str, size: str, tname: str):
    h = (NEMOTRON_H_MOE if arch == "nemotron_h_moe" else NEMOTRON_H)[size]
    qtype, ftype = TYPES[tname]
    model = f"{arch}-{size}"
    d, nh, nkv, hd, ff, V = h["d"], h["n_head"], h["n_kv"], h["hd"], h["ffn"], h["vocab"]
    inner, H, N, G, K = h["inner"], h["ssm_heads"], h["state"], h["groups"], h["conv"]
    pattern = h["pattern"]
    L = len(pattern)
    ch = inner + 2 * G * N
    w = gguf.GGUFWriter(path + ".tmp", arch)
    w.add_name(f"ggml-rs random {model} {tname}")
    w.add_file_type(int(ftype))
    w.add_context_length(h["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(L)
    # Per layer: KV heads on the attention layers, a width on the
    # feed-forward ones, both 0 on the Mamba-2 ones.
    w.add_head_count(nh)
    w.add_head_count_kv([nkv if c == "*" else 0 for c in pattern])
    E = h.get("n_expert", 0)
    w.add_feed_forward_length([ff if c == "-" else h.get("ffe", 0) * h.get("n_used", 0) if c == "E" else 0
                               for c in pattern])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_eps(1e-5)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_conv_kernel(K)
    w.add_ssm_inner_size(inner)
    w.add_ssm_state_size(N)
    w.add_ssm_time_step_rank(H)
    w.add_ssm_group_count(G)
    if E:
        w.add_expert_count(E)
        w.add_expert_used_count(h["n_used"])
        w.add_expert_feed_forward_length(h["ffe"])
        w.add_expert_shared_feed_forward_length(h["shexp"])
        w.add_expert_weights_norm(True)
        w.add_expert_weights_scale(2.5)
        if h["latent"]:
            w.add_moe_latent_size(h["latent"])
    toks, merges, types, bos, eos = bpe_vocab(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(toks); w.add_token_types(types); w.add_token_merges(merges)
    w.add_bos_token_id(bos); w.add_eos_token_id(eos)
    w.add_add_bos_token(False)

    def mat(name, shape, std):
        x = rng_for(model, name).standard_normal(shape, dtype=np.float32) * np.float32(std)
        if qtype == QT.F16:
            w.add_tensor(name, x.astype(np.float16))
        elif qtype == QT.F32:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def f32(name, shape, std, mean=0.0):
        x = np.float32(mean) + np.float32(std) * rng_for(model, name).standard_normal(shape, dtype=np.float32)
        w.add_tensor(name, x.astype(np.float32))

    mat("token_embd.weight", (V, d), 1.0)
    for i, c in enumerate(pattern):
        p = f"blk.{i}."
        f32(p + "attn_norm.weight", d, 0.1, 1.0)
        if c == "M":
            # in_proj gives z, x|B|C and dt; a 4-tap depthwise kernel with
            # its bias; as the real initialisation, A in [1, 16] (stored as
            # -A) and dt = softplus(dt + dt_bias) log-uniform in [1e-3,
            # 1e-1]; D near 1; the grouped norm; out_proj.
            mat(p + "ssm_in.weight", (2 * inner + 2 * G * N + H, d), d ** -0.5)
            f32(p + "ssm_conv1d.weight", (ch, K), 0.5)
            f32(p + "ssm_conv1d.bias", ch, 0.1)
            r = rng_for(model, p + "ssm_dt.bias")
            dt = np.exp(r.uniform(np.log(1e-3), np.log(1e-1), H))
            w.add_tensor(p + "ssm_dt.bias", (dt + np.log(-np.expm1(-dt))).astype(np.float32))
            r = rng_for(model, p + "ssm_a")
            w.add_tensor(p + "ssm_a", (-np.exp(r.uniform(0.0, np.log(16.0), (H, 1)))).astype(np.float32))
            f32(p + "ssm_d", (H, 1), 0.1, 1.0)
            f32(p + "ssm_norm.weight", (G, inner // G), 0.1, 1.0)
            mat(p + "ssm_out.weight", (d, inner), inner ** -0.5 * 0.5)
        elif c == "*":
            mat(p + "attn_q.weight", (nh * hd, d), d ** -0.5)
            mat(p + "attn_k.weight", (nkv * hd, d), d ** -0.5)
            mat(p + "attn_v.weight", (nkv * hd, d), d ** -0.5)
            mat(p + "attn_output.weight", (d, nh * hd), (nh * hd) ** -0.5 * 0.5)
        elif c == "E":
            # The router's spread keeps the k-th and (k+1)-th experts apart;
            # the selection bias is comparable to the sigmoid's spread.
            e, ffe, sh = h["latent"] or d, h["ffe"], h["shexp"]
            mat(p + "ffn_gate_inp.weight", (E, d), 2.0 * d ** -0.5)
            f32(p + "exp_probs_b.bias", E, 0.1)
            if h["latent"]:
                mat(p + "ffn_latent_down.weight", (e, d), d ** -0.5)
                mat(p + "ffn_latent_up.weight", (d, e), e ** -0.5)
            mat(p + "ffn_up_exps.weight", (E, ffe, e), e ** -0.5)
            mat(p + "ffn_down_exps.weight", (E, e, ffe), (1.5 * ffe) ** -0.5 / h["n_used"])
            mat(p + "ffn_up_shexp.weight", (sh, d), d ** -0.5)
            mat(p + "ffn_down_shexp.weight", (d, sh), (1.5 * sh) ** -0.5)
        else:
            # relu(u)² of a unit-variance u has mean square 3/2: the down
            # projection's spread keeps the branch near unit scale.
            mat(p + "ffn_up.weight", (ff, d), d ** -0.5)
            mat(p + "ffn_down.weight", (d, ff), (1.5 * ff) ** -0.5)
    f32("output_norm.weight", d, 0.1, 1.0)
    mat("output.weight", (V, d), 3.0 * d ** -0.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


# Gemma 3n E2B-like (30 layers, d 2048, 8 heads of 256 over 2 KV heads
# there). llama.cpp fixes 4 AltUp states, per-layer inputs of 256, a Laurel
# rank of 64, sparse activations on the first 10 layers and KV shared from
# layer 20 on (by the last sliding layer before it, 18, and the last global
# one, 19): 22 layers, the two shared ones one of each kind.
GEMMA3N = {
    "small": dict(n_layer=22, d=128, n_head=4, n_kv=1, hd=64, ffn=384, swa=16, output=True, vocab=512, ctx=2048),
    "bench": dict(n_layer=22, d=1024, n_head=8, n_kv=2, hd=128, ffn=4096, swa=512, output=False, vocab=8192, ctx=4096),
}
GEMMA3N_GLOBAL = (4, 9, 14, 19, 21)
POST = 0.15


def tensor_writers(w, model: str, qtype):
    """mat(name, shape, std) writes a matrix in the file's type, f32(name,
    shape, std, mean) an f32 tensor, from the tensor's own random stream."""
    def mat(name, shape, std):
        x = rng_for(model, name).standard_normal(shape, dtype=np.float32) * np.float32(std)
        if qtype == QT.F16:
            w.add_tensor(name, x.astype(np.float16))
        elif qtype == QT.F32 or shape[-1] % 32:
            w.add_tensor(name, x)  # (rows too short for the block types stay f32, as the converter's)
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    def f32(name, shape, std, mean=0.0):
        x = np.float32(mean) + np.float32(std) * rng_for(model, name).standard_normal(shape, dtype=np.float32)
        w.add_tensor(name, x.astype(np.float32))
    return mat, f32


def write_gemma3n(path: str, arch: str, size: str, tname: str):
    h = GEMMA3N[size]
    qtype, ftype = TYPES[tname]
    model = f"{arch}-{size}"
    d, nh, nkv, hd, ff, V, L = h["d"], h["n_head"], h["n_kv"], h["hd"], h["ffn"], h["vocab"], h["n_layer"]
    A, P, R, shared = 4, 256, 64, L - 20
    w = gguf.GGUFWriter(path + ".tmp", arch)
    w.add_name(f"ggml-rs random {model} {tname}")
    w.add_file_type(int(ftype))
    w.add_context_length(h["ctx"])
    w.add_embedding_length(d)
    w.add_block_count(L)
    w.add_feed_forward_length([ff] * L)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_float32(f"{arch}.rope.freq_base_swa", 10000.0)
    w.add_sliding_window(h["swa"])
    w.add_array(f"{arch}.attention.sliding_window_pattern", [i not in GEMMA3N_GLOBAL for i in range(L)])
    w.add_uint32(f"{arch}.embedding_length_per_layer_input", P)
    w.add_uint32(f"{arch}.altup.active_idx", 0)
    w.add_uint32(f"{arch}.altup.num_inputs", A)
    w.add_uint32(f"{arch}.attention.shared_kv_layers", shared)
    # llama.cpp's f_sparsity_std_mul (the normal's 0.95 quantile as a float32).
    w.add_array(f"{arch}.activation_sparsity_scale", [1.6448533535003662 if i < 10 else 0.0 for i in range(L)])
    add_gemma_tokenizer(w, V)
    mat, f32 = tensor_writers(w, model, qtype)

    mat("token_embd.weight", (V, d), d ** -0.5)
    # Per-layer embeddings about 1/16 so that, scaled by 16, they weigh as
    # much as the normed projection they join.
    mat("per_layer_token_embd.weight", (V, P * L), 1 / 16)
    mat("per_layer_model_proj.weight", (P * L, d), d ** -0.5)
    f32("per_layer_proj_norm.weight", P, 0.1, 1.0)
    mat("altup_proj.weight", (A - 1, d, d), d ** -0.5)
    mat("altup_unembd_proj.weight", (A - 1, d, d), d ** -0.5)
    for i in range(L):
        p = f"blk.{i}."
        for n in ("attn_norm", "ffn_norm", "altup_router_norm"):
            f32(p + n + ".weight", d, 0.1, 1.0)
        # The branches' output norms near POST: each branch adds a part of
        # the residual stream, not a unit-sized step (a random 22-layer
        # stack of unit steps magnifies a rounding difference a thousandfold).
        for n in ("post_attention_norm", "post_ffw_norm", "laurel_post_norm", "post_norm"):
            f32(p + n + ".weight", d, 0.02, POST)
        # The attention is unscaled (the q/k norms set its temperature):
        # norm weights near 0.35 give scores of unit spread, not sqrt(hd).
        f32(p + "attn_q_norm.weight", hd, 0.05, 0.35)
        f32(p + "attn_k_norm.weight", hd, 0.05, 0.35)
        mat(p + "attn_q.weight", (nh * hd, d), d ** -0.5)
        mat(p + "attn_k.weight", (nkv * hd, d), d ** -0.5)
        mat(p + "attn_v.weight", (nkv * hd, d), d ** -0.5)
        mat(p + "attn_output.weight", (d, nh * hd), (nh * hd) ** -0.5)
        mat(p + "ffn_gate.weight", (ff, d), d ** -0.5)
        mat(p + "ffn_up.weight", (ff, d), d ** -0.5)
        mat(p + "ffn_down.weight", (d, ff), ff ** -0.5)
        # The router reads rmsnorm(x)/d: a spread of sqrt(d)/2 gives
        # modalities near 0.5; coefficients near 0.05 keep each prediction
        # near its state.
        mat(p + "altup_router.weight", (A, d), 0.5 * d ** 0.5)
        mat(p + "altup_predict_coef.weight", (A * A, A), 0.05)
        mat(p + "altup_correct_coef.weight", (A, A), 0.05)
        f32(p + "altup_correct_scale.weight", d, 0.1, 1.0)
        mat(p + "laurel_l.weight", (R, d), d ** -0.5)
        mat(p + "laurel_r.weight", (d, R), R ** -0.5)
        mat(p + "inp_gate.weight", (P, d), d ** -0.5)
        mat(p + "proj.weight", (d, P), P ** -0.5)
    f32("output_norm.weight", d, 0.1, 1.0)
    if h["output"]:
        mat("output.weight", (V, d), 3.0 * d ** -0.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


# --- Ollama's layout -------------------------------------------------------------

# The architecture Ollama's converter names in its file for the checkpoint
# that llama.cpp's converter names arch: gpt-oss is "gptoss", and a
# Qwen3-Next checkpoint (it has experts) comes out as "qwen35moe".
OLLAMA_ARCH = {"gpt-oss": "gptoss", "qwen3next": "qwen35moe", "qwen35": "qwen35", "qwen35moe": "qwen35moe", "olmo3": "olmo3",
               "mistral3": "mistral3", "glm4moelite": "glm4moelite", "llama4": "llama4", "gemma3n": "gemma3n"}
# The architecture in the llama.cpp-layout file's keys, where it is not arch.
LLAMA_ARCH = {"olmo3": "olmo2", "glm4moelite": "deepseek2"}

# llama.cpp's MTP (nextn) tensor names and the checkpoint's, which Ollama's
# converter writes with no more than its usual renames (it binds none).
MTP_NAMES = {"nextn.eh_proj.weight": "mtp.fc.weight",
             "nextn.enorm.weight": "mtp.pre_fc_norm_embedding.weight",
             "nextn.hnorm.weight": "mtp.pre_fc_norm_hidden.weight",
             "nextn.shared_head_norm.weight": "mtp.norm.weight"}


def write_ollama_model(path: str, src: str, arch: str, size: str):
    """Writes the file Ollama's converter gives for the checkpoint whose
    llama.cpp-layout file is src: the same tensor bytes (and types) under
    Ollama's names and keys. The differences, all of them for these
    checkpoints (text-only, no vision tower):

      all     keys sorted by their unprefixed name, tensors by block then
              name (as Ollama writes them); no general.name;
              general.quantization_version 2; tokenizer.ggml.scores (the ids)
              and add_eos_token false
      qwen*   attention.head_count_kv a u32 array per layer, 0 on the
              recurrent ones (the scalar's value on every
              full_attention_interval-th); tokenizer.ggml.pre qwen35;
              blk.N.ssm_dt.bias is blk.N.ssm_dt; ffn_gate_inp_shexp is
              {d, 1} (the checkpoint's [1, d]); block_count without the MTP
              layers and no nextn_predict_layers: the MTP block's tensors
              are mtp.* (mtp.fc, mtp.pre_fc_norm_*, mtp.norm,
              mtp.layers.0.*), which nothing reads
      qwen35, qwen35moe
              rope.dimension_sections of 3 entries (the checkpoint's
              mrope_section, not padded to 4), the same array again as
              mrope_sections and rope.mrope_section; rope.mrope_interleaved
              and ssm.v_head_reordered true; qwen35moe: feed_forward_length
              0 (the checkpoint has no intermediate_size)
      qwen3next
              architecture qwen35moe, yet no rope.dimension_sections (NeoX
              RoPE) and no ssm.v_head_reordered (its value heads stay
              grouped: ssm_ba); norm_top_k_prob true (the checkpoint's
              norm_topk_prob); a few stray mtp.* tensors of its own (the
              checkpoint has an MTP block, llama.cpp's converter drops it)
      gpt-oss architecture gptoss; attn_output.{weight,bias} is attn_out.*,
              post_attention_norm.weight ffn_norm.weight and
              attn_sinks.weight attn_sinks; no expert_feed_forward_length,
              rope.scaling.type or rope.dimension_count (YaRN is implied by
              rope.scaling.original_context_length; the rotary size is the
              head's); tokenizer.ggml.pre default (Ollama knows no gpt-4o
              pre-tokenizer) and an eos_token_ids array
      olmo3   architecture olmo3 (llama.cpp's converter writes olmo2); the
              sliding layers as a per-layer bool array (the checkpoint's
              layer_types); no attention.key_length, value_length or
              rope.dimension_count (the head is n_embd/n_head)
      mistral3
              YaRN's betas as rope.scaling.beta_fast/beta_slow, its log
              multiplier as rope.scaling.mscale 1 and mscale_all_dim, the
              attention temperature as rope.scaling_beta; vocab_size; and
              the vision tower's tensors (v.*, mm.*; two stand-ins here),
              which a text decoder does not read
      gemma3n the head size as head_dim alone (no attention.key_length or
              value_length), the sliding layers' RoPE base as
              rope.freq_base_local, feed_forward_length one number (the
              checkpoint's intermediate_size), altup.correct_scale and
              altup.lr_multiplier
      llama4  the dense and expert feed-forward lengths as intermediate_size
              and intermediate_size_moe, feed_forward_length the expert's
              (the checkpoint's intermediate_size), no
              expert_feed_forward_length; use_qk_norm true; no
              attention.sliding_window (the chunk is implied); vision
              stand-ins as mistral3's

    Not reproduced: Ollama's element types (F16 for every matrix, F32
    routers; here each tensor keeps the llama.cpp file's type, so that both
    files hold the same numbers) and gpt-oss's MXFP4 experts and fixed
    token ids 199998/199999 (beyond these models' 512-token vocabulary)."""
    T = gguf.GGUFValueType
    r = gguf.GGUFReader(src)
    kv = {}  # unprefixed key -> (value, type, element type of an array)
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        bare = name[len(arch) + 1:] if name.startswith(arch + ".") else name
        kv[bare] = (f.contents(), f.types[0], f.types[-1] if f.types[0] == T.ARRAY else None)

    def u32(v):
        return (v, T.UINT32, None)

    def arr(v, t):
        return (list(v), T.ARRAY, t)

    def flag(v):
        return (v, T.BOOL, None)

    if arch in LLAMA_ARCH:
        # The llama.cpp-layout file's keys carry its own architecture.
        la = LLAMA_ARCH[arch]
        for name, f in r.fields.items():
            if name.startswith(la + "."):
                kv[name[len(la) + 1:]] = kv.pop(name)
    n_layer = kv["block_count"][0] - kv.pop("nextn_predict_layers", (0,))[0]
    kv["block_count"] = u32(n_layer)
    del kv["general.name"]
    kv["general.architecture"] = (OLLAMA_ARCH[arch], T.STRING, None)
    kv["general.quantization_version"] = u32(2)
    n_vocab = len(kv["tokenizer.ggml.tokens"][0])
    kv["tokenizer.ggml.scores"] = arr(np.arange(n_vocab, dtype=np.float32).tolist(), T.FLOAT32)
    kv["tokenizer.ggml.add_eos_token"] = flag(False)
    if arch == "gpt-oss":
        for k in ("expert_feed_forward_length", "rope.scaling.type", "rope.scaling.yarn_beta_fast",
                  "rope.scaling.yarn_beta_slow", "rope.dimension_count"):
            kv.pop(k, None)
        kv["tokenizer.ggml.pre"] = ("default", T.STRING, None)
        kv["tokenizer.ggml.eos_token_ids"] = arr([kv["tokenizer.ggml.eos_token_id"][0], n_vocab - 2], T.INT32)
    elif arch == "mistral3":
        kv["rope.scaling.beta_fast"] = kv.pop("rope.scaling.yarn_beta_fast")
        kv["rope.scaling.beta_slow"] = kv.pop("rope.scaling.yarn_beta_slow")
        kv["rope.scaling.mscale"] = (1.0, T.FLOAT32, None)
        kv["rope.scaling.mscale_all_dim"] = kv.pop("rope.scaling.yarn_log_multiplier")
        kv["rope.scaling_beta"] = kv.pop("attention.temperature_scale")
        kv["vocab_size"] = u32(n_vocab)
    elif arch == "llama4":
        ffe = kv.pop("expert_feed_forward_length")[0]
        kv["intermediate_size"] = u32(kv["feed_forward_length"][0])
        kv["intermediate_size_moe"] = u32(ffe)
        kv["feed_forward_length"] = u32(ffe)
        kv["use_qk_norm"] = flag(True)
        del kv["attention.sliding_window"]
    elif arch == "glm4moelite":
        # Each head's sizes as key_length and value_length, the cached
        # head's as the *_mla keys; every head counted as a KV head.
        for a, b in (("attention.key_length", "attention.key_length_mla"),
                     ("attention.value_length", "attention.value_length_mla")):
            kv[a], kv[b] = kv[b], kv[a]
        kv["attention.head_count_kv"] = kv["attention.head_count"]
        kv["tokenizer.ggml.pre"] = ("glm4", T.STRING, None)
    elif arch == "gemma3n":
        kv["head_dim"] = u32(kv.pop("attention.key_length")[0])
        del kv["attention.value_length"]
        kv["rope.freq_base_local"] = kv.pop("rope.freq_base_swa")
        kv["feed_forward_length"] = u32(kv["feed_forward_length"][0][0])
        kv["altup.correct_scale"] = flag(True)
        kv["altup.lr_multiplier"] = (1.0, T.FLOAT32, None)
    elif arch == "olmo3":
        for k in ("attention.key_length", "attention.value_length", "rope.dimension_count"):
            kv.pop(k, None)
        kv["attention.sliding_window_pattern"] = arr([(i + 1) % 4 != 0 for i in range(n_layer)], T.BOOL)
    else:
        nkv, every = kv["attention.head_count_kv"][0], kv["full_attention_interval"][0]
        kv["attention.head_count_kv"] = arr([nkv if (i + 1) % every == 0 else 0 for i in range(n_layer)], T.UINT32)
        kv["tokenizer.ggml.pre"] = ("qwen35", T.STRING, None)
        if arch == "qwen3next":
            kv["norm_top_k_prob"] = flag(True)
        else:
            sections = kv["rope.dimension_sections"][0][:3]
            for k in ("rope.dimension_sections", "mrope_sections", "rope.mrope_section"):
                kv[k] = arr(sections, T.INT32)
            kv["rope.mrope_interleaved"] = flag(True)
            kv["ssm.v_head_reordered"] = flag(True)
        if arch == "qwen35moe":
            kv["feed_forward_length"] = u32(0)

    renames = {"attn_output.weight": "attn_out.weight", "attn_output.bias": "attn_out.bias",
               "post_attention_norm.weight": "ffn_norm.weight",
               "attn_sinks.weight": "attn_sinks"} if arch == "gpt-oss" else {"ssm_dt.bias": "ssm_dt"}
    tensors = []  # (name, data, type)
    for t in r.tensors:
        blk, _, rest = t.name.removeprefix("blk.").partition(".")
        data = t.data
        if t.name.endswith(".ffn_gate_inp_shexp.weight"):
            data = data.reshape(1, -1)
        if not t.name.startswith("blk."):
            name = t.name
        elif int(blk) >= n_layer:
            name = MTP_NAMES.get(rest, f"mtp.layers.{int(blk) - n_layer}.{rest}")
        else:
            name = f"blk.{blk}.{renames.get(rest, rest)}"
        tensors.append((name, data, t.tensor_type))
    if arch == "qwen3next":
        d = kv["embedding_length"][0]
        model = f"{arch}-{size}-ollama"
        for name, shape in (("mtp.fc.weight", (d, 2 * d)), ("mtp.norm.weight", (d,)),
                            ("mtp.pre_fc_norm_embedding.weight", (d,)), ("mtp.layers.0.attn_norm.weight", (d,))):
            x = rng_for(model, name).standard_normal(shape, dtype=np.float32)
            tensors.append((name, x.astype(np.float16) if len(shape) > 1 else x, None))

    if arch in ("mistral3", "llama4"):
        model = f"{arch}-{size}-ollama"
        for name, shape in (("v.patch_conv.weight", (32, 3, 4, 4)), ("mm.linear_1.weight", (64, 32))):
            x = rng_for(model, name).standard_normal(shape, dtype=np.float32)
            tensors.append((name, x.astype(np.float16), None))

    w = gguf.GGUFWriter(path + ".tmp", OLLAMA_ARCH[arch])
    w.kv_data[0].clear()  # the writer's own general.architecture: it is written in order below
    for k in sorted(kv):
        v, t, sub = kv[k]
        full = k if k.startswith(("general.", "tokenizer.")) else f"{OLLAMA_ARCH[arch]}.{k}"
        w.add_key_value(full, v, t, sub)

    def block(name):
        b = name.split(".")
        return int(b[1]) if b[0] == "blk" else sys.maxsize
    for name, data, qt in sorted(tensors, key=lambda x: (block(x[0]), x[0])):
        if qt in (None, QT.F32, QT.F16):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".cache", "models"))
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--arch", help="comma-separated (default: all, or with --layout ollama the four it has)")
    ap.add_argument("--types", default="f16,q8_0,q4_0")
    ap.add_argument("--layout", default="llama.cpp", choices=["llama.cpp", "ollama"],
                    help="whose converter's file to write (ollama: from the llama.cpp-layout file of the same "
                         "model, written first when missing)")
    ap.add_argument("-f", "--force", action="store_true", help="rewrite files that exist")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    archs = a.arch or ",".join(OLLAMA_ARCH if a.layout == "ollama" else ["llama", "qwen2", "qwen3"] + list(NEW_ARCHS))
    for arch in archs.split(","):
        if a.layout == "ollama" and arch not in OLLAMA_ARCH:
            ap.error(f"{arch}: one layout only (Ollama's converter has a layout of its own for {', '.join(OLLAMA_ARCH)}; "
                     "it does not convert Qwen3-MoE, so the qwen3moe files it serves are llama.cpp's)")
        for t in a.types.split(","):
            path = os.path.join(a.out, f"{arch}-{a.size}-{t}.gguf")
            if a.layout == "ollama":
                opath = path.removesuffix(".gguf") + "-ollama.gguf"
                if os.path.exists(opath) and not a.force:
                    print(f"gen-models: {opath} exists"); continue
                if not os.path.exists(path):
                    write_new_model(path, arch, a.size, t)
                    print(f"gen-models: wrote {path} ({os.path.getsize(path)} bytes)")
                write_ollama_model(opath, path, arch, a.size)
                print(f"gen-models: wrote {opath} ({os.path.getsize(opath)} bytes)")
                continue
            if os.path.exists(path) and not a.force:
                print(f"gen-models: {path} exists"); continue
            if arch in ("nomic-bert", "nomic-bert-moe"):
                write_nomic_bert(path, arch, a.size, t)
            elif arch in ("nemotron_h", "nemotron_h_moe"):
                write_nemotron_h(path, arch, a.size, t)
            elif arch == "gemma3n":
                write_gemma3n(path, arch, a.size, t)
            elif arch in NEW_ARCHS:
                write_new_model(path, arch, a.size, t)
            elif arch in ("llama", "qwen2", "qwen3"):
                write_model(path, arch, a.size, t)
            else:
                ap.error(f"unknown architecture {arch}")
            print(f"gen-models: wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
