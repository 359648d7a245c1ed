#!/usr/bin/env bash
# ggml's CPU concat of f32/i32 copies one element at a time and splits the
# work over dim 2 only: with one sequence (ne2 = 1) one thread did it all
# while the others waited. The hybrid models concatenate each layer's
# convolution state with the new tokens (5% of the Qwen3.5 MoE prefill,
# docs/notes/cpu-speed.md). Rows (dims 1-3) are now split over the threads
# and copied whole (memcpy where a source row is contiguous). A copy: the
# result is the same bytes.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 14-cpu-concat-rows.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 14-cpu-concat-rows"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''    int64_t o[4] = {0, 0, 0, 0};
    o[dim] = src0->ne[dim];

    const float * x;

    // TODO: smarter multi-theading
    for (int i3 = 0; i3 < ne3; i3++) {
        for (int i2 = ith; i2 < ne2; i2 += nth) {
            for (int i1 = 0; i1 < ne1; i1++) {
                for (int i0 = 0; i0 < ne0; i0++) {
                    if (i0 < ne00 && i1 < ne01 && i2 < ne02 && i3 < ne03) {
                        x = (const float *) ((const char *)src0->data + (i0       )*nb00 + (i1       )*nb01 + (i2       )*nb02 + (i3       )*nb03);
                    } else {
                        x = (const float *) ((const char *)src1->data + (i0 - o[0])*nb10 + (i1 - o[1])*nb11 + (i2 - o[2])*nb12 + (i3 - o[3])*nb13);
                    }

                    float * y = (float *)((char *)dst->data + i0*nb0 + i1*nb1 + i2*nb2 + i3*nb3);

                    *y = *x;
                }
            }
        }
    }
}
'''
new = '''    int64_t o[4] = {0, 0, 0, 0};
    o[dim] = src0->ne[dim];

    // ggml-rs patch 14-cpu-concat-rows: rows split over the threads, each
    // copied whole (memcpy where the source row is contiguous).
    auto copy_row = [](float * y, const char * x, int64_t n, size_t nbx) {
        if (nbx == sizeof(float)) {
            memcpy(y, x, n * sizeof(float));
        } else {
            for (int64_t i = 0; i < n; i++) {
                y[i] = *(const float *) (x + i*nbx);
            }
        }
    };
    const int64_t nrows = ne1*ne2*ne3;
    for (int64_t ir = ith; ir < nrows; ir += nth) {
        const int64_t i1 = ir % ne1;
        const int64_t i2 = (ir / ne1) % ne2;
        const int64_t i3 = ir / (ne1*ne2);
        float * y = (float *)((char *)dst->data + i1*nb1 + i2*nb2 + i3*nb3);
        if (dim == 0) {
            copy_row(y,        (const char *)src0->data + i1*nb01 + i2*nb02 + i3*nb03, ne00, nb00);
            copy_row(y + ne00, (const char *)src1->data + i1*nb11 + i2*nb12 + i3*nb13, ne10, nb10);
        } else if (i1 < ne01 && i2 < ne02 && i3 < ne03) {
            copy_row(y, (const char *)src0->data + i1*nb01 + i2*nb02 + i3*nb03, ne0, nb00);
        } else {
            copy_row(y, (const char *)src1->data + (i1 - o[1])*nb11 + (i2 - o[2])*nb12 + (i3 - o[3])*nb13, ne0, nb10);
        }
    }
}
'''
n = src.count(old)
if n != 1:
    sys.exit(f"14-cpu-concat-rows: expected one match in {path}, found {n}")
open(path, "w").write(src.replace(old, new))
PY
