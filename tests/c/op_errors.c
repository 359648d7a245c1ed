/*
 * Every op of docs/op-contract.md given arguments it cannot take returns
 * NULL with an error (status and a message naming the op) instead of
 * letting ggml abort the process: NULL tensors, shapes that do not fit,
 * wrong types, out-of-range dims, axes, offsets, counts and parameters.
 * Each case is printed before it runs, so an abort names its call.
 * Afterwards the context still computes a valid graph.
 */
#include "check.h"

#define INV (1u << GGML_RS_ERR_INVALID_ARGUMENT)
#define SHP (1u << GGML_RS_ERR_SHAPE)
#define DTY (1u << GGML_RS_ERR_DTYPE)

static ggml_rs_context *g_ctx;
static int g_cases;

/* `call` is an expression that uses E as its error argument. */
#define E (&e_)
#define FAILS(op, allowed, call)                                                       \
    do {                                                                               \
        ggml_rs_error e_ = err_fresh();                                                \
        ggml_rs_tensor *t_;                                                            \
        g_cases++;                                                                     \
        printf("case %s\n", #call);                                                    \
        fflush(stdout);                                                                \
        t_ = (call);                                                                   \
        CHECK(t_ == NULL, "%s: returned a tensor for bad arguments", #call);           \
        CHECK(e_.status >= 0 && e_.status < 32 && ((allowed) >> e_.status & 1u),       \
              "%s: status %d (message '%s')", #call, (int)e_.status, e_.message);      \
        CHECK(err_terminated(&e_) && contains(e_.message, op),                         \
              "%s: message '%s' does not name '%s'", #call, e_.message, op);           \
        ggml_rs_ctx_clear_error(g_ctx);                                                \
    } while (0)

static ggml_rs_tensor *upload_i32(ggml_rs_context *in, const int32_t *v, const int64_t *ne, size_t n)
{
    ggml_rs_error e = err_fresh();
    size_t count = 1;
    ggml_rs_tensor *t;
    for (size_t i = 0; i < n; i++) {
        count *= (size_t)ne[i];
    }
    t = ggml_rs_ctx_from_data(in, 26, ne, n, (const uint8_t *)v, count * 4, &e);
    REQUIRE(t != NULL, "from_data i32: %s", e.message);
    return t;
}

int main(void)
{
    ggml_rs_backend *b = backend_or_die(1);
    ggml_rs_error e = err_fresh();
    ggml_rs_context *c = ggml_rs_ctx_new(b, 512, &e), *in;
    float buf[256];
    int32_t ids[8] = {0, 1, 2, 3, 0, 1, 2, 3};
    const int64_t ne_a[2] = {8, 4}, ne_b[2] = {6, 4}, ne_3[3] = {8, 4, 3}, ne_2b[3] = {8, 4, 2};
    const int64_t ne_q[3] = {8, 3, 5}, ne_kv[3] = {8, 2, 5}, ne_k4[3] = {4, 1, 5}, ne_v[3] = {8, 1, 5};
    const int64_t ne_ids[1] = {4}, ne_pos[1] = {5}, ne_pos3[1] = {3}, ne_mask_small[2] = {3, 5};
    const int64_t ne_w7[1] = {7}, ne_9[1] = {9};
    ggml_rs_tensor *a, *a2, *bb, *t3, *t3b, *ii, *pos, *pos3, *q, *kv, *k4, *v1, *msmall, *w7, *f9, *q4;
    const int64_t ne_q4[1] = {32};
    ggml_rs_rope_params rp = ggml_rs_rope_params_default();

    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    g_ctx = c;
    in = ggml_rs_ctx_input(c);
    for (int i = 0; i < 256; i++) {
        buf[i] = (float)(i % 7) * 0.25f - 0.5f;
    }
    a = upload_f32(in, buf, ne_a, 2);
    a2 = upload_f32(in, buf, ne_a, 2);
    bb = upload_f32(in, buf, ne_b, 2);
    t3 = upload_f32(in, buf, ne_3, 3);
    t3b = upload_f32(in, buf, ne_2b, 3);
    w7 = upload_f32(in, buf, ne_w7, 1);
    f9 = upload_f32(in, buf, ne_9, 1);
    ii = upload_i32(in, ids, ne_ids, 1);
    pos = upload_i32(in, ids, ne_pos, 1);
    pos3 = upload_i32(in, ids, ne_pos3, 1);
    q = upload_f32(in, buf, ne_q, 3);
    kv = upload_f32(in, buf, ne_kv, 3);
    k4 = upload_f32(in, buf, ne_k4, 3);
    v1 = upload_f32(in, buf, ne_v, 3);
    msmall = upload_f32(in, buf, ne_mask_small, 2);
    q4 = ggml_rs_ctx_zeros(in, 2, ne_q4, 1, &e);
    REQUIRE(q4 != NULL, "zeros q4_0[32]: %s", e.message);

    /* unary */
    FAILS("sqrt", INV, ggml_rs_sqrt(c, NULL, E));
    FAILS("exp", DTY, ggml_rs_exp(c, ii, E));
    FAILS("tanh", DTY, ggml_rs_tanh(c, ii, E));
    FAILS("silu", DTY, ggml_rs_silu(c, ii, NULL, E));
    FAILS("silu", SHP, ggml_rs_silu(c, a, bb, E));
    FAILS("gelu", SHP, ggml_rs_gelu(c, a, t3, E));
    FAILS("relu", INV, ggml_rs_relu(c, NULL, a, E));

    /* norm */
    FAILS("softmax", DTY, ggml_rs_softmax(c, ii, E));
    FAILS("rms_norm", SHP, ggml_rs_rms_norm(c, a, w7, 1e-6f, E));
    FAILS("rms_norm", DTY, ggml_rs_rms_norm(c, ii, NULL, 1e-6f, E));
    FAILS("layer_norm", SHP, ggml_rs_layer_norm(c, a, w7, NULL, 1e-5f, E));
    FAILS("layer_norm", SHP, ggml_rs_layer_norm(c, a, a2, f9, 1e-5f, E));
    FAILS("l2_norm", DTY, ggml_rs_l2_norm(c, ii, 1e-6f, E));
    FAILS("sum_rows", INV, ggml_rs_sum_rows(c, NULL, E));
    FAILS("mean", DTY, ggml_rs_mean(c, ii, E));

    /* matmul */
    FAILS("mul_mat", SHP, ggml_rs_mul_mat(c, a, bb, E));        /* K 8 vs 6 */
    FAILS("mul_mat", SHP, ggml_rs_mul_mat(c, t3, t3b, E));      /* batch 3 vs 2 */
    FAILS("mul_mat", DTY | SHP, ggml_rs_mul_mat(c, ii, ii, E));
    FAILS("mul_mat", INV, ggml_rs_mul_mat(c, a, NULL, E));
    FAILS("mul_mat_full_prec", SHP, ggml_rs_mul_mat_full_prec(c, bb, a, E));

    /* shape */
    {
        const int64_t bad_count[2] = {5, 7}, two_infer[2] = {-1, -1}, zero[2] = {0, 32};
        const int64_t five[5] = {1, 1, 1, 1, 32}, view_ne[2] = {8, 4}, big_ne[2] = {8, 5};
        const size_t view_nb[1] = {32};
        FAILS("reshape", SHP, ggml_rs_reshape(c, a, bad_count, 2, E));
        FAILS("reshape", SHP | INV, ggml_rs_reshape(c, a, two_infer, 2, E));
        FAILS("reshape", SHP | INV, ggml_rs_reshape(c, a, zero, 2, E));
        FAILS("reshape", SHP | INV, ggml_rs_reshape(c, a, five, 5, E));
        FAILS("reshape", INV, ggml_rs_reshape(c, a, NULL, 2, E));
        FAILS("view", SHP | INV, ggml_rs_view(c, a, 4, view_ne, view_nb, 2, E));  /* 4 bytes past */
        FAILS("view", SHP | INV, ggml_rs_view(c, a, 0, big_ne, view_nb, 2, E));  /* a 5th row */
        FAILS("view", SHP | INV, ggml_rs_view(c, a, (size_t)-8, view_ne, view_nb, 2, E));
        FAILS("view", SHP | INV, ggml_rs_view(c, a, 0, view_ne, NULL, 2, E));
        FAILS("permute", SHP | INV, ggml_rs_permute(c, a, 0, 0, 1, 2, E));
        FAILS("permute", SHP | INV, ggml_rs_permute(c, a, 0, 1, 2, 4, E));
        FAILS("permute", SHP | INV, ggml_rs_permute(c, a, -1, 1, 2, 3, E));
        FAILS("cont", SHP, ggml_rs_cont(c, a, bad_count, 2, E));
        FAILS("concat", SHP, ggml_rs_concat(c, a, bb, 1, E));        /* dim 0 differs */
        FAILS("concat", SHP | INV, ggml_rs_concat(c, a, a2, 4, E));
        FAILS("concat", DTY, ggml_rs_concat(c, ii, f9, 0, E));
        FAILS("repeat", SHP | INV, ggml_rs_repeat(c, a, 4, 2, E));
        FAILS("repeat", SHP | INV, ggml_rs_repeat(c, a, 0, 0, E));
        FAILS("repeat", SHP | INV, ggml_rs_repeat(c, a, 1, -3, E));
        FAILS("pad", SHP | INV, ggml_rs_pad(c, a, -1, 0, 0, 0, E));
        FAILS("slice", SHP | INV, ggml_rs_slice(c, a, 0, 4, 2, 1, E));  /* low > high */
        FAILS("slice", SHP | INV, ggml_rs_slice(c, a, 0, 0, 9, 1, E));  /* past the end */
        FAILS("slice", SHP | INV, ggml_rs_slice(c, a, 0, 0, 4, 0, E));  /* step 0 */
        FAILS("slice", SHP | INV, ggml_rs_slice(c, a, 5, 0, 1, 1, E));
        FAILS("dup", INV, ggml_rs_dup(c, NULL, E));
    }

    /* index */
    FAILS("get_rows", DTY, ggml_rs_get_rows(c, a, f9, E));     /* f32 ids */
    FAILS("set_rows", SHP, ggml_rs_set_rows(c, a, bb, ii, E)); /* row width 6 into 8 */
    FAILS("set_rows", DTY | SHP, ggml_rs_set_rows(c, a, a2, f9, E));
    FAILS("cpy", SHP, ggml_rs_cpy(c, a, bb, E));               /* 32 vs 24 elements */
    FAILS("cast", DTY, ggml_rs_cast(c, a, 9999, E));
    FAILS("cast", DTY, ggml_rs_cast(c, a, -3, E));
    FAILS("argsort", DTY, ggml_rs_argsort(c, q4, 0, E));       /* i32/f16/bf16 are cast; q4_0 is not */
    FAILS("argsort", INV, ggml_rs_argsort(c, NULL, 1, E));
    FAILS("top_k", SHP | INV, ggml_rs_top_k(c, a, 9, E));      /* k > ne[0] */
    FAILS("top_k", SHP | INV, ggml_rs_top_k(c, a, 0, E));
    FAILS("top_k", SHP | INV, ggml_rs_top_k(c, a, -1, E));

    /* rope: q [8, 3 heads, 5] with pos [5] */
    rp.n_dims = 7;
    FAILS("rope", INV | SHP, ggml_rs_rope(c, q, pos, NULL, &rp, E)); /* odd */
    rp.n_dims = 16;
    FAILS("rope", INV | SHP, ggml_rs_rope(c, q, pos, NULL, &rp, E)); /* > head dim */
    rp.n_dims = 0;
    FAILS("rope", INV | SHP, ggml_rs_rope(c, q, pos, NULL, &rp, E));
    rp.n_dims = 8;
    FAILS("rope", SHP, ggml_rs_rope(c, q, pos3, NULL, &rp, E));      /* 3 positions for 5 */
    FAILS("rope", DTY | SHP, ggml_rs_rope(c, q, f9, NULL, &rp, E)); /* f32 positions */
    FAILS("rope", INV, ggml_rs_rope(c, q, pos, NULL, NULL, E));
    FAILS("rope", INV, ggml_rs_rope(c, q, NULL, NULL, &rp, E));
    rp.mode = 3;
    FAILS("rope", INV, ggml_rs_rope(c, q, pos, NULL, &rp, E));
    rp.mode = 8; /* M-RoPE wants 4 positions per token */
    FAILS("rope", SHP | INV, ggml_rs_rope(c, q, pos, NULL, &rp, E));
    rp.mode = 2;
    FAILS("rope", SHP | DTY, ggml_rs_rope(c, q, pos, ii, &rp, E));  /* freq factors: i32, 4 */
    FAILS("rope", DTY | SHP, ggml_rs_rope(c, ii, pos, NULL, &rp, E));

    /* sdpa: q [8, 3 heads, 5], kv [8, 2 heads, 5]: 3 % 2 != 0 */
    FAILS("sdpa", SHP, ggml_rs_sdpa(c, q, kv, kv, NULL, NULL, NULL, 0.35f, false, false, E));
    FAILS("sdpa", SHP, ggml_rs_sdpa(c, q, kv, kv, NULL, NULL, NULL, 0.35f, true, false, E));
    FAILS("sdpa", SHP, ggml_rs_sdpa(c, q, k4, v1, NULL, NULL, NULL, 0.35f, false, false, E)); /* dk 8 vs 4 */
    FAILS("sdpa", SHP, ggml_rs_sdpa(c, q, v1, v1, msmall, NULL, NULL, 0.35f, false, false, E)); /* mask [3,5] */
    FAILS("sdpa", SHP | DTY, ggml_rs_sdpa(c, q, v1, v1, msmall, NULL, NULL, 0.35f, true, false, E));
    FAILS("sdpa", SHP, ggml_rs_sdpa(c, q, v1, v1, NULL, NULL, NULL, 0.35f, false, true, E)); /* not permuted */
    FAILS("sdpa", DTY | SHP, ggml_rs_sdpa(c, q, v1, v1, NULL, ii, NULL, 0.35f, false, false, E));
    FAILS("sdpa", INV, ggml_rs_sdpa(c, NULL, v1, v1, NULL, NULL, NULL, 0.35f, false, false, E));
    FAILS("sdpa", INV, ggml_rs_sdpa(c, q, v1, NULL, NULL, NULL, NULL, 0.35f, true, false, E));

    printf("%d bad calls returned errors\n", g_cases);

    /* Still usable: a valid graph computes. */
    {
        ggml_rs_tensor *t = ggml_rs_mul_mat(c, a, a2, &e);
        float out[16];
        REQUIRE(t != NULL, "mul_mat: %s", e.message);
        t = ggml_rs_softmax(c, t, &e);
        REQUIRE(t != NULL, "softmax: %s", e.message);
        CHECK(ggml_rs_ctx_compute(c, &t, 1, &e) == GGML_RS_OK, "compute after bad calls: %s", e.message);
        CHECK(ggml_rs_tensor_get_f32(t, out, 16, &e) == GGML_RS_OK, "get: %s", e.message);
        CHECK(fabsf(out[0] + out[1] + out[2] + out[3] - 1.0f) < 1e-5f, "softmax row sums to 1");
    }
    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
    ggml_rs_backend_free(b);
    return finish("op_errors");
}
