// ggml-rs: SIMD helpers shared by our CPU patches (14-cpu-concat-rows,
// 17-cpu-ssm-conv-blocks, 18 and 19 through 14's include), copied next to
// ggml-cpu/ops.cpp by them.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

// r[i][j] becomes r[j][i] (16 x 16 floats).
static inline void ggml_rs_transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i]     = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i]     = _mm512_shuffle_ps(t[i],     t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 1] = _mm512_shuffle_ps(t[i],     t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        t[i]      = _mm512_shuffle_f32x4(r[i],     r[i + 4],  0x88);
        t[i + 4]  = _mm512_shuffle_f32x4(r[i],     r[i + 4],  0xdd);
        t[i + 8]  = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; ++i) {
        r[i]      = _mm512_shuffle_f32x4(t[i],     t[i + 8],  0x88);
        r[i + 8]  = _mm512_shuffle_f32x4(t[i],     t[i + 8],  0xdd);
        r[i + 4]  = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
    }
}
#endif

#if defined(__AVX512F__)
// sums[j] = the sum of xs[j][i] * xs[j][i] over i < n (n a multiple of 8),
// each square an f32 product added to a double in order of i, as a scalar
// loop `sum += (double)(x[i]*x[i])` does: row j's chain in lane j.
static inline void ggml_rs_sum_squares8(const float * const xs[8], int64_t n, double sums[8]) {
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v[8];
        for (int j = 0; j < 8; j++) {
            const __m256 x = _mm256_loadu_ps(xs[j] + i);
            v[j] = _mm256_mul_ps(x, x);
        }
        // 8 x 8 transpose
        __m256 t[8];
        for (int j = 0; j < 8; j += 2) {
            t[j]     = _mm256_unpacklo_ps(v[j], v[j + 1]);
            t[j + 1] = _mm256_unpackhi_ps(v[j], v[j + 1]);
        }
        for (int j = 0; j < 8; j += 4) {
            v[j]     = _mm256_shuffle_ps(t[j],     t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
            v[j + 1] = _mm256_shuffle_ps(t[j],     t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
            v[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
            v[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int j = 0; j < 4; j++) {
            t[j]     = _mm256_permute2f128_ps(v[j], v[j + 4], 0x20);
            t[j + 4] = _mm256_permute2f128_ps(v[j], v[j + 4], 0x31);
        }
        // t[c] lane j: row j's square at i + c
        for (int c = 0; c < 8; c++) {
            acc = _mm512_add_pd(acc, _mm512_cvtps_pd(t[c]));
        }
    }
    _mm512_storeu_pd(sums, acc);
}
#endif
