#!/usr/bin/env bash
# Writes the release archive of one x86-64 level:
#   dist/ggml-rs-<version>-linux-x86_64-<level>.tar.gz
# holding include/, lib/ (static and shared library, a relocatable
# lib/pkgconfig/ggml-rs.pc), bin/ggml-rs and bin/ggml-rs-rpc-server,
# README.md and LICENSES/ (ggml-rs and everything linked into it: ggml,
# the Rust standard library and crates, the Go runtime).
#
# Portable: ggml's CPU code is built for the level, not -march=native
# (GGML_RS_CPU_LEVEL in build.rs; ggml can only pick CPU variants at run
# time by loading them as shared libraries, which our private static ggml
# rules out, hence one archive per level); Go's code for the same level
# (GOAMD64). The build lives in target/dist-<level>.
#
# Usage: scripts/dist.sh [x86-64-v2|x86-64-v3|x86-64-v4]   (default x86-64-v3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
level=${1:-x86-64-v3}
case $level in x86-64-v2|x86-64-v3|x86-64-v4) ;; *) echo "dist: level $level: x86-64-v2, -v3 or -v4" >&2; exit 2 ;; esac
[ "$(uname -m)" = x86_64 ] || { echo "dist: x86-64 levels need an x86-64 machine" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name=ggml-rs-$version-linux-x86_64-${level#x86-64-}
build=$root/target/dist-$level

echo "dist: building the library for $level in $build"
CARGO_TARGET_DIR=$build GGML_RS_CPU_LEVEL=$level \
  cargo build --release --lib --bin ggml-rs-rpc-server --no-default-features --features rpc
scripts/private-ggml.sh "$build/release" "$build/static"
scripts/gen-pc.sh "$build/pkgconfig/ggml-rs.pc" cpu "$root" "$build/static" '${prefix}/include' '${libdir}/libggml_rs.a'
echo "dist: building ggml-rs (GOAMD64=v${level#x86-64-v})"
(cd go && PKG_CONFIG_PATH=$build/pkgconfig GOAMD64=v${level#x86-64-v} \
  CGO_CFLAGS="-O2 -DGGML_RS_LIB_ID=$(sha1sum "$build/static/libggml_rs.a" | cut -c1-16)" \
  go build -trimpath -o "$build/ggml-rs" ./cmd/ggml-rs)

stage=$root/dist/$name
rm -rf "$stage" && mkdir -p "$stage"
GGML_RS_BUILD=$build GGML_RS_RUNNER=$build/ggml-rs GGML_RS_PC_PREFIX='${pcfiledir}/../..' \
  scripts/install.sh install "$stage" >/dev/null
cp README.md "$stage/"

# Licences of what the archive bundles.
lic=$stage/LICENSES
mkdir -p "$lic"
cat > "$lic/README" <<TXT
ggml-rs $version is MIT-licensed (Cargo.toml). Linked into its library and
programs, each under its own licence, in this folder:
  ggml (the pinned llama.cpp tree of the crate llama-cpp-sys-2): ggml.txt
  the Rust standard library and the crates in rust-*.txt
  the Go runtime and standard library (bin/ggml-rs): go.txt
TXT
llama_dir=$(cargo metadata --format-version 1 --manifest-path scripts/fetch-ggml/Cargo.toml --locked 2>/dev/null |
  python3 -c 'import json, os, sys
m = json.load(sys.stdin)
print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == "llama-cpp-sys-2"))')
cp "$llama_dir/llama.cpp/LICENSE" "$lic/ggml.txt"
cargo metadata --format-version 1 --locked 2>/dev/null | python3 -c '
import json, os, shutil, sys
lic = sys.argv[1]
m = json.load(sys.stdin)
resolve = {n["id"]: n for n in m["resolve"]["nodes"]}
root = m["resolve"]["root"]
seen, todo = set(), [root]
while todo:  # the normal (not build or dev) dependencies, transitively
    i = todo.pop()
    for d in resolve[i]["deps"]:
        if any(k["kind"] is None for k in d["dep_kinds"]) and d["pkg"] not in seen:
            seen.add(d["pkg"]); todo.append(d["pkg"])
pkgs = {p["id"]: p for p in m["packages"]}
for i in sorted(seen):
    p = pkgs[i]
    d = os.path.dirname(p["manifest_path"])
    files = sorted(f for f in os.listdir(d) if f.upper().startswith(("LICENSE", "LICENCE", "COPYING")))
    if not files:
        sys.exit(f"dist: no licence file in {d}")
    name, version, licence = p["name"], p["version"], p.get("license")
    with open(os.path.join(lic, f"rust-{name}.txt"), "w") as out:
        out.write(f"{name} {version}: {licence}\n\n")
        for f in files:
            out.write(open(os.path.join(d, f)).read() + "\n")
' "$lic"
rustdoc=$(rustc --print sysroot)/share/doc/rust
{ echo "The Rust standard library ($(rustc --version)): MIT OR Apache-2.0; its full notices: COPYRIGHT.html of the Rust distribution."
  echo; cat "$rustdoc/licenses/MIT.txt"; } > "$lic/rust-std.txt"
cp "$(go env GOROOT)/LICENSE" "$lic/go.txt"

tar -C "$root/dist" -czf "$root/dist/$name.tar.gz" "$name"
echo "dist: $root/dist/$name.tar.gz ($(du -h "$root/dist/$name.tar.gz" | cut -f1))"
