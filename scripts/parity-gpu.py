#!/usr/bin/env python3
"""Parity on a GPU: ours (the runner built with the GPU backend) against
llama.cpp built with the same backend from the same pinned sources
(tools/llama-ref), both run here, on this machine's first GPU, on the small
generated models of scripts/parity.py. Made for the CUDA device script
(scripts/device-cuda.sh), where no Go or Rust test can be built; standard
library only.

  parity-gpu.py --ours RUNNER --ref LLAMA_REF --models DIR --out DIR

Per model (its sha256 checked against tests/golden/ref_<model>.json, so the
models made on the device are the ones the CPU golden files were made
from) and setting, one run of each program with the three sequences of
parity.py in one batch (`logits -seqs`, the same batch in both):
  all    every layer and the output layer on the GPU (-ngl blocks+1), flash attention on
  nofa   the same, flash attention off
  half   the last half of them (-ngl (blocks+1)/2), flash attention auto
llama-ref runs with -early-rows, as for the Vulkan golden files
(scripts/parity-vulkan.py says why).

Ours must be within the CPU parity test's tolerance of llama.cpp's logits
(TOL, go/cmd/ggml-rs/parity_test.go's parityMaxAbs), with the same top-1
token except where llama.cpp's own two best are closer than TOL. Each row
also gives how far llama.cpp on the GPU is from llama.cpp on the CPU (the
same batch, flash attention on, -ngl 0): that distance is the device's
arithmetic, shared by both programs, not a fault.

Writes OUT/parity.json (every row) and OUT/parity.md (the table), and
OUT/golden-<lib>/ref_<model>.json: llama.cpp's logits on this device, in
the Vulkan golden files' layout, to commit once a GPU run has made them.
Exit status 1 when a row fails. Options: --only M1,M2, -j JOBS (programs
run at once; default 4), -t THREADS, --lib NAME (CUDA), --dry-run (the
GPU absent: -ngl 0, the same commands on the CPU, to check the script).
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402  (sequences, sha256, round6, MODELS, argmax)

ROOT = parity.ROOT
TOL = 2e-3


def block_count(path):
    """{arch}.block_count, from the GGUF header (standard library: the
    device has no gguf package outside the models' generation)."""
    arch = parity.gguf_metadata(path, {"general.architecture"})["general.architecture"]
    return int(parity.gguf_metadata(path, {f"{arch}.block_count"})[f"{arch}.block_count"])


def run(prog, args):
    t0 = time.time()
    p = subprocess.run([prog] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(prog)} exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout), time.time() - t0


