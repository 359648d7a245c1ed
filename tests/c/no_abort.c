/*
 * No op aborts the process, whatever the input's type and layout.
 *
 * Every op of the C ABI is built and computed on inputs of each type (f32,
 * f16, bf16, i32, q8_0) and layout (contiguous, transposed view, view at a
 * row offset, view with padded rows). Each case runs in a child process
 * (fork), so an abort inside ggml (GGML_ASSERT / GGML_ABORT) is seen as the
 * child dying by a signal instead of ending this program. A case passes
 * when the op is refused with an error, or the compute fails with an error,
 * or it computes; it fails when the child dies or hangs.
 *
 * Row ids out of range: compute checks host ids and must fail with an
 * error. Ids that the graph computes (e.g. dup/cont of host ids) are not
 * checked and abort in ggml's kernels: cases marked KNOWN, reported to the
 * maintainers and not yet fixed. They are printed on every run but do not
 * fail it, and a line says so when one of them stops aborting. Natively only: hundreds of
 * forks are too slow under valgrind (the other programs cover memory).
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static ggml_rs_backend *g_backend;

static const int32_t TYPES[] = {0, 1, 30, 26, 8};
static const char *const TYPE_NAMES[] = {"f32", "f16", "bf16", "i32", "q8_0"};
enum { NTYPES = 5, NLAYOUTS = 4 };
static const char *const LAYOUT_NAMES[] = {"contiguous", "transposed view", "row-offset view",
                                           "padded-rows view"};

/* The input: zeros of `type`, [32, 4] (a q8_0 row is one block), seen
 * through `layout`. NULL when the type cannot be made (not a failure). */
static ggml_rs_tensor *make_input(ggml_rs_context *c, ggml_rs_context *in, int32_t type, int layout)
{
    ggml_rs_error e = err_fresh();
    const int64_t ne[2] = {32, 4};
    ggml_rs_tensor *t = ggml_rs_ctx_zeros(in, type, ne, 2, &e);
    ggml_rs_tensor_meta m;
    if (t == NULL || ggml_rs_tensor_get_meta(t, &m, &e) != GGML_RS_OK) {
        return NULL;
    }
    switch (layout) {
    case 1:
        return ggml_rs_permute(c, t, 1, 0, 2, 3, &e);
    case 2: {
        const int64_t vn[2] = {32, 2};
        const size_t nb[1] = {(size_t)m.nb[1]};
        return ggml_rs_view(c, t, (size_t)m.nb[1], vn, nb, 2, &e);
    }
    case 3: {
        const int64_t vn[2] = {16, 4};
        const size_t nb[1] = {(size_t)m.nb[1]};
        return ggml_rs_view(c, t, 0, vn, nb, 2, &e);
    }
    default:
        return t;
    }
}

/* Row ids for get_rows/set_rows: valid, or out of range; given to the op
 * as they are (host data, checked by compute) or through an op. */
static int32_t g_ids[2] = {0, 1};
static int g_ids_via; /* 0 as they are, 1 dup, 2 cont */
static const char *const IDS_VIA[] = {"host ids", "ids = dup(host ids)", "ids = cont(host ids)"};

enum { NOPS = 56 };

