#!/usr/bin/env python3
"""Load test of `ggml-rs serve` against Ollama and llama.cpp's llama-server.

For each model, starts every server it can (loopback only) with the same
parallel slots, threads, per-request context and flash attention, waits
until each is ready, warms each up, then for each round and each
concurrency C (1, 4, 8) sends the same fixed number of streaming generate
requests from C client threads to each server in turn (ours, then the
anchors: the servers alternate within a round, so drift of the machine hits
all of them). Per server and C it reports aggregate generated tokens/s (all
tokens of a batch over its wall time; the median over rounds, and the
slowest and fastest round), time to first token p50/p99 (all requests of
all rounds) and failed requests, then the ratios of the medians ours/Ollama,
ours/llama-server and ours at 8 clients over ours at 1.

The servers and the requests:
  ours          go/bin/ggml-rs serve -addr HOST:PORT -parallel P -ctx CTX
                -threads T -flash-attention on -keep-alive -1s MODEL.gguf;
                Ollama's POST /api/generate (model: the file name without
                .gguf), readiness GET /api/version
  ollama        .cache/ollama/<version>/ollama serve (scripts/build-ollama.sh),
                the model made with `ollama create` from a Modelfile
                (FROM MODEL.gguf, num_thread T, num_ctx CTX) in a temporary
                OLLAMA_MODELS; OLLAMA_NUM_PARALLEL=P, OLLAMA_NEW_ENGINE=1 (its
                Go engine), OLLAMA_KEEP_ALIVE=-1, OLLAMA_FLASH_ATTENTION=1;
                the same /api/generate
  llama-server  .cache/llama-tools/llama-server (scripts/
                build-llama-tools.sh) -np P -c CTX*P (split over the slots)
                -t T -tb T -fa on -cb; POST /completion, readiness GET /health

Every request: a prompt of its own (a fixed set of texts, each prefixed with
the request's number, so no prompt cache serves one request from another's
prefill), N generated tokens, greedy (temperature 0, top_k 1, fixed seed,
no repetition penalty: Ollama's API defaults to 1.1, llama-server's to none).
Ollama's API has no way to ignore the end-of-sequence token, so the count is
what came (eval_count; llama-server's tokens_predicted, with ignore_eos).
Ollama ends a generation after 31 identical tokens in a row (its
token-repeat limit) by closing the stream without a final chunk, which
random weights under greedy decoding can reach: such a request is counted
as cut, with the tokens it streamed. The time to first token runs from
sending the request to the first streamed chunk that carries text (or the
final chunk, if none does). A request fails on a connection error, a status
other than 200, an "error" in the stream or no final chunk; a batch fails
when no request generated a token. Any failure makes the exit status 1.

Standard library only. Usage: bench-serve.py [-t 2] [-parallel 8] [-n 64]
[-requests N] [-c 1,4,8] [-rounds 3] [-ctx 512] [-flash-attn on]
[-servers ours,ollama,llama-server] [-keep] [-v] MODEL.gguf...
"""
import argparse
import http.client
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
HOST = "127.0.0.1"
OLLAMA_VERSION = os.environ.get("OLLAMA_VERSION", "0.17.4")

