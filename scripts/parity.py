#!/usr/bin/env python3
"""Parity of ggml-rs's runner with llama.cpp on generated models.

  parity.py golden   runs the reference (tools/llama-ref) on every generated
                     model and writes tests/golden/ref_<model>.json: the
                     last-position logits of three fixed token sequences and a
                     64-token greedy continuation.
  parity.py check    runs the reference again and compares it with the golden
                     files; then, when go/bin/ggml-rs answers `logits`, compares
                     ours with the golden files too.

The CLI contract both programs follow:
  PROG logits [-all] [-t N] MODEL TOKEN...  ->  JSON {"n_vocab", "tokens",
      "logits": last-position row, or with -all one row per position}
  PROG greedy -n 64 [-t N] MODEL TOKEN...   ->  JSON {"prompt", "tokens"}

Ours is scored by the largest absolute logit difference and the top-1
agreement over the greedy continuation, teacher-forced: the logits of every
position of prompt + continuation (one `logits -all` call) against the
reference's greedy tokens.

Standard library only. Options: --ref PATH, --ours PATH, --models DIR,
--golden DIR, -t THREADS.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODELS = [f"{a}-small-{t}" for a in ("llama", "qwen3") for t in ("f16", "q8_0", "q4_0")]
N_GREEDY = 64

# Tolerances. The reference against its own golden file: the same program on
# the same sources, so only a different CPU (ISA paths, thread split) moves it.
REF_TOL = 1e-2
# Ours against the reference, by weight type: the largest absolute difference
# of any logit (logits spread over about +-10 on these models).
OURS_TOL = {"f16": 5e-2, "q8_0": 5e-2, "q4_0": 5e-2}
OURS_MIN_TOP1 = 0.95


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


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def run_json(prog, args):
    p = subprocess.run([prog] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(prog)} {args[0]}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


def argmax(v):
    return max(range(len(v)), key=v.__getitem__)




def golden(a):
    os.makedirs(a.golden, exist_ok=True)
    for m in MODELS:
        path = os.path.join(a.models, m + ".gguf")
        probe = run_json(a.ref, ["logits", "-t", str(a.t), path, "3"])
        seqs = sequences(probe["n_vocab"])
        rows = []
        for s in seqs:
            r = run_json(a.ref, ["logits", "-t", str(a.t), path] + [str(t) for t in s])
            rows.append({"tokens": s, "logits": [float(f"{v:.6g}") for v in r["logits"]]})
        g = run_json(a.ref, ["greedy", "-n", str(N_GREEDY), "-t", str(a.t), path] + [str(t) for t in seqs[0]])
        doc = {
            "model": m,
            "made_by": "scripts/parity.py golden (make parity-golden)",
            "model_made_by": "scripts/gen-models.py --size small",
            "model_sha256": sha256(path),
            "reference": "llama.cpp from llama-cpp-sys-2 0.1.161 (our ggml patches), tools/llama-ref",
            "n_vocab": probe["n_vocab"],
            "sequences": rows,
            "greedy": {"prompt": seqs[0], "n": N_GREEDY, "tokens": g["tokens"]},
        }
        out = os.path.join(a.golden, f"ref_{m}.json")
        with open(out, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        print(f"parity: wrote {os.path.relpath(out, ROOT)} (greedy {g['tokens'][:8]}...)")


def compare_logits(prog, path, doc, t):
    """Largest |difference| and top-1 agreement of prog's last-position logits."""
    worst, top1 = 0.0, 0
    for s in doc["sequences"]:
        r = run_json(prog, ["logits", "-t", str(t), path] + [str(x) for x in s["tokens"]])
        got, want = r["logits"], s["logits"]
        if len(got) != len(want):
            raise RuntimeError(f"{len(got)} logits, want {len(want)}")
        worst = max(worst, max(abs(x - y) for x, y in zip(got, want)))
        top1 += argmax(got) == argmax(want)
    return worst, top1


def greedy_top1(prog, path, doc, t):
    """Teacher-forced top-1 agreement over the reference's greedy continuation."""
    gr = doc["greedy"]
    prompt, cont = gr["prompt"], gr["tokens"]
    seq = prompt + cont[:-1]
    r = run_json(prog, ["logits", "-all", "-t", str(t), path] + [str(x) for x in seq])
    rows = r["logits"]
    if len(rows) != len(seq):
        raise RuntimeError(f"logits -all gave {len(rows)} rows for {len(seq)} tokens")
    agree = sum(argmax(rows[len(prompt) - 1 + i]) == cont[i] for i in range(len(cont)))
    return agree / len(cont)


def check(a):
    failures = 0
    ours_ok = os.access(a.ours, os.X_OK)
    ours_note = None
    if ours_ok:
        p = subprocess.run([a.ours, "logits", "-h"], capture_output=True, text=True)
        if "not implemented" in (p.stdout + p.stderr) or "unknown command" in (p.stdout + p.stderr).lower():
            ours_ok, ours_note = False, "go/bin/ggml-rs has no `logits` command yet"
    else:
        ours_note = f"{os.path.relpath(a.ours, ROOT)} is not built (make runner)"

    print(f"{'model':<18} {'ref vs golden':>14} {'ref greedy':>10} | {'ours max|d|':>11} {'top1 3 seqs':>11} {'greedy top1':>11}")
    for m in MODELS:
        gpath = os.path.join(a.golden, f"ref_{m}.json")
        path = os.path.join(a.models, m + ".gguf")
        with open(gpath) as f:
            doc = json.load(f)
        line = f"{m:<18} "
        if sha256(path) != doc["model_sha256"]:
            print(f"{m}: the generated model differs from the one the golden file was made from "
                  "(gen-models.py, numpy or gguf changed?)")
            failures += 1
        # Reference against golden.
        worst, top1 = compare_logits(a.ref, path, doc, a.t)
        g = run_json(a.ref, ["greedy", "-n", str(doc["greedy"]["n"]), "-t", str(a.t), path] +
                     [str(x) for x in doc["greedy"]["prompt"]])
        same = sum(x == y for x, y in zip(g["tokens"], doc["greedy"]["tokens"]))
        ok = worst <= REF_TOL and top1 == 3 and same == doc["greedy"]["n"]
        failures += not ok
        line += f"{worst:>10.2e} {'ok' if ok else 'FAIL':>3} {same:>7}/{doc['greedy']['n']} |"
        # Ours against golden.
        if ours_ok:
            try:
                worst, top1 = compare_logits(a.ours, path, doc, a.t)
                frac = greedy_top1(a.ours, path, doc, a.t)
                tol = OURS_TOL[m.rsplit("-", 1)[1]]
                ok = worst <= tol and top1 == 3 and frac >= OURS_MIN_TOP1
                failures += not ok
                line += f" {worst:>11.2e} {top1:>9}/3 {frac:>10.1%} {'ok' if ok else 'FAIL'}"
            except (RuntimeError, ValueError, KeyError) as e:
                failures += 1
                line += f" ours failed: {e}"
        else:
            line += " ours: -"
        print(line)
    if ours_note:
        print(f"parity: ours not compared: {ours_note}")
    print("parity: " + ("ok" if failures == 0 else f"{failures} failure(s)"))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["golden", "check"])
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build/llama-ref"))
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("--models", default=os.path.join(ROOT, ".cache/models"))
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests/golden"))
    ap.add_argument("-t", type=int, default=min(os.cpu_count() or 1, 4))
    a = ap.parse_args()
    return golden(a) if a.mode == "golden" else check(a)


if __name__ == "__main__":
    sys.exit(main())
