#!/usr/bin/env bash
# Installs (or uninstalls) the built library for C programs and the Go
# module, and the two programs:
#   include/ggml_rs.h
#   lib/libggml_rs.a, lib/libggml_rs.so.X.Y.Z (+ .so.<soname> and .so links)
#   lib/pkgconfig/ggml-rs.pc
#   lib/libggml_rs_<v>.a and lib/pkgconfig/ggml-rs-<v>.pc for each other
#     variant built for the current sources (vulkan: make vulkan-build)
#   bin/ggml-rs, bin/ggml-rs-rpc-server
# Run by `make install` / `make uninstall`, which build first.
#
# Usage: scripts/install.sh install|uninstall PREFIX [DESTDIR]
# Environment (for make dist): GGML_RS_BUILD, the cargo target folder built
# (default target); GGML_RS_RUNNER, the ggml-rs program (default
# go/bin/ggml-rs); GGML_RS_PC_PREFIX, the prefix the .pc files name
# (default PREFIX; make dist's relocatable '${pcfiledir}/../..').
set -euo pipefail
cd "$(dirname "$0")/.."
action=$1 prefix=$2 destdir=${3:-}
case $prefix in /*) ;; *) echo "install: PREFIX must be an absolute path (got $prefix)" >&2; exit 2 ;; esac
root=$destdir$prefix
build=${GGML_RS_BUILD:-target}
runner=${GGML_RS_RUNNER:-go/bin/ggml-rs}
pc_prefix=${GGML_RS_PC_PREFIX:-$prefix}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
soname=$(readelf -d "$build/release/libggml_rs.so" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ -n "$soname" ] || soname=libggml_rs.so.${version%.*}

# Variants other than the CPU build, from GGML_RS_VARIANTS ("vulkan=DIR
# cuda=DIR": the folder of each one's private archive, set by the Makefile
# for the builds that match the current sources); static only.
variants=() variant_dirs=()
for vd in ${GGML_RS_VARIANTS:-}; do
  v=${vd%%=*} d=${vd#*=}
  case $v in vulkan|cuda) ;; *) echo "install: variant $v: vulkan or cuda" >&2; exit 2 ;; esac
  [ -f "$d/libggml_rs.a" ] || { echo "install: $d/libggml_rs.a is missing" >&2; exit 1; }
  variants+=("$v") variant_dirs+=("$d")
done

files=(include/ggml_rs.h lib/libggml_rs.a "lib/libggml_rs.so.$version" "lib/$soname" lib/libggml_rs.so
  lib/pkgconfig/ggml-rs.pc bin/ggml-rs bin/ggml-rs-rpc-server)

if [ "$action" = uninstall ]; then
  for v in vulkan cuda; do files+=("lib/libggml_rs_$v.a" "lib/pkgconfig/ggml-rs-$v.pc"); done
  n=0
  for f in "${files[@]}"; do
    if [ -e "$root/$f" ] || [ -L "$root/$f" ]; then rm -f "$root/$f"; n=$((n + 1)); fi
  done
  echo "uninstall: removed $n files from $root"
  exit 0
fi
[ "$action" = install ] || { echo "usage: $0 install|uninstall PREFIX [DESTDIR]" >&2; exit 2; }

for f in "$build/static/libggml_rs.a" "$build/release/libggml_rs.so" include/ggml_rs.h "$runner" "$build/release/ggml-rs-rpc-server"; do
  [ -f "$f" ] || { echo "install: $f is missing (make build runner first)" >&2; exit 1; }
done
install -d "$root/include" "$root/lib/pkgconfig" "$root/bin"
install -m 644 include/ggml_rs.h "$root/include/"
install -m 644 "$build/static/libggml_rs.a" "$root/lib/"
strip --strip-debug "$root/lib/libggml_rs.a"
install -m 755 "$build/release/libggml_rs.so" "$root/lib/libggml_rs.so.$version"
strip --strip-debug "$root/lib/libggml_rs.so.$version"
ln -sfn "libggml_rs.so.$version" "$root/lib/$soname"
ln -sfn "$soname" "$root/lib/libggml_rs.so"
scripts/gen-pc.sh "$root/lib/pkgconfig/ggml-rs.pc" cpu "$pc_prefix" '${prefix}/lib' '${prefix}/include' '-L${libdir} -lggml_rs'
for i in "${!variants[@]}"; do
  v=${variants[$i]}
  install -m 644 "${variant_dirs[$i]}/libggml_rs.a" "$root/lib/libggml_rs_$v.a"
  strip --strip-debug "$root/lib/libggml_rs_$v.a"
  scripts/gen-pc.sh "$root/lib/pkgconfig/ggml-rs-$v.pc" "$v" "$pc_prefix" '${prefix}/lib' '${prefix}/include' "-L\${libdir} -lggml_rs_$v"
done
install -m 755 "$runner" "$build/release/ggml-rs-rpc-server" "$root/bin/"
strip "$root/bin/ggml-rs" "$root/bin/ggml-rs-rpc-server"
echo "install: ggml-rs $version (cpu${variants[*]:+ ${variants[*]}}) in $root"
[ -n "$destdir" ] || case :${PKG_CONFIG_PATH:-}:$(pkg-config --variable pc_path pkg-config 2>/dev/null): in
  *":$prefix/lib/pkgconfig:"*) ;;
  *) echo "install: add $prefix/lib/pkgconfig to PKG_CONFIG_PATH for pkg-config to find ggml-rs" ;;
esac