PROMPTS = [
    "The history of the printing press begins in the fifteenth century, when",
    "Write a short note to a neighbour about a parcel that arrived today.",
    "In a small mountain village, the baker woke before dawn and",
    "Explain how a hash table handles two keys that land in the same bucket.",
    "A list of things to pack for a week of hiking in the rain:",
    "The committee met on Tuesday to discuss the budget for the new library, and",
    "Once the tide went out, the children ran across the wet sand towards",
    "Summarise the rules of chess for someone who has never played a board game.",
]


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    """One server process on the loopback; subclasses say how to start and ask it."""

    name = "?"
    generate_path = "/api/generate"
    # Ollama ends a generation after 31 identical tokens in a row (its
    # token-repeat limit) by closing the stream with no final chunk; random
    # weights under greedy decoding loop. Such a request counts as cut, with
    # the tokens it streamed, not as failed.
    cuts_repeats = False

    def __init__(self, a, model):
        self.a, self.model = a, model
        self.port = free_port()
        self.proc = None
        self.log_path = None
        self.tmp = None

    def skip_reason(self):
        return None

    def command(self):
        raise NotImplementedError

    def env(self):
        return dict(os.environ)

    def ready_path(self):
        return "/api/version"

    def start(self):
        self.tmp = tempfile.mkdtemp(prefix=f"bench-serve-{self.name}-")
        self.log_path = os.path.join(self.tmp, "server.log")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env(), cwd=self.tmp)
        log.close()
        self.wait_ready()
        self.prepare()

    def wait_ready(self):
        deadline = time.monotonic() + self.a.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited with status {self.proc.returncode} while starting: {self.log_tail()}")
            try:
                c = http.client.HTTPConnection(HOST, self.port, timeout=5)
                c.request("GET", self.ready_path())
                r = c.getresponse()
                r.read()
                c.close()
                if r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"not ready after {self.a.start_timeout:.0f}s: {self.log_tail()}")

    def prepare(self):
        pass

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.tmp and not self.a.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def log_tail(self, n=5):
        try:
            with open(self.log_path, errors="replace") as f:
                lines = [l.rstrip() for l in f if l.strip()]
            return " | ".join(lines[-n:]) or "(no output)"
        except OSError:
            return "(no log)"

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    # --- one request ---------------------------------------------------------

    def body(self, prompt, seed):
        raise NotImplementedError

    def parse(self, line):
        """(generated text or None, final: (tokens) or None, error or None) of one stream line."""
        raise NotImplementedError

    def request(self, prompt, seed):
        """Sends one streaming request; returns (tokens, ttft seconds, cut) or raises."""
        body = json.dumps(self.body(prompt, seed)).encode()
        t0 = time.monotonic()
        c = http.client.HTTPConnection(HOST, self.port, timeout=self.a.request_timeout)
        try:
            c.request("POST", self.generate_path, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                raise RuntimeError(f"HTTP {r.status}: {r.read(300).decode(errors='replace').strip()}")
            ttft, last, chunks, prev, repeats = None, b"", 0, None, 0
            while True:
                line = r.readline()
                if not line:
                    # the first and 30 repeats reach the client; Ollama stops at the next
                    if self.cuts_repeats and repeats >= 30:
                        return chunks, ttft, True
                    raise RuntimeError(f"stream ended without a final chunk after {chunks} chunks "
                                       f"(last: {last[:200].decode(errors='replace')})")
                line = line.strip()
                if not line:
                    continue
                last = line
                text, final, err = self.parse(line)
                if err:
                    raise RuntimeError(f"error in stream: {err}")
                if text:
                    chunks += 1
                    repeats = repeats + 1 if text.strip() == prev else 0
                    prev = text.strip()
                    if ttft is None:
                        ttft = time.monotonic() - t0
                if final is not None:
                    if ttft is None:
                        ttft = time.monotonic() - t0
                    return final, ttft, False
        finally:
            c.close()


class OllamaAPI(Server):
    """Ollama's /api/generate, which ours speaks too."""

    model_name = None

    def body(self, prompt, seed):
        return {"model": self.model_name, "prompt": prompt, "stream": True, "raw": True,
                "options": {"num_predict": self.a.n, "temperature": 0, "top_k": 1, "seed": seed, "repeat_penalty": 1,
                            "num_ctx": self.a.ctx, "num_thread": self.a.t}}

    def parse(self, line):
        m = json.loads(line)
        if m.get("error"):
            return None, None, m["error"]
        final = int(m.get("eval_count", 0)) if m.get("done") else None
        return m.get("response") or None, final, None


class Ours(OllamaAPI):
    name = "ggml-rs"

    def __init__(self, a, model):
        super().__init__(a, model)
        self.bin = a.ours
        self.model_name = os.path.basename(model)[: -len(".gguf")] if model.endswith(".gguf") else os.path.basename(model)

    def skip_reason(self):
        if not os.access(self.bin, os.X_OK):
            return f"{os.path.relpath(self.bin, ROOT)} is not built (make runner)"
        p = subprocess.run([self.bin, "-h"], capture_output=True, text=True)
        if not any(l.split()[:1] == ["serve"] for l in (p.stdout + p.stderr).splitlines()):
            return "ggml-rs has no serve command yet"
        return None

    def command(self):
        return [self.bin, "serve", "-addr", f"{HOST}:{self.port}", "-parallel", str(self.a.parallel),
                "-ctx", str(self.a.ctx), "-threads", str(self.a.t), "-flash-attention", self.a.flash_attn,
                "-keep-alive", "-1s", os.path.abspath(self.model)]


class Ollama(OllamaAPI):
    name = "ollama"
    cuts_repeats = True

    def __init__(self, a, model):
        super().__init__(a, model)
        self.bin = a.ollama
        self.model_name = "bench-" + os.path.basename(model)[: -len(".gguf")].replace("_", "-")

    def skip_reason(self):
        if not os.access(self.bin, os.X_OK):
            return f"{os.path.relpath(self.bin, ROOT)} is not built (make ollama)"
        return None

    def env(self):
        e = dict(os.environ)
        e.update({
            "OLLAMA_HOST": f"{HOST}:{self.port}",
            "OLLAMA_MODELS": os.path.join(self.tmp, "models"),
            "HOME": self.tmp,  # its key pair (~/.ollama) goes to the temporary folder
            "OLLAMA_NUM_PARALLEL": str(self.a.parallel),
            "OLLAMA_MAX_LOADED_MODELS": "1",
            "OLLAMA_KEEP_ALIVE": "-1",
            "OLLAMA_CONTEXT_LENGTH": str(self.a.ctx),
            "OLLAMA_NEW_ENGINE": "1",
            "OLLAMA_FLASH_ATTENTION": "1" if self.a.flash_attn == "on" else "0",
            "OLLAMA_NOPRUNE": "1",
        })
        return e

    def command(self):
        return [self.bin, "serve"]

    def prepare(self):
        modelfile = os.path.join(self.tmp, "Modelfile")
        with open(modelfile, "w") as f:
            f.write(f"FROM {os.path.abspath(self.model)}\n")
            f.write(f"PARAMETER num_thread {self.a.t}\n")
            f.write(f"PARAMETER num_ctx {self.a.ctx}\n")
        p = subprocess.run([self.bin, "create", self.model_name, "-f", modelfile], env=self.env(),
                           capture_output=True, text=True, cwd=self.tmp, timeout=self.a.start_timeout)
        if p.returncode != 0:
            raise RuntimeError(f"ollama create: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")

    def describe(self):
        """What its log says about the runner it started: engine, parallel, threads."""
        started = [l for l in self.log_text().splitlines() if "starting runner" in l]
        if not started:
            return "runner not seen in its log"
        if "--ollama-engine" in started[-1]:
            return "its Go engine"
        return "its llama.cpp engine, not the Go one"


class LlamaServer(Server):
    name = "llama-server"
    generate_path = "/completion"

    def __init__(self, a, model):
        super().__init__(a, model)
        self.bin = a.llama_server

    def skip_reason(self):
        if not os.access(self.bin, os.X_OK):
            return f"{os.path.relpath(self.bin, ROOT)} is not built (make llama-server)"
        return None

    def ready_path(self):
        return "/health"

    def command(self):
        return [self.bin, "-m", os.path.abspath(self.model), "--host", HOST, "--port", str(self.port),
                "-np", str(self.a.parallel), "-c", str(self.a.ctx * self.a.parallel),
                "-t", str(self.a.t), "-tb", str(self.a.t), "-fa", self.a.flash_attn,
                "-cb", "--no-webui"]

    def body(self, prompt, seed):
        return {"prompt": prompt, "n_predict": self.a.n, "stream": True, "temperature": 0, "top_k": 1,
                "seed": seed, "repeat_penalty": 1, "ignore_eos": True, "cache_prompt": True}

    def parse(self, line):
        if not line.startswith(b"data:"):
            if line.startswith(b"error:") or line.startswith(b"{"):
                return None, None, line.decode(errors="replace")[:200]
            return None, None, None
        m = json.loads(line[5:])
        if m.get("error"):
            return None, None, m["error"]
        final = int(m.get("tokens_predicted") or m.get("timings", {}).get("predicted_n", 0)) if m.get("stop") else None
        return m.get("content") or None, final, None


SERVERS = {"ours": Ours, "ollama": Ollama, "llama-server": LlamaServer}


def batch(server, conc, n_req, tag):
    """n_req requests from conc client threads; returns (tokens/s, ttfts, failures)."""
    lock = threading.Lock()
    todo = list(range(n_req))
    tokens, ttfts, failures, cuts = [0], [], [], [0]

    def client():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            prompt = f"Request {tag}-{i}. {PROMPTS[i % len(PROMPTS)]}"
            try:
                n, t, cut = server.request(prompt, seed=1234 + i)
                with lock:
                    tokens[0] += n
                    cuts[0] += cut
                    if t is not None:
                        ttfts.append(t)
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                with lock:
                    failures.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=client, daemon=True) for _ in range(conc)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - t0
    if tokens[0] == 0 and not failures:
        failures.append("RuntimeError: no token generated by any request")
    return tokens[0] / wall, tokens[0], ttfts, failures, cuts[0]


