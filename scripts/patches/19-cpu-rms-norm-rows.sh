#!/usr/bin/env bash
# ggml's CPU RMS_NORM (and its fusion with MUL) sums each row's squares in
# one double, element after element: a chain of dependent additions, 3-4%
# of the prefill of the bench models (78 nodes on the Qwen3.5 MoE one),
# which no compiler may vectorize without changing the sum. With AVX-512,
# 8 rows go together, row j's chain in lane j of a vector of doubles: the
# squares (f32 products, as before) of 8 x 8 elements transposed in
# registers (ggml-rs-simd.h), then added column after column, so every
# row's sum is the same sequence of double additions as ggml's. The rest
# (mean, scale, output) is ggml's code, per row. Rows whose length is not a
# multiple of 8 keep ggml's loop.
#
# Ours only: scripts/fetch-llama.sh leaves it out of the llama.cpp reference.
# Usage: 19-cpu-rms-norm-rows.sh GGML_DIR   (idempotent; after patch 14,
# which brings ggml-rs-simd.h into ops.cpp)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ops.cpp" <<'PY'
import sys

MARK = "ggml-rs patch 19-cpu-rms-norm-rows"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)

head = '''    float eps;
    memcpy(&eps, dst_rms_norm->op_params, sizeof(float));
    GGML_ASSERT(eps >= 0.0f);

    // TODO: optimize
    for (int64_t i03 = 0; i03 < ne03; i03++) {
        for (int64_t i02 = 0; i02 < ne02; i02++) {
            for (int64_t i01 = ith; i01 < ne01; i01 += nth) {
                const float * x = (float *) ((char *) src0->data + i01*nb01 + i02*nb02 + i03*nb03);

                ggml_float sum = 0.0;
                // worth switching to explicit SIMD?
                for (int64_t i00 = 0; i00 < ne00; i00++) {
                    sum += (ggml_float)(x[i00] * x[i00]);
                }

'''
foot = '''            }
        }
    }
}

void ggml_compute_forward_rms_norm('''
if src.count(head) != 1:
    sys.exit(f"19-cpu-rms-norm-rows: expected one match in {path}, found {src.count(head)}")
start = src.index(head)
end = src.index(foot, start)
# ggml's per-row code after the sum, from `const float mean` to the output.
row = src[start + len(head):end]

new = f'''    float eps;
    memcpy(&eps, dst_rms_norm->op_params, sizeof(float));
    GGML_ASSERT(eps >= 0.0f);

    // {MARK}: ggml's code for one row once its sum of squares is taken.
    auto finish_row = [&](int64_t i01, int64_t i02, int64_t i03, const float * x, ggml_float sum) {{
{row}    }};

#if defined(__AVX512F__) // {MARK}: 8 rows at a time, a lane each
    if (ne00 % 8 == 0) {{
        const int64_t nrows = ne01*ne02*ne03;
        for (int64_t r0 = 8*ith; r0 < nrows; r0 += 8*nth) {{
            const int n = (int) (nrows - r0 < 8 ? nrows - r0 : 8);
            const float * xs[8];
            for (int j = 0; j < 8; j++) {{
                const int64_t r = r0 + (j < n ? j : n - 1);
                xs[j] = (const float *) ((const char *) src0->data + (r % ne01)*nb01 + ((r / ne01) % ne02)*nb02 + (r / (ne01*ne02))*nb03);
            }}
            double sums[8];
            ggml_rs_sum_squares8(xs, ne00, sums);
            for (int j = 0; j < n; j++) {{
                const int64_t r = r0 + j;
                finish_row(r % ne01, (r / ne01) % ne02, r / (ne01*ne02), xs[j], sums[j]);
            }}
        }}
        return;
    }}
#endif

    // TODO: optimize
    for (int64_t i03 = 0; i03 < ne03; i03++) {{
        for (int64_t i02 = 0; i02 < ne02; i02++) {{
            for (int64_t i01 = ith; i01 < ne01; i01 += nth) {{
                const float * x = (float *) ((char *) src0->data + i01*nb01 + i02*nb02 + i03*nb03);

                ggml_float sum = 0.0;
                // worth switching to explicit SIMD?
                for (int64_t i00 = 0; i00 < ne00; i00++) {{
                    sum += (ggml_float)(x[i00] * x[i00]);
                }}

                finish_row(i01, i02, i03, x, sum);
'''
src = src[:start] + new + src[end:]
open(path, "w").write(src)
PY
