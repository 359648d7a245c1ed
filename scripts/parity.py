#!/usr/bin/env python3
"""Parity of ggml-rs's runner with llama.cpp on generated models.

  parity.py golden   runs the reference (tools/llama-ref) on every generated
                     small model and writes tests/golden/ref_<model>.json: the
                     last-position logits of three fixed token sequences and a
                     64-token greedy continuation (llama.cpp's defaults: flash
                     attention auto, i.e. on, n_ubatch 512); "cases": the same
                     three sequences with flash attention on and off and the
                     prompt computed in physical batches (n_ubatch) of 1, 7,
                     32 and 512 tokens; "parallel": two sequences of different
                     lengths in one llama_decode (-seqs), flash attention on
                     and off.
  parity.py check    runs the reference again and compares it with the golden
                     files; then, when go/bin/ggml-rs answers `logits`, compares
                     ours with the golden files too (the cases and parallel
                     batches only when its `logits -h` mentions -seqs).

  parity.py embed-golden
                     runs the reference's embedding context (llama-ref embed:
                     the model's pooling, not normalised) on every generated
                     encoder (EMBED_MODELS) over embed_sequences(), flash
                     attention on and off, and writes
                     tests/golden/embed_<model>.json.

  parity.py tokens-golden
                     runs the reference's tokenizer (llama_tokenize, vocab-only)
                     over the test strings (token_strings(): edge cases and
                     random mixes, some not valid UTF-8) and writes
                     tests/golden/tokens_<name>.json for llama-small-f16
                     (SentencePiece), gemma3-small-f16 (SentencePiece laid
                     out as Gemma's), qwen3-small-f16 (byte-level BPE,
                     pre-tokenizer qwen2) and GPT-2's real vocabulary under
                     five pre-tokenizers (gpt2-<pre>, scripts/gen-vocabs.py);
                     `check` compares both programs' tokenizers with them.

The CLI contract both programs follow:
  PROG logits [-all] [-decode N] [-ubatch N] [-t N] [-fa on|off|auto] MODEL TOKEN...
      ->  JSON {"n_vocab", "tokens", "logits": last-position row, or with -all
      one row per position}; with -decode N the last N tokens go one at a time;
      -ubatch N: the prompt (one logical batch) is computed N tokens at a time
      (llama.cpp's n_ubatch; default 512)
  PROG logits -seqs [-ubatch N] [-t N] [-fa on|off|auto] MODEL SEQ...
      ->  JSON {"n_vocab", "sequences": [[ids]...], "logits": [[last-position
      row of each sequence]...]}: each SEQ (comma-separated ids) is one
      sequence; all of them go in one batch (sequence 0's tokens first,
      positions from 0 in each, sequence ids 0..k-1)
  PROG greedy -n 64 [-t N] MODEL TOKEN...   ->  JSON {"prompt", "tokens"}
      (the reference only)
  PROG tokenize -batch FILE MODEL  ->  JSON {"n_vocab", "results": [{"plain",
      "special"}, ...]}; FILE: one hex-encoded text a line

Ours is scored by the largest absolute logit difference, top-1 on the three
sequences, and the top-1 agreement over the greedy continuation,
teacher-forced: the prompt in one batch and then the reference's greedy
tokens one at a time (`logits -all -decode 63`), as the reference made them.
The tolerances are the Go test's (go/cmd/ggml-rs/parity_test.go), which
`make test` runs without the reference.

Standard library only. Options: --ref PATH, --ours PATH, --models DIR,
--vocabs DIR, --golden DIR, -t THREADS, --only MODEL,... (golden,
tokens-golden, mtp-golden and check: those models alone, e.g.
--only gemma3-small-f16,gemma3-small-q8_0,gemma3-small-q4_0; the other
golden files are not rewritten, cpu-features only when the features
are the same).
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
ARCHS = ("llama", "qwen2", "qwen3", "qwen3moe", "gpt-oss", "qwen3next", "qwen35", "qwen35moe", "gemma3", "gemma2", "olmo2", "olmo3", "mistral3", "lfm2", "lfm2moe", "deepseek2", "deepseek2mha", "glm4moelite", "llama4", "nemotron_h", "nemotron_h_moe", "gemma3n")
MODELS = [f"{a}-small-{t}" for a in ARCHS for t in ("f16", "q8_0", "q4_0")]
# Encoders (sentence embeddings), held to llama.cpp's pooled embeddings.
EMBED_MODELS = [f"{a}-small-{t}" for a in ("nomic-bert", "nomic-bert-moe") for t in ("f16", "q8_0", "q4_0")]
# F32 weights for the hybrid archs too. llama.cpp's fused delta-net kernel
# and its unfused graphs (as our fused and primitive paths) round
# differently in the last bit, and F16/Q8_0/Q4_0 weights round the
# activations before every matmul, so the two paths part by 0.01-0.4 on
# those models (llama.cpp's own fused against unfused alike); on F32 weights
# they stay within 2e-3.
RECURRENT_ARCHS = ("qwen3next", "qwen35", "qwen35moe")
# The reference's environment for its unfused delta net (a patch of ours,
# scripts/llama-patches/01-ref-unfused-gdn.sh); the golden files of the
# recurrent models hold its logits under "unfused", which our primitive
# path is held to (at PRIMITIVE_SPREADS times the reference's spread).
UNFUSED_ENV = {"LLAMA_REF_UNFUSED_GDN": "1"}
MODELS += [f"{a}-small-f32" for a in RECURRENT_ARCHS]
N_GREEDY = 64
# The architectures with an MTP (NextN) head, and the draft steps the golden
# files record of it.
MTP_ARCHS = ("qwen35", "qwen35moe")
MTP_DRAFT = 4
# The "cases": every sequence with flash attention on and off, the prompt in
# physical batches of these many tokens (1: token by token; 7: ragged; 32;
# 512: the whole prompt, llama.cpp's default).
CASE_FA = ("on", "off")
CASE_UBATCH = (1, 7, 32, 512)
# Architectures whose graph changes only past a long prefix, and the
# prompt that crosses it: Llama 4's chunked attention and its attention
# temperature, both at llama.cpp's fixed 8192 positions. The golden files
# hold the last-position logits of that prompt, whose last ubatch crosses
# the edge, flash attention on and off. No token of it is decoded alone:
# ggml's CPU flash attention splits one query row over 512 cells or more
# among the threads, whose partial sums then meet in an order that moved
# the result by up to 0.14 on a loaded machine (docs/notes/llama4.md).
LONG_ARCHS = {"llama4": 8200}
LONG_DECODE = 0

# Tolerances. The reference against its own golden file: the same program on
# the same sources, so only a different CPU (ISA paths, thread split) moves it.
REF_TOL = 1e-2
# Ours against the golden files (the same figures as the Go test,
# go/cmd/ggml-rs/parity_test.go; keep them in agreement): the largest
# absolute difference of any last-position logit of the three sequences
# (logits spread over about +-10 on these models; ours matches the
# reference to its print precision, about 5e-6; without flash attention,
# unlike the reference, the difference is 6e-3 on F16 and 0.17 on Q8_0/Q4_0),
# top-1 on all three, and the least teacher-forced greedy top-1 agreement.
# The same bound and top-1 hold for every "cases" entry (each flash
# attention setting and n_ubatch) and every "parallel" batch: ours is run
# with the same -fa and -ubatch, so it takes the same kernel paths.
OURS_TOL = {"f32": 2e-3, "f16": 2e-3, "q8_0": 2e-3, "q4_0": 2e-3}
OURS_MIN_TOP1 = 0.95
# On a machine whose ggml CPU features (`ggml-rs devices`) are not those
# of the golden files (cpu-features beside them), the reference and ours
# are held to four times the reference's own spread (spread()), as the Go
# test's otherCPUSpreads, whose comment has the measurements.
OTHER_CPU_SPREADS = 4
# The reference runs with its default -fa auto, which llama.cpp resolves to
# flash attention on for the CPU; ours is asked for the same.
OURS_ARGS = ("-fa", "on")


def sequences(vocab: int):
    """Three fixed token sequences (8, 32 and 128 tokens), no special tokens."""
    x = 12345
    out = []
    for n in (8, 32, 128):
        seq = []
        for _ in range(n):
            x = (x * 1103515245 + 12345) % 2**31
            seq.append(3 + (x >> 8) % (vocab - 6))
        out.append(seq)
    return out


def long_sequence(vocab: int, n: int):
    """A fixed sequence of n tokens (no special tokens) for LONG_ARCHS."""
    x, seq = 54321, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2**31
        seq.append(3 + (x >> 8) % (vocab - 6))
    return seq


def embed_sequences(vocab: int):
    """Four sequences for an encoder (3, 9, 33 and 130 tokens: [CLS]
    (id 2), random ids above the five specials, [SEP] (id 3))."""
    x = 4242
    out = []
    for n in (3, 9, 33, 130):
        seq = [2]
        for _ in range(n - 2):
            x = (x * 1103515245 + 12345) % 2**31
            seq.append(5 + (x >> 8) % (vocab - 5))
        out.append(seq + [3])
    return out


def embed_golden(a):
    os.makedirs(a.golden, exist_ok=True)
    for m in EMBED_MODELS:
        if a.only and m not in a.only.split(","):
            continue
        path = os.path.join(a.models, m + ".gguf")
        seqs = embed_sequences(run_json(a.ref, ["embed", "-t", str(a.t), path, "2,3"])["n_vocab"])
        doc = {
            "model": m,
            "made_by": "scripts/parity.py embed-golden",
            "model_made_by": "scripts/gen-models.py --size small --arch nomic-bert",
            "model_sha256": sha256(path),
            "reference": "llama.cpp from llama-cpp-sys-2 0.1.161 (our ggml patches), tools/llama-ref embed: "
                         "each sequence alone, the model's pooling, not normalised",
            "sequences": seqs,
        }
        for fa in ("on", "off"):
            r = run_json(a.ref, ["embed", "-t", str(a.t), "-fa", fa, path] + [",".join(map(str, s)) for s in seqs])
            doc["n_embd"] = r["n_embd"]
            doc["fa_" + fa] = [round6(e) for e in r["embeddings"]]
        write_doc(os.path.join(a.golden, f"embed_{m}.json"), doc)
        print(f"parity: wrote tests/golden/embed_{m}.json")


def parallel_sequences(vocab: int):
    """Two sequences of different lengths (23 and 57 tokens) for one batch of
    two sequences, made like sequences() from another seed."""
    x = 54321
    out = []
    for n in (23, 57):
        seq = []
        for _ in range(n):
            x = (x * 1103515245 + 12345) % 2**31
            seq.append(3 + (x >> 8) % (vocab - 6))
        out.append(seq)
    return out


def round6(row):
    return [float(f"{v:.6g}") for v in row]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def run_json(prog, args, env=None):
    p = subprocess.run([prog] + args, capture_output=True, text=True,
                       env=None if env is None else {**os.environ, **env})
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(prog)} {args[0]}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


def argmax(v):
    return max(range(len(v)), key=v.__getitem__)




# --- tokenizers -----------------------------------------------------------------

# The tokenizer goldens: (name, directory option). The small models' vocabularies
# are synthetic (512 tokens); gpt2-<pre> is GPT-2's real vocabulary (50257
# tokens, 50000 merges) under five pre-tokenizers (scripts/gen-vocabs.py).
TOKEN_VOCABS = [("llama-small-f16", "models"), ("qwen3-small-f16", "models"), ("gemma3-small-f16", "models")] + [
    (f"gpt2-{p}", "vocabs") for p in ("gpt-2", "llama-bpe", "qwen2", "qwen35", "default", "glm4", "deepseek-v3", "gpt-4o")]


def token_strings():
    """The tokenizer test strings: hand-written edge cases, then seeded random
    mixes of words, numbers, punctuation, white space, scripts, emoji, marks
    and special-token texts. bytes items are not valid UTF-8."""
    cases = [
        "", " ", "  ", "   ", "\t", "\n", "\r\n", "\r", " \n", "\n\n\n", "\n \n", "\t\t x", " \t \n mixed \r\n ws ",
        "a", "hello", " hello", "hello ", "  hello  world  ", "Hello World", "HELLO WORLD", "hello\tworld",
        "hello\nworld", "hello\r\nworld", "hello\n\nworld", "line1\n\n\nline2\n", "trailing spaces   ",
        "   leading spaces", "a  b   c    d     e", "x  \n  y", "end\n", "\n\nstart", "tab\tand\ttabs\t\t",
        "\u00a0non-breaking\u00a0space", "\u3000ideographic\u3000space", "line\u2028separator", "next\u0085line",
        "vertical\vtab and\fform feed", "en\u2002em\u2003thin\u2009spaces",
        "0", "7", "42", "123", "1234", "12345", "123456", "1234567890", "12345678901234567890123456789012345678901234",
        "3.14159", "1,000,000", "-17", "+3e10", "0x1F", "v1.2.3", "2024-01-31", "12:30:45", "1st 2nd 3rd 4th",
        " 12 345 6789 ", "a1b22c333d4444", "\u0663\u0664\u0665 Arabic-Indic", "\u00b2\u00b3 superscripts", "\u216b Roman",
        "\u2460\u2461\u2462 circled", "\uff11\uff12\uff13 fullwidth",
        "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "'Re 'rE 'Ve 'lL 'Ll",
        "I'm", "you're", "they've", "we'll", "he'd", "it's", "don't", "can't", "I'M", "YOU'RE", "THEY'VE", "WE'LL",
        "HE'D", "IT'S", "DON'T", "rock 'n' roll", "''s", "'", "''", "'" * 3, "it\u2019s curly", "'sx", "' s", "'ll've",
        "O'Neil's", "the '90s", "'12", "quote 'single' \"double\"",
        "!", "!!!", "...", "?!?!", "---", "--->", "==>", "<=>", "#include <stdio.h>", "a.b.c", "(a+b)*c",
        '{"key": [1, 2, {"x": null}]}', "<html><body>x</body></html>", "http://example.com/path?q=1&r=2#frag",
        "user@example.com", "$100.00", "50% off!", "C++ & C# | F#", "~/.bashrc", "\\n literal backslash-n",
        "``code``", "***bold***", "...\n", "!!\n\n", "a!\r\n", "?!\n\nx", "\u00bfQu\u00e9? \u00a1S\u00ed!",
        "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
        "<s>", "</s>", "<unk>", "<s>hello", "hello<s>", "hello </s> world", "<s><s>", "< s >", "<s >",
        "<|endoftext|>", "<|im_start|>user\nhi<|im_end|>", "<|im_start|><|im_end|>", "a<|endoftext|>b",
        " <|im_start|> ", "<|im_start", "im_start|>", "<|endoftext|><|endoftext|>", "<0x41>", "<0xFF>",
        "\u2581", "\u2581\u2581x", "\u0120hello", "\u010a", "<s> </s> <unk>",
        "caf\u00e9", "na\u00efve r\u00e9sum\u00e9", "\u00c5ngstr\u00f6m", "fa\u00e7ade", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
        "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
        "\u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a",
        "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002",
        "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5\uff0c\u4f60\u597d\uff01", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
        "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e", "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
        "emoji: \U0001F600\U0001F389\U0001F44D", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family",
        "\U0001F3F3\ufe0f\u200d\U0001F308", "flags \U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5", "\U0001F44B\U0001F3FD wave",
        "e\u0301 combining acute", "a\u0308\u0304 stacked",
        "Z\u0324\u0354\u0367\u0311\u0313a\u0356\u032d\u0308\u0307l\u036e\u0312\u036bg\u030c\u0317\u031ao",
        "\u200bzero\u200bwidth", "\ufeffBOM at start", "\ufffd replacement char",
        "\U0001D518\U0001D52B\U0001D526\U0001D520\U0001D52C\U0001D521\U0001D522",
        "\ufb01 ligature", "\u0130stanbul \u0131i", "\u00df \u1e9e", "\u01c5 titlecase", "\u2126 ohm \u03a9",
        "soft\u00adhyphen", "\u00e9\u0301 double accent", "\u0915\u094d\u0937 conjunct", "\u2603\u2764\ufe0f\u2728",
        "mixed English \u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u4e2d\u6587 123 \U0001F600!",
        "The quick brown fox jumps over the lazy dog. " * 6,
        "a" * 300, " " * 50, "\n" * 20, "ab" * 100, "x " * 80, "\t" * 17 + "tabs", "-" * 64, "=" * 33 + ">",
        b"\x80", b"\xff", b"abc\xffdef", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98",
        b"\xed\xa0\x80", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xf8\x88\x80\x80\x80", b"\xfe\xff",
        b"hello \x80\x81 world", b"\xa0\xa1", b"caf\xe9", b"\xe9t\xe9", b"ok\xc3\xa9\xc3", b"\xf0\x9f\x98\x80\x80",
    ]
    rng = random.Random(20261122)
    pools = [
        ["the", "of", "and", "to", "in", "is", "hello", "world", "token", "parity", "llama", "qwen", "ggml", "cat", "sat",
         "Mat", "THE", "Quick", "BROWN", "fox", "tokenizer", "is", "a", "an", "x", "zz", "Zebra", "\u00fcber", "na\u00efve"],
        ["0", "1", "42", "123", "2024", "99999", "3.14", "1e9", "007", "10,000", "\u0663", "\u00bd"],
        ["!", "?", ".", ",", ";", ":", "...", "!!", "?!", "--", "(", ")", "[", "]", "{", "}", "<", ">", "/", "\\", "@",
         "#", "$", "%", "^", "&", "*", "_", "+", "=", "|", "~", "`", "\"", "'"],
        [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\u00a0", "\u3000", " \t "],
        ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "n't", "N'T"],
        ["\u00e9", "\u00e0", "\u00f1", "\u00e7", "\u00f8", "\u00e5", "\u00df", "\u0436", "\u044f", "\u03b1\u03b2\u03b3",
         "\u4e2d", "\u6587", "\u65e5\u672c", "\u3042", "\u30ab", "\ud55c", "\u0639", "\u05d0", "\u0915", "\u0e01"],
        ["\U0001F600", "\U0001F389", "\U0001F44D", "\u2764\ufe0f", "\U0001F468\u200d\U0001F4BB", "\u2728", "\U0001F680"],
        ["\u0301", "\u0308", "\u0327", "\u200d", "\u200b", "\ufe0f"],
        ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_start|>user\n"],
    ]
    weights = [30, 8, 10, 14, 5, 8, 3, 2, 2]
    for _ in range(220):
        parts = []
        for _ in range(rng.randint(1, 24)):
            parts.append(rng.choice(rng.choices(pools, weights)[0]))
            if rng.random() < 0.45:
                parts.append(" ")
        cases.append("".join(parts))
    return cases


def encode_case(c):
    """A string as a golden-file entry: {"text"} or, when it is not valid
    UTF-8, {"hex"}."""
    if isinstance(c, bytes):
        return {"hex": c.hex()}
    return {"text": c}


def case_bytes(e):
    return bytes.fromhex(e["hex"]) if "hex" in e else e["text"].encode("utf-8")


def tokenize_batch(prog, path, cases):
    """prog's `tokenize -batch -` over cases (golden-file entries)."""
    data = "".join(case_bytes(e).hex() + "\n" for e in cases)
    p = subprocess.run([prog, "tokenize", "-batch", "-", path], input=data, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(prog)} tokenize: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    r = json.loads(p.stdout)
    if len(r["results"]) != len(cases):
        raise RuntimeError(f"{len(r['results'])} results for {len(cases)} texts")
    return r


