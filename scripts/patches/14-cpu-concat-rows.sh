#!/usr/bin/env bash
# ggml's CPU concat of f32/i32 copies one element at a time and splits the
# work over dim 2 only: with one sequence (ne2 = 1) one thread did it all
# while the others waited. The hybrid models concatenate each layer's
# convolution state with the new tokens (5% of the Qwen3.5 MoE prefill,
# docs/notes/cpu-speed.md). Rows (dims 1-3) are now split over the threads
# in contiguous ranges and copied whole (memcpy where a source row is
# contiguous); where src1 is transposed (the convolution's new inputs),
# with AVX-512, in tiles of 16 x 16 transposed in registers
# (ggml-rs-simd.h). A copy: the result is the same bytes.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 14-cpu-concat-rows.sh GGML_DIR   (idempotent)
set -euo pipefail
cp "$(dirname "$0")/ggml-rs-simd.h" "$1/src/ggml-cpu/ggml-rs-simd.h"
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

    // ggml-rs patch 14-cpu-concat-rows: rows split over the threads in
    // contiguous ranges, each copied whole (memcpy where the source row is
    // contiguous); a transposed src1 along dim 0 in 16 x 16 tiles.
    auto copy_row = [](float * y, const char * x, int64_t n, size_t nbx) {
        if (nbx == sizeof(float)) {
            memcpy(y, x, n * sizeof(float));
        } else {
            for (int64_t i = 0; i < n; i++) {
                y[i] = *(const float *) (x + i*nbx);
            }
        }
    };
    int64_t ne1_tiled = 0;  // rows (of each i2, i3) done in tiles
#if defined(__AVX512F__)
    if (dim == 0 && nb10 != sizeof(float) && nb11 == sizeof(float)) {
        ne1_tiled = ne1 - ne1 % 16;
        const int64_t ntiles = (ne1_tiled / 16)*ne2*ne3;
        for (int64_t it = ntiles*ith/nth; it < ntiles*(ith + 1)/nth; it++) {
            const int64_t i1 = (it % (ne1_tiled / 16))*16;
            const int64_t i2 = (it / (ne1_tiled / 16)) % ne2;
            const int64_t i3 = it / ((ne1_tiled / 16)*ne2);
            float * y = (float *)((char *)dst->data + i1*nb1 + i2*nb2 + i3*nb3);
            for (int l = 0; l < 16; l++) {
                copy_row((float *)((char *) y + l*nb1), (const char *)src0->data + (i1 + l)*nb01 + i2*nb02 + i3*nb03, ne00, nb00);
            }
            const char * x = (const char *)src1->data + i1*nb11 + i2*nb12 + i3*nb13;
            int64_t i0 = 0;
            for (; i0 + 16 <= ne10; i0 += 16) {
                __m512 r[16];
                for (int l = 0; l < 16; l++) {
                    r[l] = _mm512_loadu_ps((const float *)(x + (i0 + l)*nb10));  // rows i1..i1+15 of column i0+l
                }
                ggml_rs_transpose16(r);
                for (int l = 0; l < 16; l++) {
                    _mm512_storeu_ps((float *)((char *) y + l*nb1) + ne00 + i0, r[l]);
                }
            }
            for (; i0 < ne10; i0++) {
                for (int l = 0; l < 16; l++) {
                    ((float *)((char *) y + l*nb1))[ne00 + i0] = *(const float *)(x + i0*nb10 + l*nb11);
                }
            }
        }
    }
#endif
    const int64_t ne1_rest = ne1 - ne1_tiled;
    const int64_t nrows = ne1_rest*ne2*ne3;
    const int64_t ir0 = nrows*ith/nth, ir1 = nrows*(ith + 1)/nth;
    for (int64_t ir = ir0; ir < ir1; ir++) {
        const int64_t i1 = ne1_tiled + ir % ne1_rest;
        const int64_t i2 = (ir / ne1_rest) % ne2;
        const int64_t i3 = ir / (ne1_rest*ne2);
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
src = src.replace(old, new)
head = "static void ggml_compute_forward_concat_f32("
if src.count(head) != 1:
    sys.exit(f"14-cpu-concat-rows: expected one concat_f32 in {path}")
src = src.replace(head, '#include "ggml-rs-simd.h" // ggml-rs patch 14-cpu-concat-rows\n\n' + head)
open(path, "w").write(src)
PY
