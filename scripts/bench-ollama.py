#!/usr/bin/env python3
"""Ollama on ggml-rs against Ollama's own build (its cgo ggml): the same
model files, the same requests, the two servers alternating request by
request (so drift of the machine hits both).

    python3 scripts/bench-ollama.py [-r ROUNDS] [-n TOKENS] OURS CGO MODEL.gguf...

OURS is .cache/ollama-ggml-rs/<v>/ollama (make ollama-ggml-rs), CGO
.cache/ollama/<v>/ollama (make ollama). Each server runs Ollama's Go engine
(OLLAMA_NEW_ENGINE=1) with its defaults; each request is a raw prompt of
about 200 tokens, greedy, N generated tokens, then test-ollama's long
prompt (800-1800 tokens, past one batch; prefill only: "pp-long"). Each
prompt starts with the round number, so no cached prefix is reused.
Prefill and decode rates are
Ollama's own counts over its own durations (prompt_eval_*, eval_*); the
table gives the median over rounds, the ratio ours/cgo of the medians
and the range of the rounds' own ratios, then each
binary's size and its runner's peak resident memory (VmHWM).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ollama"))
import test_ollama as T  # noqa: E402  (its server helpers)

TEXT = ("The history of the bicycle begins in the early nineteenth century, when inventors in Europe "
        "experimented with two-wheeled machines pushed along by the rider's feet. ") * 6


def runner_hwm(server):
    """Peak resident memory (MiB) of the server's runner children."""
    best = 0
    try:
        kids = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split()
    except OSError:
        return 0
    for k in kids:
        try:
            for line in open(f"/proc/{k}/status"):
                if line.startswith("VmHWM:"):
                    best = max(best, int(line.split()[1]) // 1024)
        except OSError:
            pass
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", "--rounds", type=int, default=3)
    ap.add_argument("-n", "--tokens", type=int, default=64)
    ap.add_argument("ours")
    ap.add_argument("cgo")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    builds = {"ggml-rs": a.ours, "cgo": a.cgo}
    print("| model | test | Ollama on ggml-rs | Ollama (cgo) | ratio | ratio range |")
    print("|---|---|---:|---:|---:|---:|")
    mem = {}
    for path in a.models:
        servers, tmps = {}, []
        try:
            for b, binary in builds.items():
                tmp = tempfile.mkdtemp(prefix="bench-ollama-")
                tmps.append(tmp)
                server, host, env = T.start_ollama(binary, tmp)
                servers[b] = (server, host, T.create(binary, env, tmp, path))
            rates = {b: {"pp": [], "tg": [], "pp-long": []} for b in builds}
            for r in range(a.rounds + 1):  # round 0 warms up
                for b, (server, host, name) in servers.items():
                    x = T.post(host, "/api/generate", {"model": name, "prompt": f"{r} {TEXT}", "raw": True, "stream": False,
                                                       "options": {"temperature": 0, "num_predict": a.tokens}})
                    if r == 0:
                        continue
                    rates[b]["pp"].append(x["prompt_eval_count"] / (x["prompt_eval_duration"] / 1e9))
                    rates[b]["tg"].append(x["eval_count"] / (x["eval_duration"] / 1e9))
                    x = T.post(host, "/api/generate", {"model": name, "prompt": f"{r} {T.LONG}", "raw": True, "stream": False,
                                                       "options": {"temperature": 0, "num_predict": 1}})
                    rates[b]["pp-long"].append(x["prompt_eval_count"] / (x["prompt_eval_duration"] / 1e9))
            for test in ("pp", "tg", "pp-long"):
                o, c = statistics.median(rates["ggml-rs"][test]), statistics.median(rates["cgo"][test])
                # Round by round (the two requests of a round back to back).
                per = [x / y for x, y in zip(rates["ggml-rs"][test], rates["cgo"][test])]
                print(f"| {os.path.basename(path)} | {test} | {o:.1f} | {c:.1f} | {o / c:.2f} | {min(per):.2f}-{max(per):.2f} |", flush=True)
            for b, (server, _, _) in servers.items():
                mem.setdefault(b, []).append((os.path.basename(path), runner_hwm(server)))
        finally:
            T.stop(*(s for s, _, _ in servers.values()))
            for t in tmps:
                shutil.rmtree(t, ignore_errors=True)
    print()
    for b, binary in builds.items():
        print(f"{b}: binary {os.path.getsize(binary) / 1e6:.1f} MB; runner peak RSS " +
              ", ".join(f"{m} {v} MiB" for m, v in mem.get(b, [])))


if __name__ == "__main__":
    main()
