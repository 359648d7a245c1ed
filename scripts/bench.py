#!/usr/bin/env python3
"""ggml-rs's runner against llama.cpp on the same generated models.

For each model, runs `go/bin/ggml-rs bench` and `llama-ref bench` (the
llama.cpp reference, tools/llama-ref) with the same prompt/generation lengths,
repetitions and threads, alternating the two programs round by round so that
drift of the machine hits both, and prints tokens/s of each and the ratio
ours/llama.cpp for prompt processing (pp) and generation (tg).

With --ik PATH (tools/ik-ref, `make ik-ref`: ik_llama.cpp, the CPU-tuned fork
of llama.cpp, as an anchor), each round also runs `ggml-rs bench
-fast-kernels` (our opt-in kernels that round differently from ggml's),
`ik-ref bench` and `ik-ref bench -rtr` (ik's opt-in run-time repacking), and
the table gets the columns fast, ik, ik rtr and ours/ik: the better of ours
and ours fast over the better of ik and ik rtr, each program's own opt-in
against the other's. A model ik cannot run shows "-" there, with the reason
after the table.

The CLI contract both programs follow:
  PROG bench -p 512 -n 128 -r 3 -t N -json MODEL
    -> JSON {"pp": {"n", "tps", "sd"}, "tg": {"n", "tps", "sd"}, ...}
    (warm-up first; pp: the prompt in one batch; tg: one token per decode
    from an empty cache; the KV cache cleared before each repetition)

Standard library only. Usage: bench.py [-p 512] [-n 128] [-r 3] [-t N]
[--rounds 1] [--ref PATH] [--ours PATH] [--ik PATH] MODEL...
"""
import argparse
import json
import math
import os
import subprocess
import sys
import threading

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def ik_failure(text):
    """The telling line of a failed ik-ref run (an assertion or load error
    comes before ggml's backtrace noise)."""
    lines = text.strip().splitlines()
    for marker in ("GGML_ASSERT", "ik-ref:", "error"):
        for line in lines:
            if marker in line:
                return line.strip()
    return lines[-1] if lines else "no output"


