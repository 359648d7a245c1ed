/*
 * Two threads, one backend: each thread has its own context family and
 * computes at the same time as the other (the backend runs one graph at a
 * time; the other waits). Every result is checked against plain C.
 *
 * A compute's outputs live in the backend's compute buffer and stay valid
 * only until the backend computes another graph (see ggml_rs_ctx_compute),
 * which another thread may do at any moment. So each thread either
 *  - copies its result into a data tensor of its own family inside the
 *    graph (ggml_rs_cpy), which no other compute touches: no caller lock;
 *  - or holds a lock of its own from compute until it has read the output.
 * (All computes then take it: another thread's compute would overwrite the
 * output between this thread's compute and its read.)
 * Contexts are also made on the main thread and used on the workers.
 */
#include "check.h"

#include <pthread.h>

#define N 48
#define ITERS 12
#ifndef NWORKERS
#define NWORKERS 2
#endif

static ggml_rs_backend *g_backend;
static pthread_mutex_t g_read_lock = PTHREAD_MUTEX_INITIALIZER;

struct job {
    int id;
    int locked;               /* 0: results through cpy; 1: caller's lock */
    ggml_rs_context *premade; /* made on the main thread (or NULL) */
    int failures;
    char first[512];
};

static void fail(struct job *j, const char *what, const ggml_rs_error *e)
{
    if (j->failures++ == 0) {
        snprintf(j->first, sizeof j->first, "thread %d: %.200s: %.280s", j->id, what, e ? e->message : "");
    }
}

/* One iteration: y = clamp((a + b) * a * 0.5, -0.3, 0.3) over [N/4, 4]. */
static void iteration(struct job *j, ggml_rs_context *c, int it)
{
    ggml_rs_error e = err_fresh();
    ggml_rs_context *in = ggml_rs_ctx_input(c);
    rng_t r = rng_new((uint64_t)(1000 * j->id + it + 1));
    float a[N], b[N], want[N], got[N];
    const int64_t ne[2] = {N / 4, 4};
    ggml_rs_tensor *ta, *tb, *t, *out;
    int use_cpy = !j->locked;

    rng_fill(&r, a, N, 1.0f);
    rng_fill(&r, b, N, 1.0f);
    for (int i = 0; i < N; i++) {
        float v = (a[i] + b[i]) * a[i] * 0.5f;
        want[i] = v < -0.3f ? -0.3f : v > 0.3f ? 0.3f : v;
    }
    ta = ggml_rs_ctx_from_data(in, 0, ne, 2, (const uint8_t *)a, sizeof a, &e);
    tb = ggml_rs_ctx_from_data(in, 0, ne, 2, (const uint8_t *)b, sizeof b, &e);
    if (ta == NULL || tb == NULL) {
        fail(j, "from_data", &e);
        goto done;
    }
    t = ggml_rs_add(c, ta, tb, &e);
    t = t ? ggml_rs_mul(c, t, ta, &e) : NULL;
    t = t ? ggml_rs_scale(c, t, 0.5f, &e) : NULL;
    t = t ? ggml_rs_clamp(c, t, -0.3f, 0.3f, &e) : NULL;
    if (t == NULL) {
        fail(j, "ops", &e);
        goto done;
    }
    if (use_cpy) {
        ggml_rs_tensor *dst = ggml_rs_ctx_zeros(in, 0, ne, 2, &e);
        out = dst ? ggml_rs_cpy(c, t, dst, &e) : NULL;
        if (out == NULL) {
            fail(j, "cpy", &e);
            goto done;
        }
        if (ggml_rs_ctx_compute(c, &out, 1, &e) != GGML_RS_OK) {
            fail(j, "compute", &e);
            goto done;
        }
        /* dst is the family's own memory: safe to read whatever runs now. */
        if (ggml_rs_tensor_get_f32(dst, got, N, &e) != GGML_RS_OK) {
            fail(j, "get", &e);
            goto done;
        }
    } else {
        int ok;
        pthread_mutex_lock(&g_read_lock);
        ok = ggml_rs_ctx_compute(c, &t, 1, &e) == GGML_RS_OK &&
             ggml_rs_tensor_get_f32(t, got, N, &e) == GGML_RS_OK;
        pthread_mutex_unlock(&g_read_lock);
        if (!ok) {
            fail(j, "compute/get", &e);
            goto done;
        }
    }
    for (int i = 0; i < N; i++) {
        if (fabsf(got[i] - want[i]) > 1e-6f) {
            char what[128];
            snprintf(what, sizeof what, "iteration %d (%s) element %d: got %g want %g", it,
                     use_cpy ? "cpy" : "locked", i, (double)got[i], (double)want[i]);
            fail(j, what, NULL);
            break;
        }
    }
done:
    ggml_rs_ctx_free(in);
}

static void *worker(void *arg)
{
    struct job *j = arg;
    for (int it = 0; it < ITERS; it++) {
        ggml_rs_context *c;
        if (it == 0 && j->premade != NULL) {
            c = j->premade;
        } else {
            ggml_rs_error e = err_fresh();
            c = ggml_rs_ctx_new(g_backend, 64, &e);
            if (c == NULL) {
                fail(j, "ctx_new", &e);
                continue;
            }
        }
        iteration(j, c, it);
        ggml_rs_ctx_free(c);
    }
    return NULL;
}

int main(void)
{
    pthread_t th[NWORKERS];
    struct job jobs[NWORKERS];
    g_backend = backend_or_die(2);
    /* Phase 0: results copied into each family's own tensor, no caller lock.
     * Phase 1: every compute and its read under the caller's lock. */
    for (int phase = 0; phase < 2; phase++) {
        for (int i = 0; i < NWORKERS; i++) {
            ggml_rs_error e = err_fresh();
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].id = i;
            jobs[i].locked = phase;
            jobs[i].premade = ggml_rs_ctx_new(g_backend, 64, &e);
            REQUIRE(jobs[i].premade != NULL, "ctx_new: %s", e.message);
        }
        for (int i = 0; i < NWORKERS; i++) {
            REQUIRE(pthread_create(&th[i], NULL, worker, &jobs[i]) == 0, "pthread_create");
        }
        for (int i = 0; i < NWORKERS; i++) {
            pthread_join(th[i], NULL);
            CHECK(jobs[i].failures == 0, "%s: %d failures; first: %s", phase ? "locked" : "cpy",
                  jobs[i].failures, jobs[i].first);
        }
    }
    ggml_rs_backend_free(g_backend);
    return finish("threads");
}
