#!/usr/bin/env bash
# On a CPU-type Vulkan device (Mesa's lavapipe/llvmpipe, the software
# device the tests run on where there is no GPU), ggml-vulkan's flash
# attention for a one-row query (a decode step: the split-k path, whose
# workspace mixture-of-experts matmuls share) crashed the process inside
# the driver's execution thread once a batch of 32 or more rows had run
# before it (qwen3moe, gpt-oss; llama.cpp on the same device crashed the
# same way). The device now refuses that op, so ggml's scheduler runs it on
# the CPU, and "auto" flash attention (asked for one row) resolves to off
# there, in ggml-rs and in llama.cpp alike. Real GPUs are not affected by
# this patch. docs/notes/vulkan.md.
# Usage: 09-vulkan-cpu-device-fa.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-vulkan/ggml-vulkan.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 09-vulkan-cpu-device-fa"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''        case GGML_OP_FLASH_ATTN_EXT:
            {
                bool coopmat2 = device->coopmat2;'''
new = '''        case GGML_OP_FLASH_ATTN_EXT:
            {
                // ggml-rs patch 09-vulkan-cpu-device-fa: lavapipe crashed
                // running graphs with this op; the CPU runs it.
                if (device->properties.deviceType == vk::PhysicalDeviceType::eCpu) {
                    return false;
                }
                bool coopmat2 = device->coopmat2;'''
n = src.count(old)
if n != 1:
    sys.exit(f"09-vulkan-cpu-device-fa: expected one match in {path}, found {n}")
open(path, "w").write(src.replace(old, new))
PY
