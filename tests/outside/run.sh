#!/usr/bin/env bash
# The outside-module test (make test-outside, part of make test): ggml-rs
# used as a stranger would, with no path into this repository.
#
#   1. make install's script installs the built library, header and
#      pkg-config files into a temporary PREFIX;
#   2. a C program (tests/c/attention.c, copied out) builds with
#      `cc prog.c $(pkg-config --cflags --libs ggml-rs)` and runs;
#   3. the Go module is served from a temporary module proxy (GOPROXY=file://,
#      a module zip of go/ as version v$VERSION, the same files `go mod
#      download` would fetch) into an empty module cache;
#   4. a throwaway module (tests/outside/main.go) requires it by its path,
#      links the installed library through pkg-config (PKG_CONFIG_PATH names
#      the PREFIX only; CGO_LDFLAGS adds an rpath, an override the link must
#      honour) and computes embeddings (all-MiniLM-L6-v2) and a greedy
#      generation (SmolLM2-135M-Instruct), which must equal the repository's
#      runner on the same inputs (embeddings within 1e-5, text exactly);
#   5. the same after `go mod vendor`, built with -mod=vendor.
#
# Usage: tests/outside/run.sh RUNNER MINILM_GGUF SMOLLM2_GGUF
# OUTSIDE_PREFIX=DIR uses an installation already there (an unpacked
# release archive: make test-dist) instead of installing; KEEP=1 keeps the
# temporary folder.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
runner=$(realpath "$1") minilm=$(realpath "$2") smollm=$(realpath "$3")
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -1)
modpath=github.com/ggml-rs/ggml-rs/go
tmp=$(mktemp -d /tmp/ggml-rs-outside.XXXXXX)
cleanup() { [ -n "${KEEP:-}" ] && return; chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
step() { echo "outside: $*"; }

if [ -n "${OUTSIDE_PREFIX:-}" ]; then # an unpacked release archive (make test-dist)
  prefix=$(realpath "$OUTSIDE_PREFIX")
  step "the installation in $prefix"
else
  prefix=$tmp/prefix
  step "install into $prefix"
  "$repo/scripts/install.sh" install "$prefix" >/dev/null
fi
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
unset PKG_CONFIG_LIBDIR CGO_CFLAGS LD_LIBRARY_PATH

step "C: cc attention.c \$(pkg-config --cflags --libs ggml-rs) -lm (its own exp)"
mkdir "$tmp/c"
cp "$repo/tests/c/attention.c" "$repo/tests/c/check.h" "$tmp/c/"
(cd "$tmp/c" && cc -std=c11 -O1 -o attention attention.c $(pkg-config --cflags --libs ggml-rs) -lm)
links() { # $1: the program; true when it loads the PREFIX's libggml_rs.so
  local deps # (whole, not piped into grep -q: with pipefail, grep's early exit would fail ldd)
  deps=$(ldd "$1")
  grep -q "libggml_rs.so.0.1 => $prefix/lib/" <<<"$deps" || { echo "outside: $1 does not load $prefix/lib's libggml_rs.so:" >&2; echo "$deps" >&2; return 1; }
}
LD_LIBRARY_PATH=$prefix/lib links "$tmp/c/attention"
LD_LIBRARY_PATH=$prefix/lib "$tmp/c/attention" | tail -1

step "Go: module proxy with $modpath v$version"
proxy=$tmp/proxy/$modpath/@v
mkdir -p "$proxy"
(cd "$repo" && git ls-files -z go) | python3 -c '
import os, sys, zipfile
repo, out, mod = sys.argv[1], sys.argv[2], sys.argv[3]
names = [n for n in sys.stdin.read().split("\0") if n]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for n in sorted(names):
        rel = n[len("go/"):]
        if rel.startswith("bin/") or not os.path.isfile(os.path.join(repo, n)):
            continue
        z.write(os.path.join(repo, n), mod + "/" + rel)
' "$repo" "$proxy/v$version.zip" "$modpath@v$version"
cp "$repo/go/go.mod" "$proxy/v$version.mod"
echo "{\"Version\":\"v$version\",\"Time\":\"2026-01-01T00:00:00Z\"}" > "$proxy/v$version.info"
echo "v$version" > "$proxy/list"

app=$tmp/app
mkdir "$app"
cp "$repo/tests/outside/main.go" "$app/"
cat > "$app/go.mod" <<MOD
module example.com/app

go 1.23

require $modpath v$version
MOD
export GOPROXY=file://$tmp/proxy GOSUMDB=off GOFLAGS=-mod=mod GOMODCACHE=$tmp/modcache GOTOOLCHAIN=local
export CGO_LDFLAGS="-Wl,-rpath,$prefix/lib"

texts=("A man is playing a guitar." "Someone is strumming an acoustic instrument." "The cat sleeps on the sofa.")
prompt="The three primary colors are"
"$runner" embed -json "$minilm" "${texts[@]}" 2>/dev/null > "$tmp/want-embed.json"
"$runner" generate -temp 0 -n 24 -ctx 512 "$smollm" -p "$prompt" 2>/dev/null > "$tmp/want-gen.txt"

check() { # $1: label, $2: the app binary
  "$2" embed "$minilm" "${texts[@]}" > "$tmp/got-embed.json"
  python3 - "$tmp/want-embed.json" "$tmp/got-embed.json" "$1" <<'PY'
import json, sys
want = [d["embedding"] for d in json.load(open(sys.argv[1]))["data"]]
got = json.load(open(sys.argv[2]))
assert len(got) == len(want), f"{len(got)} embeddings, the runner {len(want)}"
worst = max(abs(a - b) for w, g in zip(want, got) for a, b in zip(w, g, strict=True))
assert worst <= 1e-5, f"{sys.argv[3]}: embeddings differ from the runner's by up to {worst}"
print(f"outside: {sys.argv[3]}: {len(got)} embeddings of {len(got[0])} equal the runner's (max |diff| {worst:.1e})")
PY
  "$2" generate "$smollm" 24 "$prompt" > "$tmp/got-gen.txt"
  if ! cmp -s "$tmp/want-gen.txt" "$tmp/got-gen.txt"; then
    echo "outside: $1: generation differs from the runner's:" >&2
    diff "$tmp/want-gen.txt" "$tmp/got-gen.txt" >&2 || true
    exit 1
  fi
  echo "outside: $1: greedy generation equals the runner's: $(head -c 120 "$tmp/got-gen.txt" | tr '\n' ' ')"
  links "$2" # through its rpath alone (LD_LIBRARY_PATH is not set)
}

step "Go: build from the module cache"
(cd "$app" && go mod tidy >/dev/null 2>&1 && go build -o app-mod . )
dir=$(cd "$app" && go list -m -f '{{.Dir}}' $modpath)
case $dir in "$tmp/modcache/"*) ;; *) echo "outside: the module came from $dir, not the module cache" >&2; exit 1 ;; esac
info=$(go version -m "$app/app-mod")
grep -q "dep[[:space:]]*$modpath[[:space:]]*v$version" <<<"$info" ||
  { echo "outside: app-mod does not record $modpath v$version:" >&2; echo "$info" >&2; exit 1; }
check "module cache" "$app/app-mod"

step "Go: go mod vendor, build with -mod=vendor"
(cd "$app" && go mod vendor && GOFLAGS=-mod=vendor go build -o app-vendor .)
[ -f "$app/vendor/$modpath/ml/backend/link_cpu.go" ] || { echo "outside: vendor/ lacks the backend" >&2; exit 1; }
check "vendor" "$app/app-vendor"
echo "outside: passed"
