#!/usr/bin/env bash
# ggml's CPU short convolution (ssm_conv) computes each output, one token of
# one channel, as a scalar chain sumf = fma(s, c, sumf) over the d_conv
# taps (so GCC compiles it for d_conv < 16; from 16 taps on, it vectorizes
# the taps), token after token across every channel of its thread: a few
# instructions per tap, and a cache line per channel for every token (9%
# of the Qwen3.5 MoE prefill after our Q8_0 kernel, docs/notes/cpu-speed.md).
#
# Where the compiler targets AVX-512 and d_conv < 16: blocks of 16 channels
# by 16 tokens, each channel's 16 tokens one vector (its inputs are
# contiguous), the same FMA chain per output from 0 in the same tap order,
# then a 16x16 transpose so that each token's 16 channels are stored
# together (ggml-rs-simd.h). The same operations on the same values: the
# same floats. The channels and tokens left over (not filling a block) run
# ggml's loops.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 17-cpu-ssm-conv-blocks.sh GGML_DIR   (idempotent)
set -euo pipefail
cp "$(dirname "$0")/ggml-rs-simd.h" "$1/src/ggml-cpu/ggml-rs-simd.h"
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 17-cpu-ssm-conv-blocks"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)

head = '''static void ggml_compute_forward_ssm_conv_f32(
        const ggml_compute_params * params,
        ggml_tensor * dst) {'''
helpers = '#include "ggml-rs-simd.h" // ggml-rs patch 17-cpu-ssm-conv-blocks\n\n'
n = src.count(head)
if n != 1:
    sys.exit(f"17-cpu-ssm-conv-blocks: expected one function in {path}, found {n}")
src = src.replace(head, helpers + head)

old = '''    const int ir  = ir1 - ir0;

    for (int i3 = 0; i3 < n_s; ++i3) {
        for (int i2 = 0; i2 < n_t; ++i2) {
            // {d_conv - 1 + n_t, d_inner, n_seqs}
            // sliding window
            const float * s = (const float *) ((const char *) src0->data + ir0*(src0->nb[1]) + i2*(src0->nb[0]) + i3*(src0->nb[2])); // {d_conv, d_inner, n_s}
            const float * c = (const float *) ((const char *) src1->data + ir0*(src1->nb[1])); // {d_conv, d_inner}
            float * x = (float *) ((char *) dst->data + ir0*(dst->nb[0]) + i2*(dst->nb[1]) + i3*(dst->nb[2])); // {d_inner, n_t, n_s}
'''
new = '''    int ir  = ir1 - ir0;
    int irs = ir0;  // the first channel left for ggml's loops

#if defined(__AVX512F__)
    // ggml-rs patch 17-cpu-ssm-conv-blocks: blocks of 16 channels by 16
    // tokens, each output the same FMA chain from 0 as ggml's scalar loop
    // below (what GCC makes of it for nc < 16); then ggml's loops for the
    // channels and tokens left over.
    if (nc < 16 && src1->nb[1] == nc*sizeof(float)) {
        const int nblk = ir > 0 ? ir / 16 : 0;
        const int nt16 = n_t - n_t % 16;
        for (int i3 = 0; i3 < n_s; ++i3) {
            for (int blk = 0; blk < nblk; ++blk) {
                const int ib = ir0 + 16*blk;
                const float * s0 = (const float *) ((const char *) src0->data + ib*(src0->nb[1]) + i3*(src0->nb[2]));
                const float * c0 = (const float *) ((const char *) src1->data + ib*(src1->nb[1]));
                for (int t = 0; t < nt16; t += 16) {
                    __m512 r[16];
                    for (int l = 0; l < 16; ++l) {
                        const float * s = s0 + l*ncs + t;
                        const float * c = c0 + l*nc;
                        __m512 acc = _mm512_setzero_ps();
                        for (int i0 = 0; i0 < nc; ++i0) {
                            acc = _mm512_fmadd_ps(_mm512_loadu_ps(s + i0), _mm512_set1_ps(c[i0]), acc);
                        }
                        r[l] = acc;
                    }
                    ggml_rs_transpose16(r);
                    for (int tt = 0; tt < 16; ++tt) {
                        _mm512_storeu_ps((float *) ((char *) dst->data + ib*(dst->nb[0]) + (t + tt)*(dst->nb[1]) + i3*(dst->nb[2])), r[tt]);
                    }
                }
                for (int t = nt16; t < n_t; ++t) {
                    float * x = (float *) ((char *) dst->data + ib*(dst->nb[0]) + t*(dst->nb[1]) + i3*(dst->nb[2]));
                    for (int l = 0; l < 16; ++l) {
                        float sumf = 0.0f;
                        for (int i0 = 0; i0 < nc; ++i0) {
                            sumf = fmaf(s0[l*ncs + t + i0], c0[l*nc + i0], sumf);
                        }
                        x[l] = sumf;
                    }
                }
            }
        }
        // ggml's loops for the channels left over
        const int done = 16*nblk;
        irs += done;
        ir -= done;
    }
#endif

    for (int i3 = 0; i3 < n_s; ++i3) {
        for (int i2 = 0; i2 < n_t; ++i2) {
            // {d_conv - 1 + n_t, d_inner, n_seqs}
            // sliding window
            const float * s = (const float *) ((const char *) src0->data + irs*(src0->nb[1]) + i2*(src0->nb[0]) + i3*(src0->nb[2])); // {d_conv, d_inner, n_s}
            const float * c = (const float *) ((const char *) src1->data + irs*(src1->nb[1])); // {d_conv, d_inner}
            float * x = (float *) ((char *) dst->data + irs*(dst->nb[0]) + i2*(dst->nb[1]) + i3*(dst->nb[2])); // {d_inner, n_t, n_s}
'''
n = src.count(old)
if n != 1:
    sys.exit(f"17-cpu-ssm-conv-blocks: expected one match in {path}, found {n}")
open(path, "w").write(src.replace(old, new))
PY
