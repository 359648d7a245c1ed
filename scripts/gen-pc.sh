#!/usr/bin/env bash
# Writes a pkg-config file for the library, so that C programs
# (`cc prog.c $(pkg-config --cflags --libs ggml-rs)`) and the Go module
# (`#cgo pkg-config: --static ggml-rs`, go/ml/backend/link_*.go) find the
# header and the library.
#
# Usage: scripts/gen-pc.sh OUT VARIANT PREFIX LIBDIR INCLUDEDIR LIBS
#   VARIANT  cpu, vulkan or cuda: names the package (ggml-rs, ggml-rs-vulkan,
#            ggml-rs-cuda) and the system libraries it needs
#   LIBS     the Libs line (-L${libdir} -lggml_rs for an install; the
#            archive's own path inside this repository)
# LIBDIR and INCLUDEDIR may use ${prefix}.
set -euo pipefail
out=$1 variant=$2 prefix=$3 libdir=$4 includedir=$5 libs=$6
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$(dirname "$0")/../Cargo.toml" | head -1)
# What the static archive leaves to the system: the C++ runtime, libm,
# libdl and pthreads (ggml's CPU backend and our C++ shim), and the
# backend's own runtime.
private="-lstdc++ -lm -ldl -lpthread"
case $variant in
  cpu) name=ggml-rs; what="CPU and RPC backends" ;;
  vulkan) name=ggml-rs-vulkan; what="CPU, RPC and Vulkan backends"; private="$private -lvulkan" ;;
  cuda) name=ggml-rs-cuda; what="CPU, RPC and CUDA backends"; private="$private -lcudart -lcublas -lcublasLt -lcuda" ;;
  *) echo "gen-pc.sh: variant $variant: cpu, vulkan or cuda" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$out")"
cat > "$out.tmp" <<PC
prefix=$prefix
libdir=$libdir
includedir=$includedir

Name: $name
Description: ggml behind a checked C ABI ($what)
Version: $version
Cflags: -I\${includedir}
Libs: $libs
Libs.private: $private
PC
mv "$out.tmp" "$out"
