#!/usr/bin/env bash
# ggml's CPU barrier (ggml_barrier, between every two graph nodes and inside
# some ops) spins until the last thread arrives, however long that takes.
# When the cores are shared (a build beside us, a busy loop, a Go server's
# own goroutines), the thread everyone waits for is often not running: the
# spinners burn the time slices it needs, and a node can wait out a
# scheduler quantum. Beside one busy loop on 2 cores, 2 threads decoded at
# 0.38x the quiet speed; beside a build, SmolLM2-135M fell from 109 to 1.4
# tokens/s (issue 25).
#
# This patch makes a waiting thread spin for a bounded time (cpu_relax, then
# a clock check every 64 rounds) and then sleep: on Linux in futex(2) on the
# barrier's generation counter (n_barrier_passed), elsewhere in
# sched_yield() loops. The last thread to arrive wakes sleepers only when a
# sleeper count says there are any, so a quiet machine, where every wait
# ends within the spin, makes no system call. The sleeper registers
# (seq_cst increment) and then re-reads the generation (seq_cst); the last
# thread bumps the generation (seq_cst) and then reads the count (seq_cst):
# in the single total order of these four either the sleeper sees the new
# generation and does not sleep, or the waker sees the sleeper and wakes
# it; futex_wait itself refuses to sleep once the generation has moved.
#
# The spin time adapts, per pool: halved by every wait that has to sleep,
# doubled (+2 us) by every wait that ends while spinning, between 0 and the
# maximum; every 256th barrier spins the maximum and, if that was enough,
# restores it (a probe, for when the load is gone). A fixed spin measured
# badly under contention: once the two compute threads share one core (the
# scheduler wakes a sleeper beside its waker), a waiter spins while the
# thread it waits for queues behind it, and every node pays the whole spin
# (a fixed 200 us decoded 4x slower than sleeping at once beside other
# load). Sleeping at once, in turn, would pay a wake-up at every node of a
# quiet machine.
#
# A pool worker that the current graph leaves out (a graph on fewer threads
# than the pool) sleeps until the next graph rather than polling for it.
#
# GGML_CPU_BARRIER_SPIN_US sets the maximum in microseconds (default 200,
# read once by ggml_cpu_init; -1 spins without bound, ggml's own barrier,
# for comparisons: scripts/bench-barrier.py). The OpenMP build (`#pragma
# omp barrier`) is not changed.
# Usage: 12-cpu-barrier-sleep.sh GGML_DIR   (idempotent)
set -euo pipefail
python3 - "$1/src/ggml-cpu/ggml-cpu.c" <<'PY'
import sys

MARK = "ggml-rs patch 12-cpu-barrier-sleep"
path = sys.argv[1]
src = open(path).read()
if MARK in src:
    sys.exit(0)

