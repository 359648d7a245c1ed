#!/usr/bin/env bash
# Q8_0, Q4_0 and Q4_1 weights repacked 16 rows at a time, with AVX-512 VNNI
# kernels for MUL_MAT and MUL_MAT_ID (issue 27: three quarters of the
# hybrid MoE prefill was Q8_0 products, SmolLM2's real weights are Q4_1,
# and ggml's x86 path takes each weight row against each activation row).
# The kernels are ours, in 13-cpu-r16.inc beside this script, which says
# how they work; this script copies it next to ggml-cpu/repack.cpp and
# makes repack.cpp's choice of layout offer it first for those types.
# Where the compiler does not target AVX-512 VNNI the file compiles to
# nothing and nothing changes.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp
# reference, whose speed and numbers stay upstream's.
# Usage: 13-cpu-r16.sh GGML_DIR   (idempotent)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/13-cpu-r16.inc" "$1/src/ggml-cpu/ggml-rs-r16.inc"
python3 - "$1/src/ggml-cpu/repack.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 13-cpu-r16"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
head = "static const ggml::cpu::tensor_traits * ggml_repack_get_optimal_repack_type(const struct ggml_tensor * cur) {\n"
n = src.count(head)
if n != 1:
    sys.exit(f"13-cpu-r16: expected one match in {path}, found {n}")
src = src.replace(head,
    f'#include "ggml-rs-r16.inc" // {MARK}\n\n' + head +
    f"#ifdef GGML_RS_R16 // {MARK}\n"
    "    if (const auto * t = ggml_rs_r16::traits_for(cur)) {\n"
    "        return t;\n"
    "    }\n"
    "#endif\n")
open(path, "w").write(src)
PY
