#!/usr/bin/env python3
"""Writes go/chat/testdata/golden/*.json: llama.cpp's renderings of every
chat template in go/chat/testdata/templates.json over every conversation in
go/chat/testdata/conversations.json, by the reference `llama-ref chat`
(common/chat.cpp on llama.cpp's own Jinja engine, as llama-server renders a
request).

The clock is fixed with faketime (Debian package faketime) at NOW in UTC,
so that date_string, datetime and strftime_now are reproducible; the Go
test renders with the same time (golden "now").

usage: scripts/chat-golden.py [LLAMA_REF]   (default .cache/llama-build/llama-ref)
"""
import json
import os
import subprocess
import sys
import tempfile

NOW = "2025-03-14 15:09:26"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "go", "chat", "testdata")


def main():
    ref = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".cache", "llama-build", "llama-ref")
    if not os.access(ref, os.X_OK):
        sys.exit(f"chat-golden: no reference program at {ref} (make llama-ref)")
    if subprocess.run(["sh", "-c", "command -v faketime"], capture_output=True).returncode != 0:
        sys.exit("chat-golden: needs faketime (apt-get install faketime)")
    conv = os.path.join(DATA, "conversations.json")
    with open(os.path.join(DATA, "templates.json")) as f:
        templates = json.load(f)["templates"]
    env = dict(os.environ, TZ="UTC")
    os.makedirs(os.path.join(DATA, "golden"), exist_ok=True)
    for t in templates:
        name = t["file"]
        with tempfile.TemporaryDirectory() as tmp:
            if name == "chatml":
                # llama.cpp's fallback for a model without a template
                path = os.path.join(tmp, "chatml")
                with open(path, "w") as f:
                    f.write("chatml")
            else:
                path = os.path.join(DATA, "templates", name)
            out = subprocess.run(
                ["faketime", NOW, ref, "chat", "-bos", t["bos"], "-eos", t["eos"], path, conv],
                env=env, capture_output=True, check=True).stdout
        res = json.loads(out)
        golden = {"template": name, "bos": t["bos"], "eos": t["eos"], "now": NOW + " UTC",
                  "results": res["results"]}
        dst = os.path.join(DATA, "golden", name.removesuffix(".jinja") + ".json")
        with open(dst, "w") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        errs = sum(1 for r in res["results"] if "error" in r)
        print(f"{dst}: {len(res['results'])} conversations, {errs} errors")


if __name__ == "__main__":
    main()