/* Builds op `k` on `a`; sets *name. NULL with `e` set when refused. */
static ggml_rs_tensor *build(int k, ggml_rs_context *c, ggml_rs_context *in, ggml_rs_tensor *a,
                             ggml_rs_error *e, const char **name)
{
    ggml_rs_tensor_meta m;
    ggml_rs_tensor *f, *ids, *pos, *t;
    ggml_rs_rope_params rp = ggml_rs_rope_params_default();
    const int64_t flat[1] = {-1}, n_ids[1] = {2};
    int64_t ne[3];
    int32_t zeros[64] = {0};

    if (ggml_rs_tensor_get_meta(a, &m, e) != GGML_RS_OK) {
        return NULL;
    }
    ne[0] = m.ne[0];
    ne[1] = m.ne[1];
    f = ggml_rs_ctx_zeros(in, 0, ne, 2, e);                       /* f32 of a's shape */
    ids = ggml_rs_ctx_from_data(in, 26, n_ids, 1, (const uint8_t *)g_ids, sizeof g_ids, e);
    pos = ggml_rs_ctx_from_data(in, 26, &ne[1], 1, (const uint8_t *)zeros, (size_t)ne[1] * 4, e);
    if (f == NULL || ids == NULL || pos == NULL || ne[1] > 64) {
        return NULL;
    }
    if (g_ids_via == 1) {
        ids = ggml_rs_dup(c, ids, e);
    } else if (g_ids_via == 2) {
        ids = ggml_rs_cont(c, ids, n_ids, 1, e);
    }
    if (ids == NULL) {
        return NULL;
    }
    rp.n_dims = 4;
    rp.mode = 2;
    switch (k) {
    case 0: *name = "sqr"; return ggml_rs_sqr(c, a, e);
    case 1: *name = "sqrt"; return ggml_rs_sqrt(c, a, e);
    case 2: *name = "exp"; return ggml_rs_exp(c, a, e);
    case 3: *name = "neg"; return ggml_rs_neg(c, a, e);
    case 4: *name = "sin"; return ggml_rs_sin(c, a, e);
    case 5: *name = "cos"; return ggml_rs_cos(c, a, e);
    case 6: *name = "tanh"; return ggml_rs_tanh(c, a, e);
    case 7: *name = "sigmoid"; return ggml_rs_sigmoid(c, a, e);
    case 8: *name = "silu(a)"; return ggml_rs_silu(c, a, NULL, e);
    case 9: *name = "silu(a, up=a)"; return ggml_rs_silu(c, a, a, e);
    case 10: *name = "gelu(a)"; return ggml_rs_gelu(c, a, NULL, e);
    case 11: *name = "gelu_erf(a, up=a)"; return ggml_rs_gelu_erf(c, a, a, e);
    case 12: *name = "gelu_quick(a)"; return ggml_rs_gelu_quick(c, a, NULL, e);
    case 13: *name = "relu(a, up=a)"; return ggml_rs_relu(c, a, a, e);
    case 14: *name = "softmax"; return ggml_rs_softmax(c, a, e);
    case 15: *name = "rms_norm(a)"; return ggml_rs_rms_norm(c, a, NULL, 1e-6f, e);
    case 16: *name = "rms_norm(a, w=a)"; return ggml_rs_rms_norm(c, a, a, 1e-6f, e);
    case 17: *name = "layer_norm(a, w=a, b=a)"; return ggml_rs_layer_norm(c, a, a, a, 1e-6f, e);
    case 18: *name = "l2_norm"; return ggml_rs_l2_norm(c, a, 1e-6f, e);
    case 19: *name = "sum_rows"; return ggml_rs_sum_rows(c, a, e);
    case 20: *name = "mean"; return ggml_rs_mean(c, a, e);
    case 21: *name = "mul_mat(a, a)"; return ggml_rs_mul_mat(c, a, a, e);
    case 22: *name = "mul_mat(a, f32)"; return ggml_rs_mul_mat(c, a, f, e);
    case 23: *name = "mul_mat(f32, a)"; return ggml_rs_mul_mat(c, f, a, e);
    case 24: *name = "mul_mat_full_prec(a, f32)"; return ggml_rs_mul_mat_full_prec(c, a, f, e);
    case 25: *name = "add(a, a)"; return ggml_rs_add(c, a, a, e);
    case 26: *name = "add(a, f32)"; return ggml_rs_add(c, a, f, e);
    case 27: *name = "mul(f32, a)"; return ggml_rs_mul(c, f, a, e);
    case 28: *name = "div(a, a)"; return ggml_rs_div(c, a, a, e);
    case 29: *name = "scale"; return ggml_rs_scale(c, a, 2.0f, e);
    case 30: *name = "clamp"; return ggml_rs_clamp(c, a, -1.0f, 1.0f, e);
    case 31: *name = "reshape(-1)"; return ggml_rs_reshape(c, a, flat, 1, e);
    case 32: *name = "cont"; return ggml_rs_cont(c, a, NULL, 0, e);
    case 33: *name = "concat(a, a, 0)"; return ggml_rs_concat(c, a, a, 0, e);
    case 34: *name = "concat(a, a, 1)"; return ggml_rs_concat(c, a, a, 1, e);
    case 35: *name = "repeat(dim 1, 2)"; return ggml_rs_repeat(c, a, 1, 2, e);
    case 36: *name = "pad(1, 1, 0, 0)"; return ggml_rs_pad(c, a, 1, 1, 0, 0, e);
    case 37: *name = "slice(dim 0, 0..2 step 2)"; return ggml_rs_slice(c, a, 0, 0, 2, 2, e);
    case 38: *name = "slice(dim 1, 0..2)"; return ggml_rs_slice(c, a, 1, 0, 2, 1, e);
    case 39: *name = "dup"; return ggml_rs_dup(c, a, e);
    case 40: *name = "get_rows(a, ids)"; return ggml_rs_get_rows(c, a, ids, e);
    case 41: {
        const int64_t rows[2] = {ne[0], 2};
        ggml_rs_tensor *src = ggml_rs_ctx_zeros(in, 0, rows, 2, e);
        *name = "set_rows(a, f32 rows, ids)";
        return src ? ggml_rs_set_rows(c, a, src, ids, e) : NULL;
    }
    case 42:
        *name = "set_rows(f32, rows of a, ids)";
        t = ggml_rs_get_rows(c, a, ids, e);
        return t ? ggml_rs_set_rows(c, f, t, ids, e) : NULL;
    case 43: *name = "cpy(a, f32)"; return ggml_rs_cpy(c, a, f, e);
    case 44: *name = "cpy(f32, a)"; return ggml_rs_cpy(c, f, a, e);
    case 45: *name = "cast(a, f32)"; return ggml_rs_cast(c, a, 0, e);
    case 46: *name = "cast(a, f16)"; return ggml_rs_cast(c, a, 1, e);
    case 47: *name = "cast(a, q8_0)"; return ggml_rs_cast(c, a, 8, e);
    case 48: *name = "argsort"; return ggml_rs_argsort(c, a, 1, e);
    case 49: *name = "top_k(2)"; return ggml_rs_top_k(c, a, 2, e);
    case 50:
    case 51:
    case 52:
    case 54:
    case 55: {
        const int64_t r3[3] = {ne[0], 1, ne[1]};
        t = ggml_rs_reshape(c, a, r3, 3, e);
        if (t == NULL) {
            *name = k == 50 ? "rope" : "sdpa";
            return NULL;
        }
        if (k == 50) {
            *name = "rope(neox, 4 dims)";
            return ggml_rs_rope(c, t, pos, NULL, &rp, e);
        }
        if (k >= 54) {
            *name = k == 54 ? "sdpa_capped(a, a, a, cap 5, flash=false)" : "sdpa_capped(a, a, a, cap 5, flash=true)";
            return ggml_rs_sdpa_capped(c, t, t, t, NULL, NULL, NULL, 0.5f, 5.0f, k == 55, false, e);
        }
        *name = k == 51 ? "sdpa(a, a, a, flash=false)" : "sdpa(a, a, a, flash=true)";
        return ggml_rs_sdpa(c, t, t, t, NULL, NULL, NULL, 0.5f, k == 52, false, e);
    }
    case 53: {
        const int64_t vn[2] = {2, 2};
        const size_t nb[1] = {(size_t)m.nb[1]};
        *name = "view(2x2) then sqr";
        t = ggml_rs_view(c, a, (size_t)m.nb[0], vn, nb, 2, e);
        return t ? ggml_rs_sqr(c, t, e) : NULL;
    }
    default:
        return NULL;
    }
}

