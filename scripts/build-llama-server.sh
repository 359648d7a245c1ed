#!/usr/bin/env bash
# Builds llama.cpp's llama-server (an anchor of `make bench-serve`) against the
# pinned llama.cpp (scripts/fetch-llama.sh: libllama, common, mtmd and ggml,
# with our ggml patches) into .cache/llama-server-build/llama-server. Never
# committed; rebuilt only when the pin, its patches or this script change.
#
# The pinned package (llama-cpp-sys-2) carries no tools/server sources. The
# nearest llama.cpp that a package registry holds with them is the one
# vendored in the llama-cpp-python source distribution (PyPI), fetched by pip
# into .cache/llama-server-src. Its tools/server and tools/ui (with
# scripts/ui-assets.cmake) are laid over a copy of the pinned tree, with a
# tools/CMakeLists.txt of ours that builds only mtmd, ui and server. The
# server sources are a little older than the pin; two calls changed since,
# adapted below (server_compat), each checked to have matched.
#
# ggml options as tools/llama-ref (and our build.rs): native CPU, no OpenMP,
# no BLAS, static, no dynamic backends. The web UI is left out
# (LLAMA_BUILD_UI=OFF: no npm build; LLAMA_USE_PREBUILT_UI=OFF: no download):
# the server then serves its API without a page.
#
# Usage: scripts/build-llama-server.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama=$root/.cache/llama.cpp
dest=$root/.cache/llama-server-build
srcpkg=llama-cpp-python
srcver=${LLAMA_SERVER_SRC_VERSION:-0.3.36}
pkgdir=$root/.cache/llama-server-src
py=${PY:-$root/.cache/py/bin/python}

[ -f "$llama/.ggml-rs-stamp" ] || "$root/scripts/fetch-llama.sh"
self_hash=$({ sha256sum 2>/dev/null || shasum -a 256; } < "$0" | cut -c1-16)
stamp="pin:$(cat "$llama/.ggml-rs-stamp") server:$srcpkg-$srcver script:$self_hash"
if [ -x "$dest/llama-server" ] && [ -f "$dest/.ggml-rs-stamp" ] && [ "$(cat "$dest/.ggml-rs-stamp")" = "$stamp" ]; then
  echo "build-llama-server: $dest/llama-server is already built"
  exit 0
fi

# 1. The server's sources, from the source distribution (pip checks its hash).
sdist=$pkgdir/${srcpkg//-/_}-$srcver.tar.gz
if [ ! -f "$sdist" ]; then
  mkdir -p "$pkgdir"
  echo "build-llama-server: pip download $srcpkg==$srcver (source distribution, for tools/server)"
  "$py" -m pip download -q --no-deps --no-binary :all: -d "$pkgdir" "$srcpkg==$srcver"
fi
top=${srcpkg//-/_}-$srcver/vendor/llama.cpp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$sdist" -C "$tmp" "$top/tools/server" "$top/tools/ui" "$top/scripts/ui-assets.cmake"
[ -f "$tmp/$top/tools/server/server.cpp" ] || { echo "build-llama-server: no tools/server in $sdist" >&2; exit 1; }

# 2. The pinned tree with the server laid over it.
rm -rf "$dest/src"
mkdir -p "$dest"
cp -a "$llama" "$dest/src"
rm -rf "$dest/src/tools/server" "$dest/src/tools/ui"
cp -a "$tmp/$top/tools/server" "$tmp/$top/tools/ui" "$dest/src/tools/"
mkdir -p "$dest/src/scripts"
cp "$tmp/$top/scripts/ui-assets.cmake" "$dest/src/scripts/"
cat > "$dest/src/tools/CMakeLists.txt" <<'EOF'
# Written by scripts/build-llama-server.sh: only what llama-server needs.
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(mtmd)
add_subdirectory(ui)
add_subdirectory(server)
EOF

# 3. Calls of the server that the pinned common/mtmd changed.
replace() { # FILE OLD NEW: every OLD becomes NEW; fails when OLD is absent
  local f=$dest/src/tools/server/$1
  grep -qF -- "$2" "$f" || { echo "build-llama-server: '$2' not found in $1" >&2; exit 1; }
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
  -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT="llama-cpp-sys-2-$pin+$srcpkg-$srcver-server" \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DGGML_BACKEND_DL=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >/dev/null
start=$(date +%s)
ninja -C "$dest/build" -j "$(nproc)" llama-server
cp "$dest/build/bin/llama-server" "$dest/llama-server"
echo "$stamp" > "$dest/.ggml-rs-stamp"
echo "build-llama-server: ready at $dest/llama-server ($(( $(date +%s) - start ))s)"
