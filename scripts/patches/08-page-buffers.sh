#!/usr/bin/env bash
# ggml's CPU buffers (weights, KV caches, compute buffers) and its
# scheduler's tables are large blocks that live as long as a model or a
# backend, yet they come from malloc (posix_memalign, calloc). With glibc
# that fragments the heap of a program that opens and closes models: the
# first such block is mmapped and, when freed, makes glibc raise its mmap
# threshold to that block's size (its "dynamic threshold", up to 32 MiB),
# so every later one is carved out of a malloc heap instead, between small
# chunks that outlive it (chunks parked in each thread's tcache count as
# in use). Freed, the space cannot be returned to the system and stays in
# RSS. A Go program opening, loading, running and closing a 2.6 MB model
# 2,000 times grew from 14 MB to 60-86 MB of RSS with the default arenas
# (35-50 MB with MALLOC_ARENA_MAX=1) while the bytes in use stayed flat:
# fragmentation, not a leak (docs/notes/memory-cycles.md).
#
# This patch gives those blocks pages of their own on Linux, as ggml already
# does on macOS (vm_allocate in ggml_aligned_malloc): a CPU buffer of
# 128 KiB or more and the scheduler's six tables sized by its graph size
# are mmapped and munmapped when freed (smaller ones keep to malloc). The
# pages are zero-filled and committed on first touch, as glibc's own mmapped
# chunks are, so a calloc'd table does not need its memset. Contexts'
# metadata arenas (ggml_init) stay with malloc: a model makes one per
# forward, and the heap serves those without a system call.
# Usage: 08-page-buffers.sh GGML_DIR   (idempotent)
set -euo pipefail
f="$1/src/ggml-backend.cpp"
python3 - "$f" <<'PY'
import sys
path = sys.argv[1]
MARK = "ggml-rs patch: page buffers"
src = open(path).read()
if MARK in src:
    sys.exit(0)
