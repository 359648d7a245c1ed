#!/usr/bin/env bash
# Fetches the pinned llama.cpp sources (the reference for `make parity` and
# `make bench`) into .cache/llama.cpp. Never committed.
#
# The crates.io package llama-cpp-sys-2 (pinned by scripts/fetch-ggml/Cargo.toml
# and its Cargo.lock, the same pin as our ggml) carries llama.cpp's src/,
# include/, common/, vendor/, ggml/ and top-level CMake files, but none of its
# tools. Cargo downloads and verifies it (`cargo vendor --locked`); we keep the
# llama.cpp folder and apply our ggml patches (scripts/patches/*.sh) to its
# ggml/, so the reference runs the same ggml as we do, and the reference's
# own (scripts/llama-patches/*.sh) to the rest.
#
# SKIP_PATCHES (space-separated names of scripts/patches/*.sh) leaves those
# ggml patches out: `make bench-barrier` builds a reference with ggml's own
# spinning barrier (without 12-cpu-barrier-sleep.sh) to compare against.
#
# Usage: [SKIP_PATCHES="NN-name.sh ..."] scripts/fetch-llama.sh [DEST]   (default: .cache/llama.cpp)
set -euo pipefail
# Patches that are ours only, never the reference's: our faster CPU kernels
# (issue 27), which give the same numbers as upstream's (the reference's
# upstream kernels check that) and whose speed `make bench` measures
# against upstream's.
ours_only="13-cpu-r16.sh 14-cpu-concat-rows.sh 15-cpu-delta-net-rows.sh 16-cpu-binary-scalar-rows.sh 17-cpu-ssm-conv-blocks.sh 18-cpu-fa-tiled-pack.sh 19-cpu-rms-norm-rows.sh 20-cpu-gelu-table.sh 21-cpu-delta-net-in-place.sh 22-cpu-q8k-quantize.sh"
skip=" ${SKIP_PATCHES:-} $ours_only "
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/.cache/llama.cpp}
version=0.1.161

patches_hash() {
  local p
  for p in "$root"/scripts/patches/*.sh "$root"/scripts/llama-patches/*.sh; do
    [ -e "$p" ] || continue
    [[ "$skip" == *" $(basename "$p") "* ]] && continue
    basename "$p"
    cat "$p"
  done | { sha256sum 2>/dev/null || shasum -a 256; } | cut -c1-16
}
stamp="$version patches:$(patches_hash)"

if [ -f "$dest/.ggml-rs-stamp" ] && [ "$(cat "$dest/.ggml-rs-stamp")" = "$stamp" ]; then
  echo "fetch-llama: $dest is already at llama-cpp-sys-2 $version with the current patches"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$root/scripts/fetch-ggml/Cargo.toml" "$root/scripts/fetch-ggml/Cargo.lock" "$root/scripts/fetch-ggml/lib.rs" "$tmp/"
echo "fetch-llama: vendoring llama-cpp-sys-2 $version through cargo"
(cd "$tmp" && cargo vendor --locked --versioned-dirs --quiet vendored >/dev/null)
src="$tmp/vendored/llama-cpp-sys-2-$version/llama.cpp"
for f in include/llama.h src/llama.cpp ggml/include/ggml.h CMakeLists.txt; do
  [ -f "$src/$f" ] || { echo "fetch-llama: $src/$f missing" >&2; exit 1; }
done

rm -rf "$dest.tmp"
mkdir -p "$(dirname "$dest")"
cp -a "$src" "$dest.tmp"
for p in "$root"/scripts/patches/*.sh; do
  [ -e "$p" ] || continue
  if [[ "$skip" == *" $(basename "$p") "* ]]; then
    echo "fetch-llama: leaving out $(basename "$p") (SKIP_PATCHES or ours only)"
    continue
  fi
  echo "fetch-llama: applying $(basename "$p") to ggml/"
  bash "$p" "$dest.tmp/ggml"
done
# Patches of llama.cpp itself (scripts/llama-patches/*.sh): the reference
# only, never our library.
for p in "$root"/scripts/llama-patches/*.sh; do
  [ -e "$p" ] || continue
  echo "fetch-llama: applying $(basename "$p") to llama.cpp"
  bash "$p" "$dest.tmp"
done
echo "$stamp" > "$dest.tmp/.ggml-rs-stamp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "fetch-llama: ready at $dest"
