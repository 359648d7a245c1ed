/*
 * Two ggmls in one process. This program links the static library together
 * with a second, different ggml (scripts/twin-ggml.sh: the pinned ggml's
 * base library with the marker version "0.0.0-twin"), built twice, once
 * with each archive first on the link line. Each side must get its own
 * ggml: the program's direct ggml_* calls the twin (its version, and a
 * graph built with it), ggml-rs its private copy (its version, and a
 * computed product whose values are checked). Had the static library
 * exported its ggml, one copy would serve both, in one order or the other.
 *
 * It is the one C test that sees ggml.h (the twin's API).
 */
#include "ggml.h"

#include "check.h"

static const char *const TWIN = "0.0.0-twin";

/* The twin: a small graph built in its own context. */
static void use_twin(void)
{
    struct ggml_init_params p = {1 << 20, NULL, false};
    struct ggml_context *ctx = ggml_init(p);
    struct ggml_tensor *a, *b, *s;
    struct ggml_cgraph *g;
    REQUIRE(ctx != NULL, "twin ggml_init");
    a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
    b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 3);
    s = ggml_add(ctx, ggml_mul_mat(ctx, a, b), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 3));
    g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, s);
    CHECK(ggml_graph_n_nodes(g) == 2, "twin graph has %d nodes, want 2", ggml_graph_n_nodes(g));
    CHECK(ggml_nelements(s) == 9, "twin product has %lld elements", (long long)ggml_nelements(s));
    ggml_free(ctx);
}

/* ggml-rs: a matrix product computed on its CPU backend, checked. */
static void use_ours(void)
{
    enum { K = 8, M = 5, N = 3 };
    float w[M * K], x[N * K], got[N * M];
    const int64_t ne_w[2] = {K, M}, ne_x[2] = {K, N};
    rng_t r = rng_new(7);
    ggml_rs_backend *be = backend_or_die(2);
    ggml_rs_error e = err_fresh();
    ggml_rs_context *c = ggml_rs_ctx_new(be, 64, &e);
    ggml_rs_context *in;
    ggml_rs_tensor *tw, *tx, *y;
    rng_fill(&r, w, M * K, 1.0f);
    rng_fill(&r, x, N * K, 1.0f);
    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    in = ggml_rs_ctx_input(c);
    tw = upload_f32(in, w, ne_w, 2);
    tx = upload_f32(in, x, ne_x, 2);
    y = ggml_rs_mul_mat(c, tw, tx, &e);
    REQUIRE(y != NULL, "mul_mat: %s", e.message);
    REQUIRE(ggml_rs_ctx_compute(c, &y, 1, &e) == GGML_RS_OK, "compute: %s", e.message);
    REQUIRE(ggml_rs_tensor_get_f32(y, got, N * M, &e) == GGML_RS_OK, "get: %s", e.message);
    for (int n = 0; n < N; n++) {
        for (int m = 0; m < M; m++) {
            double want = 0;
            for (int k = 0; k < K; k++) {
                want += (double)w[m * K + k] * x[n * K + k];
            }
            CHECK(fabs(got[n * M + m] - want) < 1e-4, "y[%d][%d] = %g, want %g", n, m, got[n * M + m], want);
        }
    }
    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
    ggml_rs_backend_free(be);
}

int main(void)
{
    const char *theirs = ggml_version(), *ours = ggml_rs_ggml_version();
    printf("ggml_version() = %s (commit %s); ggml_rs_ggml_version() = %s (commit %s)\n", theirs, ggml_commit(), ours,
           ggml_rs_ggml_commit());
    CHECK(strcmp(theirs, TWIN) == 0, "the program's ggml_version() is %s, not the twin's %s", theirs, TWIN);
    CHECK(strcmp(ours, TWIN) != 0, "ggml-rs runs the twin ggml (%s), not its own", ours);
    CHECK(strcmp(ggml_rs_ggml_commit(), "twin") != 0, "ggml-rs reports the twin's commit");
    use_twin();
    use_ours();
    /* And again in the other order, each still its own. */
    use_twin();
    CHECK(strcmp(ggml_version(), TWIN) == 0 && strcmp(ggml_rs_ggml_version(), TWIN) != 0, "versions changed");
    return finish("two_ggmls");
}