enum outcome { REFUSED = 1, COMPUTE_ERROR = 2, NO_INPUT = 3 };

/* Runs one case in a child; returns the wait status; fills `what`. */
static int run_case(int k, int ti, int layout, char *what, size_t cap)
{
    int fd[2];
    pid_t pid;
    int status = 0;
    size_t n = 0;
    ssize_t r;

    REQUIRE(pipe(fd) == 0, "pipe");
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    REQUIRE(pid >= 0, "fork");
    if (pid == 0) {
        ggml_rs_error e = err_fresh();
        ggml_rs_context *c, *in;
        ggml_rs_tensor *a, *t;
        const char *name = "?";
        char msg[512];
        int len, code = 0;
        close(fd[0]);
        alarm(30);
        c = ggml_rs_ctx_new(g_backend, 256, &e);
        in = c ? ggml_rs_ctx_input(c) : NULL;
        a = in ? make_input(c, in, TYPES[ti], layout) : NULL;
        if (a == NULL) {
            _exit(NO_INPUT);
        }
        t = build(k, c, in, a, &e, &name);
        /* The name first: if the compute aborts, the parent still has it. */
        len = snprintf(msg, sizeof msg, "%s|", name);
        if (len > 0 && write(fd[1], msg, (size_t)len) < 0) {
            _exit(99);
        }
        if (t == NULL) {
            code = REFUSED;
        } else {
            ggml_rs_ctx_clear_error(c);
            e = err_fresh();
            if (ggml_rs_ctx_compute(c, &t, 1, &e) != GGML_RS_OK) {
                code = COMPUTE_ERROR;
            }
        }
        len = snprintf(msg, sizeof msg, "%.400s", code ? e.message : "");
        if (len > 0 && write(fd[1], msg, (size_t)len) < 0) {
            code = 99;
        }
        _exit(code);
    }
    close(fd[1]);
    while (n + 1 < cap && (r = read(fd[0], what + n, cap - 1 - n)) > 0) {
        n += (size_t)r;
    }
    what[n] = '\0';
    close(fd[0]);
    waitpid(pid, &status, 0);
    return status;
}

