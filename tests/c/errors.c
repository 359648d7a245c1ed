/*
 * Bad calls through the C ABI return errors (status + message), never abort:
 *
 *  - NULL handles and tensors, with and without an error record;
 *  - add with shapes that do not broadcast (GGML_RS_ERR_SHAPE, the message
 *    names the op and both shapes) and with mixed types (GGML_RS_ERR_DTYPE);
 *  - data tensors: no placement on a root context, bad shapes and types,
 *    wrong byte counts for set/get, reading a tensor that has no memory;
 *  - recorded op errors: compute after an ignored failed op fails with it
 *    (once); ggml_rs_ctx_clear_error makes compute succeed; errors are kept
 *    per handle;
 *  - context sizes above the backend's maximum; a context of 16 tensors
 *    filled until it reports GGML_RS_ERR_OUT_OF_MEMORY;
 *  - backend parameters out of range (flash_attention, nodes, threads);
 *  - data tensors placed on a scheduler device index out of range;
 *  - freeing NULL handles is a no-op; freeing the backend (or the root
 *    context) before the other handles is safe and compute still works.
 */
#include "check.h"

static ggml_rs_backend *g_backend;

/* A failed call: status as expected, written into err, message terminated
 * and containing every string of the NULL-terminated list `needles`. */
static void expect_error(const char *what, ggml_rs_status got, const ggml_rs_error *e,
                         ggml_rs_status want, const char *const *needles)
{
    CHECK(got == want, "%s: returned status %d, want %d (message '%s')", what, (int)got, (int)want,
          e->message);
    CHECK(e->status == want, "%s: err.status %d, want %d", what, (int)e->status, (int)want);
    CHECK(err_terminated(e), "%s: message not NUL-terminated", what);
    for (; needles != NULL && *needles != NULL; needles++) {
        CHECK(contains(e->message, *needles), "%s: message '%s' lacks '%s'", what, e->message, *needles);
    }
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* For calls that return a tensor: NULL means failure. */
static void expect_null(const char *what, const ggml_rs_tensor *t, const ggml_rs_error *e,
                        ggml_rs_status want, const char *const *needles)
{
    CHECK(t == NULL, "%s: returned a tensor, want an error", what);
    expect_error(what, t == NULL ? e->status : GGML_RS_OK, e, want, needles);
}

static void test_null_arguments(void)
{
    ggml_rs_error e = err_fresh();
    ggml_rs_context *c = ggml_rs_ctx_new(g_backend, 64, &e);
    ggml_rs_context *in;
    ggml_rs_tensor *x, *t;
    ggml_rs_tensor_meta meta;
    ggml_rs_backend *b = (ggml_rs_backend *)&e; /* a sentinel that must stay */
    const int64_t ne[1] = {4};
    const float v[4] = {1, 2, 3, 4};
    float out[4];
    ggml_rs_tensor *outs[2] = {NULL, NULL};

    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    in = ggml_rs_ctx_input(c);
    REQUIRE(in != NULL, "ctx_input");
    x = upload_f32(in, v, ne, 1);

    e = err_fresh();
    t = ggml_rs_add(NULL, x, x, &e);
    expect_null("add(NULL ctx)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("add", "context is NULL"));
    e = err_fresh();
    t = ggml_rs_add(c, NULL, x, &e);
    expect_null("add(a NULL)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("add", "a is NULL"));
    ggml_rs_ctx_clear_error(c);
    e = err_fresh();
    t = ggml_rs_mul(c, x, NULL, &e);
    expect_null("mul(b NULL)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("mul", "b is NULL"));
    ggml_rs_ctx_clear_error(c);
    e = err_fresh();
    t = ggml_rs_scale(c, NULL, 2.0f, &e);
    expect_null("scale(NULL)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("scale"));
    ggml_rs_ctx_clear_error(c);
    /* err may be NULL everywhere. */
    CHECK(ggml_rs_add(NULL, NULL, NULL, NULL) == NULL, "add(NULL...) with NULL err");
    CHECK(ggml_rs_ctx_compute(NULL, NULL, 0, NULL) == GGML_RS_ERR_INVALID_ARGUMENT, "compute(NULL)");

    e = err_fresh();
    expect_error("ctx_new(NULL backend)", ggml_rs_ctx_new(NULL, 0, &e) == NULL ? e.status : GGML_RS_OK,
                 &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("backend is NULL"));
    CHECK(ggml_rs_ctx_input(NULL) == NULL, "ctx_input(NULL)");
    CHECK(ggml_rs_ctx_layer(NULL, 0) == NULL, "ctx_layer(NULL)");
    CHECK(ggml_rs_ctx_max_graph_nodes(NULL) == 0, "ctx_max_graph_nodes(NULL)");
    ggml_rs_ctx_set_batch_size(NULL, 4);
    ggml_rs_ctx_set_norm_layer(NULL, 2);
    ggml_rs_ctx_clear_error(NULL);
    e = err_fresh();
    CHECK(ggml_rs_ctx_recorded_error(NULL, &e) == GGML_RS_OK && e.status == -1, "recorded_error(NULL)");

    e = err_fresh();
    expect_error("compute(NULL ctx)", ggml_rs_ctx_compute(NULL, &x, 1, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("compute", "NULL"));
    e = err_fresh();
    expect_error("compute(outputs NULL, n 1)", ggml_rs_ctx_compute(c, NULL, 1, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("compute", "NULL"));
    e = err_fresh();
    outs[0] = x;
    expect_error("compute(outputs[1] NULL)", ggml_rs_ctx_compute(c, outs, 2, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("compute", "tensor 1 is NULL"));
    e = err_fresh();
    expect_error("forward(NULL ctx)", ggml_rs_ctx_forward(NULL, &x, 1, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("forward"));
    e = err_fresh();
    expect_error("reserve(sizes NULL, n 1)", ggml_rs_ctx_reserve(c, NULL, 1, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("reserve"));

    e = err_fresh();
    expect_error("tensor_get_meta(NULL)", ggml_rs_tensor_get_meta(NULL, &meta, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("NULL"));
    e = err_fresh();
    expect_error("tensor_get_meta(out NULL)", ggml_rs_tensor_get_meta(x, NULL, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("NULL"));
    e = err_fresh();
    expect_error("tensor_get(NULL)", ggml_rs_tensor_get(NULL, (uint8_t *)out, sizeof out, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("tensor_get"));
    e = err_fresh();
    expect_error("tensor_get(dst NULL)", ggml_rs_tensor_get(x, NULL, sizeof out, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("tensor_get"));
    e = err_fresh();
    expect_error("tensor_get_f32(dst NULL)", ggml_rs_tensor_get_f32(x, NULL, 4, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("tensor_get_f32"));
    e = err_fresh();
    expect_error("tensor_set(NULL)", ggml_rs_tensor_set(NULL, (const uint8_t *)v, sizeof v, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("tensor_set"));
    e = err_fresh();
    expect_error("tensor_set(src NULL)", ggml_rs_tensor_set(x, NULL, sizeof v, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("tensor_set"));
    e = err_fresh();
    t = ggml_rs_ctx_from_data(in, 0, ne, 1, NULL, 16, &e);
    expect_null("from_data(data NULL)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("from_data"));
    ggml_rs_ctx_clear_error(in);
    e = err_fresh();
    t = ggml_rs_ctx_empty(in, 0, NULL, 2, &e);
    expect_null("empty(ne NULL)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("empty"));
    ggml_rs_ctx_clear_error(in);

    e = err_fresh();
    expect_error("backend_new(out NULL)", ggml_rs_backend_new(NULL, NULL, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("out is NULL"));
    (void)b;

    /* After all that, both handles still work. */
    e = err_fresh();
    t = ggml_rs_add(c, x, x, &e);
    REQUIRE(t != NULL, "add: %s", e.message);
    CHECK(ggml_rs_ctx_compute(c, &t, 1, &e) == GGML_RS_OK, "compute after errors: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(t, out, 4, &e) == GGML_RS_OK && out[0] == 2 && out[3] == 8, "x+x");

    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
}

static void test_shapes_and_types(void)
{
    ggml_rs_error e = err_fresh();
    ggml_rs_context *c = ggml_rs_ctx_new(g_backend, 64, &e);
    ggml_rs_context *in;
    ggml_rs_tensor *a, *b, *ib, *t;
    const int64_t ne_a[2] = {3, 2}, ne_b[1] = {2}, ne_i[2] = {3, 2};
    const float va[6] = {0};
    const float vb[2] = {0};
    const int32_t vi[6] = {0};
    uint8_t buf[64];
    float f[8];

    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    in = ggml_rs_ctx_input(c);
    a = upload_f32(in, va, ne_a, 2);
    b = upload_f32(in, vb, ne_b, 1);
    ib = ggml_rs_ctx_from_data(in, 26, ne_i, 2, (const uint8_t *)vi, sizeof vi, &e);
    REQUIRE(ib != NULL, "from_data i32: %s", e.message);

    e = err_fresh();
    t = ggml_rs_add(c, a, b, &e);
    expect_null("add(f32[3,2], f32[2])", t, &e, GGML_RS_ERR_SHAPE, NEEDLES("add", "f32[2]", "f32[3,2]"));
    ggml_rs_ctx_clear_error(c);
    e = err_fresh();
    t = ggml_rs_add(c, a, ib, &e);
    expect_null("add(f32, i32)", t, &e, GGML_RS_ERR_DTYPE, NEEDLES("add", "i32"));
    ggml_rs_ctx_clear_error(c);
    e = err_fresh();
    t = ggml_rs_scale(c, ib, 2.0f, &e);
    expect_null("scale(i32)", t, &e, GGML_RS_ERR_DTYPE, NEEDLES("scale", "i32"));
    ggml_rs_ctx_clear_error(c);
    e = err_fresh();
    t = ggml_rs_clamp(c, a, 1.0f, -1.0f, &e);
    expect_null("clamp(lo > hi)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("clamp"));
    ggml_rs_ctx_clear_error(c);
    e = err_fresh();
    t = ggml_rs_clamp(c, a, NAN, 1.0f, &e);
    expect_null("clamp(NaN)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("clamp"));
    ggml_rs_ctx_clear_error(c);

    /* Data tensors. */
    e = err_fresh();
    t = ggml_rs_ctx_empty(c, 0, ne_a, 2, &e);
    expect_null("empty() on a root context", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("empty", "Input"));
    ggml_rs_ctx_clear_error(c);
    {
        const int64_t five[5] = {1, 1, 1, 1, 1}, neg[2] = {3, -1}, zero_mid[2] = {3, 0};
        const int64_t q7[1] = {7}, big[4] = {1 << 16, 1 << 16, 1 << 16, 1 << 16};
        e = err_fresh();
        expect_null("empty(5 dims)", ggml_rs_ctx_empty(in, 0, five, 5, &e), &e, GGML_RS_ERR_SHAPE,
                    NEEDLES("empty"));
        e = err_fresh();
        expect_null("empty([3,-1])", ggml_rs_ctx_empty(in, 0, neg, 2, &e), &e, GGML_RS_ERR_SHAPE,
                    NEEDLES("empty"));
        /* A 0 past dim 0 is a zero-element tensor of that shape (no rows),
           as ggml builds them; Ollama's models meet it. */
        e = err_fresh();
        t = ggml_rs_ctx_empty(in, 0, zero_mid, 2, &e);
        CHECK(t != NULL, "empty([3,0]): %s", e.message);
        if (t) {
            ggml_rs_tensor_meta m;
            CHECK(ggml_rs_tensor_get_meta(t, &m, &e) == GGML_RS_OK && m.ne[0] == 3 && m.ne[1] == 0 && m.nbytes == 0,
                  "empty([3,0]): meta ne %lld,%lld nbytes %llu", (long long)m.ne[0], (long long)m.ne[1],
                  (unsigned long long)m.nbytes);
        }
        e = err_fresh();
        expect_null("empty(2^64 elements)", ggml_rs_ctx_empty(in, 0, big, 4, &e), &e, GGML_RS_ERR_SHAPE,
                    NEEDLES("too large"));
        e = err_fresh();
        expect_null("empty(type 9999)", ggml_rs_ctx_empty(in, 9999, ne_a, 2, &e), &e, GGML_RS_ERR_DTYPE,
                    NEEDLES("empty", "9999"));
        e = err_fresh();
        expect_null("empty(type -1)", ggml_rs_ctx_empty(in, -1, ne_a, 2, &e), &e, GGML_RS_ERR_DTYPE,
                    NEEDLES("empty"));
        e = err_fresh();
        expect_null("empty(q4_0[7])", ggml_rs_ctx_empty(in, 2, q7, 1, &e), &e, GGML_RS_ERR_SHAPE,
                    NEEDLES("block size"));
        e = err_fresh();
        t = ggml_rs_ctx_from_data(in, 0, ne_a, 2, (const uint8_t *)va, 20, &e);
        expect_null("from_data(20 bytes for f32[3,2])", t, &e, GGML_RS_ERR_SHAPE, NEEDLES("from_", "20 bytes"));
        e = err_fresh();
        t = ggml_rs_ctx_arange(c, 0, 4, 0, 0, &e);
        expect_null("arange(step 0)", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("arange"));
        e = err_fresh();
        t = ggml_rs_ctx_arange(c, 0, 4, 1, 1, &e);
        expect_null("arange(f16)", t, &e, GGML_RS_ERR_DTYPE, NEEDLES("arange"));
        ggml_rs_ctx_clear_error(c);
        ggml_rs_ctx_clear_error(in);
    }

    /* tensor_get / tensor_set with wrong lengths. */
    e = err_fresh();
    expect_error("tensor_get(23 bytes of 24)", ggml_rs_tensor_get(a, buf, 23, &e), &e, GGML_RS_ERR_SHAPE,
                 NEEDLES("tensor_get", "23"));
    e = err_fresh();
    expect_error("tensor_get(64 bytes of 24)", ggml_rs_tensor_get(a, buf, sizeof buf, &e), &e,
                 GGML_RS_ERR_SHAPE, NEEDLES("tensor_get"));
    e = err_fresh();
    expect_error("tensor_get_f32(8 of 6)", ggml_rs_tensor_get_f32(a, f, 8, &e), &e, GGML_RS_ERR_SHAPE,
                 NEEDLES("tensor_get_f32"));
    e = err_fresh();
    expect_error("tensor_set(8 bytes of 24)", ggml_rs_tensor_set(a, buf, 8, &e), &e, GGML_RS_ERR_SHAPE,
                 NEEDLES("tensor_set"));
    /* A node that was never computed has no memory. */
    e = err_fresh();
    t = ggml_rs_add(c, a, a, &e);
    REQUIRE(t != NULL, "add: %s", e.message);
    e = err_fresh();
    expect_error("tensor_get_f32(uncomputed)", ggml_rs_tensor_get_f32(t, f, 6, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("no memory"));
    e = err_fresh();
    expect_error("tensor_set(uncomputed)", ggml_rs_tensor_set(t, (const uint8_t *)va, sizeof va, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("no memory"));
    /* The right lengths work. */
    e = err_fresh();
    CHECK(ggml_rs_tensor_get(a, buf, 24, &e) == GGML_RS_OK, "tensor_get(24): %s", e.message);
    CHECK(ggml_rs_tensor_set(a, buf, 24, &e) == GGML_RS_OK, "tensor_set(24): %s", e.message);
    CHECK(ggml_rs_tensor_set(a, NULL, 0, &e) == GGML_RS_OK, "tensor_set(0 bytes): %s", e.message);

    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
}

static void test_recorded_errors(void)
{
    ggml_rs_error e = err_fresh();
    ggml_rs_context *c = ggml_rs_ctx_new(g_backend, 64, &e);
    ggml_rs_context *in;
    ggml_rs_tensor *a, *b, *good, *bad;
    const int64_t ne_a[2] = {3, 2}, ne_b[1] = {2};
    const float va[6] = {1, 2, 3, 4, 5, 6}, vb[2] = {0};
    float out[6];

    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    in = ggml_rs_ctx_input(c);
    a = upload_f32(in, va, ne_a, 2);
    b = upload_f32(in, vb, ne_b, 1);

    /* An ignored failure (err NULL) is recorded and fails the next compute. */
    bad = ggml_rs_add(c, a, b, NULL);
    CHECK(bad == NULL, "add with bad shapes succeeded");
    e = err_fresh();
    CHECK(ggml_rs_ctx_recorded_error(c, &e) == GGML_RS_ERR_SHAPE && e.status == GGML_RS_ERR_SHAPE,
          "recorded_error: %d", (int)e.status);
    CHECK(contains(e.message, "add"), "recorded message '%s'", e.message);
    /* Only the first failure is kept; the sibling has none. */
    CHECK(ggml_rs_scale(c, NULL, 1.0f, NULL) == NULL, "scale(NULL)");
    e = err_fresh();
    CHECK(ggml_rs_ctx_recorded_error(c, &e) == GGML_RS_ERR_SHAPE, "first error kept: %s", e.message);
    CHECK(ggml_rs_ctx_recorded_error(in, &e) == GGML_RS_OK, "the sibling has no recorded error");

    good = ggml_rs_add(c, a, a, &e);
    REQUIRE(good != NULL, "add: %s", e.message);
    e = err_fresh();
    expect_error("compute after an ignored failed op", ggml_rs_ctx_compute(c, &good, 1, &e), &e,
                 GGML_RS_ERR_SHAPE, NEEDLES("compute", "earlier op", "add", "f32[2]", "f32[3,2]"));
    /* The error was reported once; the next compute succeeds. */
    e = err_fresh();
    CHECK(ggml_rs_ctx_recorded_error(c, &e) == GGML_RS_OK, "error still recorded after compute");
    CHECK(ggml_rs_ctx_compute(c, &good, 1, &e) == GGML_RS_OK, "second compute: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(good, out, 6, &e) == GGML_RS_OK && out[0] == 2 && out[5] == 12, "a+a");

    /* Handled failure: clear it, then compute succeeds. */
    e = err_fresh();
    bad = ggml_rs_sub(c, a, b, &e);
    CHECK(bad == NULL && e.status == GGML_RS_ERR_SHAPE, "sub with bad shapes: %d", (int)e.status);
    CHECK(ggml_rs_ctx_recorded_error(c, NULL) == GGML_RS_ERR_SHAPE, "recorded_error with NULL err");
    ggml_rs_ctx_clear_error(c);
    CHECK(ggml_rs_ctx_recorded_error(c, NULL) == GGML_RS_OK, "cleared");
    good = ggml_rs_scale(c, a, 3.0f, &e);
    REQUIRE(good != NULL, "scale: %s", e.message);
    e = err_fresh();
    CHECK(ggml_rs_ctx_compute(c, &good, 1, &e) == GGML_RS_OK, "compute after clear: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(good, out, 6, &e) == GGML_RS_OK && out[0] == 3 && out[5] == 18, "3a");

    /* A failed data-tensor call on the sibling is recorded there. */
    e = err_fresh();
    CHECK(ggml_rs_ctx_empty(in, 9999, ne_a, 2, NULL) == NULL, "empty(type 9999)");
    CHECK(ggml_rs_ctx_recorded_error(in, &e) == GGML_RS_ERR_DTYPE, "sibling recorded %d", (int)e.status);
    CHECK(ggml_rs_ctx_recorded_error(c, NULL) == GGML_RS_OK, "root unaffected");
    e = err_fresh();
    CHECK(ggml_rs_ctx_compute(in, NULL, 0, &e) == GGML_RS_ERR_DTYPE, "compute(in) after failed empty: %d",
          (int)e.status);
    e = err_fresh();
    CHECK(ggml_rs_ctx_compute(in, NULL, 0, &e) == GGML_RS_OK, "empty compute: %s", e.message);

    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
}

static void test_context_sizes(void)
{
    ggml_rs_error e = err_fresh();
    size_t max = ggml_rs_backend_max_graph_nodes(g_backend);
    ggml_rs_context *c;
    ggml_rs_context *in;
    ggml_rs_tensor *x, *t;
    const int64_t ne[1] = {4};
    const float v[4] = {1, 1, 1, 1};
    float out[4];
    int made = 0;

    c = ggml_rs_ctx_new(g_backend, max + 1, &e);
    CHECK(c == NULL, "ctx_new(max + 1) succeeded");
    expect_error("ctx_new(max + 1)", e.status, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("exceeds"));
    e = err_fresh();
    c = ggml_rs_ctx_new(g_backend, (size_t)-1, &e);
    CHECK(c == NULL && e.status == GGML_RS_ERR_INVALID_ARGUMENT, "ctx_new(SIZE_MAX): %d", (int)e.status);
    c = ggml_rs_ctx_new(g_backend, max, &e);
    CHECK(c != NULL && ggml_rs_ctx_max_graph_nodes(c) == max, "ctx_new(max): %s", e.message);
    ggml_rs_ctx_free(c);
    c = ggml_rs_ctx_new(g_backend, 0, &e);
    CHECK(c != NULL && ggml_rs_ctx_max_graph_nodes(c) == max, "ctx_new(0): %s", e.message);
    ggml_rs_ctx_free(c);

    /* A context of 16 tensors: make ops until it is full. */
    e = err_fresh();
    c = ggml_rs_ctx_new(g_backend, 16, &e);
    REQUIRE(c != NULL, "ctx_new(16): %s", e.message);
    CHECK(ggml_rs_ctx_max_graph_nodes(c) == 16, "max nodes %zu", ggml_rs_ctx_max_graph_nodes(c));
    in = ggml_rs_ctx_input(c);
    x = upload_f32(in, v, ne, 1);
    t = x;
    for (int i = 0; i < 100; i++) {
        ggml_rs_tensor *n;
        e = err_fresh();
        n = ggml_rs_add(c, t, x, &e);
        if (n == NULL) {
            break;
        }
        t = n;
        made++;
    }
    CHECK(made >= 1 && made < 16, "%d ops fit in a context of 16 tensors", made);
    expect_error("add in a full context", e.status, &e, GGML_RS_ERR_OUT_OF_MEMORY,
                 NEEDLES("add", "context is full"));
    e = err_fresh();
    CHECK(ggml_rs_ctx_empty(in, 0, ne, 1, &e) == NULL && e.status == GGML_RS_ERR_OUT_OF_MEMORY,
          "empty in a full context: %d '%s'", (int)e.status, e.message);
    /* The ops made before it was full still compute (after clearing). */
    ggml_rs_ctx_clear_error(c);
    e = err_fresh();
    CHECK(ggml_rs_ctx_compute(c, &t, 1, &e) == GGML_RS_OK, "compute the full context: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(t, out, 4, &e) == GGML_RS_OK && out[0] == (float)(made + 1),
          "chain of %d adds gives %g", made, (double)out[0]);
    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
}

static void test_backend_params(void)
{
    ggml_rs_backend_params p = ggml_rs_backend_params_default();
    ggml_rs_backend *sentinel = (ggml_rs_backend *)&p;
    ggml_rs_backend *b = sentinel;
    ggml_rs_error e = err_fresh();

    CHECK(p.n_threads == 0 && p.max_graph_nodes == 0 && p.flash_attention == -1 && p.alloc_memory,
          "defaults %u %u %d %d", p.n_threads, p.max_graph_nodes, (int)p.flash_attention, (int)p.alloc_memory);

    p.flash_attention = 2;
    expect_error("backend_new(flash_attention 2)", ggml_rs_backend_new(&p, &b, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("flash_attention", "2"));
    CHECK(b == sentinel, "*out written on failure");
    p.flash_attention = -2;
    e = err_fresh();
    CHECK(ggml_rs_backend_new(&p, &b, &e) == GGML_RS_ERR_INVALID_ARGUMENT && b == sentinel,
          "flash_attention -2: %d", (int)e.status);
    p = ggml_rs_backend_params_default();
    p.max_graph_nodes = 8;
    e = err_fresh();
    expect_error("backend_new(max_graph_nodes 8)", ggml_rs_backend_new(&p, &b, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("max_graph_nodes"));
    CHECK(b == sentinel, "*out written on failure");
    p = ggml_rs_backend_params_default();
    p.n_threads = 1000000;
    e = err_fresh();
    expect_error("backend_new(1e6 threads)", ggml_rs_backend_new(&p, &b, &e), &e,
                 GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("thread"));
    CHECK(b == sentinel, "*out written on failure");

    /* Each valid flash_attention value works; NULL params are the defaults. */
    for (int fa = -1; fa <= 1; fa++) {
        p = ggml_rs_backend_params_default();
        p.flash_attention = fa;
        p.n_threads = 1;
        p.max_graph_nodes = 64;
        b = NULL;
        e = err_fresh();
        CHECK(ggml_rs_backend_new(&p, &b, &e) == GGML_RS_OK && b != NULL, "flash_attention %d: %s", fa,
              e.message);
        CHECK(ggml_rs_backend_max_graph_nodes(b) == 64, "max nodes %zu", ggml_rs_backend_max_graph_nodes(b));
        ggml_rs_backend_free(b);
    }
    b = NULL;
    CHECK(ggml_rs_backend_new(NULL, &b, &e) == GGML_RS_OK && b != NULL, "backend_new(NULL params): %s",
          e.message);
    ggml_rs_backend_free(b);

    /* A backend that only sizes memory refuses to compute, but reserves. */
    p = ggml_rs_backend_params_default();
    p.alloc_memory = false;
    p.n_threads = 1;
    b = NULL;
    CHECK(ggml_rs_backend_new(&p, &b, &e) == GGML_RS_OK && b != NULL, "alloc_memory false: %s", e.message);
    if (b != NULL) {
        ggml_rs_context *c = ggml_rs_ctx_new(b, 32, &e);
        ggml_rs_context *in = ggml_rs_ctx_input(c);
        const int64_t ne[1] = {4};
        const float v[4] = {1, 2, 3, 4};
        ggml_rs_tensor *x = upload_f32(in, v, ne, 1);
        ggml_rs_tensor *t = ggml_rs_add(c, x, x, &e);
        uint64_t sizes[4] = {0, 0, 0, 0};
        size_t nd = ggml_rs_backend_device_count(b);
        REQUIRE(t != NULL, "add: %s", e.message);
        CHECK(ggml_rs_ctx_forward(c, &t, 1, &e) == GGML_RS_OK, "forward: %s", e.message);
        CHECK(ggml_rs_ctx_reserve(c, sizes, nd < 4 ? nd : 4, &e) == GGML_RS_OK, "reserve: %s", e.message);
        e = err_fresh();
        expect_error("compute without memory", ggml_rs_ctx_compute(c, &t, 1, &e), &e,
                     GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("compute", "without memory"));
        ggml_rs_ctx_free(in);
        ggml_rs_ctx_free(c);
        ggml_rs_backend_free(b);
    }
}

static void test_device_placement(void)
{
    ggml_rs_error e = err_fresh();
    ggml_rs_context *c = ggml_rs_ctx_new(g_backend, 64, &e);
    size_t nd = ggml_rs_backend_device_count(g_backend);
    ggml_rs_context *cpu, *bad;
    ggml_rs_tensor *t, *y;
    const int64_t ne[1] = {4};
    const float v[4] = {1, 2, 3, 4};
    float out[4];

    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    CHECK(ggml_rs_ctx_device(NULL, 0) == NULL, "ctx_device(NULL)");
    cpu = ggml_rs_ctx_device(c, nd - 1); /* the CPU is last */
    bad = ggml_rs_ctx_device(c, nd + 5);
    REQUIRE(cpu != NULL && bad != NULL, "ctx_device handles");

    e = err_fresh();
    t = ggml_rs_ctx_from_data(bad, 0, ne, 1, (const uint8_t *)v, sizeof v, &e);
    expect_null("from_data on device nd + 5", t, &e, GGML_RS_ERR_INVALID_ARGUMENT, NEEDLES("device", "out of range"));
    CHECK(ggml_rs_ctx_recorded_error(bad, NULL) != GGML_RS_OK, "failure recorded on the handle");

    e = err_fresh();
    t = ggml_rs_ctx_from_data(cpu, 0, ne, 1, (const uint8_t *)v, sizeof v, &e);
    REQUIRE(t != NULL, "from_data on the CPU device: %s", e.message);
    y = ggml_rs_scale(c, t, -1.0f, &e);
    REQUIRE(y != NULL, "scale: %s", e.message);
    CHECK(ggml_rs_ctx_compute(c, &y, 1, &e) == GGML_RS_OK, "compute: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(y, out, 4, &e) == GGML_RS_OK && out[0] == -1 && out[3] == -4, "-x");

    ggml_rs_ctx_free(bad);
    ggml_rs_ctx_free(cpu);
    ggml_rs_ctx_free(c);
}

static void test_free_order(void)
{
    ggml_rs_error e = err_fresh();
    ggml_rs_backend *b = backend_or_die(2);
    ggml_rs_context *c = ggml_rs_ctx_new(b, 64, &e);
    ggml_rs_context *in, *layer;
    ggml_rs_tensor *x, *y, *t;
    const int64_t ne[1] = {4};
    const float v[4] = {1, 2, 3, 4};
    float out[4];

    ggml_rs_ctx_free(NULL);
    ggml_rs_backend_free(NULL);

    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    in = ggml_rs_ctx_input(c);
    layer = ggml_rs_ctx_layer(c, 3);
    REQUIRE(in != NULL && layer != NULL, "siblings");
    ggml_rs_backend_free(b); /* the contexts keep it alive */

    x = upload_f32(in, v, ne, 1);
    e = err_fresh();
    y = ggml_rs_ctx_zeros(layer, 0, ne, 1, &e);
    REQUIRE(y != NULL, "zeros on a layer context: %s", e.message);
    t = ggml_rs_add(c, x, y, &e);
    REQUIRE(t != NULL, "add: %s", e.message);
    t = ggml_rs_scale(c, t, 2.0f, &e);
    REQUIRE(t != NULL, "scale: %s", e.message);
    CHECK(ggml_rs_ctx_compute(c, &t, 1, &e) == GGML_RS_OK, "compute after backend_free: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(t, out, 4, &e) == GGML_RS_OK && out[0] == 2 && out[3] == 8,
          "2(x+0) = %g %g %g %g", (double)out[0], (double)out[1], (double)out[2], (double)out[3]);

    /* Free the root first: the siblings keep the family (and x) alive. */
    ggml_rs_ctx_free(c);
    ggml_rs_ctx_free(layer);
    e = err_fresh();
    t = ggml_rs_add(in, x, x, &e);
    REQUIRE(t != NULL, "add on the input sibling: %s", e.message);
    CHECK(ggml_rs_ctx_compute(in, &t, 1, &e) == GGML_RS_OK, "compute on the last handle: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(t, out, 4, &e) == GGML_RS_OK && out[1] == 4, "x+x");
    ggml_rs_ctx_free(in); /* the last handle: the backend goes too */
}

int main(void)
{
    g_backend = backend_or_die(2);
    test_null_arguments();
    test_shapes_and_types();
    test_recorded_errors();
    test_context_sizes();
    test_backend_params();
    test_device_placement();
    ggml_rs_backend_free(g_backend);
    test_free_order();
    return finish("errors");
}
