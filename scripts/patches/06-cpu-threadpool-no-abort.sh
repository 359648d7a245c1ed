#!/usr/bin/env bash
# ggml's CPU threadpool aborts the process (GGML_ASSERT(rc == 0)) when the
# system refuses a worker thread (thread limits, address-space limits,
# memory pressure), and ggml_graph_compute uses the pool it made for one
# compute without a NULL check. For a library, and above all for a server,
# that is a crash on a resource limit. This patch makes
# ggml_threadpool_new return NULL after stopping and joining the threads it
# did start, and a compute whose one-off pool cannot be made fail with
# GGML_STATUS_ALLOC_FAILED. ggml-rs makes its backends' pools up front and
# reports the NULL as an error (src/ml/backend.rs); the RPC server's computes
# use one-off pools.
# Usage: 06-cpu-threadpool-no-abort.sh GGML_DIR   (idempotent)
set -euo pipefail
f="$1/src/ggml-cpu/ggml-cpu.c"
python3 - "$f" <<'PY'
import sys
path = sys.argv[1]
MARK = "ggml-rs patch: threadpool no abort"
src = open(path).read()
if MARK in src:
    sys.exit(0)
pairs = [
    ("""        int32_t rc = ggml_thread_create(&workers[j].thrd, NULL, ggml_graph_compute_secondary_thread, &workers[j]);
        GGML_ASSERT(rc == 0);
""", """        int32_t rc = ggml_thread_create(&workers[j].thrd, NULL, ggml_graph_compute_secondary_thread, &workers[j]);
        if (rc != 0) { // %s: stop and join the threads made, free, fail
            ggml_mutex_lock(&threadpool->mutex);
            threadpool->stop  = true;
            threadpool->pause = false;
            ggml_cond_broadcast(&threadpool->cond);
            ggml_mutex_unlock(&threadpool->mutex);
            for (int k = 1; k < j; k++) {
                ggml_thread_join(workers[k].thrd, NULL);
            }
            ggml_mutex_destroy(&threadpool->mutex);
            ggml_cond_destroy(&threadpool->cond);
            ggml_aligned_free(workers, workers_size);
            ggml_aligned_free(threadpool, sizeof(struct ggml_threadpool));
            return NULL;
        }
""" % MARK),
    ("""        struct ggml_threadpool_params ttp = ggml_threadpool_params_default(n_threads);
        threadpool = ggml_threadpool_new_impl(&ttp, cgraph, cplan);
""", """        struct ggml_threadpool_params ttp = ggml_threadpool_params_default(n_threads);
        threadpool = ggml_threadpool_new_impl(&ttp, cgraph, cplan);
        if (threadpool == NULL) { // %s
            return GGML_STATUS_ALLOC_FAILED;
        }
""" % MARK),
]
for old, new in pairs:
    if src.count(old) != 1:
        sys.exit("06-cpu-threadpool-no-abort: pattern not found once in %s: %s" % (path, old.strip().splitlines()[0]))
    src = src.replace(old, new)
open(path, "w").write(src)
PY
