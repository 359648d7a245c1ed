#!/usr/bin/env bash
# ggml's CPU gated delta net makes four passes over each head's state per
# token (decay, k·S, the rank-1 update, q·S), each over the whole S_v x S_v
# matrix (64 KiB at S_v = 128, more than L1). Every step works on one row
# of the (transposed) state at a time and no row reads another, so the
# four steps now run row after row, each row while it is in L1. The same
# ggml_vec_* calls on the same rows in the same order per row: the same
# floats (13.5% of the Qwen3.5 MoE prefill, docs/notes/cpu-speed.md).
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 15-cpu-delta-net-rows.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 15-cpu-delta-net-rows"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)
old = '''            if (kda) {
                // precompute exp(g) into delta scratch (reused below)
                for (int64_t i = 0; i < S_v; ++i) {
                    delta[i] = expf(g_d[i]);
                }
                // S[i][:] *= exp(g[i]) => for each row j of M: M[j][i] *= exp(g[i])
                for (int64_t j = 0; j < S_v; ++j) {
                    ggml_vec_mul_f32(S_v, &s_out[j * S_v], &s_out[j * S_v], delta);
                }
            } else {
                ggml_vec_scale_f32(S_v * S_v, s_out, expf(g_d[0]));
            }

            // delta[j] = sum_i S[i][j] * k[i] = dot(row j of M, k)
            for (int64_t j = 0; j < S_v; ++j) {
                float sum = 0.0f;
                ggml_vec_dot_f32(S_v, &sum, 0, &s_out[j * S_v], 0, k_d, 0, 1);
                delta[j] = (v_d[j] - sum) * beta_val;
            }

            // outer product: S[i][j] += k[i] * delta[j] => M[j][i] += delta[j] * k[i]
            for (int64_t j = 0; j < S_v; ++j) {
                ggml_vec_mad_f32(S_v, &s_out[j * S_v], k_d, delta[j]);
            }

            // attn_out[j] = sum_i S[i][j] * q[i] = dot(row j of M, q)
            for (int64_t j = 0; j < S_v; ++j) {
                float sum = 0.0f;
                ggml_vec_dot_f32(S_v, &sum, 0, &s_out[j * S_v], 0, q_d, 0, 1);
                attn_data[j] = sum * scale;
            }
'''
new = '''            // ggml-rs patch 15-cpu-delta-net-rows: the four steps row by
            // row (row j of M = column j of S; no step reads another row),
            // each row while it is in L1; per row the same calls as before.
            // delta holds exp(g) when kda; the delta of row j is dj.
            const float decay = kda ? 0.0f : expf(g_d[0]);
            if (kda) {
                for (int64_t i = 0; i < S_v; ++i) {
                    delta[i] = expf(g_d[i]);
                }
            }
            for (int64_t j = 0; j < S_v; ++j) {
                float * row = &s_out[j * S_v];
                // S[i][j] *= exp(g[i]) (kda) or exp(g)
                if (kda) {
                    ggml_vec_mul_f32(S_v, row, row, delta);
                } else {
                    ggml_vec_scale_f32(S_v, row, decay);
                }
                // dj = (v[j] - sum_i S[i][j] * k[i]) * beta
                float sum = 0.0f;
                ggml_vec_dot_f32(S_v, &sum, 0, row, 0, k_d, 0, 1);
                const float dj = (v_d[j] - sum) * beta_val;
                // S[i][j] += k[i] * dj
                ggml_vec_mad_f32(S_v, row, k_d, dj);
                // attn_out[j] = sum_i S[i][j] * q[i]
                sum = 0.0f;
                ggml_vec_dot_f32(S_v, &sum, 0, row, 0, q_d, 0, 1);
                attn_data[j] = sum * scale;
            }
'''
n = src.count(old)
if n != 1:
    sys.exit(f"15-cpu-delta-net-rows: expected one match in {path}, found {n}")
open(path, "w").write(src.replace(old, new))
PY
