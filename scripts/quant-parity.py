#!/usr/bin/env python3
"""Byte identity of `ggml-rs quantize` with llama.cpp's llama_model_quantize.

For every generated small model with F16/F32 weights (and the converted
all-MiniLM-L6-v2 GGUF when present), every file type the command supports,
and a few flag combinations (-pure, -output-type, -token-embedding-type),
runs the reference (`llama-ref quantize`, tools/llama-ref) and ours
(`ggml-rs quantize`) on the same input and compares the two files byte for
byte. Prints the model x type table; exits 1 on any difference or failure.
`make test` checks only the sha256 of a sample (go/cmd/ggml-rs/
quantize_test.go), which was made with this comparison.

Standard library only. Options: --ref PATH, --ours PATH, --models DIR,
--minilm PATH, -t THREADS, --only MODEL,..., --types TYPE,...
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = [f"{a}-small-f16" for a in ("llama", "qwen3", "qwen3moe", "gpt-oss", "qwen3next", "qwen35", "qwen35moe")] + \
    [f"{a}-small-f32" for a in ("qwen3next", "qwen35", "qwen35moe")]
TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
         "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "F16", "BF16", "F32"]
# flag variants (same spelling in both programs), on a few types
VARIANTS = [
    (["-pure"], ["Q4_K_M", "Q2_K", "Q5_0", "IQ4_XS"]),
    (["-output-type", "q4_0", "-token-embedding-type", "q8_0"], ["Q4_K_M", "Q4_0"]),
    (["-output-type", "f16"], ["Q3_K_M", "Q8_0"]),
]


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit {p.returncode}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("--models", default=os.path.join(ROOT, ".cache/models"))
    ap.add_argument("--minilm", default=os.path.join(ROOT, ".cache/all-minilm-l6-v2.gguf"))
    ap.add_argument("-t", type=int, default=min(os.cpu_count() or 1, 4))
    ap.add_argument("--only", default="")
    ap.add_argument("--types", default="")
    a = ap.parse_args()
    inputs = [(m, os.path.join(a.models, m + ".gguf")) for m in MODELS]
    if os.path.exists(a.minilm):
        inputs.append(("all-minilm-l6-v2", a.minilm))
    if a.only:
        inputs = [i for i in inputs if i[0] in a.only.split(",")]
    types = a.types.split(",") if a.types else TYPES
    cases = [([], types)] + [(f, [t for t in ts if t in types]) for f, ts in VARIANTS]
    failures, total = 0, 0
    with tempfile.TemporaryDirectory(prefix="quant-parity-") as tmp:
        for name, path in inputs:
            if not os.path.exists(path):
                print(f"{name}: missing ({path}; make models)")
                failures += 1
                continue
            for flags, ts in cases:
                row = []
                for t in ts:
                    ref, ours = os.path.join(tmp, "ref.gguf"), os.path.join(tmp, "ours.gguf")
                    total += 1
                    try:
                        run([a.ref, "quantize", "-t", str(a.t)] + flags + [t, path, ref])
                    except RuntimeError as e:
                        row.append(f"{t}:REF-FAIL({e})")
                        failures += 1
                        continue
                    try:
                        run([a.ours, "quantize", "-q", "-threads", str(a.t)] + flags + ["-type", t, path, ours])
                    except RuntimeError as e:
                        row.append(f"{t}:FAIL({e})")
                        failures += 1
                        continue
                    same = filecmp.cmp(ref, ours, shallow=False)
                    failures += not same
                    row.append(f"{t}:{'=' if same else 'DIFFERS'}")
                label = name + (" " + " ".join(flags) if flags else "")
                print(f"{label:<60} {' '.join(row)}")
    print(f"quant-parity: {total - failures}/{total} identical" + ("" if failures == 0 else f", {failures} failure(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
