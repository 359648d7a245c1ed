#!/usr/bin/env bash
# Builds Ollama's own binary with ggml-rs in place of its cgo ggml and its
# llama.cpp copy, with no hand edit: Ollama's module (from the Go module
# proxy) is copied into .cache/ollama-ggml-rs/<version>/src, its
# ml/backend/ggml (the cgo ggml) and llama/ (llama.cpp) are deleted, and
# the imports of the packages ggml-rs provides are rewritten to ours:
#
#   github.com/ollama/ollama/ml             -> github.com/ggml-rs/ggml-rs/go/ml
#   github.com/ollama/ollama/ml/backend     -> .../go/ml/backend
#   github.com/ollama/ollama/ml/backend/ggml -> .../go/ml/backend/ggml
#   github.com/ollama/ollama/ml/nn/rope     -> .../go/ml/nn/rope
#   github.com/ollama/ollama/fs             -> .../go/fs
#   github.com/ollama/ollama/llama          -> .../go/llama
#
# with a replace directive onto this checkout's go/ folder. The binary
# (.cache/ollama-ggml-rs/<version>/ollama, path printed last) runs
# Ollama's Go engine; run it with OLLAMA_NEW_ENGINE=1 so that every
# architecture the Go engine implements uses it (the llama.cpp engine is not
# there: go/llama says so for the others). Built once per version, library
# and Go sources (a stamp records them). Nothing of Ollama is committed.
#
# Usage: scripts/build-ollama-ggml-rs.sh [VERSION]   (default 0.17.4, the
# last release with the Go engine's ggml backend)
#        OLLAMA_SRC=DIR scripts/build-ollama-ggml-rs.sh LABEL
# builds an Ollama source tree DIR instead of a release from the proxy
# (for instance f63eea3d, the Go engine's last commit, which the proxy
# does not serve: `git archive f63eea3d | tar -x -C DIR` from a clone).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:-${OLLAMA_VERSION:-0.17.4}}
dest=$root/.cache/ollama-ggml-rs/$version
ours=github.com/ggml-rs/ggml-rs/go
lib=$root/target/static/libggml_rs.a
[ -f "$lib" ] || { echo "build-ollama-ggml-rs: $lib is missing (make build)" >&2; exit 1; }
export PKG_CONFIG_PATH=$root/target/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}

srchash=$( (cd "$root/go" && find . -name '*.go' -o -name go.mod | LC_ALL=C sort | xargs sha1sum) | sha1sum | cut -c1-16)
srcdir=${OLLAMA_SRC:-}
[ -z "$srcdir" ] || [ -f "$srcdir/go.mod" ] || { echo "build-ollama-ggml-rs: OLLAMA_SRC=$srcdir has no go.mod" >&2; exit 1; }
stamp="ollama $version${srcdir:+ src:$(cd "$srcdir" && find . -name '*.go' -o -name go.mod | LC_ALL=C sort | xargs sha1sum | sha1sum | cut -c1-16)} lib:$(sha1sum "$lib" | cut -c1-16) go-src:$srchash script:$(sha1sum "$0" | cut -c1-16) go:$(go env GOVERSION)"
if [ -x "$dest/ollama" ] && [ "$(cat "$dest/.ggml-rs-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "build-ollama-ggml-rs: already built ($stamp)" >&2
  echo "$dest/ollama"
  exit 0
fi

if [ -n "$srcdir" ]; then
  moddir=$srcdir
else
  modjson=$(go mod download -json "github.com/ollama/ollama@v$version")
  moddir=$(python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error", "no Dir")))' <<<"$modjson")
fi
src=$dest/src
rm -rf "$src" "$dest/ollama" "$dest/.ggml-rs-stamp"
mkdir -p "$dest"
cp -r "$moddir" "$src"
chmod -R u+w "$src"

# The cgo code ggml-rs replaces.
rm -rf "$src/ml/backend/ggml" "$src/llama"
# Imports, mechanically: only these exact paths (fs/ggml, ml/nn etc. stay
# Ollama's).
n=$(grep -rlE '"github.com/ollama/ollama/(ml|ml/backend|ml/backend/ggml|ml/nn/rope|fs|llama)"' --include='*.go' "$src" | tee "$dest/rewritten.txt" | wc -l)
xargs -a "$dest/rewritten.txt" sed -i -E \
  "s#\"github.com/ollama/ollama/(ml|ml/backend|ml/backend/ggml|ml/nn/rope|fs|llama)\"#\"$ours/\1\"#g"
(cd "$src" && go mod edit -require="$ours@v0.0.0" -replace="$ours=$root/go")
echo "build-ollama-ggml-rs: $n files' imports rewritten; building (Go only, no C++)" >&2

start=$(date +%s)
(cd "$src" && CGO_ENABLED=1 CGO_CFLAGS="-O2 -DGGML_RS_LIB_ID=$(sha1sum "$lib" | cut -c1-16)" GOFLAGS="-buildvcs=false -mod=mod" \
  go build -trimpath -ldflags "-X=github.com/ollama/ollama/version.Version=$version" -o "$dest/ollama" .)
echo "$stamp" > "$dest/.ggml-rs-stamp"
echo "build-ollama-ggml-rs: built in $(( $(date +%s) - start ))s, $(du -h "$dest/ollama" | cut -f1)" >&2
echo "$dest/ollama"
