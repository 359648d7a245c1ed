/*
 * Small helpers shared by the C ABI tests. Only ggml_rs.h and the C
 * standard library are used: the tests see exactly what a C caller sees.
 */
#ifndef GGML_RS_TEST_CHECK_H
#define GGML_RS_TEST_CHECK_H

#include "ggml_rs.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_checks;
static int g_failures;

/* CHECK(cond, fmt, ...): records a failure (and goes on) when cond is false. */
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        g_checks++;                                                            \
        if (!(cond)) {                                                         \
            g_failures++;                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__,   \
                    #cond);                                                    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

/* REQUIRE: like CHECK (cond evaluated once), but a failure ends the program
 * (later steps need what it checked). */
#define REQUIRE(cond, ...)                                                     \
    do {                                                                       \
        int require_ok_ = (cond) ? 1 : 0;                                      \
        CHECK(require_ok_, __VA_ARGS__);                                       \
        if (!require_ok_) {                                                    \
            fprintf(stderr, "%s:%d: REQUIRE(%s) failed, cannot go on\n",       \
                    __FILE__, __LINE__, #cond);                                \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

/* A fresh error record, filled with a pattern so that "not written" shows. */
static inline ggml_rs_error err_fresh(void)
{
    ggml_rs_error e;
    e.status = -1;
    memset(e.message, 0x7f, sizeof e.message);
    e.message[sizeof e.message - 1] = '\0';
    return e;
}

/* The message is NUL-terminated inside its array. */
static inline int err_terminated(const ggml_rs_error *e)
{
    return memchr(e->message, '\0', sizeof e->message) != NULL;
}

static inline int contains(const char *hay, const char *needle)
{
    return hay != NULL && strstr(hay, needle) != NULL;
}

/* A CPU backend with `threads` threads (small: valgrind serialises them). */
static inline ggml_rs_backend *backend_or_die(uint32_t threads)
{
    ggml_rs_backend_params p = ggml_rs_backend_params_default();
    ggml_rs_backend *b = NULL;
    ggml_rs_error e = err_fresh();
    p.n_threads = threads;
    if (ggml_rs_backend_new(&p, &b, &e) != GGML_RS_OK || b == NULL) {
        fprintf(stderr, "ggml_rs_backend_new failed: %s\n", e.message);
        exit(2);
    }
    return b;
}

/* Deterministic xorshift64* numbers in [-1, 1). */
typedef struct { uint64_t s; } rng_t;

static inline rng_t rng_new(uint64_t seed)
{
    rng_t r;
    r.s = seed * 0x9E3779B97F4A7C15ull | 1u;
    return r;
}

static inline float rng_uniform(rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    x *= 0x2545F4914F6CDD1Dull;
    return (float)((double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

static inline void rng_fill(rng_t *r, float *dst, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = rng_uniform(r) * scale;
    }
}

/* Uploads f32 values as a data tensor of context `c` (which needs a placement). */
static inline ggml_rs_tensor *upload_f32(ggml_rs_context *c, const float *v,
                                         const int64_t *ne, size_t n_dims)
{
    size_t n = 1;
    ggml_rs_error e = err_fresh();
    ggml_rs_tensor *t;
    for (size_t i = 0; i < n_dims; i++) {
        n *= (size_t)ne[i];
    }
    t = ggml_rs_ctx_from_data(c, 0, ne, n_dims, (const uint8_t *)v, n * sizeof(float), &e);
    REQUIRE(t != NULL, "from_data f32: %s", e.message);
    return t;
}

/* Exits 0 when every check passed; prints a one-line summary. */
static inline int finish(const char *name)
{
    if (g_failures == 0) {
        printf("%s: all %d checks passed\n", name, g_checks);
        return 0;
    }
    printf("%s: %d of %d checks FAILED\n", name, g_failures, g_checks);
    return 1;
}

#endif
