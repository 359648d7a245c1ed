/*
 * Device enumeration, backend queries and log routing through the C ABI.
 *
 *  - ggml_rs_device_count() >= 1, every device reads back with NUL-terminated
 *    strings, one of them is the CPU; an index out of range and a NULL `out`
 *    are errors that leave `out` untouched.
 *  - ggml_rs_default_threads() >= 1; a backend made with n_threads = 2
 *    reports 2, and its scheduler devices map to registry indices, CPU last.
 *  - A log callback installed with ggml_rs_log_set receives records (with
 *    sane levels and strings) while a backend is created and a graph is
 *    computed; min_level 0 silences it; NULL restores the default.
 */
#include "check.h"

#include <stdatomic.h>

struct log_stats {
    atomic_int records;
    atomic_int bad;      /* a level outside 1..4 or a NULL string */
    atomic_int below;    /* a record below the min_level we asked for */
    atomic_int min_level;
    atomic_int ggml_records;
};

static void on_log(int32_t level, const char *target, const char *message, void *user_data)
{
    struct log_stats *s = user_data;
    atomic_fetch_add(&s->records, 1);
    if (level < 1 || level > 4 || target == NULL || message == NULL) {
        atomic_fetch_add(&s->bad, 1);
        return;
    }
    if (level < atomic_load(&s->min_level)) {
        atomic_fetch_add(&s->below, 1);
    }
    if (strcmp(target, "ggml") == 0) {
        atomic_fetch_add(&s->ggml_records, 1);
    }
    if (getenv("GGML_RS_TEST_VERBOSE") != NULL) {
        fprintf(stderr, "log[%d] %s: %s\n", (int)level, target, message);
    }
}

static int nul_terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

static void test_devices(void)
{
    size_t n = ggml_rs_device_count();
    int cpus = 0;
    ggml_rs_device_info info;
    ggml_rs_error e;
    CHECK(n >= 1, "device count %zu", n);
    for (size_t i = 0; i < n; i++) {
        e = err_fresh();
        memset(&info, 0x55, sizeof info);
        CHECK(ggml_rs_device_get(i, &info, &e) == GGML_RS_OK, "device_get(%zu): %s", i, e.message);
        CHECK(e.status == -1, "device_get(%zu) wrote err on success", i);
        CHECK(info.index == i, "device %zu reports index %zu", i, info.index);
        CHECK(nul_terminated(info.name, sizeof info.name), "device %zu name not terminated", i);
        CHECK(nul_terminated(info.description, sizeof info.description), "device %zu description", i);
        CHECK(nul_terminated(info.id, sizeof info.id), "device %zu id not terminated", i);
        CHECK(nul_terminated(info.library, sizeof info.library), "device %zu library", i);
        CHECK(nul_terminated(info.pci_id, sizeof info.pci_id), "device %zu pci_id", i);
        CHECK(info.name[0] != '\0', "device %zu has an empty name", i);
        CHECK(info.device_type >= 0 && info.device_type <= 4, "device %zu type %d", i, (int)info.device_type);
        if (info.device_type == 0) {
            cpus++;
            CHECK(strcmp(info.library, "CPU") == 0, "CPU device %zu library '%s'", i, info.library);
        }
        printf("device %zu: %s (%s) library=%s type=%d memory %llu/%llu\n", i, info.name,
               info.description, info.library, (int)info.device_type,
               (unsigned long long)info.memory_free, (unsigned long long)info.memory_total);
    }
    CHECK(cpus >= 1, "no CPU device among %zu", n);

    /* Out of range: an error, and `out` is not written. */
    e = err_fresh();
    memset(&info, 0x55, sizeof info);
    CHECK(ggml_rs_device_get(n, &info, &e) == GGML_RS_ERR_INVALID_ARGUMENT, "device_get(count)");
    CHECK(e.status == GGML_RS_ERR_INVALID_ARGUMENT, "status %d", (int)e.status);
    CHECK(err_terminated(&e) && contains(e.message, "out of range"), "message '%s'", e.message);
    CHECK(info.index == (size_t)0x5555555555555555ull && info.name[0] == 0x55, "out written on failure");
    e = err_fresh();
    CHECK(ggml_rs_device_get((size_t)-1, &info, &e) == GGML_RS_ERR_INVALID_ARGUMENT, "device_get(SIZE_MAX)");
    e = err_fresh();
    CHECK(ggml_rs_device_get(0, NULL, &e) == GGML_RS_ERR_INVALID_ARGUMENT, "device_get(0, NULL)");
    CHECK(contains(e.message, "NULL"), "message '%s'", e.message);
    /* err may be NULL. */
    CHECK(ggml_rs_device_get(n, &info, NULL) == GGML_RS_ERR_INVALID_ARGUMENT, "device_get with NULL err");

    CHECK(ggml_rs_default_threads() >= 1, "default threads %zu", ggml_rs_default_threads());
}

