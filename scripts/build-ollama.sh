#!/usr/bin/env bash
# Builds Ollama from its Go module (the anchor of `make bench-serve`) into
# .cache/ollama/<version>/ollama. Never committed; built once per version and
# flags (a stamp beside the binary records both).
#
# `go install github.com/ollama/ollama@<version>` compiles Ollama's own ggml
# (ml/backend/ggml/ggml, CPU backend) and its llama.cpp copy through cgo.
# Two things the plain command lacks:
#  - cgo's default flags (-O2, no -march) give a baseline x86-64 ggml; we pass
#    -O3 -march=native, as our library and llama-server are built natively.
#  - the module zip leaves out llama.cpp's vendor/ headers (nlohmann/json,
#    stb, miniaudio); the pinned llama.cpp sources (scripts/fetch-llama.sh)
#    supply them through CGO_CPPFLAGS.
# The version string is set with -ldflags so /api/version reports it.
#
# Usage: scripts/build-ollama.sh [VERSION]   (default below)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:-${OLLAMA_VERSION:-0.17.4}}
dest=$root/.cache/ollama/$version
llama=$root/.cache/llama.cpp
flags="-O3 -march=native"
stamp="ollama $version cflags:$flags go:$(go env GOVERSION)"

if [ -x "$dest/ollama" ] && [ -f "$dest/.ggml-rs-stamp" ] && [ "$(cat "$dest/.ggml-rs-stamp")" = "$stamp" ]; then
  echo "build-ollama: $dest/ollama is already built ($stamp)"
  exit 0
fi
[ -d "$llama/vendor/nlohmann" ] || "$root/scripts/fetch-llama.sh"

mkdir -p "$dest"
rm -f "$dest/.ggml-rs-stamp"
echo "build-ollama: go install github.com/ollama/ollama@v$version (cgo, $flags; several minutes)"
start=$(date +%s)
CGO_ENABLED=1 \
CGO_CFLAGS="$flags" \
CGO_CXXFLAGS="$flags" \
CGO_CPPFLAGS="-I$llama/vendor" \
GOBIN="$dest" \
GOFLAGS="-buildvcs=false" \
  go install -trimpath -ldflags "-X=github.com/ollama/ollama/version.Version=$version" \
  "github.com/ollama/ollama@v$version"
echo "$stamp" > "$dest/.ggml-rs-stamp"
echo "build-ollama: ready at $dest/ollama ($(( $(date +%s) - start ))s)"
