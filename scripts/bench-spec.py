#!/usr/bin/env python3
"""Speculative decoding: ggml-rs beside llama.cpp on the same models.

For each model, alternates round by round (so that drift of the machine hits
both):
  go/bin/ggml-rs bench-spec -json -r 1 ...   oracle drafts at acceptance
      rates 0/50/80/100% and the model's MTP head, each against plain
      decoding measured in alternation within the run
  llama-ref spec -r 1 ...                   llama.cpp's MTP speculative
      decoding (n_rs_seq rollback, draft-mtp's draft/process) against its
      plain decoding
with the same prompt (token i = (7919 i + 13) mod vocab), generation length,
draft length and threads, greedy. Prints per row: the acceptance rate,
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


def ours(a, model):
    args = [a.ours, "bench-spec", "-json", "-r", "1", "-n", str(a.n), "-p", str(a.p), "-draft-max", str(a.draft),
            "-threads", str(a.t), model]
    return last_json(subprocess.run(args, capture_output=True, text=True, timeout=a.timeout), "ggml-rs bench-spec")


def ref(a, model):
    args = [a.ref, "spec", "-r", "1", "-n", str(a.n), "-p", str(a.p), "-draft", str(a.draft), "-t", str(a.t), model]
    return last_json(subprocess.run(args, capture_output=True, text=True, timeout=a.timeout), "llama-ref spec")


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
    ap.add_argument("-t", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run")
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    a = ap.parse_args()

    print(f"bench-spec: {a.n} tokens after {a.p}, {a.draft} drafts a step, greedy, {a.t} threads, {a.rounds} rounds; "
          "tokens/s mean ± sd over rounds")
    cols = ["model", "draft", "accepted", "tok/step", "ggml-rs spec", "ggml-rs plain", "ratio",
            "llama.cpp spec", "llama.cpp plain", "ratio", "spec ours/llama", "identical"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(cols) - 1)) + "|---|")
    for model in a.models:
        runs_ours, runs_ref, notes = [], [], []
        for _ in range(a.rounds):
            for name, f, acc in (("ggml-rs", ours, runs_ours), ("llama.cpp", ref, runs_ref)):
                try:
                    acc.append(f(a, model))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired, OSError) as e:
                    notes.append(f"{name}: {e}")
        name = os.path.basename(model).removesuffix(".gguf")
        drafts = [r["draft"] for r in runs_ours[0]["rows"]] if runs_ours else []
        if runs_ref and "mtp" not in drafts:
            drafts.append("mtp")
        for d in drafts:
            rows = [row for run in runs_ours for row in run["rows"] if row["draft"] == d]
            o_spec = mean_sd([r["tps"] for r in rows])
            o_plain = mean_sd([r["plain_tps"] for r in rows])
            acc = f"{100 * sum(r['accepted'] for r in rows) / len(rows):5.1f}%" if rows else "-"
            per = f"{sum(r['tokens_per_step'] for r in rows) / len(rows):.2f}" if rows else "-"
            same = "yes" if rows and all(r["identical"] for r in rows) else ("no" if rows else "-")
            r_spec = r_plain = None
            if d == "mtp" and runs_ref:
                r_spec = mean_sd([r["spec"]["tps"] for r in runs_ref])
                r_plain = mean_sd([r["plain"]["tps"] for r in runs_ref])
                if not rows:
                    dr = sum(r["drafted"] for r in runs_ref)
                    acc = f"{100 * sum(r['accepted'] for r in runs_ref) / dr:5.1f}%" if dr else "-"
                same += " / " + ("yes" if all(r["identical"] for r in runs_ref) else "no")
            ratio_o = f"{o_spec[0] / o_plain[0]:.2f}" if o_spec and o_plain else "-"
            ratio_r = f"{r_spec[0] / r_plain[0]:.2f}" if r_spec and r_plain else "-"
            vs = f"{o_spec[0] / r_spec[0]:.2f}" if o_spec and r_spec else "-"
            print(f"| {name} | {d} | {acc} | {per} | {fmt(o_spec)} | {fmt(o_plain)} | {ratio_o} | "
                  f"{fmt(r_spec)} | {fmt(r_plain)} | {ratio_r} | {vs} | {same} |", flush=True)
        for n in notes:
            print(f"bench-spec: {name}: {n}")
    print("identical: the speculative tokens equal plain decoding's in every round (ours / llama.cpp's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
