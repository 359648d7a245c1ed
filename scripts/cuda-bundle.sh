#!/usr/bin/env bash
# Builds, here, everything scripts/device-cuda.sh runs on the GPU machine
# (which has no Go, no Rust and no network), into .cuda-bundle/ (ignored by
# git; the device tool carries it with `carry: [".cuda-bundle"]`):
#
#   bin/ggml-rs.xz    the runner, -tags ggml_cuda (scripts/build-cuda.sh's library)
#   bin/llama-ref.xz  llama.cpp's reference built with GGML_CUDA the same way
#                     (sm_90, CPU code x86-64-v3; make llama-ref-cuda)
#   bin/gpu-test.xz   tests/gpu.rs built with the cuda feature
#   wheels/           gguf and numpy as scripts/gen-models-requirements.txt
#                     pins them (the models must be byte-identical), for the
#                     device's Python 3.12
#   SHA256SUMS, MANIFEST
#
# Each program is stripped and xz-compressed; everything that travels (the
# repository's files and the bundle) must stay under the tool's 64 MiB: the
# script fails when it would not.
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
# The Rust GPU tests: the test binary cargo names in its JSON messages.
test_bin=$(PATH=$root/bin:$PATH CUDACXX=$root/bin/nvcc CUDAToolkit_ROOT=$root \
  GGML_RS_CUDA_ARCHS=${GGML_RS_CUDA_ARCHS:-90} GGML_RS_CPU_LEVEL=${GGML_RS_CPU_LEVEL:-x86-64-v3} CARGO_TARGET_DIR=$dir \
  RUSTFLAGS="-L native=$root/lib -L native=$root/lib/stubs" \
  cargo test --release --no-default-features --features rpc,cuda --test gpu --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu"][-1])')
cp "$test_bin" "$tmp/gpu-test"
strip "$tmp"/*

rm -rf "$out" && mkdir -p "$out/bin" "$out/wheels"
(cd "$tmp" && sha256sum ggml-rs llama-ref gpu-test) > "$out/SHA256SUMS"
for f in ggml-rs llama-ref gpu-test; do
  xz -9e -T0 -c "$tmp/$f" > "$out/bin/$f.xz"
done
gguf=$(sed -n 's/^gguf==//p' scripts/gen-models-requirements.txt)
numpy=$(sed -n 's/^numpy==//p' scripts/gen-models-requirements.txt)
python3 -m pip download -q --no-deps --disable-pip-version-check --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$out/wheels" "gguf==$gguf" "numpy==$numpy"
{
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.cuda-bundle' || echo ' (with uncommitted changes)'), built $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# CUDA toolkit 13.0.2 from PyPI wheels (nvcc $("$root/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')), kernels sm_${GGML_RS_CUDA_ARCHS:-90}, CPU code ${GGML_RS_CPU_LEVEL:-x86-64-v3}"
  echo "# needs at run time: $(readelf -d "$tmp/ggml-rs" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | grep -E 'cuda|cublas' | tr '\n' ' ')"
  ls -l "$out/bin" "$out/wheels" | awk 'NF > 5 {print $5, $NF}'
} > "$out/MANIFEST"
cat "$out/MANIFEST"

# What travels: tracked and untracked-not-ignored files, and the bundle.
travel=$(( $( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1) + $(du -sb "$out" | cut -f1) ))
echo "cuda-bundle: $out is $(du -sh "$out" | cut -f1); with the repository $((travel / 1048576)) MiB travel (the limit: 64)"
[ "$travel" -lt $((62 * 1048576)) ] || { echo "cuda-bundle: too big to carry" >&2; exit 1; }