static void test_backend_queries(void)
{
    ggml_rs_backend *b = backend_or_die(2);
    size_t nd = ggml_rs_backend_device_count(b);
    ggml_rs_device_info info;
    ggml_rs_error e = err_fresh();
    int64_t last;

    CHECK(ggml_rs_backend_n_threads(b) == 2, "n_threads %zu", ggml_rs_backend_n_threads(b));
    CHECK(ggml_rs_backend_max_graph_nodes(b) == 8192, "max nodes %zu", ggml_rs_backend_max_graph_nodes(b));
    CHECK(nd >= 1 && nd <= ggml_rs_device_count(), "backend devices %zu", nd);
    for (size_t i = 0; i < nd; i++) {
        int64_t idx = ggml_rs_backend_device_index(b, i);
        CHECK(idx >= 0 && (size_t)idx < ggml_rs_device_count(), "scheduler device %zu -> %lld", i, (long long)idx);
    }
    last = ggml_rs_backend_device_index(b, nd - 1);
    CHECK(last >= 0 && ggml_rs_device_get((size_t)last, &info, &e) == GGML_RS_OK && info.device_type == 0,
          "the last scheduler device (%lld) is not the CPU", (long long)last);
    CHECK(ggml_rs_backend_device_index(b, nd) == -1, "index past the end");
    CHECK(ggml_rs_backend_device_index(NULL, 0) == -1, "NULL backend index");
    CHECK(ggml_rs_backend_device_count(NULL) == 0, "NULL backend device count");
    CHECK(ggml_rs_backend_n_threads(NULL) == 0, "NULL backend threads");
    CHECK(ggml_rs_backend_max_graph_nodes(NULL) == 0, "NULL backend max nodes");
    ggml_rs_backend_free(b);

    /* 0 threads means ggml_rs_default_threads(). */
    b = backend_or_die(0);
    CHECK(ggml_rs_backend_n_threads(b) == ggml_rs_default_threads(), "n_threads %zu vs default %zu",
          ggml_rs_backend_n_threads(b), ggml_rs_default_threads());
    ggml_rs_backend_free(b);
}

/* Creates a backend and computes a tiny graph (something for ggml to log). */
static void backend_and_compute(void)
{
    ggml_rs_backend *b = backend_or_die(2);
    ggml_rs_error e = err_fresh();
    ggml_rs_context *c = ggml_rs_ctx_new(b, 64, &e);
    ggml_rs_context *in;
    const float x[4] = {1, 2, 3, 4};
    const int64_t ne[1] = {4};
    ggml_rs_tensor *t, *y;
    float out[4];
    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    in = ggml_rs_ctx_input(c);
    REQUIRE(in != NULL, "ctx_input");
    t = upload_f32(in, x, ne, 1);
    y = ggml_rs_add(c, t, t, &e);
    REQUIRE(y != NULL, "add: %s", e.message);
    CHECK(ggml_rs_ctx_compute(c, &y, 1, &e) == GGML_RS_OK, "compute: %s", e.message);
    CHECK(ggml_rs_tensor_get_f32(y, out, 4, &e) == GGML_RS_OK && out[3] == 8.0f, "2*x");
    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
    ggml_rs_backend_free(b);
}