def execute(args, timeout):
    """Runs args to completion: (returncode, stdout, stderr, peak resident
    set size in MiB, from the kernel's accounting of that one process)."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = [], []
    readers = [threading.Thread(target=lambda f=f, into=into: into.append(f.read())) for f, into in ((p.stdout, out), (p.stderr, err))]
    for r in readers:
        r.start()
    expired = threading.Event()
    timer = threading.Timer(timeout, lambda: (expired.set(), p.kill()))
    timer.start()
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    for r in readers:
        r.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if expired.is_set():
        raise subprocess.TimeoutExpired(args, timeout)
    return p.returncode, "".join(out), "".join(err), usage.ru_maxrss / 1024


PEAK = {}  # (model, column) -> the largest peak RSS in MiB over the rounds


def run(prog, a, model, ours=False, extra=(), ik=False, column=None):
    # ggml-rs bench takes -threads and prints llama-bench's markdown table
    # (| ... | test | t/s |, "mean ± sd"); llama-ref and ik-ref take -t and
    # -json (ggml-rs also -fast-kernels, ik-ref -rtr, in extra).
    args = [prog, "bench", "-p", str(a.p), "-n", str(a.n), "-r", str(a.r)]
    if a.ngl is not None and not ik:
        args += ["-ngl", str(a.ngl)]
    args += ["-threads", str(a.t), *extra, model] if ours else ["-t", str(a.t), "-json", *extra, model]
    code, stdout, stderr, peak = execute(args, a.timeout)
    if code != 0 and ik:
        raise RuntimeError(f"exit {code}: {ik_failure(stderr + stdout)}")
    if code != 0:
        raise RuntimeError((stderr or stdout).strip().splitlines()[-1] if (stderr or stdout).strip() else f"exit {code}")
    if column:
        PEAK[(model, column)] = max(PEAK.get((model, column), 0), peak)
    if not ours:
        return json.loads(stdout.strip().splitlines()[-1])
    out = {}
    for line in stdout.splitlines():
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
    ap.add_argument("--ngl", type=int, help="layers on the GPU, for both programs (999: all; "
                    "ours alone defaults to all, llama-ref to none); not for ik")
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("--ik", help="ik-ref (make ik-ref): add ik_llama.cpp's columns")
    a = ap.parse_args()

    ours_note = None
    if not os.access(a.ours, os.X_OK):
        ours_note = f"{os.path.relpath(a.ours, ROOT)} is not built"
    print(f"bench: pp{a.p} and tg{a.n}, {a.r} repetitions after a warm-up, {a.rounds} round(s), {a.t} threads; tokens/s mean ± sd")
    ik_head = ik_rule = ""
    if a.ik:
        ik_head = f" {'ggml-rs fast':>17} | {'ik':>17} | {'ik rtr':>17} | {'ours/ik':>7} |"
        ik_rule = f"{'-' * 19}|{'-' * 19}|{'-' * 19}|{'-' * 9}|"
    print(f"| {'model':<20} | {'test':>6} | {'ggml-rs':>17} | {'llama.cpp':>17} | {'ratio':>6} |{ik_head}")
    print(f"|{'-' * 22}|{'-' * 8}|{'-' * 19}|{'-' * 19}|{'-' * 8}|{ik_rule}")
    ik_notes = []
    for model in a.models:
        ours, ref, fast, ik, ikr = [], [], [], [], []
        ik_ok = ikr_ok = bool(a.ik)
        for _ in range(a.rounds):
            if ours_note is None:
                try:
                    ours.append(run(a.ours, a, model, ours=True, column="ggml-rs"))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                    ours_note = f"ggml-rs bench failed: {e}"
            ref.append(run(a.ref, a, model, column="llama.cpp"))
            if a.ik and ours_note is None:
                try:
                    fast.append(run(a.ours, a, model, ours=True, extra=("-fast-kernels",), column="ggml-rs fast"))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                    ours_note = f"ggml-rs bench -fast-kernels failed: {e}"
            if ik_ok:
                try:
                    ik.append(run(a.ik, a, model, ik=True, column="ik"))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                    ik_notes.append(f"{os.path.basename(model)}: {e}")
                    ik_ok = False
            if ikr_ok:
                try:
                    ikr.append(run(a.ik, a, model, extra=("-rtr",), ik=True, column="ik rtr"))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                    ik_notes.append(f"{os.path.basename(model)} with -rtr: {e}")
                    ikr_ok = False
        name = os.path.basename(model).removesuffix(".gguf")
        for key, n in (("pp", a.p), ("tg", a.n)):
            r = pool(ref, key)
            o = pool(ours, key) if ours else None
            if r is None:
                continue
            rs = f"{r[0]:8.2f} ± {r[1]:6.2f}"
            os_ = f"{o[0]:8.2f} ± {o[1]:6.2f}" if o else f"{'-':>17}"
            ratio = f"{o[0] / r[0]:6.2f}" if o else f"{'-':>6}"
            cols = ""
            if a.ik:
                f = pool(fast, key) if fast else None
                k = pool(ik, key) if ik_ok else None
                kr = pool(ikr, key) if ikr_ok else None
                fs = f"{f[0]:8.2f} ± {f[1]:6.2f}" if f else f"{'-':>17}"
                ks = f"{k[0]:8.2f} ± {k[1]:6.2f}" if k else f"{'-':>17}"
                krs = f"{kr[0]:8.2f} ± {kr[1]:6.2f}" if kr else f"{'-':>17}"
                best = max((x[0] for x in (k, kr) if x), default=None)
                mine = max((x[0] for x in (o, f) if x), default=None)
                kratio = f"{mine / best:7.2f}" if mine and best else f"{'-':>7}"
                cols = f" {fs} | {ks} | {krs} | {kratio} |"
            print(f"| {name:<20} | {key + str(n):>6} | {os_} | {rs} | {ratio} |{cols}", flush=True)
    columns = [c for c in ("ggml-rs", "llama.cpp", "ggml-rs fast", "ik", "ik rtr") if any(k[1] == c for k in PEAK)]
    print(f"\npeak resident memory, MiB (largest over the rounds; model file size for scale)")
    print(f"| {'model':<20} | {'file':>6} |" + "".join(f" {c:>12} |" for c in columns))
    print(f"|{'-' * 22}|{'-' * 8}|" + "".join(f"{'-' * 14}|" for _ in columns))
    for model in a.models:
        cells = "".join(f" {PEAK[(model, c)]:12.0f} |" if (model, c) in PEAK else f" {'-':>12} |" for c in columns)
        print(f"| {os.path.basename(model).removesuffix('.gguf'):<20} | {os.path.getsize(model) / 2**20:6.0f} |{cells}")
    if ours_note:
        print(f"bench: ours not measured: {ours_note}; the reference alone is shown")
    for note in ik_notes:
        print(f"bench: ik_llama.cpp not measured on {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
