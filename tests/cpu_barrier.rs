//! ggml's CPU barrier with more threads than cores (our patch
//! scripts/patches/12-cpu-barrier-sleep.sh: a waiting thread spins a
//! bounded time, then sleeps in futex(2)). Many small graphs on 4 and 8
//! threads must give the one-thread results bit for bit and finish (no lost
//! wake-up); a thread waiting at a barrier for a slow one must sleep, not
//! burn the CPU time the slow one needs.
mod common;
use common::*;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use ggml_rs::ml::{data, Backend, BackendParams, Context, Tensor};
use ggml_rs::sys;

/// Generous: a deadlocked barrier fails here instead of hanging the suite.
const DEADLINE: Duration = Duration::from_secs(900);

/// Runs `f` on its own thread; fails the test if it has not returned by
/// DEADLINE (a stuck thread is left behind and dies with the process).
fn within_deadline<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: not done after {DEADLINE:?}: a barrier lost a wake-up"),
    }
}

fn backend_with(n_threads: usize) -> Backend {
    Backend::new(&BackendParams { n_threads, ..Default::default() }).expect("backend")
}

const D: i64 = 64;
const ROWS: i64 = 8;
const GRAPHS: u64 = 60;

/// One small graph: a block of matmuls, norms and activations (each node
/// ends at a barrier, the matmuls have one inside), read back as bits.
fn small_graph(b: &Backend, seed: u64) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    let mut root = Context::new(b, 256).expect("context");
    let mut input = root.input();
    let x = upload(&mut input, F32, &[D, ROWS], &rng.vec((D * ROWS) as usize));
    let w1 = upload(&mut input, F32, &[D, D], &rng.vec((D * D) as usize));
    let w2 = upload(&mut input, F32, &[D, D], &rng.vec((D * D) as usize));
    let g = upload(&mut input, F32, &[D], &rng.vec(D as usize));
    let mut h: Tensor = x;
    for _ in 0..3 {
        let n = root.rms_norm(h, Some(g), 1e-6).unwrap();
        let a = root.mul_mat(w1, n).unwrap();
        let s = root.silu(a, None).unwrap();
        let m = root.mul_mat(w2, s).unwrap();
        let p = root.softmax(m).unwrap();
        h = root.add(h, p).unwrap();
    }
    root.compute(&[h]).expect("compute");
    data::read_f32(h, "test").expect("read").iter().map(|v| v.to_bits()).collect()
}

#[test]
fn more_threads_than_cores_match_one_thread_bit_for_bit() {
    within_deadline("oversubscribed graphs", || {
        let one = backend_with(1);
        let want: Vec<Vec<u32>> = (0..GRAPHS).map(|s| small_graph(&one, s)).collect();
        drop(one);
        for n in [4, 8] {
            let b = backend_with(n);
            assert_eq!(b.n_threads(), n);
            for (s, w) in want.iter().enumerate() {
                let got = small_graph(&b, s as u64);
                assert!(got == *w, "{n} threads, graph {s}: differs from one thread");
            }
        }
    });
}

// ---- waiting threads sleep ------------------------------------------------------

const SLOW: Duration = Duration::from_secs(2);
const POOL: usize = 4;
/// Thread CPU time (ns) at the end of node 1 and at the start of node 2.
static LEFT: [AtomicU64; POOL] = [const { AtomicU64::new(0) }; POOL];
static ENTERED: [AtomicU64; POOL] = [const { AtomicU64::new(0) }; POOL];

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill.
    assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) }, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Node 1: thread 0 is slow; every thread notes its CPU time as it leaves.
unsafe extern "C" fn slow_first(
    _dst: *mut sys::ggml_tensor,
    _a: *const sys::ggml_tensor,
    ith: i32,
    _nth: i32,
    _ud: *mut std::ffi::c_void,
) {
    if ith == 0 {
        std::thread::sleep(SLOW);
    }
    LEFT[ith as usize].store(thread_cpu_ns(), Ordering::SeqCst);
}

/// Node 2: every thread notes its CPU time as it enters.
unsafe extern "C" fn note_entry(
    _dst: *mut sys::ggml_tensor,
    _a: *const sys::ggml_tensor,
    ith: i32,
    _nth: i32,
    _ud: *mut std::ffi::c_void,
) {
    ENTERED[ith as usize].store(thread_cpu_ns(), Ordering::SeqCst);
}

#[test]
fn threads_waiting_at_a_barrier_sleep() {
    within_deadline("barrier sleep", || {
        let b = backend_with(POOL);
        let mut root = Context::new(&b, 16).expect("context");
        let mut input = root.input();
        let x = upload(&mut input, F32, &[4], &[1., 2., 3., 4.]);
        let ctx = root.ggml_context();
        // n_tasks -1 (GGML_N_TASKS_MAX): every thread runs each node.
        let n1 = view_of(unsafe { sys::ggml_map_custom1(ctx, x.as_ptr(), Some(slow_first), -1, std::ptr::null_mut()) });
        let n2 = view_of(unsafe { sys::ggml_map_custom1(ctx, n1.as_ptr(), Some(note_entry), -1, std::ptr::null_mut()) });
        root.compute(&[n2]).expect("compute");
        // Threads 1.. waited at the barrier between the nodes for thread 0's
        // SLOW. A spinning barrier spends that time on the CPU (as much of
        // it as the scheduler gives: two thirds of a core each when nothing
        // else runs, still a tenth of a second at a load of 20 on 2 cores);
        // a sleeping one spends its bounded spin (200 us at most) and a
        // system call or two, however loaded the machine.
        for i in 1..POOL {
            let (left, entered) = (LEFT[i].load(Ordering::SeqCst), ENTERED[i].load(Ordering::SeqCst));
            assert!(left > 0 && entered >= left, "thread {i} did not run both nodes ({left}, {entered})");
            let waited = Duration::from_nanos(entered - left);
            eprintln!("thread {i}: {waited:?} of CPU time at the barrier");
            assert!(
                waited < Duration::from_millis(50),
                "thread {i} used {waited:?} of CPU time waiting at the barrier for a {SLOW:?} node: it spun"
            );
        }
    });
}
