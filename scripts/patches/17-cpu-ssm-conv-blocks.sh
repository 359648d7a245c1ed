#!/usr/bin/env bash
# ggml's CPU short convolution (ssm_conv) takes the tokens one after the
# other and, for each, every channel of its thread: each channel's window
# lies in its own cache line (the rows are d_conv - 1 + n_tokens long), so
# a token touched thousands of lines (128 KiB for 2048 channels) and the
# next token found them gone from L1. Channels now go in blocks of 64
# (4 KiB of lines), all the tokens for one block, then the next. The
# innermost loops are ggml's own, unchanged: the same sums in the same
# order, the same floats (4-6% of the Qwen3.5 MoE prefill,
# docs/notes/cpu-speed.md).
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 17-cpu-ssm-conv-blocks.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 17-cpu-ssm-conv-blocks"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''    for (int i3 = 0; i3 < n_s; ++i3) {
        for (int i2 = 0; i2 < n_t; ++i2) {
            // {d_conv - 1 + n_t, d_inner, n_seqs}
            // sliding window
            const float * s = (const float *) ((const char *) src0->data + ir0*(src0->nb[1]) + i2*(src0->nb[0]) + i3*(src0->nb[2])); // {d_conv, d_inner, n_s}
            const float * c = (const float *) ((const char *) src1->data + ir0*(src1->nb[1])); // {d_conv, d_inner}
            float * x = (float *) ((char *) dst->data + ir0*(dst->nb[0]) + i2*(dst->nb[1]) + i3*(dst->nb[2])); // {d_inner, n_t, n_s}

            // TODO: transpose the output for smaller strides for big batches?
            // d_inner
            for (int i1 = 0; i1 < ir; ++i1) {'''
new = '''    // ggml-rs patch 17-cpu-ssm-conv-blocks: channels in blocks of 64, all
    // the tokens for each block; the loops inside are ggml's.
    for (int ib = ir0; ib < ir1; ib += 64) {
    const int ibr = MIN(ib + 64, ir1) - ib;
    for (int i3 = 0; i3 < n_s; ++i3) {
        for (int i2 = 0; i2 < n_t; ++i2) {
            // {d_conv - 1 + n_t, d_inner, n_seqs}
            // sliding window
            const float * s = (const float *) ((const char *) src0->data + ib*(src0->nb[1]) + i2*(src0->nb[0]) + i3*(src0->nb[2])); // {d_conv, d_inner, n_s}
            const float * c = (const float *) ((const char *) src1->data + ib*(src1->nb[1])); // {d_conv, d_inner}
            float * x = (float *) ((char *) dst->data + ib*(dst->nb[0]) + i2*(dst->nb[1]) + i3*(dst->nb[2])); // {d_inner, n_t, n_s}

            // TODO: transpose the output for smaller strides for big batches?
            // d_inner
            for (int i1 = 0; i1 < ibr; ++i1) {'''
n = src.count(old)
if n != 1:
    sys.exit(f"17-cpu-ssm-conv-blocks: expected one match in {path}, found {n}")
src = src.replace(old, new)
# close the added loop after the function's token loops
old_end = '''                x[i1] = sumf;
            }
        }
    }
}

void ggml_compute_forward_ssm_conv('''
new_end = '''                x[i1] = sumf;
            }
        }
    }
    }
    GGML_UNUSED(ir);
}

void ggml_compute_forward_ssm_conv('''
n = src.count(old_end)
if n != 1:
    sys.exit(f"17-cpu-ssm-conv-blocks: expected one end in {path}, found {n}")
open(path, "w").write(src.replace(old_end, new_end))
PY