def tokens_golden(a):
    cases = [encode_case(c) for c in token_strings()]
    for m, where in TOKEN_VOCABS:
        if a.only and m not in a.only.split(","):
            continue
        path = os.path.join(getattr(a, where), m + ".gguf")
        r = tokenize_batch(a.ref, path, cases)
        kept = []
        for e, res in zip(cases, r["results"]):
            if "error" in res:
                print(f"parity: {m}: the reference fails on {e}: {res['error']}; left out")
                continue
            kept.append({**e, "plain": res["plain"], "special": res["special"]})
        doc = {
            "model": m,
            "made_by": "scripts/parity.py tokens-golden",
            "model_sha256": sha256(path),
            "reference": "llama_tokenize of llama.cpp from llama-cpp-sys-2 0.1.161 (vocab-only load), tools/llama-ref",
            "modes": "plain: add_special and parse_special false; special: both true",
            "add_bos": r["add_bos"],
            "add_eos": r["add_eos"],
            "cases": kept,
        }
        out = os.path.join(a.golden, f"tokens_{m}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"parity: wrote {os.path.relpath(out, ROOT)} ({len(kept)} strings)")


def check_tokens(prog, path, doc):
    """The golden-file entries whose ids from prog differ (either mode)."""
    r = tokenize_batch(prog, path, doc["cases"])
    return [e for e, res in zip(doc["cases"], r["results"])
            if res.get("plain") != e["plain"] or res.get("special") != e["special"]]


def golden(a):
    os.makedirs(a.golden, exist_ok=True)
    if a.only:
        # The golden files share one cpu-features: some of them rewritten
        # on a machine of other features would hold to the wrong ones.
        here, made = cpu_features(a.ours), golden_cpu(a.golden)
        if here is None or here != made:
            raise SystemExit(f"parity: --only needs the golden files' CPU features ({' '.join(made or [])}); "
                             f"here: {' '.join(here) if here else 'unknown (make runner)'}. Rewrite them all instead")
    for m in MODELS:
        if a.only and m not in a.only.split(","):
            continue
        path = os.path.join(a.models, m + ".gguf")
        probe = run_json(a.ref, ["logits", "-t", str(a.t), path, "3"])
        seqs = sequences(probe["n_vocab"])
        rows = []
        for s in seqs:
            r = run_json(a.ref, ["logits", "-t", str(a.t), path] + [str(t) for t in s])
            rows.append({"tokens": s, "logits": round6(r["logits"])})
        g = run_json(a.ref, ["greedy", "-n", str(N_GREEDY), "-t", str(a.t), path] + [str(t) for t in seqs[0]])
        cases, parallel = ref_cases(a, path, seqs, parallel_sequences(probe["n_vocab"]))
        doc = {
            "model": m,
            "made_by": "scripts/parity.py golden (make parity-golden)",
            "model_made_by": "scripts/gen-models.py --size small",
            "model_sha256": sha256(path),
            "reference": "llama.cpp from llama-cpp-sys-2 0.1.161 (our ggml patches), tools/llama-ref",
            "n_vocab": probe["n_vocab"],
            "sequences": rows,
            "greedy": {"prompt": seqs[0], "n": N_GREEDY, "tokens": g["tokens"]},
            "cases_note": "the three sequences' last-position logits (rows in the order of \"sequences\") "
                          "with flash attention on/off and the prompt computed in physical batches of "
                          "ubatch tokens (llama_context n_ubatch; n_batch the whole prompt)",
            "cases": cases,
            "parallel_note": "two sequences in one llama_decode (sequence 0's tokens first, positions "
                             "from 0 in each, seq ids 0 and 1, n_ubatch 512): the last-position logits "
                             "of each",
            "parallel": parallel,
        }
        if m.split("-small-")[0] in RECURRENT_ARCHS:
            # The same cases, parallel batches and greedy continuation from
            # the reference's unfused delta net (scripts/llama-patches/
            # 01-ref-unfused-gdn.sh), the counterpart of our primitive path.
            ug = run_json(a.ref, ["greedy", "-n", str(N_GREEDY), "-t", str(a.t), path] + [str(t) for t in seqs[0]],
                          UNFUSED_ENV)
            ucases, uparallel = ref_cases(a, path, seqs, parallel_sequences(probe["n_vocab"]), UNFUSED_ENV)
            doc["unfused_note"] = ("the reference with its unfused gated delta net (LLAMA_REF_UNFUSED_GDN: "
                                   "build_delta_net_chunking for prompts, build_delta_net_autoregressive "
                                   "for one token), as \"cases\", \"parallel\" and \"greedy\"")
            doc["unfused"] = {"cases": ucases, "parallel": uparallel,
                              "greedy": {"prompt": seqs[0], "n": N_GREEDY, "tokens": ug["tokens"]}}
        if m.split("-small-")[0] in MTP_ARCHS:
            doc["mtp"] = ref_mtp(a, path, seqs[1])
        if m.split("-small-")[0] in LONG_ARCHS:
            doc["long"] = ref_long(a, path, long_sequence(probe["n_vocab"], LONG_ARCHS[m.split("-small-")[0]]))
        out = os.path.join(a.golden, f"ref_{m}.json")
        write_doc(out, doc)
        print(f"parity: wrote {os.path.relpath(out, ROOT)} (greedy {g['tokens'][:8]}...)")
    # The CPU features they were made with (ours' ggml and the reference's
    # are the same sources, built for this machine).
    feats = cpu_features(a.ours)
    if a.only:
        return  # the same features (checked above)
    if feats is None:
        print("parity: cpu-features not written: go/bin/ggml-rs is not built (make runner)", file=sys.stderr)
        return
    out = os.path.join(a.golden, "cpu-features")
    with open(out) as f:
        head = [line for line in f if line.startswith("#")]
    with open(out, "w") as f:
        f.writelines(head)
        f.write(" ".join(feats) + "\n")
    print(f"parity: wrote {os.path.relpath(out, ROOT)} ({' '.join(feats)})")


def write_doc(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def ref_mtp(a, path, tokens):
    """The reference's MTP head (llama-ref mtp, as llama.cpp's draft-mtp
    runs it) over tokens, and MTP_DRAFT greedy draft steps after them."""
    r = run_json(a.ref, ["mtp", "-draft", str(MTP_DRAFT), "-t", str(a.t), path] + [str(t) for t in tokens])
    return {"note": "llama-ref mtp: the MTP head's logits at every position (row p predicts token p+1; "
                    "token p paired with the main model's hidden state of token p-1, zeros for p = 0), "
                    "the main model's greedy next token and the head's greedy draft from it",
            "tokens": tokens, "logits": [round6(x) for x in r["mtp_logits"]],
            "target_next": r["target_next"], "draft": r["draft"],
            "draft_logits": [round6(x) for x in r["draft_logits"]]}


def mtp_golden(a):
    """Adds (or replaces) the "mtp" entry of the MTP models' golden files."""
    for m in MODELS:
        if m.split("-small-")[0] not in MTP_ARCHS or (a.only and m not in a.only.split(",")):
            continue
        out = os.path.join(a.golden, f"ref_{m}.json")
        with open(out) as f:
            doc = json.load(f)
        path = os.path.join(a.models, m + ".gguf")
        if sha256(path) != doc["model_sha256"]:
            raise SystemExit(f"{m}: the model differs from the golden file's; run golden instead")
        doc["mtp"] = ref_mtp(a, path, doc["sequences"][1]["tokens"])
        write_doc(out, doc)
        print(f"parity: added mtp to {os.path.relpath(out, ROOT)} (draft {doc['mtp']['draft']})")


def ref_long(a, path, tokens):
    """The reference's "long" entry: the last-position logits of tokens
    (n_ubatch 512; the last LONG_DECODE, if any, decoded one at a time),
    flash attention on and off."""
    cases = []
    for fa in CASE_FA:
        r = run_json(a.ref, ["logits", "-fa", fa, "-ubatch", "512", "-decode", str(LONG_DECODE), "-t", str(a.t),
                             path] + [str(t) for t in tokens])
        cases.append({"fa": fa, "logits": round6(r["logits"])})
    return {"note": f"one {len(tokens)}-token prompt in ubatches of 512 (its last {LONG_DECODE} tokens decoded one "
                    "at a time): the last position's logits, flash attention on and off",
            "tokens": tokens, "decode": LONG_DECODE, "cases": cases}


def ref_cases(a, path, seqs, par_seqs, env=None):
    """The reference's "cases" (every sequence, flash attention on and off,
    each n_ubatch) and "parallel" batches (the sequences of par_seqs in one
    llama_decode, flash attention on and off), in env."""
    cases = []
    for fa in CASE_FA:
        for ub in CASE_UBATCH:
            case_rows = []
            for s in seqs:
                r = run_json(a.ref, ["logits", "-fa", fa, "-ubatch", str(ub), "-t", str(a.t), path] +
                             [str(t) for t in s], env)
                case_rows.append(round6(r["logits"]))
            cases.append({"fa": fa, "ubatch": ub, "logits": case_rows})
    parallel = []
    for fa in CASE_FA:
        r = run_json(a.ref, ["logits", "-seqs", "-fa", fa, "-t", str(a.t), path] +
                     [",".join(map(str, s)) for s in par_seqs], env)
        parallel.append({"fa": fa, "sequences": par_seqs, "logits": [round6(x) for x in r["logits"]]})
    return cases, parallel


def rows_diff(got_rows, want_rows, tie=0.0):
    """Largest |difference| and top-1 agreement of rows of logits. With
    tie > 0, a row whose wanted top-1 leads its runner-up by at most 2*tie
    counts as agreeing (a tie within that tolerance)."""
    if len(got_rows) != len(want_rows):
        raise RuntimeError(f"{len(got_rows)} rows of logits, want {len(want_rows)}")
    worst, top1 = 0.0, 0
    for got, want in zip(got_rows, want_rows):
        if len(got) != len(want):
            raise RuntimeError(f"{len(got)} logits, want {len(want)}")
        worst = max(worst, max(abs(x - y) for x, y in zip(got, want)))
        first, second = sorted(want, reverse=True)[:2]
        top1 += argmax(got) == argmax(want) or (tie > 0 and first - second <= 2 * tie)
    return worst, top1


def spread(doc):
    """The largest difference between the reference's own runs of the same
    input on the machine that made the golden file (the Go test's
    goldenDoc.spread): the cases across ubatch sizes per flash-attention
    setting, and the fused runs against the unfused ones."""
    worst = 0.0

    def diff(a, b):
        nonlocal worst
        for x, y in zip(a, b):
            worst = max(worst, max(abs(u - v) for u, v in zip(x, y)))

    runs = [doc]
    if "unfused" in doc:
        runs.append(doc["unfused"])
        for a, b in zip(doc["cases"], doc["unfused"]["cases"]):
            diff(a["logits"], b["logits"])
        for a, b in zip(doc["parallel"], doc["unfused"]["parallel"]):
            diff(a["logits"], b["logits"])
    for r in runs:
        for i, a in enumerate(r["cases"]):
            for b in r["cases"][i + 1:]:
                if a["fa"] == b["fa"]:
                    diff(a["logits"], b["logits"])
    return worst


def compare_logits(prog, path, doc, t, extra=(), new=True, unfused=False, env=None, tie=0.0):
    """prog's last-position logits against the golden file's: the three
    sequences as the golden "sequences" were made (extra: the options that
    reproduce the reference's defaults), then, with new, every "cases" entry
    and every "parallel" batch. With unfused, only the cases and parallel
    batches of the "unfused" runs (prog in env, with extra). A list of
    (what, max|d|, top-1 agreements, rows)."""
    seqs = [s["tokens"] for s in doc["sequences"]]

    def rows(opts):
        return [run_json(prog, ["logits", "-t", str(t), *opts, path] + [str(x) for x in s], env)["logits"]
                for s in seqs]

    runs, out = doc, []
    if unfused:
        runs = doc["unfused"]
    else:
        out.append(("sequences", *rows_diff(rows(extra), [s["logits"] for s in doc["sequences"]], tie), len(seqs)))
        extra = ()
        if not new:
            return out
    for c in runs["cases"]:
        w, k = rows_diff(rows((*extra, "-fa", c["fa"], "-ubatch", str(c["ubatch"]))), c["logits"], tie)
        out.append((f"fa {c['fa']} ubatch {c['ubatch']}", w, k, len(seqs)))
    for p in runs["parallel"]:
        r = run_json(prog, ["logits", "-seqs", *extra, "-fa", p["fa"], "-t", str(t), path] +
                     [",".join(map(str, x)) for x in p["sequences"]], env)
        if r.get("sequences") != p["sequences"]:
            raise RuntimeError("-seqs answered other sequences")
        w, k = rows_diff(r["logits"], p["logits"], tie)
        out.append((f"parallel fa {p['fa']}", w, k, len(p["sequences"])))
    if "long" in doc and not unfused:
        lg = doc["long"]
        for c in lg["cases"]:
            r = run_json(prog, ["logits", "-t", str(t), "-fa", c["fa"], "-ubatch", "512", "-decode", str(lg["decode"]),
                                path] + [str(x) for x in lg["tokens"]], env)
            w, k = rows_diff([r["logits"]], [c["logits"]], tie)
            out.append((f"long fa {c['fa']}", w, k, 1))
    return out


def greedy_top1(prog, path, doc, t, extra=()):
    """Teacher-forced top-1 agreement over the reference's greedy continuation:
    the prompt in one batch, then the reference's tokens one at a time (-decode),
    as the reference generated them."""
    gr = doc["greedy"]
    prompt, cont = gr["prompt"], gr["tokens"]
    seq = prompt + cont[:-1]
    r = run_json(prog, ["logits", "-all", "-decode", str(len(cont) - 1), "-t", str(t), *extra, path] +
                 [str(x) for x in seq])
    rows = r["logits"]
    if len(rows) != len(seq):
        raise RuntimeError(f"logits -all gave {len(rows)} rows for {len(seq)} tokens")
    agree = sum(argmax(rows[len(prompt) - 1 + i]) == cont[i] for i in range(len(cont)))
    return agree / len(cont)


def cpu_features(ours):
    """The CPU features of ours' ggml (`ggml-rs devices`), or None."""
    try:
        p = subprocess.run([ours, "devices"], capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    for line in p.stdout.splitlines():
        if line.startswith("CPU features:"):
            return line.split(":", 1)[1].split()
    return None


def golden_cpu(golden_dir):
    """The CPU features the golden files were made with (cpu-features)."""
    try:
        with open(os.path.join(golden_dir, "cpu-features")) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    return line.split()
    except OSError:
        pass
    return None


def check(a):
    failures = 0
    here, made = cpu_features(a.ours), golden_cpu(a.golden)
    same_cpu = here is not None and here == made
    print(f"CPU features here: {' '.join(here) if here else 'unknown (no go/bin/ggml-rs)'}; the golden files': "
          f"{' '.join(made) if made else 'unknown'}: " +
          ("the golden files' tolerances" if same_cpu else f"{OTHER_CPU_SPREADS} times each model's spread"))
    ours_ok = os.access(a.ours, os.X_OK)
    ours_note, ours_new = None, False
    if ours_ok:
        p = subprocess.run([a.ours, "logits", "-h"], capture_output=True, text=True)
        if "not implemented" in (p.stdout + p.stderr) or "unknown command" in (p.stdout + p.stderr).lower():
            ours_ok, ours_note = False, "go/bin/ggml-rs has no `logits` command yet"
        elif "-seqs" in p.stdout + p.stderr:
            ours_new = True
        else:
            ours_note = ("go/bin/ggml-rs logits lacks -seqs (and so -ubatch): the golden \"cases\" and "
                         "\"parallel\" batches were compared for the reference only")
    else:
        ours_note = f"{os.path.relpath(a.ours, ROOT)} is not built (make runner)"

    # Per model: the largest |d| of the reference against its golden file over
    # every row (the sequences, each case, the parallel batches), the rows
    # whose top-1 agrees, and its greedy continuation; then ours likewise.
    print(f"{'model':<22} {'ref max|d|':>10} {'top-1':>7} {'greedy':>6} | {'ours max|d|':>11} {'top-1':>7} "
          f"{'greedy top-1':>12}")
    for m in MODELS:
        if a.only and m not in a.only.split(","):
            continue
        gpath = os.path.join(a.golden, f"ref_{m}.json")
        path = os.path.join(a.models, m + ".gguf")
        with open(gpath) as f:
            doc = json.load(f)
        line, notes = f"{m:<22} ", []
        if sha256(path) != doc["model_sha256"]:
            print(f"{m}: the generated model differs from the one the golden file was made from "
                  "(gen-models.py, numpy or gguf changed?)")
            failures += 1
        # Reference against golden.
        # On another CPU than the golden files': OTHER_CPU_SPREADS times the
        # reference's own spread, top-1 required beyond that.
        other = 0.0 if same_cpu else OTHER_CPU_SPREADS * spread(doc)
        try:
            tol = max(REF_TOL, other)
            res = [(w, d, k, n, tol) for w, d, k, n in compare_logits(a.ref, path, doc, a.t, tie=other)]
            if "unfused" in doc:
                res += [(f"unfused {w}", d, k, n, tol) for w, d, k, n in
                        compare_logits(a.ref, path, doc, a.t, unfused=True, env=UNFUSED_ENV, tie=other)]
            g = run_json(a.ref, ["greedy", "-n", str(doc["greedy"]["n"]), "-t", str(a.t), path] +
                         [str(x) for x in doc["greedy"]["prompt"]])
        except (RuntimeError, ValueError, KeyError) as e:
            failures += 1
            print(line + f"reference failed: {e}")
            continue
        same = sum(x == y for x, y in zip(g["tokens"], doc["greedy"]["tokens"]))
        worst = max(r[1] for r in res)
        top1, rows = sum(r[2] for r in res), sum(r[3] for r in res)
        ok = all(d <= tol for _, d, _, _, tol in res) and top1 == rows and same == doc["greedy"]["n"]
        failures += not ok
        notes += [f"    reference, {w}: max|d| {d:.2e} (at most {tol:.2e}), top-1 {k}/{n}" for w, d, k, n, tol in res
                  if d > tol or k != n]
        line += f"{worst:>10.2e} {top1:>3}/{rows:<3} {same:>2}/{doc['greedy']['n']} {'ok' if ok else 'FAIL'} |"
        # Ours against golden.
        if ours_ok:
            try:
                tol = max(OURS_TOL[m.rsplit("-", 1)[1]], other)
                res = [(w, d, k, n, tol) for w, d, k, n in
                       compare_logits(a.ours, path, doc, a.t, OURS_ARGS, ours_new, tie=other)]
                frac = greedy_top1(a.ours, path, doc, a.t, OURS_ARGS)
                if "unfused" in doc and ours_new:
                    # Our primitive delta net against the reference's unfused one.
                    res += [(f"primitive {w}", d, k, n, tol) for w, d, k, n in
                            compare_logits(a.ours, path, doc, a.t, ("-delta-net", "primitive"), unfused=True,
                                           tie=other)]
                    frac = min(frac, greedy_top1(a.ours, path, {"greedy": doc["unfused"]["greedy"]}, a.t,
                                                 OURS_ARGS + ("-delta-net", "primitive")))
                worst = max(r[1] for r in res)
                top1, rows = sum(r[2] for r in res), sum(r[3] for r in res)
                ok = all(d <= tol for _, d, _, _, tol in res) and top1 == rows and frac >= OURS_MIN_TOP1
                failures += not ok
                notes += [f"    ours, {w}: max|d| {d:.2e} (at most {tol:.2e}), top-1 {k}/{n}"
                          for w, d, k, n, tol in res if d > tol or k != n]
                line += f" {worst:>11.2e} {top1:>3}/{rows:<3} {frac:>11.1%} {'ok' if ok else 'FAIL'}"
            except (RuntimeError, ValueError, KeyError) as e:
                failures += 1
                line += f" ours failed: {e}"
        else:
            line += " ours: -"
        print("\n".join([line] + notes))
    print(f"\n{'tokenizer':<18} {'strings':>8} {'ref':>9} {'ours':>9}")
    ours_tok = ours_ok and subprocess.run([a.ours, "tokenize", "-h"], capture_output=True).returncode == 0
    for m, where in TOKEN_VOCABS:
        with open(os.path.join(a.golden, f"tokens_{m}.json"), encoding="utf-8") as f:
            doc = json.load(f)
        path = os.path.join(getattr(a, where), m + ".gguf")
        if sha256(path) != doc["model_sha256"]:
            print(f"{m}: the vocabulary differs from the one the golden file was made from")
            failures += 1
        n = len(doc["cases"])
        line, notes = f"{m:<18} {n:>8}", []
        for prog, on in ((a.ref, True), (a.ours, ours_tok)):
            if not on:
                line += f" {'-':>9}"
                continue
            try:
                bad = check_tokens(prog, path, doc)
            except (RuntimeError, ValueError, KeyError) as e:
                failures += 1
                line += f" {'FAIL':>9}"
                notes.append(f"    {os.path.basename(prog)}: {e}")
                continue
            failures += bool(bad)
            line += f" {n - len(bad):>5}/{n:<3}"
            notes += [f"    {os.path.basename(prog)} differs on {e}" for e in bad[:5]]
        print("\n".join([line] + notes))
    if ours_note:
        print(f"parity: ours not compared: {ours_note}")
    print("parity: " + ("ok" if failures == 0 else f"{failures} failure(s)"))
    return 1 if failures else 0


# --- real weights ----------------------------------------------------------------

# The real models (fetched outside the clone: scripts/fetch-gemma3.sh,
# scripts/fetch-smollm2.sh): name -> (file name in the cache, chat template:
# None for the file's own, else a template file). The Gemma 3 270M file
# carries no chat template; Gemma's turn format is Gemma 2's published
# template, which renders a user turn as Gemma 3's does.
REAL_MODELS = {
    "gemma3-270m": ("gemma-3-270m-q4_k_m.gguf", "go/chat/testdata/templates/google-gemma-2-2b-it.jinja"),
    "smollm2-135m": ("SmolLM2-135M-Instruct.Q4_1.gguf", None),
}
# Prompts of the logits check: short, a paragraph, and one longer than
# Gemma 3's 512-token sliding window (its local layers then mask).
REAL_PROMPTS = [
    "The capital of France is",
    "Photosynthesis is the process by which green plants and some other organisms use sunlight to synthesize "
    "foods from carbon dioxide and water. In plants, it generally involves the green pigment chlorophyll and",
    " ".join(f"Step {i}: add {i * 7 % 13} apples to the basket, then count them again." for i in range(1, 51)) +
    " After all of these steps, the number of apples in the basket is",
]
REAL_CASES = [("on", 512), ("on", 32), ("off", 512), ("off", 7)]
REAL_TOP = 64  # the reference's largest logits kept per row
REAL_CHAT = "Give me three tips for a good night's sleep."
REAL_GREEDY = 48


def gguf_metadata(path, keys):
    """The values of some string, bool and integer keys of a GGUF file's
    metadata (standard library only; arrays are skipped)."""
    import struct
    out = {}
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def rstr():
            return f.read(rd("Q")).decode("utf-8", "replace")
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        fmts = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

        def value(t):
            if t == 8:
                return rstr()
            if t == 9:
                et, n = rd("I"), rd("Q")
                if et == 8:
                    for _ in range(n):
                        f.seek(rd("Q"), 1)
                elif et == 9:
                    raise ValueError("nested arrays")
                else:
                    f.seek(n * sizes[et], 1)
                return None
            return rd(fmts[t])
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        rd("I"); rd("Q")
        for _ in range(rd("Q")):
            k = rstr()
            v = value(rd("I"))
            if k in keys:
                out[k] = v
    return out


def real_golden(a):
    """tests/golden/real_<name>.json for the real models: the reference's
    largest logits of REAL_PROMPTS in each of REAL_CASES, its tokenizer on
    the tokenizer strings and the prompts, and a chat turn rendered by
    llama-ref chat, tokenized and continued greedily."""
    import tempfile
    cache = os.environ.get("GGML_RS_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "ggml-rs"))
    for name, (fname, template) in REAL_MODELS.items():
        if a.only and name not in a.only.split(","):
            continue
        path = os.path.join(cache, "models", fname)
        meta = gguf_metadata(path, {"tokenizer.chat_template"})
        doc = {"model": name, "file": fname, "made_by": "scripts/parity.py real-golden",
               "model_sha256": sha256(path),
               "reference": "llama.cpp from llama-cpp-sys-2 0.1.161 (our ggml patches), tools/llama-ref",
               "note": f"logits: the reference's {REAL_TOP} largest last-position logits (ids and values) per "
                       "case (flash attention, n_ubatch); tokens: llama_tokenize plain and special"}
        prompts = []
        for text in REAL_PROMPTS:
            toks = run_json(a.ref, ["tokenize", "-special", path, text])["tokens"]
            cases = []
            for fa, ub in REAL_CASES:
                row = run_json(a.ref, ["logits", "-fa", fa, "-ubatch", str(ub), "-t", str(a.t), path] +
                               [str(t) for t in toks])["logits"]
                top = sorted(range(len(row)), key=lambda i: -row[i])[:REAL_TOP]
                cases.append({"fa": fa, "ubatch": ub, "ids": top, "logits": round6([row[i] for i in top])})
            prompts.append({"text": text, "tokens": toks, "cases": cases})
        doc["prompts"] = prompts
        tcases = [encode_case(c) for c in token_strings()]
        r = tokenize_batch(a.ref, path, tcases)
        doc["tokens"] = [{**e, "plain": res["plain"], "special": res["special"]}
                         for e, res in zip(tcases, r["results"]) if "error" not in res]
        # The chat turn.
        with tempfile.TemporaryDirectory() as tmp:
            tfile = os.path.join(ROOT, template) if template else os.path.join(tmp, "template.jinja")
            if not template:
                with open(tfile, "w") as f:
                    f.write(meta["tokenizer.chat_template"])
            conv = os.path.join(tmp, "conv.json")
            with open(conv, "w") as f:
                json.dump({"conversations": [{"name": "turn", "messages": [{"role": "user", "content": REAL_CHAT}]}]}, f)
            # The BOS the tokenizer adds (none: the empty text gives none).
            ids = run_json(a.ref, ["tokenize", "-special", path, ""])["tokens"]
            bos = ids[0] if ids else None
            rendered = run_json(a.ref, ["chat", tfile, conv])["results"][0]
        if "error" in rendered:
            raise SystemExit(f"{name}: llama-ref chat: {rendered['error']}")
        prompt = rendered["prompt"]
        ctoks = run_json(a.ref, ["tokenize", "-special", path, prompt])["tokens"]
        if bos is not None and len(ctoks) > 1 and ctoks[0] == bos and ctoks[1] == bos:
            # The template wrote the BOS the tokenizer adds: llama.cpp keeps
            # one (as go/chat's AddBOS).
            ctoks = ctoks[1:]
        g = run_json(a.ref, ["greedy", "-n", str(REAL_GREEDY), "-t", str(a.t), path] + [str(t) for t in ctoks])
        doc["chat"] = {"template": template or "the file's", "user": REAL_CHAT, "prompt": prompt,
                       "tokens": ctoks, "greedy": g["tokens"]}
        out = os.path.join(a.golden, f"real_{name}.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print(f"parity: wrote {os.path.relpath(out, ROOT)} (chat greedy {g['tokens'][:8]}...)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["golden", "mtp-golden", "tokens-golden", "embed-golden", "real-golden", "check"])
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("--models", default=os.path.join(ROOT, ".cache/models"))
    ap.add_argument("--vocabs", default=os.path.join(ROOT, ".cache/vocabs"))
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests/golden"))
    ap.add_argument("-t", type=int, default=min(os.cpu_count() or 1, 4))
    ap.add_argument("--only", default="", help="golden, tokens-golden, mtp-golden, check: only these models "
                    "(comma-separated); the others' golden files are left as they are")
    a = ap.parse_args()
    if a.mode == "golden":
        return golden(a)
    if a.mode == "mtp-golden":
        return mtp_golden(a)
    if a.mode == "tokens-golden":
        return tokens_golden(a)
    if a.mode == "embed-golden":
        return embed_golden(a)
    if a.mode == "real-golden":
        return real_golden(a)
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