pairs = [
    # The helpers, after the includes.
    ("""#include <algorithm>
#include <unordered_map>
#include <vector>
""", """#include <algorithm>
#include <unordered_map>
#include <vector>

// %s: large long-lived blocks (CPU buffers, the scheduler's
// tables) get pages of their own on Linux instead of malloc's heap, where
// glibc's dynamic mmap threshold would fragment them between small live
// chunks. Zero-filled; the caller passes the size it allocated to free.
#if defined(__linux__)
#include <sys/mman.h>
#define GGML_RS_PAGES_MIN ((size_t) 128 * 1024)
#endif

static void * ggml_rs_pages_alloc(size_t size) {
#if defined(__linux__)
    if (size >= GGML_RS_PAGES_MIN) {
        void * p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            GGML_LOG_ERROR("%%s: insufficient memory (attempted to map %%6.2f MB)\\n", __func__, size/(1024.0*1024.0));
            return NULL;
        }
        return p;
    }
#endif
    void * p = ggml_aligned_malloc(size);
    if (p != NULL) {
        memset(p, 0, size);
    }
    return p;
}

static void ggml_rs_pages_free(void * p, size_t size) {
    if (p == NULL) {
        return;
    }
#if defined(__linux__)
    if (size >= GGML_RS_PAGES_MIN) {
        munmap(p, size);
        return;
    }
#endif
    ggml_aligned_free(p, size);
}
""" % MARK),
    # The scheduler remembers the size of its node tables, to free them.
    ("""    char * context_buffer;
    size_t context_buffer_size;
""", """    char * context_buffer;
    size_t context_buffer_size;
    size_t rs_nodes_size; // %s: the node tables' length
""" % MARK),
    ("""    sched->hv_tensor_backend_ids = (int *) malloc(sched->hash_set.size * sizeof(sched->hv_tensor_backend_ids[0]));
    sched->hv_tensor_copies      = (ggml_tensor **) malloc(sched->hash_set.size * sched->n_backends * sched->n_copies * sizeof(struct ggml_tensor *));
""", """    sched->hv_tensor_backend_ids = (int *) ggml_rs_pages_alloc(sched->hash_set.size * sizeof(sched->hv_tensor_backend_ids[0]));
    sched->hv_tensor_copies      = (ggml_tensor **) ggml_rs_pages_alloc(sched->hash_set.size * sched->n_backends * sched->n_copies * sizeof(struct ggml_tensor *));
"""),
    ("""    sched->node_backend_ids = (int *) calloc(nodes_size, sizeof(sched->node_backend_ids[0]));
    sched->leaf_backend_ids = (int *) calloc(nodes_size, sizeof(sched->leaf_backend_ids[0]));
    sched->prev_node_backend_ids = (int *) calloc(nodes_size, sizeof(sched->prev_node_backend_ids[0]));
    sched->prev_leaf_backend_ids = (int *) calloc(nodes_size, sizeof(sched->prev_leaf_backend_ids[0]));
""", """    sched->rs_nodes_size = nodes_size; // %s
    sched->node_backend_ids = (int *) ggml_rs_pages_alloc(nodes_size * sizeof(sched->node_backend_ids[0]));
    sched->leaf_backend_ids = (int *) ggml_rs_pages_alloc(nodes_size * sizeof(sched->leaf_backend_ids[0]));
    sched->prev_node_backend_ids = (int *) ggml_rs_pages_alloc(nodes_size * sizeof(sched->prev_node_backend_ids[0]));
    sched->prev_leaf_backend_ids = (int *) ggml_rs_pages_alloc(nodes_size * sizeof(sched->prev_leaf_backend_ids[0]));
""" % MARK),
    ("""    sched->context_buffer = (char *) malloc(sched->context_buffer_size);
""", """    sched->context_buffer = (char *) ggml_rs_pages_alloc(sched->context_buffer_size);
"""),
    ("""    free(sched->hv_tensor_backend_ids);
    free(sched->hv_tensor_copies);
    free(sched->node_backend_ids);
    free(sched->leaf_backend_ids);
    free(sched->prev_node_backend_ids);
    free(sched->prev_leaf_backend_ids);
    free(sched->context_buffer);
""", """    ggml_rs_pages_free(sched->hv_tensor_backend_ids, sched->hash_set.size * sizeof(sched->hv_tensor_backend_ids[0])); // %s
    ggml_rs_pages_free(sched->hv_tensor_copies, sched->hash_set.size * sched->n_backends * sched->n_copies * sizeof(struct ggml_tensor *));
    ggml_rs_pages_free(sched->node_backend_ids, sched->rs_nodes_size * sizeof(sched->node_backend_ids[0]));
    ggml_rs_pages_free(sched->leaf_backend_ids, sched->rs_nodes_size * sizeof(sched->leaf_backend_ids[0]));
    ggml_rs_pages_free(sched->prev_node_backend_ids, sched->rs_nodes_size * sizeof(sched->prev_node_backend_ids[0]));
    ggml_rs_pages_free(sched->prev_leaf_backend_ids, sched->rs_nodes_size * sizeof(sched->prev_leaf_backend_ids[0]));
    ggml_rs_pages_free(sched->context_buffer, sched->context_buffer_size);
""" % MARK),
    # CPU buffers (the repack buffer type allocates through this one).
    ("""static void ggml_backend_cpu_buffer_free_buffer(ggml_backend_buffer_t buffer) {
    GGML_ASSERT(buffer);
    ggml_aligned_free(buffer->context, buffer->size);
}
""", """static void ggml_backend_cpu_buffer_free_buffer(ggml_backend_buffer_t buffer) {
    GGML_ASSERT(buffer);
    ggml_rs_pages_free(buffer->context, buffer->size); // %s
}
""" % MARK),
    ("""static ggml_backend_buffer_t ggml_backend_cpu_buffer_type_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    void * data = ggml_aligned_malloc(size);
""", """static ggml_backend_buffer_t ggml_backend_cpu_buffer_type_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    void * data = ggml_rs_pages_alloc(size); // %s
""" % MARK),
]
for old, new in pairs:
    if src.count(old) != 1:
        sys.exit("08-page-buffers: pattern not found once in %s: %s" % (path, old.strip().splitlines()[0]))
    src = src.replace(old, new)
open(path, "w").write(src)
PY
