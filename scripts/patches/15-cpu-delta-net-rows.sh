#!/usr/bin/env bash
# ggml's CPU gated delta net makes four passes over each head's state per
# token (decay, k·S, the rank-1 update, q·S), each over the whole S_v x S_v
# matrix (64 KiB at S_v = 128, more than L1): the state went through L2
# twice per token and head. Every step works on one row of the
# (transposed) state and no row reads another, at any token: so with one
# state slot (K = 1) and a scalar gate (every Qwen3.5/Qwen3-Next prefill),
# rows go in blocks of 32 (16 KiB) through all the tokens, and on AVX-512
# (head sizes 64 and 128) 16 rows at a time with their dot products'
# horizontal sums done together, k and q in registers, each row read once
# per pass (the decay with the dot by k, the update with the dot by q).
# The same operations on the same rows in the same order per row: the same
# floats (tests/deltanet.rs holds them to ggml's per-row loop bit for bit;
# 16-18% of the Qwen3.5 MoE prefill before, 11-13% now,
# docs/notes/cpu-speed.md). Other cases (several slots, per-channel gates)
# keep ggml's loop.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 15-cpu-delta-net-rows.sh GGML_DIR   (idempotent)
set -euo pipefail
cp "$(dirname "$0")/ggml-rs-simd.h" "$1/src/ggml-cpu/ggml-rs-simd.h"
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 15-cpu-delta-net-rows"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old2 = '''        // attn output pointer for first token of this (head, seq)
        float * attn_data = attn_out_base + (iv3 * n_tokens * H + iv1) * S_v;
'''
new2 = '''        // attn output pointer for first token of this (head, seq)
        float * attn_data = attn_out_base + (iv3 * n_tokens * H + iv1) * S_v;

        // ggml-rs patch 15-cpu-delta-net-rows: with one state slot and a
        // scalar gate, rows in blocks of 32 (16 KiB, in L1), each block
        // through all the tokens; per row the same calls in the same order.
        if (!kda && K == 1) {
            for (int64_t jb = 0; jb < S_v; jb += 32) {
                const int64_t je = MIN(jb + 32, S_v);
                float * attn_t = attn_data;
                for (int64_t t = 0; t < n_tokens; t++) {
                    const float * q_d = (const float *)((const char *)src_q->data + iq3 * nbq3 + t * nbq2 + iq1 * nbq1);
                    const float * k_d = (const float *)((const char *)src_k->data + ik3 * nbk3 + t * nbk2 + ik1 * nbk1);
                    const float * v_d = (const float *)((const char *)src_v->data + iv3 * nbv3 + t * nbv2 + iv1 * nbv1);
                    const float beta_val = *(const float *)((const char *)src_beta->data + iv3 * nbb3 + t * nbb2 + iv1 * nbb1);
                    const float * g_d    =  (const float *)((const char *)src_g->data    + iv3 * nbg3 + t * nbg2 + iv1 * nbg1);
                    const float decay = expf(g_d[0]);
                    int64_t j = jb;
#if defined(__AVX512F__)
                    if (S_v == 128 || S_v == 64) {
                        for (; j + 16 <= je; j += 16) {
                            if (S_v == 128) {
                                ggml_rs_delta_rows16<8>(&s_out[j * S_v], k_d, q_d, v_d + j, decay, beta_val, scale, attn_t + j);
                            } else {
                                ggml_rs_delta_rows16<4>(&s_out[j * S_v], k_d, q_d, v_d + j, decay, beta_val, scale, attn_t + j);
                            }
                        }
                    }
#endif
                    for (; j < je; ++j) {
                        float * row = &s_out[j * S_v];
                        ggml_vec_scale_f32(S_v, row, decay);
                        float sum = 0.0f;
                        ggml_vec_dot_f32(S_v, &sum, 0, row, 0, k_d, 0, 1);
                        const float dj = (v_d[j] - sum) * beta_val;
                        ggml_vec_mad_f32(S_v, row, k_d, dj);
                        sum = 0.0f;
                        ggml_vec_dot_f32(S_v, &sum, 0, row, 0, q_d, 0, 1);
                        attn_t[j] = sum * scale;
                    }
                    attn_t += S_v * H;
                }
            }
            continue;
        }
