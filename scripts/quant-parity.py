#!/usr/bin/env python3
"""Byte identity of `ggml-rs quantize` with llama.cpp's llama-quantize.

The reference is llama.cpp's own llama-quantize, built from the pinned
sources (scripts/build-llama-tools.sh: its llama_model_quantize, its
imatrix loader, its command line). For every generated small model with
F16/F32 weights (and the converted all-MiniLM-L6-v2 GGUF when present):

1. every file type (those that need an importance matrix refuse alike,
   or run where every tensor falls back to a type that needs none), and a
   few flag combinations (-pure, -output-type, -token-embedding-type,
   -tensor-type);
2. with an importance matrix: a deterministic one of llama-imatrix's GGUF
   format (scripts/gen-imatrix.py), every file type, the IQ1/IQ2/IQ3_XXS/
   Q2_K_S ones that need it included; the legacy format and
   -include-weights/-exclude-weights on a few; and, for the models
   llama-imatrix can run, the matrix llama-imatrix itself computes from a
   text (--real-imatrix, on by default).

Runs both programs on the same input (the same paths, since the imatrix
path is written to the output) and compares the two files byte for byte;
where both refuse (a file type that needs an importance matrix, given
none), the cell says so and counts as agreement.
Prints the model x type tables; exits 1 on any difference or failure.
`make test` checks only the sha256 of a sample (go/cmd/ggml-rs/
quantize_test.go), which was made with this comparison.

Options: --ref PATH (llama-quantize), --imatrix-tool PATH (llama-imatrix),
--ours PATH, --models DIR, --minilm PATH, -t THREADS, --only MODEL,...,
--types TYPE,..., --no-imatrix, --no-real-imatrix. Standard library only,
besides scripts/gen-imatrix.py (run with --py, the generator's Python).
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = [f"{a}-small-f16" for a in ("llama", "qwen2", "qwen3", "qwen3moe", "gpt-oss", "qwen3next", "qwen35", "qwen35moe", "gemma3", "gemma2", "olmo2", "olmo3", "mistral3", "lfm2", "lfm2moe", "deepseek2", "deepseek2mha", "glm4moelite", "llama4", "nemotron_h", "nemotron_h_moe", "gemma3n", "nomic-bert", "nomic-bert-moe")] + \
    [f"{a}-small-f32" for a in ("qwen3next", "qwen35", "qwen35moe")]
# file types that need no importance matrix
TYPES = ["Q1_0", "Q2_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4_MOE", "TQ1_0", "TQ2_0", "Q2_K",
         "IQ3_S", "IQ3_M", "IQ3_XS", "Q3_K_S", "Q3_K_M", "Q3_K_L", "IQ4_NL", "IQ4_XS", "Q4_K_S", "Q4_K_M",
         "Q5_K_S", "Q5_K_M", "Q6_K", "F16", "BF16", "F32"]
# those that do (llama-quantize refuses them without one)
IMATRIX_ONLY = ["IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "Q2_K_S"]
# with an imatrix: every type whose choice or data an imatrix changes
IMATRIX_TYPES = IMATRIX_ONLY + ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "IQ3_S", "IQ3_M", "IQ3_XS", "Q3_K_M",
                                "IQ4_NL", "IQ4_XS", "Q4_K_M", "Q5_K_S", "Q6_K", "TQ1_0", "Q8_0"]
# flag variants (ours, llama-quantize's), on a few types
VARIANTS = [
    ((["-pure"], ["--pure"]), ["Q4_K_M", "Q2_K", "Q5_0", "IQ4_XS", "IQ3_S"]),
    ((["-output-type", "q4_0", "-token-embedding-type", "q8_0"],
      ["--output-tensor-type", "q4_0", "--token-embedding-type", "q8_0"]), ["Q4_K_M", "Q4_0"]),
    ((["-output-type", "f16"], ["--output-tensor-type", "f16"]), ["Q3_K_M", "Q8_0"]),
    ((["-tensor-type", "attn_v=q8_0", "-tensor-type", r"blk\.1\.ffn_(up|down)=q5_k"],
      ["--tensor-type", "attn_v=q8_0", "--tensor-type", r"blk\.1\.ffn_(up|down)=q5_k"]), ["Q4_K_M", "Q3_K_S"]),
]
IMATRIX_VARIANTS = [
    ((["-include-weights", "ffn_"], ["--include-weights", "ffn_"]), ["IQ3_S", "Q4_K_M"]),
    ((["-exclude-weights", "attn_v"], ["--exclude-weights", "attn_v"]), ["Q4_0", "IQ4_XS"]),
]
# llama-imatrix runs a real text through these (others: its context or
# architecture support makes the run a test of llama-imatrix, not of us)
REAL_IMATRIX_MODELS = ["llama-small-f16", "qwen3-small-f16", "qwen3moe-small-f16", "qwen35-small-f16"]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        lines = [l for l in (p.stderr + p.stdout).strip().splitlines() if l.strip()]
        raise RuntimeError(lines[-1] if lines else f"exit {p.returncode}")


class Table:
    def __init__(self, a, tmp):
        self.a, self.tmp, self.failures, self.total = a, tmp, 0, 0

    def row(self, label, path, types, ours_flags, ref_flags):
        cells = []
        for t in types:
            ref, ours = os.path.join(self.tmp, "ref.gguf"), os.path.join(self.tmp, "ours.gguf")
            self.total += 1
            ref_err = ours_err = None
            try:
                run([self.a.ref] + ref_flags + [path, ref, t, str(self.a.t)])
            except RuntimeError as e:
                ref_err = e
            try:
                run([self.a.ours, "quantize", "-q", "-threads", str(self.a.t)] + ours_flags + ["-type", t, path, ours])
            except RuntimeError as e:
                ours_err = e
            if ref_err and ours_err:
                cells.append(f"{t}:both-refuse")  # e.g. a type that needs an imatrix, given none
                continue
            if ref_err or ours_err:
                cells.append(f"{t}:REF-FAIL({ref_err})" if ref_err else f"{t}:FAIL({ours_err})")
                self.failures += 1
                continue
            same = filecmp.cmp(ref, ours, shallow=False)
            self.failures += not same
            cells.append(f"{t}:{'=' if same else 'DIFFERS'}")
        print(f"{label:<64} {' '.join(cells)}", flush=True)


def real_imatrix(a, model, out, tmp):
    """llama-imatrix on a text (this script's own docstring, repeated)."""
    text = os.path.join(tmp, "imatrix-text.txt")
    with open(text, "w") as f:
        f.write((__doc__ + "\n") * 8)
    run([a.imatrix_tool, "-m", model, "-f", text, "-o", out, "-c", "128", "-b", "128", "-t", str(a.t),
         "--no-ppl", "--chunks", "4"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-tools/llama-quantize"))
    ap.add_argument("--imatrix-tool", default=os.path.join(ROOT, ".cache/llama-tools/llama-imatrix"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("--models", default=os.path.join(ROOT, ".cache/models"))
    ap.add_argument("--minilm", default=os.path.join(ROOT, ".cache/all-minilm-l6-v2.gguf"))
    ap.add_argument("--py", default=os.path.join(ROOT, ".cache/py/bin/python"))
    ap.add_argument("-t", type=int, default=min(os.cpu_count() or 1, 4))
    ap.add_argument("--only", default="")
    ap.add_argument("--types", default="")
    ap.add_argument("--no-imatrix", action="store_true")
    ap.add_argument("--no-real-imatrix", action="store_true")
    a = ap.parse_args()
    inputs = [(m, os.path.join(a.models, m + ".gguf")) for m in MODELS]
    if os.path.exists(a.minilm):
        inputs.append(("all-minilm-l6-v2", a.minilm))
    if a.only:
        inputs = [i for i in inputs if i[0] in a.only.split(",")]
    pick = (lambda ts: [t for t in ts if t in a.types.split(",")]) if a.types else (lambda ts: ts)
    with tempfile.TemporaryDirectory(prefix="quant-parity-") as tmp:
        tab = Table(a, tmp)
        present = []
        for name, path in inputs:
            if not os.path.exists(path):
                print(f"{name}: missing ({path}; make models)")
                tab.failures += 1
            else:
                present.append((name, path))
        print("-- without an importance matrix")
        for name, path in present:
            tab.row(name, path, pick(TYPES + IMATRIX_ONLY), [], [])
            for (ours, ref), ts in VARIANTS:
                tab.row(name + " " + " ".join(ours), path, pick(ts), ours, ref)
        if not a.no_imatrix:
            print("-- with an importance matrix (gen-imatrix.py; GGUF, legacy)")
            for name, path in present:
                im = os.path.join(tmp, name + ".imatrix.gguf")
                dat = os.path.join(tmp, name + ".imatrix.dat")
                run([a.py, os.path.join(ROOT, "scripts/gen-imatrix.py"), path, im])
                run([a.py, os.path.join(ROOT, "scripts/gen-imatrix.py"), "--legacy", path, dat])
                tab.row(name + " -imatrix", path, pick(IMATRIX_TYPES), ["-imatrix", im], ["--imatrix", im])
                tab.row(name + " -imatrix (legacy)", path, pick(["IQ2_XS", "Q4_K_M", "Q5_0"]),
                        ["-imatrix", dat], ["--imatrix", dat])
                for (ours, ref), ts in IMATRIX_VARIANTS:
                    tab.row(name + " -imatrix " + " ".join(ours), path, pick(ts),
                            ["-imatrix", im] + ours, ["--imatrix", im] + ref)
            if not a.no_real_imatrix:
                print("-- with llama-imatrix's own matrix of a text")
                for name, path in present:
                    if name not in REAL_IMATRIX_MODELS:
                        continue
                    im = os.path.join(tmp, name + ".real-imatrix.gguf")
                    try:
                        real_imatrix(a, path, im, tmp)
                    except RuntimeError as e:
                        print(f"{name}: llama-imatrix failed ({e})")
                        tab.failures += 1
                        continue
                    tab.row(name + " -imatrix (llama-imatrix)", path, pick(["IQ2_XXS", "IQ3_XXS", "Q4_K_M", "Q4_0"]),
                            ["-imatrix", im], ["--imatrix", im])
    print(f"quant-parity: {tab.total - tab.failures}/{tab.total} identical" +
          ("" if tab.failures == 0 else f", {tab.failures} failure(s)"))
    return 1 if tab.failures else 0


if __name__ == "__main__":
    sys.exit(main())
