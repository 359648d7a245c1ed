#!/usr/bin/env bash
# Both libraries must export only ggml_rs_ symbols, so that either can live
# in one process beside another copy of ggml: the shared library's dynamic
# exports, and the static library's global definitions (made private by
# scripts/private-ggml.sh).
#
# Usage: scripts/check-symbols.sh [SO] [A]
set -euo pipefail
so=${1:-target/release/libggml_rs.so}
a=${2:-target/static/libggml_rs.a}

check() { # name, list of exported symbols
  local what=$1 list=$2 bad n
  bad=$(echo "$list" | grep -v '^ggml_rs_' || true)
  n=$(echo "$list" | grep -c '^ggml_rs_' || true)
  if [ -n "$bad" ]; then
    echo "check-symbols: $what exports symbols outside the ggml_rs_ prefix ($(echo "$bad" | wc -l)):" >&2
    echo "$bad" | head -20 >&2
    exit 1
  fi
  [ "$n" -gt 0 ] || { echo "check-symbols: $what exports no ggml_rs_ symbols" >&2; exit 1; }
  echo "check-symbols: $what: $n symbols, all ggml_rs_"
}

[ -f "$so" ] || { echo "check-symbols: $so not found" >&2; exit 1; }
check "$so" "$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')"

[ -f "$a" ] || { echo "check-symbols: $a not found" >&2; exit 1; }
# readelf, not nm: it reads every member without binutils' linker plugins.
check "$a" "$(readelf -sW "$a" | awk '$7 != "UND" && $7 != "Ndx" && ($5 == "GLOBAL" || $5 == "WEAK" || $5 == "UNIQUE") && $8 != "" {print $8}' | sort -u)"