'''
n = src.count(old2)
if n != 1:
    sys.exit(f"15-cpu-delta-net-rows: expected one match in {path}, found {n}")
src = src.replace(old2, new2)

head = "// ggml_compute_forward_gated_delta_net\n"
helpers = '''#include "ggml-rs-simd.h" // ggml-rs patch 15-cpu-delta-net-rows

#if defined(__AVX512F__)
// The horizontal sums of 16 vectors at once, in the order of GCC's
// _mm512_reduce_add_ps (halves, quarters, then (b0 + b2) + (b1 + b3)):
// lane r of the result is the sum of v[r].
static inline __m512 ggml_rs_reduce16(__m512 v[16]) {
    ggml_rs_transpose16(v);
    __m512 a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = _mm512_add_ps(v[i + 8], v[i]);
    }
    __m512 b[4];
    for (int i = 0; i < 4; i++) {
        b[i] = _mm512_add_ps(a[i + 4], a[i]);
    }
    return _mm512_add_ps(_mm512_add_ps(b[0], b[2]), _mm512_add_ps(b[1], b[3]));
}

// One token's four steps on 16 rows of the state, as the per-row loop
// computes them with ggml_vec_scale_f32, ggml_vec_dot_f32 and
// ggml_vec_mad_f32: the same operations in the same order per row, the
// 16 rows' dot products summed together. NV = S_v / 16 vectors a row, a
// constant, so that k, q and the row being worked on stay in registers
// and each row is read once per pass: the decay goes with the dot by k,
// the update with the dot by q.
template <int NV>
static void ggml_rs_delta_rows16(float * rows, const float * k, const float * q, const float * v,
                                 float decay, float beta, float scale, float * out) {
    static_assert(NV % 4 == 0, "ggml_vec_dot_f32 takes 64 values a step");
    const __m512 dec = _mm512_set1_ps(decay);
    __m512 kv[NV];
    for (int i = 0; i < NV; i++) {
        kv[i] = _mm512_loadu_ps(k + 16*i);
    }
    __m512 p[16];
    for (int l = 0; l < 16; l++) {
        float * row = rows + l*16*NV;
        __m512 sum[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
        for (int i = 0; i < NV; i++) {
            const __m512 r = _mm512_mul_ps(_mm512_loadu_ps(row + 16*i), dec);
            _mm512_storeu_ps(row + 16*i, r);
            sum[i % 4] = _mm512_fmadd_ps(r, kv[i], sum[i % 4]);
        }
        p[l] = _mm512_add_ps(_mm512_add_ps(sum[0], sum[2]), _mm512_add_ps(sum[1], sum[3]));
    }
    const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v), ggml_rs_reduce16(p)), _mm512_set1_ps(beta));
    float dj[16];
    _mm512_storeu_ps(dj, d);
    __m512 qv[NV];
    for (int i = 0; i < NV; i++) {
        qv[i] = _mm512_loadu_ps(q + 16*i);
    }
    for (int l = 0; l < 16; l++) {
        float * row = rows + l*16*NV;
        const __m512 vd = _mm512_set1_ps(dj[l]);
        __m512 sum[4] = { _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps() };
        for (int i = 0; i < NV; i++) {
            const __m512 r = _mm512_fmadd_ps(kv[i], vd, _mm512_loadu_ps(row + 16*i));
            _mm512_storeu_ps(row + 16*i, r);
            sum[i % 4] = _mm512_fmadd_ps(r, qv[i], sum[i % 4]);
        }
        p[l] = _mm512_add_ps(_mm512_add_ps(sum[0], sum[2]), _mm512_add_ps(sum[1], sum[3]));
    }
    _mm512_storeu_ps(out, _mm512_mul_ps(ggml_rs_reduce16(p), _mm512_set1_ps(scale)));
}
#endif

'''
if src.count(head) != 1:
    sys.exit(f"15-cpu-delta-net-rows: expected one gated_delta_net section in {path}")
src = src.replace(head, helpers + head)
open(path, "w").write(src)
PY
