#!/usr/bin/env python3
"""ggml-rs's runner against llama.cpp on the same generated models.

For each model, runs `go/bin/ggml-rs bench` and `llama-ref bench` (the
llama.cpp reference, tools/llama-ref) with the same prompt/generation lengths,
repetitions and threads, alternating the two programs round by round so that
drift of the machine hits both, and prints tokens/s of each and the ratio
ours/llama.cpp for prompt processing (pp) and generation (tg).

The CLI contract both programs follow:
  PROG bench -p 512 -n 128 -r 3 -t N -json MODEL
    -> JSON {"pp": {"n", "tps", "sd"}, "tg": {"n", "tps", "sd"}, ...}
    (warm-up first; pp: the prompt in one batch; tg: one token per decode
    from an empty cache; the KV cache cleared before each repetition)

Standard library only. Usage: bench.py [-p 512] [-n 128] [-r 3] [-t N]
[--rounds 1] [--ref PATH] [--ours PATH] MODEL...
"""
import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def run(prog, a, model, ours=False):
    # ggml-rs bench takes -threads and prints llama-bench's markdown table
    # (| ... | test | t/s |, "mean ± sd"); llama-ref takes -t and -json.
    args = [prog, "bench", "-p", str(a.p), "-n", str(a.n), "-r", str(a.r)]
    args += ["-threads", str(a.t), model] if ours else ["-t", str(a.t), "-json", model]
    p = subprocess.run(args, capture_output=True, text=True, timeout=a.timeout)
    if p.returncode != 0:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1] if (p.stderr or p.stdout).strip() else f"exit {p.returncode}")
    if not ours:
        return json.loads(p.stdout.strip().splitlines()[-1])
    out = {}
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and "±" in cells[-1] and cells[-2][:2] in ("pp", "tg"):
            m, sd = (float(x) for x in cells[-1].split("±"))
            out[cells[-2][:2]] = {"n": int(cells[-2][2:]), "tps": m, "sd": sd}
    if not out:
        raise RuntimeError("no pp/tg rows in ggml-rs bench's output")
    return out


def pool(results, key):
    """Mean and sd of tokens/s pooled over rounds (each round: mean, sd of r reps)."""
    xs = [r[key] for r in results if key in r]
    if not xs:
        return None
    m = sum(x["tps"] for x in xs) / len(xs)
    # Pooled variance: within-round variances plus the spread of round means.
    var = sum(x["sd"] ** 2 + (x["tps"] - m) ** 2 for x in xs) / len(xs)
    return m, math.sqrt(var)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per bench run")
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    a = ap.parse_args()

    ours_note = None
    if not os.access(a.ours, os.X_OK):
        ours_note = f"{os.path.relpath(a.ours, ROOT)} is not built"
    print(f"bench: pp{a.p} and tg{a.n}, {a.r} repetitions after a warm-up, {a.rounds} round(s), {a.t} threads; tokens/s mean ± sd")
    print(f"| {'model':<20} | {'test':>6} | {'ggml-rs':>17} | {'llama.cpp':>17} | {'ratio':>6} |")
    print(f"|{'-' * 22}|{'-' * 8}|{'-' * 19}|{'-' * 19}|{'-' * 8}|")
    for model in a.models:
        ours, ref = [], []
        for _ in range(a.rounds):
            if ours_note is None:
                try:
                    ours.append(run(a.ours, a, model, ours=True))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                    ours_note = f"ggml-rs bench failed: {e}"
            ref.append(run(a.ref, a, model))
        name = os.path.basename(model).removesuffix(".gguf")
        for key, n in (("pp", a.p), ("tg", a.n)):
            r = pool(ref, key)
            o = pool(ours, key) if ours else None
            if r is None:
                continue
            rs = f"{r[0]:8.2f} ± {r[1]:6.2f}"
            os_ = f"{o[0]:8.2f} ± {o[1]:6.2f}" if o else f"{'-':>17}"
            ratio = f"{o[0] / r[0]:6.2f}" if o else f"{'-':>6}"
            print(f"| {name:<20} | {key + str(n):>6} | {os_} | {rs} | {ratio} |", flush=True)
    if ours_note:
        print(f"bench: ours not measured: {ours_note}; the reference alone is shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