pairs = [
    # The futex system call (Linux only).
    ("""#if defined(__gnu_linux__)
#include <syscall.h>
#endif
""", """#if defined(__gnu_linux__)
#include <syscall.h>
#endif
#if defined(__linux__) // %(m)s
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(SYS_futex)
#define GGML_BARRIER_FUTEX 1
#endif
#endif
""" % {"m": MARK}),
    # The sleeper count, beside the generation it sleeps on.
    ("""    atomic_int GGML_CACHE_ALIGN n_barrier_passed;
""", """    atomic_int GGML_CACHE_ALIGN n_barrier_passed;
    atomic_int n_barrier_sleeping; // %(m)s: threads in (or entering) the barrier's sleep
    atomic_int GGML_CACHE_ALIGN barrier_spin_us; // %(m)s: the adaptive spin time
""" % {"m": MARK}),
    # The barrier.
    ("""static struct ggml_state g_state = {0};

void ggml_barrier(struct ggml_threadpool * tp) {""", """static struct ggml_state g_state = {0};

#ifndef GGML_USE_OPENMP
// %(m)s: the most a barrier spins before it sleeps (us; -1: forever).
#define GGML_BARRIER_SPIN_US_DEFAULT 200
static int ggml_barrier_spin_max_us = GGML_BARRIER_SPIN_US_DEFAULT;

static void ggml_barrier_sleep_init(void) {
    const char * env = getenv("GGML_CPU_BARRIER_SPIN_US");
    if (env != NULL && *env != '\\0') {
        ggml_barrier_spin_max_us = atoi(env) < 0 ? -1 : atoi(env);
    }
}

// Spins until the generation leaves n_passed or the spin time is up;
// returns whether it left. The pool's spin time adapts: a wait that ends
// while spinning doubles it (up to the maximum), one that runs out halves
// it. Every 256th barrier spins the maximum, whatever the current time, and
// sets it back to the maximum when that is enough: a probe, so that a pool
// whose time went down under load spins again once the load is gone.
static bool ggml_barrier_spin(struct ggml_threadpool * tp, int n_passed) {
    const int spin_max = ggml_barrier_spin_max_us;
    int cur = -1;
    int spin_us = -1;
    const bool probe = (n_passed & 255) == 0;
    if (spin_max >= 0) {
        cur = atomic_load_explicit(&tp->barrier_spin_us, memory_order_relaxed);
        cur = cur < spin_max ? cur : spin_max;
        spin_us = probe ? spin_max : cur;
    }
    int64_t t_start = -1;
    for (uint32_t i = 1; ; i++) {
        if (atomic_load_explicit(&tp->n_barrier_passed, memory_order_relaxed) != n_passed) {
            if (cur >= 0 && cur < spin_max) {
                const int more = probe ? spin_max : 2*cur + 2;
                atomic_store_explicit(&tp->barrier_spin_us, more < spin_max ? more : spin_max, memory_order_relaxed);
            }
            return true;
        }
        ggml_thread_cpu_relax();
        if (spin_us >= 0 && (i %% 64) == 0) {
            const int64_t t = ggml_time_us();
            if (t_start < 0) {
                t_start = t;
            } else if (t - t_start >= spin_us) {
                if (cur > 0) {
                    atomic_store_explicit(&tp->barrier_spin_us, cur / 2, memory_order_relaxed);
                }
                return false;
            }
        }
    }
}

// Sleeps until the generation leaves n_passed.
static void ggml_barrier_sleep(struct ggml_threadpool * tp, int n_passed) {
    while (atomic_load_explicit(&tp->n_barrier_passed, memory_order_relaxed) == n_passed) {
#ifdef GGML_BARRIER_FUTEX
        atomic_fetch_add_explicit(&tp->n_barrier_sleeping, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&tp->n_barrier_passed, memory_order_seq_cst) == n_passed) {
            // Returns at once (EAGAIN) if the generation has moved; a
            // spurious return (EINTR) goes round the loop.
            syscall(SYS_futex, (int *) &tp->n_barrier_passed, FUTEX_WAIT_PRIVATE, n_passed, NULL, NULL, 0);
        }
        atomic_fetch_sub_explicit(&tp->n_barrier_sleeping, 1, memory_order_seq_cst);
#else
        sched_yield();
#endif
    }
}

// Called by the last thread after it has moved the generation on.
static void ggml_barrier_wake(struct ggml_threadpool * tp) {
#ifdef GGML_BARRIER_FUTEX
    if (atomic_load_explicit(&tp->n_barrier_sleeping, memory_order_seq_cst) > 0) {
        syscall(SYS_futex, (int *) &tp->n_barrier_passed, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
#else
    UNUSED(tp);
#endif
}
#endif // GGML_USE_OPENMP

void ggml_barrier(struct ggml_threadpool * tp) {""" % {"m": MARK}),
    ("""        // exit barrier (full seq-cst fence)
        atomic_fetch_add_explicit(&tp->n_barrier_passed, 1, memory_order_seq_cst);
        return;
    }

    // wait for other threads
    while (atomic_load_explicit(&tp->n_barrier_passed, memory_order_relaxed) == n_passed) {
        ggml_thread_cpu_relax();
    }
""", """        // exit barrier (full seq-cst fence)
        atomic_fetch_add_explicit(&tp->n_barrier_passed, 1, memory_order_seq_cst);
        ggml_barrier_wake(tp); // %(m)s
        return;
    }

    // wait for other threads: spin a while, then sleep (%(m)s)
    if (!ggml_barrier_spin(tp, n_passed)) {
        ggml_barrier_sleep(tp, n_passed);
    }
""" % {"m": MARK}),
    # A new pool starts with no sleepers.
    ("""        threadpool->n_barrier_passed = 0;
""", """        threadpool->n_barrier_passed = 0;
        threadpool->n_barrier_sleeping = 0; // %(m)s
        threadpool->barrier_spin_us  = GGML_BARRIER_SPIN_US_DEFAULT; // %(m)s
""" % {"m": MARK}),
    # A worker the current graph leaves out (the backend computes on fewer
    # threads than the pool has: src/ml/cpu_load.rs) sleeps until the next
    # graph instead of polling for it: a polling worker would take the core
    # the graph was given up for.
    ("""    const uint64_t n_rounds = 1024UL * 128 * threadpool->poll;
""", """    uint64_t n_rounds = 1024UL * 128 * threadpool->poll;
    if (state->ith >= (atomic_load_explicit(&threadpool->n_graph, memory_order_relaxed) & GGML_THREADPOOL_N_THREADS_MASK)) {
        n_rounds = 0; // %(m)s: left out of the current graph
    }
""" % {"m": MARK}),
    # Read the spin time once, with ggml's other settings.
    ("""        {
            const char * env = getenv("GGML_CPU_DISABLE_FUSION");
            ggml_cpu_disable_fusion = (env != NULL && atoi(env) == 1);
        }
""", """        {
            const char * env = getenv("GGML_CPU_DISABLE_FUSION");
            ggml_cpu_disable_fusion = (env != NULL && atoi(env) == 1);
        }

#ifndef GGML_USE_OPENMP
        ggml_barrier_sleep_init(); // %(m)s
#endif
""" % {"m": MARK}),
]
for old, new in pairs:
    n = src.count(old)
    if n != 1:
        sys.exit(f"12-cpu-barrier-sleep: expected one match in {path}, found {n}: {old.strip().splitlines()[0]}")
    src = src.replace(old, new)
open(path, "w").write(src)
PY
