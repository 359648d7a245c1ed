/*
 * A small attention block built and computed through the C ABI only, then
 * recomputed in plain C (double precision, naive loops, our own RoPE and
 * softmax) and compared.
 *
 *   x [d=16, seq=5] (seeded random)
 *   h  = rms_norm(x) * w_norm                       ggml_rs_rms_norm
 *   q  = Wq h, k = Wk h, v = Wv h                   ggml_rs_mul_mat
 *   q -> [8, 2 heads, 5], k, v -> [8, 1 KV head, 5] ggml_rs_reshape (GQA 2:1)
 *   q, k = RoPE(neox, 8 dims, pos 0..4)             ggml_rs_rope
 *   a  = softmax(q k^T / sqrt(8) + causal mask) v   ggml_rs_sdpa
 *   y  = x + Wo a                                   ggml_rs_mul_mat, ggml_rs_add
 *
 * Attention is computed five ways in one graph: flash=false with an f32
 * mask; flash=false with V given permuted ([seq, dv, kv_heads], made with
 * ggml_rs_permute + ggml_rs_cont); flash=true with the mask cast to f16 by
 * ggml_rs_cast; flash=true with f16 mask bits computed here; flash=true
 * with V permuted. Each must match the reference within the tolerance below.
 * A check that the mask matters (unmasked attention differs at position 0,
 * equals at the last) guards against a mask that is silently ignored.
 */
#include "check.h"

#define D 16
#define S 5
#define H 2
#define HKV 1
#define HD 8
#define KVD (HKV * HD)
#define EPS 1e-6f

/*
 * Tolerance: |got - want| <= TOL * (1 + |want|), outputs being O(1).
 * On the CPU the non-flash path computes in f32 (it asks for f32
 * accumulation): the error is ~1e-7, and TOL_CPU = 1e-5 leaves a 100x
 * margin while a wrong position, head, mask or RoPE mode moves outputs by
 * 1e-2 or more. The flash path takes f32 keys and values as f16, as
 * llama.cpp does, and a GPU or accelerator may round K/V or products to
 * f16 or tf32: TOL_F16 = 5e-3 for those.
 */
#define TOL_CPU 1e-5
#define TOL_F16 5e-3

enum { VARIANTS = 5 };
static const char *const variant_names[VARIANTS] = {
    "flash=false, f32 mask",
    "flash=false, V permuted",
    "flash=true, mask cast to f16",
    "flash=true, f16 mask uploaded",
    "flash=true, V permuted",
};

/* ---- the reference, in double precision ------------------------------- */

/* out[s][m] = sum_k w[m*in + k] * a[s][k]  (ggml_mul_mat(w[in, out], a[in, S])) */
static void ref_matmul(const float *w, const double *a, double *out, int in, int outd)
{
    for (int s = 0; s < S; s++) {
        for (int m = 0; m < outd; m++) {
            double acc = 0;
            for (int k = 0; k < in; k++) {
                acc += (double)w[m * in + k] * a[s * in + k];
            }
            out[s * outd + m] = acc;
        }
    }
}

/* GPT-NeoX RoPE on one head vector: pairs (i, i + n/2), theta = p * base^(-2i/n). */
static void ref_rope_neox(double *v, int n, int pos, double base)
{
    for (int i = 0; i < n / 2; i++) {
        double theta = pos * pow(base, -2.0 * i / n);
        double c = cos(theta), s = sin(theta);
        double x0 = v[i], x1 = v[i + n / 2];
        v[i] = x0 * c - x1 * s;
        v[i + n / 2] = x0 * s + x1 * c;
    }
}