def worst(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def margin(row):
    s = sorted(row, reverse=True)
    return s[0] - s[1]


def one_model(a, m):
    path = os.path.join(a.models, m + ".gguf")
    with open(os.path.join(a.golden, f"ref_{m}.json")) as f:
        cpu = json.load(f)
    got = parity.sha256(path)
    if got != cpu["model_sha256"]:
        raise RuntimeError(f"{m}: sha256 {got[:12]}, the golden file's {cpu['model_sha256'][:12]}: not the model the golden files were made from")
    blocks = block_count(path)
    seqs = [s["tokens"] for s in cpu["sequences"]]
    args = [",".join(map(str, s)) for s in seqs]
    # llama.cpp on this machine's CPU, the same batch: the device's own
    # arithmetic against the CPU's, for scale.
    cpu_rows = run(a.ref, ["logits", "-seqs", "-early-rows", "-ngl", "0", "-fa", "on", "-t", str(a.t), path] + args)[0]["logits"]
    rows, runs = [], []
    for name, ngl, fa in (("all", blocks + 1, "on"), ("nofa", blocks + 1, "off"), ("half", (blocks + 1) // 2, "auto")):
        if a.dry_run:
            ngl = 0
        common = ["logits", "-seqs", "-ngl", str(ngl), "-fa", fa, "-t", str(a.t), path]
        ref, tr = run(a.ref, common[:2] + ["-early-rows"] + common[2:] + args)
        ours, to = run(a.ours, common + args)
        d = worst(ours["logits"], ref["logits"])
        top = []
        for i, (o, r) in enumerate(zip(ours["logits"], ref["logits"])):
            if parity.argmax(o) != parity.argmax(r) and margin(r) >= TOL:
                top.append(f"sequence {i}: top-1 {parity.argmax(o)}, llama.cpp's {parity.argmax(r)} (its margin {margin(r):.3g})")
        rows.append({
            "model": m, "setting": name, "ngl": ngl, "fa": fa,
            "ours_vs_ref": d, "ref_vs_cpu": worst(ref["logits"], cpu_rows),
            "ok": d <= TOL and not top, "top1": top,
            "seconds": {"ours": round(to, 2), "ref": round(tr, 2)},
        })
        runs.append({"layers": name, "ngl": ngl, "flash_attn": fa, "logits": [parity.round6(r) for r in ref["logits"]]})
    doc = {
        "model": m, "made_by": "scripts/parity-gpu.py (scripts/device-cuda.sh)", "model_sha256": got,
        "reference": f"llama.cpp (tools/llama-ref) built with ggml's {a.lib} backend, -seqs -early-rows",
        "device": a.device, "n_vocab": cpu["n_vocab"], "block_count": blocks, "sequences": seqs, "runs": runs,
    }
    return rows, doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests/golden"))
    ap.add_argument("--only", default="")
    ap.add_argument("--lib", default="CUDA")
    ap.add_argument("--device", default="")
    ap.add_argument("-j", type=int, default=4)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    models = [m for m in parity.MODELS if not a.only or m in a.only.split(",")]
    gdir = os.path.join(a.out, "golden-" + a.lib.lower())
    os.makedirs(gdir, exist_ok=True)
    rows, failed = [], []
    with cf.ThreadPoolExecutor(a.j) as ex:
        futs = {ex.submit(one_model, a, m): m for m in models}
        for fut in cf.as_completed(futs):
            m = futs[fut]
            try:
                r, doc = fut.result()
            except Exception as e:  # a crash or a refusal is a row too
                rows.append({"model": m, "setting": "-", "ok": False, "error": str(e)})
                print(f"parity-gpu: {m}: {e}", flush=True)
                continue
            rows += r
            with open(os.path.join(gdir, f"ref_{m}.json"), "w") as f:
                json.dump(doc, f, separators=(",", ":"))
                f.write("\n")
            print(f"parity-gpu: {m}: " + ", ".join(f"{x['setting']} {x['ours_vs_ref']:.2e}{'' if x['ok'] else ' FAIL'}" for x in r), flush=True)
    rows.sort(key=lambda x: (parity.MODELS.index(x["model"]), x["setting"]))
    failed = [x for x in rows if not x["ok"]]
    with open(os.path.join(a.out, "parity.json"), "w") as f:
        json.dump({"tolerance": TOL, "lib": a.lib, "device": a.device, "dry_run": a.dry_run, "rows": rows}, f, indent=1)
    with open(os.path.join(a.out, "parity.md"), "w") as f:
        f.write(f"Ours against llama.cpp, both on {a.device or a.lib}{' (dry run: -ngl 0, the CPU)' if a.dry_run else ''}; "
                f"max|d| of the last-position logits of 3 sequences in one batch, tolerance {TOL}\n\n")
        f.write("| model | setting | ours vs llama.cpp | llama.cpp GPU vs its CPU | ok |\n|---|---|---:|---:|---|\n")
        for x in rows:
            if "error" in x:
                f.write(f"| {x['model']} | - | error: {x['error'][:120]} | | FAIL |\n")
            else:
                f.write(f"| {x['model']} | {x['setting']} | {x['ours_vs_ref']:.2e} | {x['ref_vs_cpu']:.2e} | {'yes' if x['ok'] else 'FAIL ' + '; '.join(x['top1'])} |\n")
    print(f"parity-gpu: {len(rows) - len(failed)}/{len(rows)} rows within {TOL}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
