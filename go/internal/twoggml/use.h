/* What the two-ggmls test does with each side (see twoggml.go): included by
 * the preambles of oursfirst and twinfirst, which link the same two
 * archives in opposite orders. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ggml.h"
#include "ggml_rs.h"

/* The twin (the program's own ggml_* calls): nodes of a small graph. */
static int twin_graph_nodes(void)
{
    struct ggml_init_params p = {1 << 20, NULL, false};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *a, *b, *s;
    struct ggml_cgraph *g;
    int n;
    if (ctx == NULL) {
        return -1;
    }
    a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
    b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
    s = ggml_add(ctx, ggml_mul_mat(ctx, a, b), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 3));
    g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, s);
    n = ggml_graph_n_nodes(g);
    ggml_free(ctx);
    return n;
}

/* ggml-rs: a 5x8 by 8x3 product on its CPU backend; the largest error
 * against a naive product, or -1 when a call failed. */
static double ours_product_error(void)
{
    enum { K = 8, M = 5, N = 3 };
    float w[M * K], x[N * K], got[N * M];
    const int64_t ne_w[2] = {K, M}, ne_x[2] = {K, N};
    ggml_rs_backend_params bp = ggml_rs_backend_params_default();
    ggml_rs_backend *be = NULL;
    ggml_rs_context *c = NULL, *in = NULL;
    ggml_rs_tensor *tw, *tx, *y = NULL;
    ggml_rs_error e;
    double worst = -1;
    for (int i = 0; i < M * K; i++) w[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < N * K; i++) x[i] = (float)((i * 5) % 13) / 13.0f - 0.5f;
    bp.n_threads = 2;
    if (ggml_rs_backend_new(&bp, &be, &e) != GGML_RS_OK) return -1;
    c = ggml_rs_ctx_new(be, 64, &e);
    in = c ? ggml_rs_ctx_input(c) : NULL;
    tw = in ? ggml_rs_ctx_from_data(in, 0, ne_w, 2, (const uint8_t *)w, sizeof w, &e) : NULL;
    tx = in ? ggml_rs_ctx_from_data(in, 0, ne_x, 2, (const uint8_t *)x, sizeof x, &e) : NULL;
    y = tw && tx ? ggml_rs_mul_mat(c, tw, tx, &e) : NULL;
    if (y && ggml_rs_ctx_compute(c, &y, 1, &e) == GGML_RS_OK && ggml_rs_tensor_get_f32(y, got, N * M, &e) == GGML_RS_OK) {
        worst = 0;
        for (int n = 0; n < N; n++) {
            for (int m = 0; m < M; m++) {
                double want = 0;
                for (int k = 0; k < K; k++) want += (double)w[m * K + k] * x[n * K + k];
                worst = fmax(worst, fabs(got[n * M + m] - want));
            }
        }
    }
    if (in) ggml_rs_ctx_free(in);
    if (c) ggml_rs_ctx_free(c);
    ggml_rs_backend_free(be);
    return worst;
}
