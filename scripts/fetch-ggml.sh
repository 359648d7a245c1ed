#!/usr/bin/env bash
# Fetches the pinned upstream ggml into vendor/ggml.
#
# ggml comes from the `llama.cpp/ggml` folder of the crates.io package
# llama-cpp-sys-2, pinned to an exact version in scripts/fetch-ggml/Cargo.toml
# and to an exact checksum in scripts/fetch-ggml/Cargo.lock. Cargo itself
# downloads and verifies it (`cargo vendor --locked`); we then keep only the
# ggml folder and apply our small patches (scripts/patches/*.sh).
#
# Usage: scripts/fetch-ggml.sh [DEST]   (default: vendor/ggml)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/vendor/ggml}
version=0.1.161

if [ -f "$dest/.ggml-rs-stamp" ] && [ "$(cat "$dest/.ggml-rs-stamp")" = "$version" ]; then
  echo "fetch-ggml: $dest is already at llama-cpp-sys-2 $version"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$root/scripts/fetch-ggml/Cargo.toml" "$root/scripts/fetch-ggml/Cargo.lock" "$root/scripts/fetch-ggml/lib.rs" "$tmp/"
echo "fetch-ggml: vendoring llama-cpp-sys-2 $version through cargo"
(cd "$tmp" && cargo vendor --locked --versioned-dirs --quiet vendored >/dev/null)
src="$tmp/vendored/llama-cpp-sys-2-$version/llama.cpp/ggml"
[ -f "$src/include/ggml.h" ] || { echo "fetch-ggml: $src/include/ggml.h missing" >&2; exit 1; }

rm -rf "$dest.tmp"
mkdir -p "$(dirname "$dest")"
cp -a "$src" "$dest.tmp"
for p in "$root"/scripts/patches/*.sh; do
  [ -e "$p" ] || continue
  echo "fetch-ggml: applying $(basename "$p")"
  bash "$p" "$dest.tmp"
done
echo "$version" > "$dest.tmp/.ggml-rs-stamp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "fetch-ggml: ready at $dest"
