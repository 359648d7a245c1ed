#!/usr/bin/env bash
# ggml's CPU add/sub/mul/div with a src1 of one element per row (ne10 = 1,
# broadcast along the row: a mixture-of-experts layer's routing weights
# times its experts' outputs, a gate per head) called the element-wise
# loop once per element, 1024 calls of one element per row, which the
# compiler cannot vectorize. Such rows now go through one loop over the row
# with src1's value held: the same operation on the same two values per
# element, so the same floats.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 16-cpu-binary-scalar-rows.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/binary-ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 16-cpu-binary-scalar-rows"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''        if (is_src1_contiguous_rows) {
            // src1 is broadcastable across src0 and dst in i1, i2, i3
            const int64_t nr0 = ne00 / ne10;
'''
new = '''        if (is_src1_contiguous_rows && ne10 == 1) {
            // ggml-rs patch 16-cpu-binary-scalar-rows: one value of src1
            // for the whole row, in one loop.
            constexpr auto src0_to_f32 = type_conversion_table<src0_t>::to_f32;
            constexpr auto f32_to_dst  = type_conversion_table<dst_t >::from_f32;
            const float y = type_conversion_table<src1_t>::to_f32(src1_ptr[0]);
            for (int64_t i = 0; i < ne00; i++) {
                dst_ptr[i] = f32_to_dst(op(src0_to_f32(src0_ptr[i]), y));
            }
        } else if (is_src1_contiguous_rows) {
            // src1 is broadcastable across src0 and dst in i1, i2, i3
            const int64_t nr0 = ne00 / ne10;
'''
n = src.count(old)
if n != 1:
    sys.exit(f"16-cpu-binary-scalar-rows: expected one match in {path}, found {n}")
open(path, "w").write(src.replace(old, new))
PY
