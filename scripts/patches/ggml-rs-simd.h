// ggml-rs: SIMD helpers shared by our CPU patches (14-cpu-concat-rows,
// 17-cpu-ssm-conv-blocks), copied next to ggml-cpu/ops.cpp by them.
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
