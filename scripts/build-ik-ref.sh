#!/usr/bin/env bash
# Builds ik-ref (tools/ik-ref): our bench driver over ik_llama.cpp, the
# CPU-tuned fork of llama.cpp, as a speed anchor for `make bench` (issue 27).
# Never committed, never part of `make test`.
#
# The sources: the slm_ikllama_sys crate (pinned below), which ships an
# ik_llama.cpp tree (src/, include/, ggml/ with the iqk kernels, common/,
# CMake files). Cargo downloads and verifies it (`cargo fetch` of a throwaway
# package in .cache/ik-fetch); we build from the unpacked crate in cargo's
# registry, out of tree, into .cache/ik-build (CMake + Ninja, Release,
# GGML_NATIVE=ON, no CUDA, static libllama; OpenMP as ik's default, ON: see
# tools/ik-ref/CMakeLists.txt). The crate's own build.rs (a cmake-rs build with
# CUDA and shared libraries by default) is not run.
#
# The build is keyed by its inputs (crate version, tools/ik-ref/*, this
# script): with the same key and the binary present, nothing runs. The first
# build compiles ik's iqk_mul_mat sources: 15-30 minutes on 2 cores.
#
# Usage: [JOBS=N] scripts/build-ik-ref.sh   (prints the binary's path last)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=0.1.2
fetch=$root/.cache/ik-fetch
build=$root/.cache/ik-build
bin=$build/ik-ref
jobs=${JOBS:-2}

key=$({
  echo "slm_ikllama_sys $version"
  for f in "$root"/tools/ik-ref/* "$root/tools/common/cli.h" "$root/scripts/build-ik-ref.sh"; do
    echo "$(basename "$f")"
    cat "$f"
  done
} | { sha256sum 2>/dev/null || shasum -a 256; } | cut -c1-16)

if [ -x "$bin" ] && [ -f "$build/.ggml-rs-key" ] && [ "$(cat "$build/.ggml-rs-key")" = "$key" ]; then
  echo "build-ik-ref: $bin is up to date (key $key)" >&2
  touch "$bin"  # newer than its inputs, for make
  echo "$bin"
  exit 0
fi

mkdir -p "$fetch"
cat > "$fetch/Cargo.toml" <<TOML
[package]
name = "ik-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[lib]
path = "lib.rs"

[dependencies]
slm_ikllama_sys = "=$version"

[workspace]
TOML
: > "$fetch/lib.rs"
echo "build-ik-ref: fetching slm_ikllama_sys $version through cargo" >&2
(cd "$fetch" && cargo fetch --quiet)
manifest=$(cd "$fetch" && cargo metadata --format-version 1 --quiet | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "slm_ikllama_sys" and p["version"] == sys.argv[1]:
        print(p["manifest_path"])
        break
' "$version")
[ -n "$manifest" ] || { echo "build-ik-ref: slm_ikllama_sys $version not found by cargo metadata" >&2; exit 1; }
src=$(dirname "$manifest")/ik_llama.cpp
for f in CMakeLists.txt include/llama.h src/llama.cpp ggml/CMakeLists.txt ggml/src/iqk/iqk_mul_mat.cpp; do
  [ -f "$src/$f" ] || { echo "build-ik-ref: $src/$f missing" >&2; exit 1; }
done

echo "build-ik-ref: building ik_llama.cpp from $src into $build (-j$jobs)" >&2
start=$(date +%s)
mkdir -p "$build"
# (ik's CMake files warn that the crate is no git checkout: kept in cmake.log)
cmake -S "$root/tools/ik-ref" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DIK_SRC="$src" >"$build/cmake.log" 2>&1 ||
  { cat "$build/cmake.log" >&2; exit 1; }
ninja -C "$build" -j"$jobs" ik-ref >&2
touch "$bin"  # newer than its inputs, for make, even when ninja had nothing to do
echo "$key" > "$build/.ggml-rs-key"
echo "build-ik-ref: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
