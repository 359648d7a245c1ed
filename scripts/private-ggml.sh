#!/usr/bin/env bash
# Makes the static library keep its ggml to itself, as the shared one does:
# from cargo's archive (RELEASE_DIR/libggml_rs.a, which cargo rewrites on
# every build, fresh or not) it writes OUT_DIR/libggml_rs.a, the library
# programs link: one relocatable object whose only global
# definitions are the ggml_rs_ functions of include/ggml_rs.h, so that a
# program may link it beside another ggml (llama.cpp's, whisper's) and each
# side runs its own.
#
#   1. ld -r, rooted at the ggml_rs_ functions (-u), pulls out of cargo's
#      archive exactly the members a program would link (our crate, Rust's
#      std, the pinned ggml, our C++ shim) and links them into one object,
#      resolving every reference between them;
#   2. objcopy --keep-global-symbols makes every other definition local
#      (ggml_*, gguf_*, Rust's runtime, C++ inline and template copies);
#      references to the system (libc, libm, libstdc++, pthread) stay
#      undefined, to be resolved as before. The COMDAT groups go too
#      (-R .group): the linker would otherwise keep one copy of a group
#      (say std::vector<ggml_tensor*>'s code, or DW.ref.__gxx_personality_v0)
#      for both ggmls and leave the other's references to a symbol now
#      local, unresolved. (ggml's C++ is built with -fno-gnu-unique, whose
#      STB_GNU_UNIQUE symbols objcopy cannot make local: build.rs.)
#   3. the LLVM bitcode Rust embeds for LTO (.llvmbc) is dropped: no link
#      uses it, and binutils' LLVM plugin aborts on it.
#
# It also writes OUT_DIR/libggml_raw.a: the same ggml build (cmake's
# archives that cargo linked), every symbol global, for the benchmark's
# raw-cgo anchor (go/internal/rawggml), which drives ggml directly.
#
# Does nothing when the outputs are newer than cargo's archive. Usage:
#   scripts/private-ggml.sh [RELEASE_DIR] [OUT_DIR]
#   (defaults: target/release, target/static)
set -euo pipefail
dir=${1:-target/release}
outdir=${2:-target/static}
lib=$dir/libggml_rs.a
private=$outdir/libggml_rs.a
[ -f "$lib" ] || { echo "private-ggml: $lib not found (cargo build --release --lib first)" >&2; exit 1; }
mkdir -p "$outdir"

# The raw ggml: the cmake build named by the build script's link search.
out=$(ls -t "$dir"/build/ggml-rs-*/output 2>/dev/null | xargs -r grep -l 'rustc-link-search=native=.*ggml-build' | head -1 || true)
[ -n "$out" ] || { echo "private-ggml: no ggml-rs build output under $dir/build" >&2; exit 1; }
ggml_lib=$(sed -n 's/^cargo:rustc-link-search=native=//p' "$out" | grep ggml-build | head -1)
raw=$outdir/libggml_raw.a
if [ ! -f "$raw" ] || [ -n "$(find "$ggml_lib" -name '*.a' -newer "$raw" | head -1)" ]; then
  mri="create $raw.tmp"$'\n'
  for a in ggml ggml-base ggml-cpu ggml-rpc ggml-cuda ggml-vulkan ggml-metal; do
    [ -f "$ggml_lib/lib$a.a" ] && mri+="addlib $ggml_lib/lib$a.a"$'\n'
  done
  rm -f "$raw.tmp"
  printf '%ssave\nend\n' "$mri" | ar -M
  mv "$raw.tmp" "$raw"
fi

if [ -f "$private" ] && [ "$private" -nt "$lib" ]; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The C ABI: every global function named ggml_rs_ but our C++ shim's
# (readelf reads archive members without loading linker plugins).
readelf -sW "$lib" | awk '$4 == "FUNC" && $5 == "GLOBAL" && $7 != "UND" && $8 ~ /^ggml_rs_/ && $8 !~ /^ggml_rs_shim_/ {print $8}' |
  sort -u >"$tmp/keep"
n=$(wc -l <"$tmp/keep")
[ "$n" -gt 0 ] || { echo "private-ggml: no ggml_rs_ functions in $lib" >&2; exit 1; }
ld -r -o "$tmp/all.o" $(sed 's/^/-u /' "$tmp/keep") "$lib"
objcopy --keep-global-symbols="$tmp/keep" --remove-section=.group --remove-section=.llvmbc --remove-section=.llvmcmd \
  "$tmp/all.o" "$tmp/ggml_rs_private.o"
rm -f "$private.tmp"
ar rcs "$private.tmp" "$tmp/ggml_rs_private.o"
mv "$private.tmp" "$private"
echo "private-ggml: $private is one object exporting $n ggml_rs_ functions; $raw holds the raw ggml"
