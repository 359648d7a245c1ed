#!/usr/bin/env bash
# Builds and runs stale.c (see its head) on the first Vulkan device:
# exit 0 and "a[0] = N" when the driver survives; an abort (heap
# corruption) on Debian bookworm's lavapipe (Mesa 22.3.6).
#   tools/lavapipe-stale-descriptor/run.sh [ROUNDS]   (default 200)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
glslc -fshader-stage=compute "$here/stale.comp" -o "$work/stale.spv"
cc -O1 -g "$here/stale.c" -o "$work/stale" -lvulkan
"$work/stale" "$work/stale.spv" "${1:-200}"
