#!/usr/bin/env python3
"""Speculative decoding: ggml-rs beside llama.cpp on the same models.

For each model, alternates round by round (so that drift of the machine hits
both):
  go/bin/ggml-rs bench-spec -json -r 1 ...   oracle drafts at acceptance
      rates 0/50/80/100% and the model's MTP head, each against plain
      decoding measured in alternation within the run
  llama-ref spec -r 1 ...                   llama.cpp's speculative decoding
      (n_rs_seq rollback) with the same oracle drafts (-oracle: the same
      random numbers) and with the MTP head (draft-mtp's draft/process),
      each against its plain decoding
with the same prompt (token i = (7919 i + 13) mod vocab), generation length,
draft length and threads, greedy. Prints per row: the acceptance rates,
tokens per verification step, speculative and plain tokens/s (mean ± sd over
rounds) and their ratio, for ours and (MTP rows) llama.cpp's, the ratio of
the two speculative speeds, and whether the speculative tokens equalled
plain decoding's in every round.

Standard library only. Usage: bench-spec.py [-n 256] [-p 32] [--draft 3]
[-t N] [--rounds 3] [--ref PATH] [--ours PATH] MODEL...
"""
import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def last_json(p, what):
    if p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise RuntimeError(f"{what}: {err[-1] if err else 'exit %d' % p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def ngl(a):
    """-ngl for both programs when --ngl is given (ours alone defaults to
    every layer on the GPU, llama-ref to none)."""
    return [] if a.ngl is None else ["-ngl", str(a.ngl)]


def ours(a, model):
    rates = ",".join(str(float(r) / 100) for r in a.rates.split(",") if r)
    args = [a.ours, "bench-spec", "-json", "-r", "1", "-n", str(a.n), "-p", str(a.p), "-draft-max", str(a.draft),
            "-rates", rates, "-threads", str(a.t)] + ngl(a) + [model]
    return last_json(subprocess.run(args, capture_output=True, text=True, timeout=a.timeout), "ggml-rs bench-spec")


def ref(a, model, drafter):
    args = [a.ref, "spec", "-r", "1", "-n", str(a.n), "-p", str(a.p), "-draft", str(a.draft), "-t", str(a.t)] + ngl(a)
    if drafter != "mtp":
        args += ["-oracle", str(float(drafter.split()[1].rstrip("%")) / 100)]
    return last_json(subprocess.run(args + [model], capture_output=True, text=True, timeout=a.timeout), "llama-ref spec")


def mean_sd(xs):
    if not xs:
        return None
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else 0.0
    return m, sd


def fmt(ms):
    return f"{ms[0]:7.2f} ± {ms[1]:5.2f}" if ms else f"{'-':>15}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("-n", type=int, default=256)
    ap.add_argument("-p", type=int, default=32)
    ap.add_argument("--draft", type=int, default=3)
    ap.add_argument("--rates", default="0,50,80,100", help="the oracle's acceptance rates, in percent")
    ap.add_argument("-t", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run")
    ap.add_argument("--ngl", type=int, help="layers on the GPU, for both programs (999: all)")
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    a = ap.parse_args()

    print(f"bench-spec: {a.n} tokens after {a.p}, {a.draft} drafts a step, greedy, {a.t} threads, {a.rounds} rounds; "
          "tokens/s mean ± sd over rounds")
    cols = ["model", "draft", "accepted", "tok/step", "ggml-rs spec", "ggml-rs plain", "ratio",
            "llama.cpp spec", "llama.cpp plain", "ratio", "spec ours/llama", "identical"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(cols) - 1)) + "|---|")
    drafters = [f"oracle {r}%" for r in a.rates.split(",") if r] + ["mtp"]
    for model in a.models:
        runs_ours, runs_ref, notes = [], {d: [] for d in drafters}, []
        for _ in range(a.rounds):
            try:
                runs_ours.append(ours(a, model))
            except (RuntimeError, ValueError, subprocess.TimeoutExpired, OSError) as e:
                notes.append(f"ggml-rs: {e}")
            for d in drafters:
                try:
                    runs_ref[d].append(ref(a, model, d))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired, OSError) as e:
                    notes.append(f"llama.cpp {d}: {e}")
        name = os.path.basename(model).removesuffix(".gguf")
        for d in drafters:
            rows = [row for run in runs_ours for row in run["rows"] if row["draft"] == d]
            refs = runs_ref[d]
            if not rows and not refs:
                continue
            o_spec = mean_sd([r["tps"] for r in rows])
            o_plain = mean_sd([r["plain_tps"] for r in rows])
            r_spec = mean_sd([r["spec"]["tps"] for r in refs])
            r_plain = mean_sd([r["plain"]["tps"] for r in refs])
            acc_o = f"{100 * sum(r['accepted'] for r in rows) / len(rows):.1f}%" if rows else "-"
            dr = sum(r["drafted"] for r in refs)
            acc_r = f"{100 * sum(r['accepted'] for r in refs) / dr:.1f}%" if dr else "-"
            per = f"{sum(r['tokens_per_step'] for r in rows) / len(rows):.2f}" if rows else "-"
            same_o = ("yes" if all(r["identical"] for r in rows) else "no") if rows else "-"
            same_r = ("yes" if all(r["identical"] for r in refs) else "no") if refs else "-"
            ratio_o = f"{o_spec[0] / o_plain[0]:.2f}" if o_spec and o_plain else "-"
            ratio_r = f"{r_spec[0] / r_plain[0]:.2f}" if r_spec and r_plain else "-"
            vs = f"{o_spec[0] / r_spec[0]:.2f}" if o_spec and r_spec else "-"
            print(f"| {name} | {d} | {acc_o} / {acc_r} | {per} | {fmt(o_spec)} | {fmt(o_plain)} | {ratio_o} | "
                  f"{fmt(r_spec)} | {fmt(r_plain)} | {ratio_r} | {vs} | {same_o} / {same_r} |", flush=True)
        for n in notes:
            print(f"bench-spec: {name}: {n}")
    print("accepted, identical: ours / llama.cpp's; identical: the speculative tokens equal plain decoding's in every round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
