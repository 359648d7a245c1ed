#!/usr/bin/env bash
# The CUDA toolkit for building ggml's CUDA backend on a machine without
# one: NVIDIA's own PyPI wheels (nvcc, its NVVM and CRT headers, the
# runtime, cuBLAS and CCCL), pinned to CUDA 13.0 update 2 (the device's
# nvcc and driver are 13.0: docs/notes/cuda.md), their sha256 checked,
# unpacked once into the cache outside the clone. Nothing is installed.
#
#   scripts/cuda-toolkit.sh        prints the toolkit's root (bin/nvcc,
#                                  include/, lib/), usable as CUDAToolkit_ROOT
#
# Cache: $GGML_RS_CACHE, default $HOME/.cache/ggml-rs. Needs python3 with pip.
# The wheels ship versioned libraries only (libcudart.so.13): the link
# names (libcudart.so) are added as symbolic links. The driver library
# (libcuda.so.1) is not in any wheel: scripts/build-cuda.sh makes a link
# stub of the symbols ggml uses, as the toolkit's own lib/stubs would.
set -euo pipefail

# name==version sha256 (CUDA 13.0.2: the versions its meta-package cuda-toolkit pins)
WHEELS="
nvidia-cuda-nvcc==13.0.88 56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
nvidia-nvvm==13.0.88 c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0
nvidia-cuda-crt==13.0.88 2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4
nvidia-cuda-runtime==13.0.96 7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548
nvidia-cublas==13.1.0.3 ee8722c1f0145ab246bccb9e452153b5e0515fd094c3678df50b2a0888b8b171
nvidia-cuda-cccl==13.0.85 e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649
"
cache=${GGML_RS_CACHE:-$HOME/.cache/ggml-rs}
key=$(echo "$WHEELS" | sha1sum | cut -c1-12)
dir=$cache/cuda-toolkit-13.0.2-$key
root=$dir/nvidia/cu13

if [ -f "$dir/.complete" ]; then
  echo "$root"; exit 0
fi
wheels=$cache/cuda-wheels
mkdir -p "$wheels"
rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
echo "$WHEELS" | while read -r spec sha; do
  [ -n "$spec" ] || continue
  name=${spec%%==*} version=${spec##*==}
  file=$(ls "$wheels/${name//-/_}-$version-"*.whl 2>/dev/null | head -1 || true)
  if [ -z "$file" ] || [ "$(sha256sum "$file" | cut -c1-64)" != "$sha" ]; then
    echo "fetching $spec into $wheels" >&2
    rm -f "$wheels/${name//-/_}-$version-"*.whl
    python3 -m pip download --no-deps --disable-pip-version-check -q --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 \
      --python-version 3.11 -d "$wheels" "$spec" >&2 || { echo "could not download $spec from PyPI" >&2; exit 1; }
    file=$(ls "$wheels/${name//-/_}-$version-"*.whl | head -1)
    got=$(sha256sum "$file" | cut -c1-64)
    [ "$got" = "$sha" ] || { echo "$spec: sha256 $got, expected $sha" >&2; rm -f "$file"; exit 1; }
  fi
  python3 -m zipfile -e "$file" "$dir.tmp"
done
r=$dir.tmp/nvidia/cu13
chmod +x "$r"/bin/* "$r"/nvvm/bin/* 2>/dev/null || true
for l in cudart cublas cublasLt; do ln -sf "lib$l.so.13" "$r/lib/lib$l.so"; done
# nvcc.profile names lib64 (the toolkit's layout); the wheels have lib.
ln -sfn lib "$r/lib64"
mkdir -p "$r/lib/stubs"
cc -E -P -I"$r/include" "$r/include/cuda.h" | grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' |
  sed 's/[[:space:]]*($//' | sort -u | sed 's/.*/int &(void) { return 999; }/' > "$r/lib/stubs/cuda-stub.c"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$r/lib/stubs/libcuda.so" "$r/lib/stubs/cuda-stub.c"
# Under its soname too: device-cuda.sh --dry-run runs the CUDA programs
# here with it (every call fails, so CUDA lists no device).
ln -sf libcuda.so "$r/lib/stubs/libcuda.so.1"
# One fixed time for every file: an unpacked-again toolkit must not look
# newer than the objects built with it (ninja would rebuild them all).
find "$dir.tmp" -exec touch -h -d '2025-01-01 00:00:00 UTC' {} +
touch "$dir.tmp/.complete"
rm -rf "$dir"; mv "$dir.tmp" "$dir"
echo "$root"
