//! Soak, at the Rust level (no Go, no cgo): a model opened, loaded, run and
//! dropped again and again, and contexts built, computed and dropped again
//! and again on one backend, must not grow. As go/model/soak_test.go: the
//! cycles run in a child process whose C heap is exact (no per-thread
//! caches, one arena), the C heap's free pages are handed back after every
//! cycle, and over the last half of the cycles the least-squares slopes of
//! the resident set and of the C heap's bytes in use (mallinfo2) must stay
//! under a bound. Counts, not durations. Linux with glibc only.
mod common;
use common::*;
use common::gguf_write::Writer;
use ggml_rs::ml::gguf::Value;
use ggml_rs::ml::model::Layout;
use ggml_rs::ml::{data, Backend, BackendParams, Context};
use ggml_rs::sys;

const CHILD_ENV: &str = "GGML_RS_SOAK_CHILD";
/// The exact C heap: glibc's tunables for no tcache and one arena.
const TUNABLES: &str = "glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1";

const MODEL_CYCLES: usize = 400;
const CONTEXT_CYCLES: usize = 1000;
/// Bounds on the slopes over the last half, bytes per cycle (as the Go
/// test's: one leaked chunk a cycle is 32 bytes or more; the resident set
/// also holds what mallinfo does not see: mmapped CPU buffers and
/// scheduler tables, thread stacks).
const C_IN_USE_BOUND: f64 = 16.0;
const RSS_BOUND: f64 = 1024.0;

/// A small llama-like model with about 1 MB of weights (so its CPU buffer,
/// like the scheduler's tables, is mmapped: scripts/patches/08-page-buffers.sh).
fn model_file(dir: &std::path::Path) -> String {
    let mut w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(2))
        .tensor("token_embd.weight", F32, &[256, 512])
        .tensor("output_norm.weight", F32, &[256]);
    for i in 0..2 {
        w = w
            .tensor(format!("blk.{i}.attn_norm.weight"), F32, &[256])
            .tensor(format!("blk.{i}.attn_q.weight"), F16, &[256, 256])
            .tensor(format!("blk.{i}.ffn_up.weight"), sys::GGML_TYPE_Q8_0, &[256, 512]);
    }
    let path = dir.join("soak.gguf");
    w.write_to(&path).unwrap();
    path.to_string_lossy().into_owned()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod mem {
    pub fn c_in_use() -> f64 {
        let m = unsafe { libc::mallinfo2() };
        (m.uordblks + m.hblkhd) as f64
    }
    pub fn trim() {
        unsafe { libc::malloc_trim(0) };
    }
    pub fn rss() -> f64 {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: f64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as f64
    }
}

fn slope(ys: &[f64]) -> f64 {
    let n = ys.len() as f64;
    let (mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0);
    for (i, &y) in ys.iter().enumerate() {
        let x = i as f64;
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    (n * sxy - sx * sy) / (n * sxx - sx * sx)
}

/// Runs `cycle` n times, sampling after each; prints the curve and returns
/// the failures (empty when both slopes are under their bounds).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn run_cycles(what: &str, n: usize, mut cycle: impl FnMut(usize)) -> Vec<String> {
    let (mut rss, mut cmem) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        cycle(i);
        mem::trim();
        rss.push(mem::rss());
        cmem.push(mem::c_in_use());
    }
    let curve: String = (1..=10).map(|k| k * n / 10).map(|i| format!(" {i}:{:.0}/{:.0}", rss[i - 1] / 1024.0, cmem[i - 1] / 1024.0)).collect();
    let (rs, cs) = (slope(&rss[n / 2..]), slope(&cmem[n / 2..]));
    println!("{what}: {n} cycles; cycle:RSS KiB/C in use KiB 1:{:.0}/{:.0}{curve}", rss[0] / 1024.0, cmem[0] / 1024.0);
    println!(
        "{what}: slopes over cycles {}-{n}: RSS {rs:+.1} B/cycle (bound {RSS_BOUND}), C in use {cs:+.2} B/cycle (bound {C_IN_USE_BOUND})",
        n / 2 + 1
    );
    let mut failures = Vec::new();
    if rs > RSS_BOUND {
        failures.push(format!("{what}: the resident set still grows by {rs:.0} bytes a cycle over the last half"));
    }
    if cs > C_IN_USE_BOUND {
        failures.push(format!("{what}: the C heap still grows by {cs:.1} bytes a cycle over the last half"));
    }
    failures
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn child() {
    let dir = std::env::temp_dir().join(format!("ggml-rs-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = model_file(&dir);
    let params = BackendParams { n_threads: 2, alloc_memory: true, ..Default::default() };
    let mut failures = run_cycles("model", MODEL_CYCLES, |i| {
        let b = Backend::open(Some(&path), &params, &Layout::default()).unwrap();
        b.load(&mut |_| true).unwrap();
        let mut root = Context::new(&b, 256).unwrap();
        let mut inp = root.input();
        let ids = upload_i32(&mut inp, &[3], &[(i % 512) as i32, 7, 511]);
        let x = root.get_rows(b.get("token_embd.weight").unwrap(), ids).unwrap();
        let x = root.rms_norm(x, Some(b.get("blk.0.attn_norm.weight").unwrap()), 1e-6).unwrap();
        let q = root.mul_mat(b.get("blk.0.attn_q.weight").unwrap(), x).unwrap();
        let up = root.mul_mat(b.get("blk.1.ffn_up.weight").unwrap(), q).unwrap();
        let out = eval(&mut root, up);
        assert_eq!(out.len(), 512 * 3);
    });
    std::fs::remove_dir_all(&dir).ok();
    let b = Backend::new(&BackendParams { n_threads: 2, ..Default::default() }).unwrap();
    failures.extend(run_cycles("context", CONTEXT_CYCLES, |i| {
        let mut root = Context::new(&b, 64).unwrap();
        let mut inp = root.input();
        let vals: Vec<f32> = (0..32 * 32).map(|j| ((i + j) % 7) as f32 - 3.0).collect();
        let a = upload(&mut inp, F32, &[32, 32], &vals);
        let v = upload(&mut inp, F32, &[32, 1], &vals[..32]);
        let y = root.mul_mat(a, v).unwrap();
        let y = root.add(y, v).unwrap();
        let y = root.rms_norm(y, None, 1e-6).unwrap();
        let got = eval(&mut root, y);
        assert_eq!(got.len(), 32);
        assert!(data::read_f32(y, "soak").is_ok());
    }));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn soak() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os(CHILD_ENV).is_some() {
            child();
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["soak", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .env("GLIBC_TUNABLES", TUNABLES)
            .output()
            .unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        println!("child:\n{text}");
        assert!(out.status.success(), "the soak child failed:\n{text}");
    }
}