/*
 * ggml logs little in a Release build (NDEBUG): creating a CPU backend and
 * computing a graph log nothing, even at debug level (ggml's registry and
 * allocator messages are compiled out). The counts are printed so that a
 * change shows, but the check that records arrive uses something ggml does
 * log in every build: an allocation it cannot make (GGML_LOG_ERROR from
 * ggml_aligned_malloc and the CPU buffer type), here a 2^48-element tensor.
 * That also checks that such a failure is an error, not an abort.
 */
static void test_logging(void)
{
    static struct log_stats s; /* static: outlives every record we may get */
    int got;
    ggml_rs_backend *b;
    ggml_rs_context *c, *in;
    ggml_rs_tensor *t;
    ggml_rs_error e = err_fresh();
    const int64_t huge[2] = {(int64_t)1 << 24, ((int64_t)1 << 24) - 1};

    atomic_init(&s.records, 0);
    atomic_init(&s.bad, 0);
    atomic_init(&s.below, 0);
    atomic_init(&s.ggml_records, 0);
    atomic_init(&s.min_level, 1);
    ggml_rs_log_set(on_log, &s, 1);
    backend_and_compute();
    printf("log: %d records at min_level 1 while creating a backend and computing\n",
           atomic_load(&s.records));

    /* Warnings and errors only; an impossible allocation logs errors. */
    atomic_store(&s.min_level, 3);
    ggml_rs_log_set(on_log, &s, 3);
    got = atomic_load(&s.records);
    b = backend_or_die(2);
    c = ggml_rs_ctx_new(b, 16, &e);
    REQUIRE(c != NULL, "ctx_new: %s", e.message);
    in = ggml_rs_ctx_input(c);
    t = ggml_rs_ctx_empty(in, 0, huge, 2, &e);
    CHECK(t == NULL && e.status == GGML_RS_ERR_OUT_OF_MEMORY, "empty(f32[2^24, 2^24-1]): status %d '%s'",
          (int)e.status, e.message);
    got = atomic_load(&s.records) - got;
    printf("log: %d records at min_level 3 for a failed allocation (%d from ggml in all)\n", got,
           atomic_load(&s.ggml_records));
    CHECK(got >= 1, "the log callback got no record for a failed allocation (min_level 3)");
    CHECK(atomic_load(&s.ggml_records) >= 1, "no record with target \"ggml\"");
    CHECK(atomic_load(&s.bad) == 0, "%d records with a bad level or NULL strings", atomic_load(&s.bad));
    CHECK(atomic_load(&s.below) == 0, "%d records below min_level", atomic_load(&s.below));
    ggml_rs_ctx_clear_error(in);

    /* min_level 0 silences everything. */
    ggml_rs_log_set(on_log, &s, 0);
    got = atomic_load(&s.records);
    e = err_fresh();
    CHECK(ggml_rs_ctx_empty(in, 0, huge, 2, &e) == NULL, "huge empty succeeded");
    CHECK(atomic_load(&s.records) == got, "%d records after min_level 0", atomic_load(&s.records) - got);

    /* Back to the default (warnings and errors to stderr): no callback. */
    ggml_rs_log_set(NULL, NULL, 3);
    got = atomic_load(&s.records);
    e = err_fresh();
    CHECK(ggml_rs_ctx_empty(in, 0, huge, 2, &e) == NULL, "huge empty succeeded");
    CHECK(atomic_load(&s.records) == got, "callback called after it was removed");

    ggml_rs_ctx_free(in);
    ggml_rs_ctx_free(c);
    ggml_rs_backend_free(b);
}

int main(void)
{
    test_logging(); /* first: ggml logs only while its registry starts */
    test_devices();
    test_backend_queries();
    return finish("devices");
}