static void reference(const float *x, const float *wn, const float *wq, const float *wk,
                      const float *wv, const float *wo, double base, double *y)
{
    double h[S * D], q[S * D], k[S * KVD], v[S * KVD], att[S * D], o[S * D];
    const double scale = 1.0 / sqrt((double)HD);

    for (int s = 0; s < S; s++) {
        double ss = 0;
        for (int d = 0; d < D; d++) {
            ss += (double)x[s * D + d] * x[s * D + d];
        }
        double r = 1.0 / sqrt(ss / D + EPS);
        for (int d = 0; d < D; d++) {
            h[s * D + d] = x[s * D + d] * r * wn[d];
        }
    }
    ref_matmul(wq, h, q, D, D);
    ref_matmul(wk, h, k, D, KVD);
    ref_matmul(wv, h, v, D, KVD);
    for (int s = 0; s < S; s++) {
        for (int hh = 0; hh < H; hh++) {
            ref_rope_neox(&q[s * D + hh * HD], HD, s, base);
        }
        for (int hh = 0; hh < HKV; hh++) {
            ref_rope_neox(&k[s * KVD + hh * HD], HD, s, base);
        }
    }
    for (int hh = 0; hh < H; hh++) {
        int kvh = hh / (H / HKV);
        for (int qi = 0; qi < S; qi++) {
            double sc[S], mx = -INFINITY, sum = 0;
            for (int kj = 0; kj < S; kj++) {
                double dot = 0;
                for (int i = 0; i < HD; i++) {
                    dot += q[qi * D + hh * HD + i] * k[kj * KVD + kvh * HD + i];
                }
                sc[kj] = kj <= qi ? dot * scale : -INFINITY;
                if (sc[kj] > mx) {
                    mx = sc[kj];
                }
            }
            for (int kj = 0; kj < S; kj++) {
                sc[kj] = kj <= qi ? exp(sc[kj] - mx) : 0.0;
                sum += sc[kj];
            }
            for (int i = 0; i < HD; i++) {
                double acc = 0;
                for (int kj = 0; kj < S; kj++) {
                    acc += sc[kj] / sum * v[kj * KVD + kvh * HD + i];
                }
                att[qi * D + hh * HD + i] = acc;
            }
        }
    }
    ref_matmul(wo, att, o, D, D);
    for (int i = 0; i < S * D; i++) {
        y[i] = x[i] + o[i];
    }
}

/* ---- the graph --------------------------------------------------------- */

static ggml_rs_error g_err;

#define OK(expr) ok_or_die((expr), #expr)
static ggml_rs_tensor *ok_or_die(ggml_rs_tensor *t, const char *what)
{
    if (t == NULL) {
        fprintf(stderr, "%s failed: status %d: %s\n", what, (int)g_err.status, g_err.message);
        exit(2);
    }
    return t;
}

static void check_shape(ggml_rs_tensor *t, const char *what, int64_t n0, int64_t n1, int64_t n2)
{
    ggml_rs_tensor_meta m;
    ggml_rs_error e = err_fresh();
    CHECK(ggml_rs_tensor_get_meta(t, &m, &e) == GGML_RS_OK, "%s meta: %s", what, e.message);
    CHECK(m.type_ == 0 && m.ne[0] == n0 && m.ne[1] == n1 && m.ne[2] == n2 && m.ne[3] == 1,
          "%s: type %d shape [%lld,%lld,%lld,%lld], want f32[%lld,%lld,%lld]", what, (int)m.type_,
          (long long)m.ne[0], (long long)m.ne[1], (long long)m.ne[2], (long long)m.ne[3], (long long)n0,
          (long long)n1, (long long)n2);
}

