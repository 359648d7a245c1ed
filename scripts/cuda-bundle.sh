#!/usr/bin/env bash
# Builds, here, everything scripts/device-cuda.sh runs on the GPU machine
# (which has no Go, no Rust and no network), into .cuda-bundle/ (ignored by
# git):
#
#   ggml-rs     the runner, -tags ggml_cuda (scripts/build-cuda.sh's library)
#   llama-ref   llama.cpp's reference built with GGML_CUDA the same way
#               (make llama-ref-cuda)
#   gpu-test    tests/gpu.rs built with the cuda feature
#   wheels      gguf and numpy as scripts/gen-models-requirements.txt pins
#               them (the models must be byte-identical), for the device's
#               Python 3.12
#
# Each program is stripped and xz-compressed. Every call of the device tool
# carries at most 64 MiB with the repository's own files, and each program
# holds all of ggml's CUDA kernels, so they are packed into parts
# (.cuda-bundle/partN/{bin,wheels}, with SHA256SUMS and MANIFEST), one call
# each: .cuda-bundle/PLAN gives the calls. The script fails when one
# program alone would not fit.
#
#   scripts/cuda-bundle.sh        (make cuda-bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(scripts/cuda-toolkit.sh)
dir=$(scripts/build-cuda.sh)
ref=.cache/llama-build-cuda/llama-ref
[ -x "$ref" ] || { echo "cuda-bundle: no $ref (make llama-ref-cuda)" >&2; exit 1; }
out=.cuda-bundle
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The runner, linked with the CUDA library (pkg-config ggml-rs-cuda).
lib=target/cuda/libggml_rs.a
(cd go && PKG_CONFIG_PATH=$PWD/../target/pkgconfig \
  CGO_CFLAGS="-g -O2 -DGGML_RS_LIB_ID=$(sha1sum "../$lib" | cut -c1-16)" \
  go build -tags ggml_cuda -trimpath -ldflags "-s -w" -o "$tmp/ggml-rs" ./cmd/ggml-rs)
cp "$ref" "$tmp/llama-ref"
cp "$dir/gpu-test" "$tmp/gpu-test"
strip "$tmp"/*

# Compressed programs and the wheels, then packed into parts that each fit
# in one call of the device tool beside the repository's own files.
rm -rf "$out" && mkdir -p "$tmp/xz"
for f in ggml-rs llama-ref gpu-test; do
  xz -9 -T0 -c "$tmp/$f" > "$tmp/xz/$f.xz"
done
gguf=$(sed -n 's/^gguf==//p' scripts/gen-models-requirements.txt)
numpy=$(sed -n 's/^numpy==//p' scripts/gen-models-requirements.txt)
python3 -m pip download -q --no-deps --disable-pip-version-check --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$tmp/wheels" "gguf==$gguf" "numpy==$numpy"
# What travels in every call: tracked and untracked-not-ignored files.
repo=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
room=$(( (62 << 20) - repo ))
size() { du -cb "$@" | tail -1 | cut -f1; }
# The runner and the wheels go in the last part (the call that runs the
# script), the others before it, each part as full as it can be.
items=("bin:llama-ref" "bin:gpu-test" "bin:ggml-rs" "wheels")
n=1 used=0
for it in "${items[@]}"; do
  if [ "$it" = wheels ]; then src=("$tmp"/wheels/*.whl); else src=("$tmp/xz/${it#bin:}.xz"); fi
  sz=$(size "${src[@]}")
  [ "$sz" -le "$room" ] || { echo "cuda-bundle: $it alone ($((sz >> 20)) MiB) is more than a call can carry ($((room >> 20)) MiB)" >&2; exit 1; }
  if [ $((used + sz)) -gt "$room" ]; then n=$((n + 1)); used=0; fi
  used=$((used + sz))
  d=$out/part$n/${it%%:*}; mkdir -p "$d"; cp "${src[@]}" "$d/"
  if [ "${it%%:*}" = bin ]; then (cd "$tmp" && sha256sum "${it#bin:}") >> "$out/part$n/SHA256SUMS"; fi
done
{
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.cuda-bundle' || echo ' (with uncommitted changes)'), built $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# CUDA toolkit 13.0.2 from PyPI wheels (nvcc $("$root/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')); $(basename "$dir"): $(sed -n 's/.*(\(CUDA .*\)).*/\1/p' "$dir/build-cuda.txt" 2>/dev/null)"
  echo "# needs at run time: $(readelf -d "$tmp/ggml-rs" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -E 'cuda|cublas' | tr '\n' ' ')"
  (cd "$out" && find . -type f ! -name MANIFEST -printf '%s %p\n' | sort -k2)
} > "$tmp/MANIFEST"
for d in "$out"/part*; do cp "$tmp/MANIFEST" "$d/"; done
# The plan: one device call per part; every call but the last stages its
# part on the machine (kept while it stays warm), the last runs the script.
{
  echo "# $n device call(s), one after the other (the machine stays warm 30 s between them):"
  for i in $(seq 1 $((n - 1))); do
    echo "run carry [\".cuda-bundle/part$i\"] command: scripts/device-cuda.sh --stage"
  done
  echo "run carry [\".cuda-bundle/part$n\"] command: scripts/device-cuda.sh \$OUT   (timeout_s 600)"
} > "$out/PLAN"
cat "$tmp/MANIFEST" "$out/PLAN"
echo "cuda-bundle: $(du -sh "$out" | cut -f1) in $n part(s); the repository's files travel too: $((repo >> 20)) MiB"
