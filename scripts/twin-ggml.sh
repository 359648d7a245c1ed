#!/usr/bin/env bash
# Builds a second, different ggml for the two-ggmls test (tests/c/two_ggmls.c,
# go/internal/twoggml): ggml's base library from the pinned sources, with a
# marker version and commit ("0.0.0-twin", "twin") so that a program can
# tell which copy answered. Plain gcc/g++ (-O1: it computes nothing heavy).
# Rebuilt when the pinned tree's stamp changes.
#
# Usage: scripts/twin-ggml.sh [OUT_DIR]   (default: target/twin-ggml)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/target/twin-ggml}
src=$root/vendor/ggml
lib=$out/libggml-twin.a
stamp=$src/.ggml-rs-stamp
[ -f "$stamp" ] || { echo "twin-ggml: no pinned ggml in $src (scripts/fetch-ggml.sh)" >&2; exit 1; }
if [ -f "$lib" ] && [ "$lib" -nt "$stamp" ] && [ "$lib" -nt "$0" ]; then
  exit 0
fi
mkdir -p "$out/obj"
printf '#pragma once\n#define GGML_VERSION "0.0.0-twin"\n#define GGML_COMMIT "twin"\n' >"$out/ggml-version.h"
flags=(-O1 -fPIC -DNDEBUG -D_GNU_SOURCE -D_XOPEN_SOURCE=600 -I"$out" -I"$src/include" -I"$src/src")
pids=()
for f in ggml.c ggml-alloc.c ggml-quants.c; do
  gcc -std=c11 "${flags[@]}" -c "$src/src/$f" -o "$out/obj/$f.o" & pids+=($!)
done
for f in ggml.cpp ggml-backend.cpp ggml-backend-meta.cpp ggml-opt.cpp ggml-threading.cpp gguf.cpp; do
  g++ -std=c++17 "${flags[@]}" -c "$src/src/$f" -o "$out/obj/$f.o" & pids+=($!)
  [ ${#pids[@]} -ge 4 ] && { wait "${pids[0]}"; pids=("${pids[@]:1}"); }
done
for p in "${pids[@]}"; do wait "$p"; done
rm -f "$lib"
ar rcs "$lib" "$out"/obj/*.o
echo "twin-ggml: $lib (the pinned ggml's base library, version 0.0.0-twin)"
