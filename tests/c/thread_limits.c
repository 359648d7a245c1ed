/*
 * Thread limits: a backend asked for more threads than ggml allows is an
 * invalid argument, and one whose threads the system refuses (here an
 * address-space limit leaves no room for their stacks) is an out-of-memory
 * error, not an abort in ggml's threadpool (scripts/patches/
 * 06-cpu-threadpool-no-abort.sh); with the limit lifted, a backend works
 * again in the same process. Natively only: valgrind manages thread stacks
 * and address space itself.
 */
#define _GNU_SOURCE
#include <sys/resource.h>

#include "check.h"

/* The process's current virtual size in bytes (0 if unknown). */
static unsigned long long vm_size(void)
{
    char line[256];
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

static void add_works(uint32_t threads)
{
    ggml_rs_backend_params p = ggml_rs_backend_params_default();
    ggml_rs_backend *b = NULL;
    ggml_rs_error e = err_fresh();
    const int64_t ne[1] = {4};
    const float v[4] = {1, 2, 3, 4};
    float got[4] = {0};
    p.n_threads = threads;
    REQUIRE(ggml_rs_backend_new(&p, &b, &e) == GGML_RS_OK && b != NULL, "backend with %u threads: %s", threads,
            e.message);
    {
        ggml_rs_context *c = ggml_rs_ctx_new(b, 32, &e);
        ggml_rs_context *in = ggml_rs_ctx_input(c);
        ggml_rs_tensor *x = upload_f32(in, v, ne, 1);
        ggml_rs_tensor *t = ggml_rs_add(c, x, x, &e);
        REQUIRE(t != NULL, "add: %s", e.message);
        CHECK(ggml_rs_ctx_compute(c, &t, 1, &e) == GGML_RS_OK, "compute: %s", e.message);
        CHECK(ggml_rs_tensor_get_f32(t, got, 4, &e) == GGML_RS_OK && got[3] == 8.0f, "x+x = %g, want 8", got[3]);
        ggml_rs_ctx_free(in);
        ggml_rs_ctx_free(c);
    }
    ggml_rs_backend_free(b);
}

int main(void)
{
    ggml_rs_backend_params p = ggml_rs_backend_params_default();
    ggml_rs_backend *b = NULL;
    ggml_rs_error e = err_fresh();
    struct rlimit old, low;

    /* More than ggml's GGML_MAX_N_THREADS (512). */
    p.n_threads = 513;
    CHECK(ggml_rs_backend_new(&p, &b, &e) == GGML_RS_ERR_INVALID_ARGUMENT && b == NULL, "513 threads: status %d, %s",
          (int)e.status, e.message);
    CHECK(contains(e.message, "512"), "513 threads: message '%s' names the limit", e.message);

    add_works(2); /* ggml's registries and our globals exist before the limit */

    /* 512 threads with 256 MiB of address space to spare: the stacks do
     * not fit. */
    REQUIRE(getrlimit(RLIMIT_AS, &old) == 0, "getrlimit");
    low = old;
    low.rlim_cur = (rlim_t)(vm_size() + (256ull << 20));
    REQUIRE(vm_size() > 0 && setrlimit(RLIMIT_AS, &low) == 0, "setrlimit");
    p.n_threads = 512;
    b = NULL;
    e = err_fresh();
    CHECK(ggml_rs_backend_new(&p, &b, &e) == GGML_RS_ERR_OUT_OF_MEMORY && b == NULL,
          "512 threads under a 256 MiB margin: status %d, %s", (int)e.status, e.message);
    CHECK(contains(e.message, "threads"), "message '%s' says what was refused", e.message);
    if (b != NULL) {
        ggml_rs_backend_free(b);
    }
    REQUIRE(setrlimit(RLIMIT_AS, &old) == 0, "restore the limit");

    add_works(4); /* and the process goes on */
    return finish("thread_limits");
}
