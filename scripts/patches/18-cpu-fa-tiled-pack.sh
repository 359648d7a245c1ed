#!/usr/bin/env bash
# ggml's tiled CPU flash attention (the prefill path: 64 query rows by 64
# KV cells at a time) spent more time preparing its tiles than multiplying
# them: per tile the mask went through a scalar loop of f16 table lookups
# (a quarter of the op's time on the qwen3 bench model at pp512), K was
# transposed into f32 one element at a time (an eighth), and each row's
# maximum was a scalar chain. With AVX-512 the mask converts 16 cells per
# instruction, K goes in blocks of 16 x 16 converted and transposed in
# registers (ggml-rs-simd.h), and the maximum is a vector reduction.
#
# The same floats: f16 to f32 is exact either way, slope * mask is the same
# product, and a maximum does not depend on the order it is taken in (only
# the sign of a zero maximum could, and x - 0 and x - (-0) give the same
# exponentials). The products and the softmax are ggml's, untouched.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 18-cpu-fa-tiled-pack.sh GGML_DIR   (idempotent; after patch 14,
# which brings ggml-rs-simd.h into ops.cpp)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 18-cpu-fa-tiled-pack"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)

def swap(old, new):
    global src
    n = src.count(old)
    if n != 1:
        sys.exit(f"18-cpu-fa-tiled-pack: expected one match in {path}, found {n}:\n{old}")
    src = src.replace(old, new)

swap('''                for (int tq = 0; tq < tile_rows; tq++) {
                    const ggml_fp16_t * mp_row = (const ggml_fp16_t *)((const char *) mask->data + (iq1 + tq)*mask->nb[1] + (iq2%mask->ne[2])*mask->nb[2] + (iq3%mask->ne[3])*mask->nb[3]);
                    for (int tk = 0; tk < kv_tile; tk++) {
''', f'''                for (int tq = 0; tq < tile_rows; tq++) {{
                    const ggml_fp16_t * mp_row = (const ggml_fp16_t *)((const char *) mask->data + (iq1 + tq)*mask->nb[1] + (iq2%mask->ne[2])*mask->nb[2] + (iq3%mask->ne[3])*mask->nb[3]);
                    int tk0 = 0;
#if defined(__AVX512F__) // {MARK}: 16 cells at a time
                    for (; tk0 + 16 <= kv_tile; tk0 += 16) {{
                        const __m512 m = _mm512_mul_ps(_mm512_set1_ps(slope), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (mp_row + ic + tk0))));
                        _mm512_storeu_ps(mask32 + tq * KV_TILE_SZ + tk0, m);
                        if (_mm512_cmp_ps_mask(m, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ)) {{
                            can_skip = false;
                        }}
                    }}
#endif
                    for (int tk = tk0; tk < kv_tile; tk++) {{
''')

swap('''            for (int tk = 0; tk < kv_tile; tk++) {
                const char * k_data = (const char *)k->data + (ic + tk)*nbk1 + ik2*nbk2 + ik3*nbk3;
                if (kv_type == GGML_TYPE_F16) {''', f'''            int tk0 = 0;
#if defined(__AVX512F__) // {MARK}: blocks of 16 cells x 16 dims
            if (kv_type == GGML_TYPE_F16 && DK % 16 == 0) {{
                for (; tk0 + 16 <= kv_tile; tk0 += 16) {{
                    for (int64_t dk = 0; dk < DK; dk += 16) {{
                        __m512 r[16];
                        for (int j = 0; j < 16; j++) {{
                            const ggml_fp16_t * k_f16 = (const ggml_fp16_t *)((const char *)k->data + (ic + tk0 + j)*nbk1 + ik2*nbk2 + ik3*nbk3) + dk;
                            r[j] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) k_f16));
                        }}
                        ggml_rs_transpose16(r);
                        for (int j = 0; j < 16; j++) {{
                            _mm512_storeu_ps(K_f32 + (dk + j) * KV_TILE_SZ + tk0, r[j]);
                        }}
                    }}
                }}
            }}
#endif
            for (int tk = tk0; tk < kv_tile; tk++) {{
                const char * k_data = (const char *)k->data + (ic + tk)*nbk1 + ik2*nbk2 + ik3*nbk3;
                if (kv_type == GGML_TYPE_F16) {{''')

swap('''                float tile_max;
                ggml_vec_max_f32(KV_TILE_SZ, &tile_max, kq_row);
''', f'''                float tile_max;
#if defined(__AVX512F__) // {MARK}: the maximum as a vector reduction
                if (KV_TILE_SZ % 16 == 0) {{
                    __m512 mx = _mm512_loadu_ps(kq_row);
                    for (int j = 16; j < KV_TILE_SZ; j += 16) {{
                        mx = _mm512_max_ps(mx, _mm512_loadu_ps(kq_row + j));
                    }}
                    tile_max = _mm512_reduce_max_ps(mx);
                }} else
#endif
                ggml_vec_max_f32(KV_TILE_SZ, &tile_max, kq_row);
''')
open(path, "w").write(src)
PY
