#!/usr/bin/env python3
"""CPU barriers under contention: tokens/s quiet and beside busy loops.

ggml's CPU barrier spins; with other work on the cores, a node can wait out
a scheduler quantum (issue 25; scripts/patches/12-cpu-barrier-sleep.sh makes
it spin a bounded time and then sleep). This runs, on one model:

  ggml-rs          go/bin/ggml-rs bench with its default thread count, which
                   follows the load (src/ml/cpu_load.rs), and our barrier,
                   which sleeps
  ggml-rs -t T     the same on a fixed T threads (-t): our barrier alone
  ggml-rs spin     the same on T threads with GGML_CPU_BARRIER_SPIN_US=-1
                   (ggml's own spinning barrier)
  ggml-rs N us     T threads, a spin time of N us at most (--spin-us N,...)
  ggml-rs N thr    ggml-rs on a fixed N threads (--ours-threads N,...)
  NAME             another build of go/bin/ggml-rs (--also NAME=PATH, e.g.
                   a variant of patch 12 built in another worktree)
  llama.cpp        llama-ref bench with ggml's own barrier, no OpenMP
                   (--ref; make bench-barrier builds it without the patch)
  llama.cpp omp    the same built with OpenMP (--ref-omp)
  llama.cpp sleep  llama-ref with all our patches (--ref-sleep; optional)

under each load: quiet, and beside 1 and 2 busy loops (`yes > /dev/null`,
started here and stopped after). Each round visits every load and runs
every program once per load, in an order rotated round by round, so drift
of the machine (and other people's work on it) hits all alike. Reported:
the median over rounds of each run's mean tokens/s (pp and tg), and the
ratio to the same program's quiet median.

Standard library only. Usage: bench-barrier.py [-p 128] [-n 32] [-r 3]
[-t 2] [--rounds 5] [--busy 0,1,2] [--spin-us N,...] [--ours-threads N,...]
[--ours PATH]
[--also NAME=PATH ...] [--ref PATH] [--ref-omp PATH] [--ref-sleep PATH] MODEL
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def run(prog, a, model):
    """One bench run of prog (a dict: name, path, ours, env) -> {"pp": tps, "tg": tps}."""
    args = [prog["path"], "bench", "-p", str(a.p), "-n", str(a.n), "-r", str(a.r)]
    t = str(prog.get("t", a.t))
    args += ["-threads", t, model] if prog["ours"] else ["-t", t, "-json", model]
    env = dict(os.environ, **prog["env"])
    p = subprocess.run(args, capture_output=True, text=True, timeout=a.timeout, env=env)
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip()
        raise RuntimeError(f"{prog['name']}: " + (msg.splitlines()[-1] if msg else f"exit {p.returncode}"))
    if not prog["ours"]:
        j = json.loads(p.stdout.strip().splitlines()[-1])
        return {k: j[k]["tps"] for k in ("pp", "tg") if k in j}
    # ggml-rs bench prints llama-bench's markdown table (| ... | test | t/s |).
    out = {}
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and "±" in cells[-1] and cells[-2][:2] in ("pp", "tg"):
            out[cells[-2][:2]] = float(cells[-1].split("±")[0])
    if not out:
        raise RuntimeError(f"{prog['name']}: no pp/tg rows in ggml-rs bench's output")
    return out


class Busy:
    """n busy loops (`yes` writing to /dev/null) while the block runs."""

    def __init__(self, n):
        self.n, self.procs = n, []

    def __enter__(self):
        for _ in range(self.n):
            self.procs.append(subprocess.Popen(["yes"], stdout=subprocess.DEVNULL))
        time.sleep(0.2 if self.n else 0)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait()
        return False


def programs(a):
    progs = []
    if os.access(a.ours, os.X_OK):
        progs.append(dict(name="ggml-rs", path=a.ours, ours=True, env={}, t=0))
        progs.append(dict(name=f"ggml-rs -t {a.t}", path=a.ours, ours=True, env={}))
        progs.append(dict(name="ggml-rs spin", path=a.ours, ours=True, env={"GGML_CPU_BARRIER_SPIN_US": "-1"}))
        for t in [s for s in a.ours_threads.split(",") if s]:
            progs.append(dict(name=f"ggml-rs {int(t)} thr", path=a.ours, ours=True, env={}, t=int(t)))
        for us in [s for s in a.spin_us.split(",") if s]:
            progs.append(dict(name=f"ggml-rs {int(us)} us", path=a.ours, ours=True, env={"GGML_CPU_BARRIER_SPIN_US": str(int(us))}))
    else:
        print(f"bench-barrier: {os.path.relpath(a.ours, ROOT)} is not built; ours left out", file=sys.stderr)
    for spec in a.also:
        name, _, path = spec.partition("=")
        if not path or not os.access(path, os.X_OK):
            raise SystemExit(f"bench-barrier: --also {spec}: want NAME=PATH of a built ggml-rs")
        progs.append(dict(name=name, path=path, ours=True, env={}, t=0))
    for name, path in (("llama.cpp", a.ref), ("llama.cpp omp", a.ref_omp), ("llama.cpp sleep", a.ref_sleep)):
        if path and os.access(path, os.X_OK):
            progs.append(dict(name=name, path=path, ours=False, env={}))
        elif path:
            print(f"bench-barrier: {path} is not built; {name} left out", file=sys.stderr)
    return progs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-r", type=int, default=3, help="repetitions per run (after a warm-up)")
    ap.add_argument("-t", type=int, default=2, help="threads")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--busy", default="0,1,2", help="busy-loop counts to measure beside")
    ap.add_argument("--spin-us", default="", help="extra ggml-rs columns with these spin times (us)")
    ap.add_argument("--ours-threads", default="", help="extra ggml-rs columns with these thread counts")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per bench run")
    ap.add_argument("--ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("--also", action="append", default=[], metavar="NAME=PATH",
                    help="another ggml-rs build to measure beside ours (repeatable)")
    ap.add_argument("--ref", default=os.path.join(ROOT, ".cache/llama-build-spin/llama-ref"))
    ap.add_argument("--ref-omp", default=os.path.join(ROOT, ".cache/llama-build-spin-omp/llama-ref"))
    ap.add_argument("--ref-sleep", default="", help="llama-ref with our barrier patch (optional)")
    a = ap.parse_args()

    progs = programs(a)
    if not progs:
        print("bench-barrier: nothing to run", file=sys.stderr)
        return 1
    loads = [int(b) for b in a.busy.split(",")]
    res = {(p["name"], b): {"pp": [], "tg": []} for p in progs for b in loads}
    print(f"bench-barrier: {os.path.basename(a.model)}, pp{a.p} and tg{a.n}, {a.t} threads, "
          f"{a.r} repetitions per run, {a.rounds} rounds; load average at start {os.getloadavg()[0]:.2f}", flush=True)
    for rnd in range(a.rounds):
        for b in loads:
            order = progs[rnd % len(progs):] + progs[:rnd % len(progs)]
            with Busy(b):
                for prog in order:
                    r = run(prog, a, a.model)
                    for k, v in r.items():
                        res[(prog["name"], b)][k].append(v)
                    print(f"  round {rnd + 1} busy {b} {prog['name']:<16} " +
                          " ".join(f"{k} {v:8.2f}" for k, v in sorted(r.items())), flush=True)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}; median tokens/s over {a.rounds} rounds "
          f"(ratio: to the same program's quiet median)\n")
    head = "| program | test | " + " | ".join(f"{'quiet' if b == 0 else f'{b} busy'}" for b in loads) + " |"
    print(head)
    print("| --- | --- |" + " ---: |" * len(loads))
    for prog in progs:
        for key, n in (("pp", a.p), ("tg", a.n)):
            meds = [statistics.median(res[(prog["name"], b)][key]) if res[(prog["name"], b)][key] else None for b in loads]
            if meds[0] is None and all(m is None for m in meds):
                continue
            base = meds[loads.index(0)] if 0 in loads else None
            cells = []
            for b, m in zip(loads, meds):
                if m is None:
                    cells.append("-")
                elif b == 0 or not base:
                    cells.append(f"{m:.2f}")
                else:
                    cells.append(f"{m:.2f} ({m / base:.2f}x)")
            print(f"| {prog['name']} | {key}{n} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
