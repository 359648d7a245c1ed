#!/usr/bin/env python3
"""Parity on a Vulkan device: llama.cpp built with Vulkan (tools/llama-ref,
make llama-ref-vulkan) on the small generated models, with all layers and
with the last half of them (-ngl, the output layer counting as one) on the
first Vulkan device.

  parity-vulkan.py golden   writes tests/golden/vulkan/ref_<model>.json: per
                            setting (ngl), the last-position logits of the
                            three sequences of scripts/parity.py (one
                            llama_decode each, n_ubatch 512) with flash
                            attention auto, and what llama.cpp resolved auto
                            to on that placement. llama-ref runs with
                            -early-rows: the graph ggml-rs computes (its
                            comment in tools/llama-ref/main.cpp says why).

The Go test go/cmd/ggml-rs/parity_vulkan_test.go (build tag ggml_vulkan,
make test-vulkan) holds ours on the same device and settings to these files
with the CPU parity test's tolerances.

A CPU-type device such as Mesa's llvmpipe is listed by ggml-vulkan only when
GGML_VK_VISIBLE_DEVICES names it; set it (make sets 0). Options: --ref PATH,
--models DIR, --golden DIR, --only M1,M2, -t THREADS.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402  (sequences, sha256, run_json, round6, MODELS)

ROOT = parity.ROOT


def block_count(path):
    """{arch}.block_count of a GGUF, read with the gguf package of the
    models' venv (run this script with .cache/py/bin/python)."""
    import gguf
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    return int(r.fields[f"{arch}.block_count"].parts[-1][0])


def settings(blocks):
    """(name, ngl): every layer and the output layer; the last half."""
    return [("all", blocks + 1), ("half", (blocks + 1) // 2)]


def device_name(ref, model):
    """The first Vulkan device's name, from llama.cpp's own log (-v)."""
    p = subprocess.run([ref, "logits", "-v", "-ngl", "1", model, "3"], capture_output=True, text=True)
    m = re.search(r"^ggml_vulkan: 0 = (.*?) \(\w+\) \|", p.stderr, re.M)
    if not m:
        raise RuntimeError("llama-ref names no Vulkan device 0 (is GGML_VK_VISIBLE_DEVICES set?)")
    return m.group(1)


def golden(a):
    out_dir = os.path.join(a.golden, "vulkan")
    os.makedirs(out_dir, exist_ok=True)
    dev = None
    for m in parity.MODELS:
        if a.only and m not in a.only.split(","):
            continue
        path = os.path.join(a.models, m + ".gguf")
        blocks = block_count(path)
        dev = dev or device_name(a.ref, path)
        probe = parity.run_json(a.ref, ["logits", "-t", str(a.t), path, "3"])
        seqs = parity.sequences(probe["n_vocab"])
        runs = []
        for name, ngl in settings(blocks):
            rows, fa = [], None
            for s in seqs:
                r = parity.run_json(a.ref, ["logits", "-early-rows", "-ngl", str(ngl), "-fa", "auto", "-t", str(a.t), path] + [str(t) for t in s])
                if "flash_attn" not in r:
                    raise RuntimeError(f"{m} -ngl {ngl}: llama-ref did not report its flash attention resolution")
                if fa not in (None, r["flash_attn"]):
                    raise RuntimeError(f"{m} -ngl {ngl}: flash attention resolved differently between runs")
                fa = r["flash_attn"]
                rows.append(parity.round6(r["logits"]))
            runs.append({"layers": name, "ngl": ngl, "flash_attn": fa, "logits": rows})
        doc = {
            "model": m,
            "made_by": "scripts/parity-vulkan.py golden (make parity-golden-vulkan)",
            "model_sha256": parity.sha256(path),
            "reference": "llama.cpp from llama-cpp-sys-2 0.1.161 (our ggml patches) built with GGML_VULKAN, tools/llama-ref",
            "device": dev,
            "n_vocab": probe["n_vocab"],
            "block_count": blocks,
            "sequences": seqs,
            "runs_note": "per run: -ngl (the last ngl layers, the output layer counting as one, on the Vulkan device), "
                         "-fa auto and what llama.cpp resolved it to, n_ubatch 512, -early-rows (the last layer computes the output "
                         "rows only, as ggml-rs does; by default the pinned llama.cpp computes it for every position on "
                         "gpt-oss and the hybrids, for MTP); logits: the last position of each sequence",
            "runs": runs,
        }
        out = os.path.join(out_dir, f"ref_{m}.json")
        with open(out, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        print(f"parity-vulkan: wrote {os.path.relpath(out, ROOT)} (fa auto -> {[r['flash_attn'] for r in runs]})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["golden"])
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build-vulkan/llama-ref"))
    ap.add_argument("--models", default=os.path.join(ROOT, ".cache/models"))
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests/golden"))
    ap.add_argument("--only", default="")
    ap.add_argument("-t", type=int, default=os.cpu_count())
    a = ap.parse_args()
    golden(a)


if __name__ == "__main__":
    main()
