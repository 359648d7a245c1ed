#!/usr/bin/env bash
# The library built with ggml's CUDA backend, on a machine with no GPU and
# no CUDA installed, for the device script (scripts/device-cuda.sh): the
# toolkit from NVIDIA's PyPI wheels (scripts/cuda-toolkit.sh), ggml's
# CUDA kernels for Hopper only (sm_90: the H100 and H200), the CPU code
# portable (x86-64-v3: the device's CPU is not this one). Not part of
# `make test`; `make cuda-build` runs it.
#
#   scripts/build-cuda.sh     prints the build folder; leaves target/cuda
#                             (the archive, ggml private) and
#                             target/pkgconfig/ggml-rs-cuda.pc pointing at it,
#                             and the Rust GPU tests in BUILD/gpu-test
#
# The build lives outside the clone, in a folder keyed by everything that
# changes ggml's build, as the Vulkan build does: a rebuild of ggml's CUDA
# code takes most of an hour on 2 cores; cargo rebuilds only our crate when
# its sources change.
#
# Linking: the CUDA runtime and cuBLAS dynamically (libcudart.so.13,
# libcublas.so.13, libcublasLt.so.13: the device has them, in its CUDA
# install and in its Python's nvidia-* packages), and the driver
# (libcuda.so.1) through the toolkit's link stub (scripts/cuda-toolkit.sh):
# the stub only names the symbols; the device's driver provides them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(scripts/cuda-toolkit.sh)
# sm_90 machine code only ("-real": no PTX beside it, which the driver
# would compile only for a newer GPU), uncompressed by nvcc: xz makes the
# bundle's programs a fifth of nvcc's compressed PTX and SASS (measured on
# softmax.cu: 161 KB as ggml builds it, 33 KB so).
ARCHS=${GGML_RS_CUDA_ARCHS:-90-real}
COMPRESSION=${GGML_RS_CUDA_COMPRESSION:-none}
LEVEL=${GGML_RS_CPU_LEVEL:-x86-64-v3}
cache=${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}
bash scripts/fetch-ggml.sh >/dev/null

# The key: what changes ggml's build (as the Vulkan build's), the toolkit
# (its folder names its wheels), the GPU and CPU targets.
key=$( (cat scripts/fetch-ggml/Cargo.lock scripts/patches/* build.rs Cargo.toml cmake/ggml/*; echo "$ARCHS $COMPRESSION $LEVEL $root") | sha1sum | cut -c1-16)
dir=$cache/cuda-$key
mkdir -p "$dir"
echo "build-cuda: $dir (CUDA $ARCHS, nvcc compression $COMPRESSION, CPU $LEVEL)" | tee "$dir/build-cuda.txt" >&2
cargo_cuda() {
  PATH=$root/bin:$PATH CUDACXX=$root/bin/nvcc CUDAToolkit_ROOT=$root \
    GGML_RS_CUDA_ARCHS=$ARCHS GGML_RS_CUDA_COMPRESSION=$COMPRESSION GGML_RS_CPU_LEVEL=$LEVEL CARGO_TARGET_DIR=$dir \
    RUSTFLAGS="-L native=$root/lib -L native=$root/lib/stubs" \
    cargo "$@" --release --no-default-features --features rpc,cuda
}
cargo_cuda build --lib >&2
# The Rust GPU tests (tests/gpu.rs) for the device: $dir/gpu-test.
exe=$(cargo_cuda test --test gpu --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "gpu"][-1])')
cp "$exe" "$dir/gpu-test"
scripts/private-ggml.sh "$dir/release" "$dir/static" >&2
mkdir -p target && ln -sfn "$dir/static" target/cuda
scripts/gen-pc.sh target/pkgconfig/ggml-rs-cuda.pc cuda "$PWD" '${prefix}/target/cuda' '${prefix}/include' \
  "\${libdir}/libggml_rs.a -L$root/lib -L$root/lib/stubs"
echo "$dir"
