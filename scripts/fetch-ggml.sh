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

# The stamp names the version and a hash of our patch files (the scripts and
# what they copy in), so that a tree fetched before a patch was added or
# changed is fetched and patched again.
patches_hash() {
  local p
  for p in "$root"/scripts/patches/*; do
    [ -e "$p" ] || continue
    basename "$p"
    cat "$p"
  done | { sha256sum 2>/dev/null || shasum -a 256; } | cut -c1-16
}
stamp="$version patches:$(patches_hash)"

if [ -f "$dest/.ggml-rs-stamp" ] && [ "$(cat "$dest/.ggml-rs-stamp")" = "$stamp" ]; then
  echo "fetch-ggml: $dest is already at llama-cpp-sys-2 $version with the current patches"
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
echo "$stamp" > "$dest.tmp/.ggml-rs-stamp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "fetch-ggml: ready at $dest"
