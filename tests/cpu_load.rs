//! The CPU thread count that follows the load (src/ml/cpu_load.rs): other
//! processes' busy CPUs are seen, and a backend whose thread count was left
//! to the default computes on the CPUs they leave, with the same results.
mod common;
use common::*;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ggml_rs::ml::cpu_load::{CpuLoad, WINDOW};
use ggml_rs::ml::threads::affinity_cpus;
use ggml_rs::ml::{data, Backend, BackendParams, Context};

/// `k` busy loops in other processes, stopped on drop.
struct Busy(Vec<Child>);

impl Busy {
    fn start(k: usize) -> Busy {
        Busy((0..k).map(|_| Command::new("yes").stdout(Stdio::null()).spawn().expect("yes")).collect())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Busy loops beside us: two, or one on a single CPU.
fn loops(n: usize) -> usize {
    n.min(2)
}

#[test]
fn the_gauge_sees_other_processes() {
    let n = affinity_cpus();
    let mut g = CpuLoad::new(n);
    let k = loops(n);
    let _busy = Busy::start(k);
    std::thread::sleep(WINDOW + Duration::from_millis(250));
    // Each loop keeps most of a CPU busy (more of them are busy on a loaded
    // machine, never fewer), and this process sleeps: at most n - k + 1 free
    // CPUs (rounding), at least one thread.
    let t = g.threads(n);
    assert!(t >= 1 && t <= (n + 1 - k).max(1), "{n} CPUs, {k} busy loops beside: chose {t} threads");
}

fn graph(b: &Backend) -> Vec<u32> {
    let mut rng = Rng::new(7);
    let mut root = Context::new(b, 64).expect("context");
    let mut input = root.input();
    let (d, rows) = (256i64, 16i64);
    let x = upload(&mut input, F32, &[d, rows], &rng.vec((d * rows) as usize));
    let w = upload(&mut input, F32, &[d, d], &rng.vec((d * d) as usize));
    let mut h = x;
    for _ in 0..4 {
        let m = root.mul_mat(w, h).unwrap();
        h = root.rms_norm(m, None, 1e-6).unwrap();
    }
    root.compute(&[h]).expect("compute");
    data::read_f32(h, "test").expect("read").iter().map(|v| v.to_bits()).collect()
}

#[test]
fn a_default_thread_count_gives_way_to_other_processes() {
    let fixed = Backend::new(&BackendParams { n_threads: 1, ..Default::default() }).expect("backend");
    let want = graph(&fixed);
    assert_eq!(fixed.threads_now(), 1);
    drop(fixed);

    let b = Backend::new(&BackendParams::default()).expect("backend");
    let n = b.n_threads();
    assert_eq!(b.threads_now(), n);
    assert!(graph(&b) == want, "{n} threads: differs from one thread");
    if n < 2 {
        return; // one CPU: nothing to give way
    }
    let k = loops(n);
    let _busy = Busy::start(k);
    let until = Instant::now() + 3 * WINDOW;
    while Instant::now() < until {
        assert!(graph(&b) == want, "{} threads beside {k} busy loops: differs from one thread", b.threads_now());
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = b.threads_now();
    assert!(t < n, "{n} CPUs, {k} busy loops beside: still {t} threads");

    // An explicit count is kept whatever the load.
    let explicit = Backend::new(&BackendParams { n_threads: n, ..Default::default() }).expect("backend");
    std::thread::sleep(WINDOW);
    assert!(graph(&explicit) == want);
    assert_eq!(explicit.threads_now(), n);
}