int main(void)
{
    int cases = 0, computed = 0, refused = 0, failed_compute = 0, known_seen = 0;
    char what[600];

    /* ggml would run gdb for a backtrace on every abort: slow and noisy. */
    setenv("GGML_NO_BACKTRACE", "1", 1);
    g_backend = backend_or_die(1);

    for (int k = 0; k < NOPS; k++) {
        for (int ti = 0; ti < NTYPES; ti++) {
            for (int layout = 0; layout < NLAYOUTS; layout++) {
                int st = run_case(k, ti, layout, what, sizeof what);
                char *bar = strchr(what, '|');
                if (bar != NULL) {
                    *bar = '\0';
                }
                if (WIFEXITED(st) && WEXITSTATUS(st) == NO_INPUT) {
                    continue;
                }
                cases++;
                if (WIFSIGNALED(st)) {
                    CHECK(0, "%s on %s %s: the process died (signal %d%s)", what[0] ? what : "op", TYPE_NAMES[ti],
                          LAYOUT_NAMES[layout], WTERMSIG(st), WTERMSIG(st) == SIGALRM ? ", hung" : "");
                } else if (WEXITSTATUS(st) == 0) {
                    computed++;
                } else if (WEXITSTATUS(st) == REFUSED) {
                    refused++;
                } else if (WEXITSTATUS(st) == COMPUTE_ERROR) {
                    failed_compute++;
                } else {
                    CHECK(0, "%s on %s %s: child exit %d", what, TYPE_NAMES[ti], LAYOUT_NAMES[layout],
                          WEXITSTATUS(st));
                }
            }
        }
    }
    printf("%d cases: %d computed, %d refused by the op, %d refused by compute, %d aborted\n", cases, computed,
           refused, failed_compute, g_failures);
    CHECK(computed > 100 && refused > 100, "too few cases ran either way: is the table out of date?");

    /* Row ids out of range: ggml's CPU kernels assert on them. Host ids are
     * checked by ggml_rs_ctx_compute, which must fail with an error. */
    {
        const int32_t bad[3][2] = {{0, 4}, {0, 100}, {-1, 0}};
        const int id_ops[2] = {40, 41};
        for (int via = 0; via < 3; via++) {
            for (int i = 0; i < 3; i++) {
                if (via > 0 && i != 1) {
                    continue; /* one known case per op and route is enough */
                }
                for (int j = 0; j < 2; j++) {
                    int st;
                    char *bar;
                    g_ids[0] = bad[i][0];
                    g_ids[1] = bad[i][1];
                    g_ids_via = via;
                    st = run_case(id_ops[j], 0, 0, what, sizeof what);
                    bar = strchr(what, '|');
                    if (bar != NULL) {
                        *bar = '\0';
                    }
                    if (via == 0) {
                        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == COMPUTE_ERROR,
                              "%s with %s {%d, %d} for 4 rows: %s %d, want a compute error (%s)", what,
                              IDS_VIA[via], (int)bad[i][0], (int)bad[i][1],
                              WIFSIGNALED(st) ? "died by signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                              bar ? bar + 1 : "");
                        CHECK(bar != NULL && contains(bar + 1, "out of range"), "message '%s'", bar ? bar + 1 : "");
                    } else if (WIFSIGNALED(st)) {
                        /* Known issue: ids that the graph computes are not checked. */
                        known_seen++;
                        printf("KNOWN (not counted): %s with %s {%d, %d} for 4 rows aborts the process in "
                               "ggml_rs_ctx_compute (signal %d)\n",
                               what, IDS_VIA[via], (int)bad[i][0], (int)bad[i][1], WTERMSIG(st));
                    } else {
                        printf("KNOWN ISSUE FIXED? %s with %s {%d, %d} no longer aborts (exit %d: %s): "
                               "make it a checked case\n",
                               what, IDS_VIA[via], (int)bad[i][0], (int)bad[i][1], WEXITSTATUS(st), bar ? bar + 1 : "");
                    }
                }
            }
        }
        g_ids_via = 0;
        printf("%d known aborts (ids computed by the graph are not checked)\n", known_seen);
    }
    ggml_rs_backend_free(g_backend);
    return finish("no_abort");
}
