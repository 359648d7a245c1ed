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
#                             target/pkgconfig/ggml-rs-cuda.pc pointing at it
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
ARCHS=${GGML_RS_CUDA_ARCHS:-90}
LEVEL=${GGML_RS_CPU_LEVEL:-x86-64-v3}
cache=${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}
bash scripts/fetch-ggml.sh >/dev/null

# The key: what changes ggml's build (as the Vulkan build's), the toolkit
# (its folder names its wheels), the GPU and CPU targets.
key=$( (cat scripts/fetch-ggml/Cargo.lock scripts/patches/* build.rs Cargo.toml cmake/ggml/*; echo "$ARCHS $LEVEL $root") | sha1sum | cut -c1-16)
dir=$cache/cuda-$key
echo "build-cuda: $dir (sm $ARCHS, CPU $LEVEL)" >&2
PATH=$root/bin:$PATH CUDACXX=$root/bin/nvcc CUDAToolkit_ROOT=$root \
  GGML_RS_CUDA_ARCHS=$ARCHS GGML_RS_CPU_LEVEL=$LEVEL CARGO_TARGET_DIR=$dir \
  RUSTFLAGS="-L native=$root/lib -L native=$root/lib/stubs" \
  cargo build --release --lib --no-default-features --features rpc,cuda >&2
scripts/private-ggml.sh "$dir/release" "$dir/static" >&2
mkdir -p target && ln -sfn "$dir/static" target/cuda
scripts/gen-pc.sh target/pkgconfig/ggml-rs-cuda.pc cuda "$PWD" '${prefix}/target/cuda' '${prefix}/include' \
  "\${libdir}/libggml_rs.a -L$root/lib -L$root/lib/stubs"
echo "$dir"
