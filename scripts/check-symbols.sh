#!/usr/bin/env bash
# The shared library must export only ggml_rs_ symbols, so that it can live
# in one process beside another copy of ggml.
set -euo pipefail
so=${1:-target/release/libggml_rs.so}
[ -f "$so" ] || { echo "check-symbols: $so not found" >&2; exit 1; }
exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
bad=$(echo "$exported" | grep -v '^ggml_rs_' || true)
n=$(echo "$exported" | grep -c '^ggml_rs_' || true)
if [ -n "$bad" ]; then
  echo "check-symbols: $so exports symbols outside the ggml_rs_ prefix:" >&2
  echo "$bad" | head -20 >&2
  exit 1
fi
[ "$n" -gt 0 ] || { echo "check-symbols: no ggml_rs_ symbols exported" >&2; exit 1; }
echo "check-symbols: $n symbols, all ggml_rs_"
