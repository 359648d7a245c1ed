#!/usr/bin/env bash
# ggml's CPU GELU and GEGLU (ggml's default GGML_GELU_FP16 build) look each
# value up in a 65536-entry f16 table, one element at a time: 6% of the
# real Gemma 3 270M prefill (GEGLU). With AVX-512, 16 values at a time: the
# same f16 rounding of x (round to nearest even, as F16C's _cvtss_sh(x, 0)),
# the same table entries (a 32-bit gather at twice the index, whose low half
# is the entry; only for -10 < x < 10, whose f16 bits stay below 0xC900,
# so no read passes the table's end), x itself (times g) at or above 10 and
# 0 at or below -10, as the scalar code. A block holding a NaN goes to the
# scalar loop from there. The same floats.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 20-cpu-gelu-table.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/vec.h" <<'PY'
import sys

MARK = "ggml-rs patch 20-cpu-gelu-table"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)

def swap(old, new):
    global src
    n = src.count(old)
    if n != 1:
        sys.exit(f"20-cpu-gelu-table: expected one match in {path}, found {n}:\n{old}")
    src = src.replace(old, new)

helper = f'''#if defined(__AVX512F__) && defined(__AVX512BW__)
// {MARK}: 16 values of GELU through ggml_table_gelu_f16, as the scalar
// loops below compute each (times g when g is not NULL); false, with nothing
// written, when the block holds a NaN.
static inline bool ggml_rs_gelu16(float * y, const float * x, const float * g) {{
    const __m512 vx = _mm512_loadu_ps(x);
    const __mmask16 lo  = _mm512_cmp_ps_mask(vx, _mm512_set1_ps(-10.0f), _CMP_LE_OQ);
    const __mmask16 hi  = _mm512_cmp_ps_mask(vx, _mm512_set1_ps(10.0f), _CMP_GE_OQ);
    const __mmask16 mid = _mm512_cmp_ps_mask(vx, _mm512_set1_ps(-10.0f), _CMP_GT_OQ) & _mm512_cmp_ps_mask(vx, _mm512_set1_ps(10.0f), _CMP_LT_OQ);
    if ((__mmask16) (lo | hi | mid) != (__mmask16) 0xFFFF) {{
        return false;
    }}
    const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(vx, 0));
    const __m512i ent = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mid, idx, (const void *) ggml_table_gelu_f16, 2);
    __m512 r = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(ent));
    if (g) {{
        const __m512 vg = _mm512_loadu_ps(g);
        r = _mm512_mul_ps(r, vg);
        r = _mm512_mask_mul_ps(r, hi, vx, vg);
    }} else {{
        r = _mm512_mask_mov_ps(r, hi, vx);
    }}
    _mm512_storeu_ps(y, _mm512_mask_mov_ps(r, lo, _mm512_setzero_ps()));
    return true;
}}
#endif

#ifdef GGML_GELU_FP16
inline static void ggml_vec_gelu_f32(const int n, float * y, const float * x) {{
    uint16_t t;
    int i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) // {MARK}
    for (; i + 16 <= n && ggml_rs_gelu16(y + i, x + i, NULL); i += 16) {{
    }}
#endif
    for (; i < n; ++i) {{'''

swap('''#ifdef GGML_GELU_FP16
inline static void ggml_vec_gelu_f32(const int n, float * y, const float * x) {
    uint16_t t;
    for (int i = 0; i < n; ++i) {''', helper)

swap('''#ifdef GGML_GELU_FP16
inline static void ggml_vec_geglu_f32(const int n, float * y, const float * x, const float * g) {
    uint16_t t;
    for (int i = 0; i < n; ++i) {''', f'''#ifdef GGML_GELU_FP16
inline static void ggml_vec_geglu_f32(const int n, float * y, const float * x, const float * g) {{
    uint16_t t;
    int i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__) // {MARK}
    for (; i + 16 <= n && ggml_rs_gelu16(y + i, x + i, g + i); i += 16) {{
    }}
#endif
    for (; i < n; ++i) {{''')
open(path, "w").write(src)
PY