def pct(xs, q):
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def bench_model(a, model):
    print(f"\n## {os.path.basename(model)}: {a.t} threads, {a.parallel} parallel slots, ctx {a.ctx} per request, "
          f"{a.requests or 'max(8, 2 x clients)'} requests x {a.n} tokens per concurrency, {a.rounds} round(s); "
          f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    servers, started = [], []
    try:
        run_servers(a, model, servers, started)
    finally:
        for s in started:
            if a.keep and s.log_path:
                print(f"{s.name}: log kept at {s.log_path}")
            s.stop()


def run_servers(a, model, servers, started):
    for key in a.servers:
        s = SERVERS[key](a, model)
        why = s.skip_reason()
        if why:
            print(f"{s.name}: skipped: {why}", flush=True)
            continue
        started.append(s)
        try:
            t0 = time.monotonic()
            s.start()
            # Warm-up: loads the model where loading is lazy (Ollama), then a
            # full batch at the highest concurrency, not measured.
            batch(s, 1, 1, "warm-a")
            f = batch(s, max(a.conc), max(a.conc), "warm-b")[3]
            if f:
                raise RuntimeError(f"warm-up failed: {f[0]}")
            note = f" ({s.describe()})" if hasattr(s, "describe") else ""
            print(f"{s.name}: ready in {time.monotonic() - t0:.1f}s{note}", flush=True)
            servers.append(s)
        except Exception as e:  # noqa: BLE001
            print(f"{s.name}: failed to start: {e}", flush=True)
            s.stop()
            started.remove(s)
            if key == "ours":
                a.failed = True
    if not servers:
        return
    res = {(s.name, c): {"tps": [], "tok": 0, "ttft": [], "fail": [], "cut": 0} for s in servers for c in a.conc}
    for r in range(a.rounds):
        for c in a.conc:
            for s in servers:
                tps, tok, ttfts, fails, cut = batch(s, c, a.requests or max(8, 2 * c), f"r{r}c{c}")
                x = res[(s.name, c)]
                x["tps"].append(tps)
                x["tok"] += tok
                x["ttft"] += ttfts
                x["fail"] += fails
                x["cut"] += cut
                if a.verbose:
                    print(f"  round {r + 1} c{c} {s.name}: {tps:.1f} tok/s, {tok} tokens, {len(fails)} failed"
                          + (f", {cut} cut" if cut else ""), flush=True)

    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"| {'server':<12} | {'clients':>7} | {'tokens/s':>8} | {'min-max':>13} | {'TTFT p50 ms':>11} | {'TTFT p99 ms':>11} | {'tokens':>6} | {'failed':>6} |")
    print(f"|{'-' * 14}|{'-' * 9}|{'-' * 10}|{'-' * 15}|{'-' * 13}|{'-' * 13}|{'-' * 8}|{'-' * 8}|")
    for s in servers:
        for c in a.conc:
            x = res[(s.name, c)]
            spread = f"{min(x['tps']):.1f}-{max(x['tps']):.1f}"
            print(f"| {s.name:<12} | {c:>7} | {pct(x['tps'], .5):>8.1f} | {spread:>13} | {pct(x['ttft'], .5) * 1e3:>11.0f} | "
                  f"{pct(x['ttft'], .99) * 1e3:>11.0f} | {x['tok']:>6} | {len(x['fail']):>6} |", flush=True)
            if x["cut"]:
                print(f"    {s.name} c{c}: {x['cut']} request(s) cut by its token-repeat limit (counted with the tokens they streamed)")
            for f in x["fail"][:3]:
                print(f"    {s.name} c{c} failure: {f}")
            if x["fail"]:
                a.failed = True
    names = [s.name for s in servers]
    tps = {k: pct(v["tps"], .5) for k, v in res.items()}
    if "ggml-rs" in names:
        for anchor in ("ollama", "llama-server"):
            if anchor in names:
                cells = ", ".join(f"c{c} {tps[('ggml-rs', c)] / tps[(anchor, c)]:.2f}" for c in a.conc)
                print(f"ours/{anchor}: {cells}")
    for s in names:
        lo, hi = min(a.conc), max(a.conc)
        if lo != hi:
            label = "ours" if s == "ggml-rs" else s
            print(f"{label}-{hi}/{label}-{lo}: {tps[(s, hi)] / tps[(s, lo)]:.2f}")
    if "ollama" in names and "llama-server" in names:
        print("ollama/llama-server: " + ", ".join(f"c{c} {tps[('ollama', c)] / tps[('llama-server', c)]:.2f}" for c in a.conc))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("-t", type=int, default=2, help="threads of each server")
    ap.add_argument("-parallel", type=int, default=8, help="parallel slots of each server")
    ap.add_argument("-ctx", type=int, default=512, help="context of one request (a slot)")
    ap.add_argument("-n", type=int, default=64, help="generated tokens per request")
    ap.add_argument("-requests", type=int, default=0,
                    help="requests per concurrency and round (0: two per client, at least 8)")
    ap.add_argument("-c", default="1,4,8", help="concurrencies (client threads)")
    ap.add_argument("-rounds", type=int, default=3)
    ap.add_argument("-servers", default="ours,ollama,llama-server")
    ap.add_argument("-flash-attn", dest="flash_attn", default="on", choices=["on", "off"])
    ap.add_argument("-start-timeout", dest="start_timeout", type=float, default=300)
    ap.add_argument("-request-timeout", dest="request_timeout", type=float, default=600)
    ap.add_argument("-ours", default=os.path.join(ROOT, "go/bin/ggml-rs"))
    ap.add_argument("-ollama", default=os.path.join(ROOT, ".cache/ollama", OLLAMA_VERSION, "ollama"))
    ap.add_argument("-llama-server", dest="llama_server", default=os.path.join(ROOT, ".cache/llama-tools/llama-server"))
    ap.add_argument("-keep", action="store_true", help="keep the servers' temporary folders and logs")
    ap.add_argument("-v", dest="verbose", action="store_true", help="print every batch")
    a = ap.parse_args()
    a.conc = [int(x) for x in a.c.split(",")]
    a.servers = [s.strip() for s in a.servers.split(",") if s.strip()]
    for s in a.servers:
        if s not in SERVERS:
            ap.error(f"unknown server {s!r} (one of {', '.join(SERVERS)})")
    a.failed = False
    for m in a.models:
        if not os.path.isfile(m):
            print(f"{m}: no such model", file=sys.stderr)
            return 1
        bench_model(a, m)
    if a.failed:
        print("bench-serve: some requests failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # SIGTERM stops the servers as Ctrl-C does (the finally in bench_model).
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(main())
