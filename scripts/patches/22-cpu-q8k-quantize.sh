#!/usr/bin/env bash
# ggml-cpu's quantize_row_q8_K on x86 is the scalar reference
# (quantize_row_q8_K_ref, built for the baseline ISA): the activations of
# every K-quant product (Q4_K's gemv rows, every Q6_K product, ...) went
# through a scalar max search, 2% of the hybrid MoE's Q4_K_M prefill and
# of its decode. With AVX-512 BW: the block's largest |x| as a vector
# maximum (a NaN never wins, as with the reference's strict >), the first
# value of that magnitude found by a compare mask (the reference keeps the
# first), and the values quantized 16 at a time with the reference's own
# operations: x times -127/max, plus 1.5 * 2^23 (two roundings, never
# contracted into an FMA), the low 23 bits minus
# 2^22 (its nearest_int), at most 127, truncated to 8 bits; each 16
# values' sum from those bytes. An all-zero block leaves bsums as the
# reference does. Byte for byte the reference's output
# (tests/quant.rs, with ties of |max|, zeros, infinities and NaNs).
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 22-cpu-q8k-quantize.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/arch/x86/quants.c" <<'PY'
import sys

MARK = "ggml-rs patch 22-cpu-q8k-quantize"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''void quantize_row_q8_K(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k) {
    quantize_row_q8_K_ref(x, y, k);
}
'''
new = '''void quantize_row_q8_K(const float * GGML_RESTRICT x, void * GGML_RESTRICT y, int64_t k) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    // ggml-rs patch 22-cpu-q8k-quantize: quantize_row_q8_K_ref's
    // operations, 16 values at a time.
    assert(k % QK_K == 0);
    block_q8_K * GGML_RESTRICT yb = (block_q8_K *) y;
    const int64_t nb = k / QK_K;
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512 magic = _mm512_set1_ps(12582912.f);
    const __m512i mant = _mm512_set1_epi32(0x007fffff);
    const __m512i half = _mm512_set1_epi32(0x00400000);
    const __m512i top = _mm512_set1_epi32(127);
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        __m512 am = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16) {
            // max_ps returns its second operand when the first is NaN.
            am = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + j), abs_mask), am);
        }
        const float amax = _mm512_reduce_max_ps(am);
        if (amax == 0.0f) {
            yb[i].d = 0;
            memset(yb[i].qs, 0, QK_K);
            continue;
        }
        float max = 0;
        const __m512 va = _mm512_set1_ps(amax);
        for (int j = 0; j < QK_K; j += 16) {
            const __mmask16 m = _mm512_cmp_ps_mask(_mm512_and_ps(_mm512_loadu_ps(x + j), abs_mask), va, _CMP_EQ_OQ);
            if (m) {
                max = x[j + __builtin_ctz(m)];
                break;
            }
        }
        const float iscale = -127.f/max;
        const __m512 vs = _mm512_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 16) {
            // Two roundings, as the reference: the explicit-rounding forms
            // keep the compiler from contracting them into one FMA.
            const __m512 p = _mm512_mul_round_ps(_mm512_loadu_ps(x + j), vs, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512 v = _mm512_add_round_ps(p, magic, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512i q = _mm512_min_epi32(_mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), mant), half), top);
            const __m128i b = _mm512_cvtepi32_epi8(q);
            _mm_storeu_si128((__m128i *) (yb[i].qs + j), b);
            yb[i].bsums[j/16] = (int16_t) _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(b));
        }
        yb[i].d = 1/iscale;
    }
#else
    quantize_row_q8_K_ref(x, y, k);
#endif
}
'''
if src.count(old) != 1:
    sys.exit(f"22-cpu-q8k-quantize: expected quantize_row_q8_K once in {path}")
src = src.replace(old, new)
open(path, "w").write(src)
PY