int main(void)
{
    float x[S * D], wn[D], wq[D * D], wk[D * KVD], wv[D * KVD], wo[D * D], mask[S * S];
    uint16_t mask16[S * S];
    double want[S * D];
    float got[S * D];
    rng_t r = rng_new(42);
    ggml_rs_backend *b = backend_or_die(2);
    ggml_rs_context *c, *in;
    ggml_rs_tensor *tx, *twn, *twq, *twk, *twv, *two, *tmask, *tmask16, *tmask_cast, *pos;
    ggml_rs_tensor *h, *q, *k, *v, *vperm, *outs[VARIANTS];
    ggml_rs_rope_params rp = ggml_rs_rope_params_default();
    const int64_t ne_x[2] = {D, S}, ne_wq[2] = {D, D}, ne_wkv[2] = {D, KVD}, ne_mask[2] = {S, S};
    const int64_t ne_q[3] = {HD, H, S}, ne_kv[3] = {HD, HKV, S}, ne_flat[2] = {D, S};
    const float scale = 1.0f / sqrtf((float)HD);
    double tol = TOL_CPU;

    /* Any device but the CPU in the scheduler: the looser tolerance. */
    for (size_t i = 0; i < ggml_rs_backend_device_count(b); i++) {
        ggml_rs_device_info info;
        int64_t idx = ggml_rs_backend_device_index(b, i);
        if (idx >= 0 && ggml_rs_device_get((size_t)idx, &info, NULL) == GGML_RS_OK && info.device_type != 0) {
            tol = TOL_F16;
            printf("backend uses %s (%s): tolerance %.0e\n", info.name, info.description, tol);
        }
    }

    /* Ollama's rope defaults, which the reference below relies on. */
    CHECK(rp.n_ctx_orig == 131072 && rp.freq_base == 10000.0f && rp.freq_scale == 1.0f &&
              rp.ext_factor == 0.0f && rp.attn_factor == 1.0f && rp.beta_fast == 32.0f &&
              rp.beta_slow == 1.0f && rp.sections[0] == 0 && rp.sections[3] == 0,
          "rope defaults: n_ctx_orig %d base %g scale %g ext %g attn %g beta %g/%g", (int)rp.n_ctx_orig,
          (double)rp.freq_base, (double)rp.freq_scale, (double)rp.ext_factor, (double)rp.attn_factor,
          (double)rp.beta_fast, (double)rp.beta_slow);
    rp.n_dims = HD;
    rp.mode = 2; /* GGML_ROPE_TYPE_NEOX */

    rng_fill(&r, x, S * D, 1.0f);
    for (int i = 0; i < D; i++) {
        wn[i] = 1.0f + 0.5f * rng_uniform(&r);
    }
    rng_fill(&r, wq, D * D, 1.0f / 4);
    rng_fill(&r, wk, D * KVD, 1.0f / 4);
    rng_fill(&r, wv, D * KVD, 1.0f / 4);
    rng_fill(&r, wo, D * D, 1.0f / 4);
    for (int qi = 0; qi < S; qi++) {
        for (int kj = 0; kj < S; kj++) {
            mask[qi * S + kj] = kj <= qi ? 0.0f : -INFINITY;
            mask16[qi * S + kj] = kj <= qi ? 0x0000 : 0xFC00; /* f16 0 and -inf */
        }
    }
    reference(x, wn, wq, wk, wv, wo, rp.freq_base, want);

    g_err = err_fresh();
    c = ggml_rs_ctx_new(b, 256, &g_err);
    REQUIRE(c != NULL, "ctx_new: %s", g_err.message);
    in = ggml_rs_ctx_input(c);
    REQUIRE(in != NULL, "ctx_input");
    tx = upload_f32(in, x, ne_x, 2);
    twn = upload_f32(in, wn, ne_x, 1);
    twq = upload_f32(in, wq, ne_wq, 2);
    twk = upload_f32(in, wk, ne_wkv, 2);
    twv = upload_f32(in, wv, ne_wkv, 2);
    two = upload_f32(in, wo, ne_wq, 2);
    tmask = upload_f32(in, mask, ne_mask, 2);
    tmask16 = OK(ggml_rs_ctx_from_data(in, 1, ne_mask, 2, (const uint8_t *)mask16, sizeof mask16, &g_err));
    pos = OK(ggml_rs_ctx_arange(c, 0, S, 1, 26, &g_err));

    h = OK(ggml_rs_rms_norm(c, tx, twn, EPS, &g_err));
    q = OK(ggml_rs_mul_mat(c, twq, h, &g_err));
    k = OK(ggml_rs_mul_mat(c, twk, h, &g_err));
    v = OK(ggml_rs_mul_mat(c, twv, h, &g_err));
    check_shape(q, "Wq h", D, S, 1);
    check_shape(k, "Wk h", KVD, S, 1);
    q = OK(ggml_rs_reshape(c, q, ne_q, 3, &g_err));
    k = OK(ggml_rs_reshape(c, k, ne_kv, 3, &g_err));
    v = OK(ggml_rs_reshape(c, v, ne_kv, 3, &g_err));
    q = OK(ggml_rs_rope(c, q, pos, NULL, &rp, &g_err));
    k = OK(ggml_rs_rope(c, k, pos, NULL, &rp, &g_err));
    check_shape(q, "rope(q)", HD, H, S);
    /* [dv, kv_heads, seq] -> [seq, dv, kv_heads]: axis 0 to 1, 1 to 2, 2 to 0. */
    vperm = OK(ggml_rs_permute(c, v, 1, 2, 0, 3, &g_err));
    vperm = OK(ggml_rs_cont(c, vperm, NULL, 0, &g_err));
    check_shape(vperm, "permuted v", S, HD, HKV);
    tmask_cast = OK(ggml_rs_cast(c, tmask, 1, &g_err));

    for (int i = 0; i < VARIANTS; i++) {
        ggml_rs_tensor *a, *vi = (i == 1 || i == 4) ? vperm : v;
        ggml_rs_tensor *mi = i < 2 ? tmask : i == 3 ? tmask16 : tmask_cast;
        bool flash = i >= 2, permuted = (i == 1 || i == 4);
        a = OK(ggml_rs_sdpa(c, q, k, vi, mi, NULL, NULL, scale, flash, permuted, &g_err));
        check_shape(a, variant_names[i], HD, H, S);
        a = OK(ggml_rs_reshape(c, a, ne_flat, 2, &g_err));
        a = OK(ggml_rs_mul_mat(c, two, a, &g_err));
        outs[i] = OK(ggml_rs_add(c, a, tx, &g_err));
        check_shape(outs[i], "output", D, S, 1);
    }
    REQUIRE(ggml_rs_ctx_compute(c, outs, VARIANTS, &g_err) == GGML_RS_OK, "compute: %s", g_err.message);

    for (int i = 0; i < VARIANTS; i++) {
        double max_ratio = 0, max_abs = 0;
        int worst = 0;
        const double vtol = i >= 2 ? TOL_F16 : tol; /* the flash variants */
        REQUIRE(ggml_rs_tensor_get_f32(outs[i], got, S * D, &g_err) == GGML_RS_OK, "get: %s",
                g_err.message);
        for (int j = 0; j < S * D; j++) {
            double diff = fabs(got[j] - want[j]);
            double ratio = diff / (vtol * (1.0 + fabs(want[j])));
            if (isnan(ratio)) {
                ratio = INFINITY;
            }
            if (ratio > max_ratio) {
                max_ratio = ratio;
                worst = j;
            }
            if (diff > max_abs || isnan(diff)) {
                max_abs = isnan(diff) ? INFINITY : diff;
            }
        }
        printf("%-30s max |got - want| = %.2e, %.1f%% of the tolerance\n", variant_names[i], max_abs,
               100.0 * max_ratio);
        CHECK(max_ratio <= 1.0, "%s: element %d (seq %d, dim %d) is %.7f, want %.7f", variant_names[i], worst,
              worst / D, worst % D, (double)got[worst], want[worst]);
    }

    /* The causal mask matters: without it the first position would differ. */
    {
        ggml_rs_tensor *a = OK(ggml_rs_sdpa(c, q, k, v, NULL, NULL, NULL, scale, false, false, &g_err));
        float un[HD * H * S], masked[HD * H * S];
        ggml_rs_tensor *m = OK(ggml_rs_sdpa(c, q, k, v, tmask, NULL, NULL, scale, false, false, &g_err));
        ggml_rs_tensor *both[2] = {a, m};
        double diff = 0;
        REQUIRE(ggml_rs_ctx_compute(c, both, 2, &g_err) == GGML_RS_OK, "compute: %s", g_err.message);
        REQUIRE(ggml_rs_tensor_get_f32(a, un, HD * H * S, &g_err) == GGML_RS_OK, "get: %s", g_err.message);
        REQUIRE(ggml_rs_tensor_get_f32(m, masked, HD * H * S, &g_err) == GGML_RS_OK, "get: %s", g_err.message);
        for (int j = 0; j < HD * H; j++) {
            diff += fabs(un[j] - masked[j]); /* position 0 sees 5 keys vs 1 */
        }
        CHECK(diff > 1e-2, "the mask made no difference (%g)", diff);
        for (int j = HD * H * (S - 1); j < HD * H * S; j++) {
            CHECK(fabsf(un[j] - masked[j]) < 1e-5f, "the last position sees every key either way");
        }
    }

    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
    ggml_rs_backend_free(b);
    return finish("attention");
}
