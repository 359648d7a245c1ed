#!/usr/bin/env bash
# Builds llama.cpp's own programs against the pinned llama.cpp
# (scripts/fetch-llama.sh: libllama, common, mtmd and ggml, with our ggml
# patches) into .cache/llama-tools/: llama-server (an anchor of `make
# bench-serve`), llama-quantize and llama-imatrix (the references of
# `ggml-rs quantize -imatrix`, `make quant-parity`). Never committed; each
# rebuilt only when the pin, its patches or this script change.
#
# The pinned package (llama-cpp-sys-2) carries no tools/ sources. The
# nearest llama.cpp that a package registry holds with them is the one
# vendored in the llama-cpp-python source distribution (PyPI), fetched by pip
# into .cache/llama-server-src. Its tools/server, tools/ui (with
# scripts/ui-assets.cmake), tools/quantize and tools/imatrix are laid over a
# copy of the pinned tree, with a tools/CMakeLists.txt of ours that builds
# only those. The sources are a little older than the pin; two calls of the
# server changed since, adapted below (server_compat), each checked to have
# matched; quantize and imatrix build unchanged (common's imatrix loader and
# llama_model_imatrix_data are the pin's).
#
# ggml options as tools/llama-ref (and our build.rs): native CPU, no OpenMP,
# no BLAS, static, no dynamic backends. The web UI is left out
# (LLAMA_BUILD_UI=OFF: no npm build; LLAMA_USE_PREBUILT_UI=OFF: no download):
# the server then serves its API without a page.
#
# Usage: scripts/build-llama-tools.sh [llama-server|llama-quantize|llama-imatrix]...
#        (no argument: llama-server)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama=$root/.cache/llama.cpp
dest=$root/.cache/llama-tools
srcpkg=llama-cpp-python
srcver=${LLAMA_SERVER_SRC_VERSION:-0.3.36}
pkgdir=$root/.cache/llama-server-src
py=${PY:-$root/.cache/py/bin/python}

[ -f "$llama/.ggml-rs-stamp" ] || "$root/scripts/fetch-llama.sh"
self_hash=$({ sha256sum 2>/dev/null || shasum -a 256; } < "$0" | cut -c1-16)
stamp="pin:$(cat "$llama/.ggml-rs-stamp") tools:$srcpkg-$srcver script:$self_hash"
[ $# -gt 0 ] || set -- llama-server
todo=()
for t in "$@"; do
  case $t in llama-server|llama-quantize|llama-imatrix) ;; *) echo "build-llama-tools: unknown program $t" >&2; exit 2;; esac
  if [ -x "$dest/$t" ] && [ -f "$dest/.stamp-$t" ] && [ "$(cat "$dest/.stamp-$t")" = "$stamp" ]; then
    echo "build-llama-tools: $dest/$t is already built"
  else
    todo+=("$t")
  fi
done
[ ${#todo[@]} -gt 0 ] || exit 0

# 1. The tools' sources, from the source distribution (pip checks its hash).
sdist=$pkgdir/${srcpkg//-/_}-$srcver.tar.gz
if [ ! -f "$sdist" ]; then
  mkdir -p "$pkgdir"
  echo "build-llama-tools: pip download $srcpkg==$srcver (source distribution, for tools/)"
  "$py" -m pip download -q --no-deps --no-binary :all: -d "$pkgdir" "$srcpkg==$srcver"
fi
top=${srcpkg//-/_}-$srcver/vendor/llama.cpp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tools=(server ui quantize imatrix)
tar -xzf "$sdist" -C "$tmp" "${tools[@]/#/$top/tools/}" "$top/scripts/ui-assets.cmake"
for d in server/server.cpp quantize/quantize.cpp imatrix/imatrix.cpp; do
  [ -f "$tmp/$top/tools/$d" ] || { echo "build-llama-tools: no tools/$d in $sdist" >&2; exit 1; }
done

# 2. The pinned tree with the server laid over it.
rm -rf "$dest/src"
mkdir -p "$dest"
cp -a "$llama" "$dest/src"
for d in "${tools[@]}"; do
  rm -rf "$dest/src/tools/$d"
  cp -a "$tmp/$top/tools/$d" "$dest/src/tools/"
done
mkdir -p "$dest/src/scripts"
cp "$tmp/$top/scripts/ui-assets.cmake" "$dest/src/scripts/"
cat > "$dest/src/tools/CMakeLists.txt" <<'EOF'
# Written by scripts/build-llama-tools.sh: only the programs it builds.
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(mtmd)
add_subdirectory(ui)
add_subdirectory(server)
add_subdirectory(quantize)
add_subdirectory(imatrix)
EOF

# 3. Calls of the server that the pinned common/mtmd changed.
replace() { # FILE OLD NEW: every OLD becomes NEW; fails when OLD is absent
  local f=$dest/src/tools/server/$1
  grep -qF -- "$2" "$f" || { echo "build-llama-tools: '$2' not found in $1" >&2; exit 1; }
  OLD=$2 NEW=$3 perl -0pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/g' "$f"
}
server_compat() {
  # mtmd_get_memory_usage returns a struct whose backend_mem_usage is the map.
  replace server-context.cpp "mtmd_get_memory_usage(mmproj_path.c_str(), mparams);" \
    "mtmd_get_memory_usage(mmproj_path.c_str(), mparams).backend_mem_usage;"
  # common's fs_open_ifstream is gone; on Linux it was a plain ifstream.
  replace server-mcp.cpp "fs_open_ifstream(params.mcp_servers_config, std::ios::in)" \
    "std::ifstream(params.mcp_servers_config, std::ios::in)"
}
server_compat

# 4. Configure and build (ggml as tools/llama-ref). The build number and
# commit are named, or llama.cpp's CMake would take them from whatever git
# repository holds .cache (ours).
pin=$(cut -d' ' -f1 "$llama/.ggml-rs-stamp")
cmake -S "$dest/src" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT="llama-cpp-sys-2-$pin+$srcpkg-$srcver-tools" \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DGGML_BACKEND_DL=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >/dev/null
start=$(date +%s)
ninja -C "$dest/build" -j "$(nproc)" "${todo[@]}"
for t in "${todo[@]}"; do
  cp "$dest/build/bin/$t" "$dest/$t"
  echo "$stamp" > "$dest/.stamp-$t"
done
echo "build-llama-tools: ${todo[*]} ready in $dest ($(( $(date +%s) - start ))s)"
