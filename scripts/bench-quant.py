#!/usr/bin/env python3
"""Quantizing: ggml-rs quantize beside llama.cpp's llama_model_quantize.

For each model and file type, alternates round by round (so that drift of
the machine hits both):
  go/bin/ggml-rs quantize -type TYPE -threads N MODEL OUT
  llama-ref quantize -t N TYPE MODEL OUT
and prints the wall time of each (mean ± sd over rounds), the ratio
ours / llama.cpp (below 1: we are faster), whether the two outputs of
every round were byte-identical, and the mean CPU time (user + sys) of
each: on a machine shared with other work, wall time includes waiting
for the CPUs, CPU time does not. Outputs go to a temporary folder and are
removed.

Standard library only. Usage: bench-quant.py [-t N] [--rounds 3]
[--types Q4_K_M,Q8_0] [--ref PATH] [--ours PATH] MODEL...
"""
import argparse
import filecmp
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def timed(args, what, timeout):
    """Runs args; returns its wall time and CPU time (user + sys), in s."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise RuntimeError(f"{what}: {err[-1] if err else 'exit %d' % p.returncode}")
    return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def mean_sd(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-t", type=int, default=os.cpu_count() or 1, help="threads for both")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--types", default="Q4_K_M,Q8_0", help="comma-separated file types")
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    # Quantizing a quantized model only copies it: F16/BF16/F32 inputs only.
    models = [m for m in a.models if any(m.endswith(f"-{t}.gguf") for t in ("f16", "bf16", "f32"))]
    if not models:
        sys.exit("bench-quant: no F16/BF16/F32 model among the arguments")
    print(f"threads {a.t}, {a.rounds} rounds, alternating; time in s (mean ± sd)")
    print(f"{'model':<32} {'type':<8} {'ggml-rs':>14} {'llama.cpp':>14} {'ratio':>7}  same bytes  {'CPU ggml-rs':>11} {'llama.cpp':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="bench-quant-") as tmp:
        out_ours, out_ref = os.path.join(tmp, "ours.gguf"), os.path.join(tmp, "ref.gguf")
        for model in models:
            for ftype in [t for t in a.types.split(",") if t]:
                ours, ref, cpu_ours, cpu_ref, same = [], [], [], [], True
                for r in range(a.rounds):
                    # Alternate which goes first, so that neither always
                    # meets a cold or a warm page cache.
                    order = ["ours", "ref"] if r % 2 == 0 else ["ref", "ours"]
                    for who in order:
                        if who == "ours":
                            wall, cpu = timed([a.ours, "quantize", "-q", "-type", ftype.upper(), "-threads", str(a.t), model, out_ours],
                                              "ggml-rs quantize", a.timeout)
                            ours.append(wall)
                            cpu_ours.append(cpu)
                        else:
                            wall, cpu = timed([a.ref, "quantize", "-t", str(a.t), ftype.upper(), model, out_ref],
                                              "llama-ref quantize", a.timeout)
                            ref.append(wall)
                            cpu_ref.append(cpu)
                    same = same and filecmp.cmp(out_ours, out_ref, shallow=False)
                (mo, so), (mr, sr) = mean_sd(ours), mean_sd(ref)
                name = os.path.basename(model)
                co, cr = sum(cpu_ours) / len(cpu_ours), sum(cpu_ref) / len(cpu_ref)
                print(f"{name:<32} {ftype:<8} {mo:8.2f} ± {so:4.2f} {mr:8.2f} ± {sr:4.2f} {mo / mr:7.3f}  {'yes' if same else 'NO':<10}  {co:11.2f} {cr:9.2f} {co / cr:6.3f}")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
