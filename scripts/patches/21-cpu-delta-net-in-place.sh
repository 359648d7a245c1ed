#!/usr/bin/env bash
# The gated delta net's new state went through memory three times a token
# and layer in decode: the kernel copied the old state into its output,
# updated it there, and a CPY node copied it back into the cache (1 MiB a
# layer at Qwen3.5's 16 heads of 128 x 128; a third of the hybrid MoE's
# decode traffic besides the weights). With op parameter 1 set (only
# ggml-rs sets it, on the CPU backend, with one state slot), the kernel
# updates the state where it is: src[5] is read and written, the output's
# state rows are left alone. The same operations on the same values: the
# same floats.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 21-cpu-delta-net-in-place.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 21-cpu-delta-net-in-place"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)

def swap(old, new):
    global src
    n = src.count(old)
    if n != 1:
        sys.exit(f"21-cpu-delta-net-in-place: expected one match in {path}, found {n}:\n{old}")
    src = src.replace(old, new)

swap('''        float * s_out = (K > 1)
            ? state_work
            : state_out_base + (iv3 * H + iv1) * S_v * S_v;
''', '''        float * s_out = (K > 1)
            ? state_work
            : state_out_base + (iv3 * H + iv1) * S_v * S_v;
        // ggml-rs patch 21-cpu-delta-net-in-place: the state updated where
        // it is (src[5] written; one slot only).
        const bool in_place = K == 1 && ggml_get_op_params_i32(dst, 1) != 0;
''')
swap('''        const float * s_in = state_in_base + iv3 * state_seq_stride + iv1 * S_v * S_v;
        memcpy(s_out, s_in, S_v * S_v * sizeof(float));
''', '''        const float * s_in = state_in_base + iv3 * state_seq_stride + iv1 * S_v * S_v;
        if (in_place) {
            s_out = (float *) s_in;
        } else {
            memcpy(s_out, s_in, S_v * S_v * sizeof(float));
        }
''')
open(path, "w").write(src)
PY
