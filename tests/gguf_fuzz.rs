//! A dependency-free mutation fuzzer for the GGUF reader (see fuzz/README.md).
//!
//! Seeds are written by `common::gguf_write` (tests/common/gguf_write.rs) (valid files of every
//! value and tensor type, and broken ones); each iteration applies one to
//! four mutations (bit flips, bytes set to 0/0xff/random, truncations,
//! insertions, deletions, splices, length and count fields inflated, type,
//! n_dims, dimension and offset fields set to edge values) and opens the
//! result. Any panic fails; every result must be Ok (with a consistent
//! tensor table) or a Format error (Io for files); an abort inside ggml kills
//! the test binary. Allocations are bounded: the process runs under a data
//! limit, and no single Rust allocation may exceed a bound proportional to
//! the input.
//!
//! Environment:
//! * `GGML_RS_FUZZ_SECS` (default 10): time budget.
//! * `GGML_RS_FUZZ_SEED` (default fixed): the mutation sequence.
//! * `GGML_RS_FUZZ_CORPUS=dir`: writes the seed corpus there, and adds every
//!   file already in it as a seed.
//! * `GGML_RS_FUZZ_SAVE=path`: writes each input to `path` before trying it
//!   (slow; to capture the input of an abort).

mod common;
use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::gguf_write::{sample_all_types, sample_full, sample_minimal, TensorSpec, Writer};
use ggml_rs::ml::gguf::{Array, Gguf, Value};
use ggml_rs::ml::ErrorKind;
use ggml_rs::sys::*;

/// The system allocator, recording the largest single request.
struct Tracking;
static LARGEST: AtomicUsize = AtomicUsize::new(0);
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LARGEST.fetch_max(n, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}
#[global_allocator]
static ALLOC: Tracking = Tracking;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

struct Seed {
    name: String,
    bytes: Vec<u8>,
    /// Positions of u64 length/count fields.
    lengths: Vec<usize>,
    /// Positions of u32 fields (version, n_dims, tensor types).
    u32s: Vec<usize>,
    /// Positions of i64/u64 fields (dimensions, tensor offsets).
    u64s: Vec<usize>,
}

fn seed(name: &str, w: &Writer) -> Seed {
    let wr = w.write();
    let b = &wr.bytes;
    let rd = |at: usize, n: usize| -> Option<u64> {
        b.get(at..at + n).map(|s| s.iter().rev().fold(0u64, |a, &x| a << 8 | x as u64))
    };
    let mut u32s = vec![4];
    let mut u64s = Vec::new();
    for &at in &wr.tensor_infos {
        let Some(len) = rd(at, 8) else { continue };
        let nd_at = at + 8 + len as usize;
        let Some(nd) = rd(nd_at, 4) else { continue };
        u32s.push(nd_at);
        let dims = (nd as usize).min(8);
        for d in 0..dims {
            u64s.push(nd_at + 4 + 8 * d);
        }
        u32s.push(nd_at + 4 + 8 * dims);
        u64s.push(nd_at + 8 + 8 * dims);
    }
    Seed { name: name.into(), bytes: wr.bytes, lengths: wr.length_fields, u32s, u64s }
}

fn seeds() -> Vec<Seed> {
    let t = |name: &str, dtype, ne: &[i64]| TensorSpec {
        name: name.into(),
        dtype,
        ne: ne.to_vec(),
        n_dims: None,
        offset: None,
        data: None,
    };
    let mut v2 =
        sample_minimal().with_alignment(64).tensor("a", GGML_TYPE_F32, &[3]).tensor("b", GGML_TYPE_Q8_0, &[32, 3]);
    v2.version = 2;
    let mut out = vec![
        seed("full", &sample_full()),
        seed("minimal", &sample_minimal()),
        seed("all-types", &sample_all_types()),
        seed("v2-align64", &v2),
        seed("empty", &Writer::new()),
        seed(
            "tokenizer",
            &sample_minimal()
                .kv("tokenizer.ggml.tokens", Value::Array(Array::Str((0..40).map(|i| format!("tok{i}")).collect())))
                .kv("tokenizer.ggml.scores", Value::Array(Array::F32((0..40).map(|i| i as f32).collect())))
                .tensor("w", GGML_TYPE_F16, &[16, 4]),
        ),
        seed("scalar", &Writer::new().tensor_spec(TensorSpec { n_dims: Some(0), ..t("s", GGML_TYPE_F32, &[]) })),
        // Broken seeds: mutations of these explore the checks' neighbourhood.
        seed(
            "overlap",
            &sample_minimal()
                .tensor("a", GGML_TYPE_F32, &[16])
                .tensor_spec(TensorSpec { offset: Some(32), ..t("b", GGML_TYPE_F32, &[16]) }),
        ),
        seed("dup-name", &sample_minimal().tensor("x", GGML_TYPE_F32, &[4]).tensor("x", GGML_TYPE_F32, &[4])),
        seed("bad-type", &sample_minimal().tensor_spec(TensorSpec { data: Some(vec![0; 64]), ..t("q", 4, &[32]) })),
        seed("nested", &Writer::new().kv_raw("n", common::gguf_write::nested_array_payload())),
        seed("align0", &sample_full().with_alignment(0)),
    ];
    if let Ok(dir) = std::env::var("GGML_RS_FUZZ_CORPUS") {
        std::fs::create_dir_all(&dir).expect("corpus dir");
        let mut names = std::collections::HashSet::new();
        for s in &out {
            names.insert(format!("{}.gguf", s.name));
            std::fs::write(format!("{dir}/{}.gguf", s.name), &s.bytes).expect("write seed");
        }
        for e in std::fs::read_dir(&dir).expect("corpus dir").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if names.contains(&name) {
                continue;
            }
            if let Ok(bytes) = std::fs::read(e.path()) {
                out.push(Seed { name, bytes, lengths: vec![], u32s: vec![], u64s: vec![] });
            }
        }
    }
    out
}

const LENGTHS: [u64; 12] = [0, 1, 7, 8, 255, 1 << 16, 1 << 30, (1 << 30) + 1, 1 << 31, 1 << 32, 1 << 63, u64::MAX];
const U32S: [u32; 12] = [0, 1, 2, 3, 4, 5, 29, 31, 39, 43, 1000, u32::MAX];
const I64S: [i64; 12] = [0, -1, 1, 2, 31, 32, 256, 1 << 31, 1 << 32, 1 << 62, i64::MAX, i64::MIN];

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if at + v.len() <= b.len() {
        b[at..at + v.len()].copy_from_slice(v);
    }
}

fn mutate(rng: &mut Rng, seeds: &[Seed], s: &Seed, b: &mut Vec<u8>) {
    let len = b.len();
    match rng.below(12) {
        0 if len > 0 => {
            let i = rng.below(len);
            b[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            b[i] = [0, 0xff, rng.next() as u8][rng.below(3)];
        }
        2 => b.truncate(rng.below(len + 1)),
        3 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(16);
            let ins: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            b.splice(at..at, ins);
        }
        4 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below(16.min(len - at));
            b.drain(at..at + n);
        }
        5 | 6 if !s.lengths.is_empty() => {
            let at = s.lengths[rng.below(s.lengths.len())];
            let old = b.get(at..at + 8).map_or(0, |x| u64::from_le_bytes(x.try_into().unwrap()));
            let v = match rng.below(5) {
                0 => LENGTHS[rng.below(LENGTHS.len())],
                1 => old.wrapping_add(1 + rng.below(8) as u64),
                2 => old.wrapping_sub(1),
                3 => len as u64 + rng.below(64) as u64,
                _ => rng.next() >> rng.below(64),
            };
            put(b, at, &v.to_le_bytes());
        }
        7 if !s.u32s.is_empty() => {
            let at = s.u32s[rng.below(s.u32s.len())];
            put(b, at, &U32S[rng.below(U32S.len())].to_le_bytes());
        }
        8 if !s.u64s.is_empty() => {
            let at = s.u64s[rng.below(s.u64s.len())];
            let v = if rng.below(4) == 0 { rng.next() as i64 } else { I64S[rng.below(I64S.len())] };
            put(b, at, &v.to_le_bytes());
        }
        9 if len >= 4 => {
            let at = rng.below(len - 3);
            put(b, at, &U32S[rng.below(U32S.len())].to_le_bytes());
        }
        10 => {
            // Splice: our head, another seed's tail.
            let o = &seeds[rng.below(seeds.len())].bytes;
            let cut = rng.below(len + 1);
            let from = rng.below(o.len() + 1);
            b.truncate(cut);
            b.extend_from_slice(&o[from..]);
        }
        _ if len > 0 => {
            // Duplicate a chunk in place.
            let at = rng.below(len);
            let n = 1 + rng.below(32.min(len - at));
            let chunk = b[at..at + n].to_vec();
            let to = rng.below(b.len() + 1);
            b.splice(to..to, chunk);
        }
        _ => {}
    }
}

/// Checks what the reader said about `input`; returns a short outcome label.
fn check(input: &[u8], r: ggml_rs::ml::Result<Gguf>, from_file: bool) -> String {
    match r {
        Ok(g) => {
            assert_eq!(g.file_size(), input.len() as u64);
            assert!(g.data_offset() <= g.file_size());
            let mut names = std::collections::HashSet::new();
            let mut spans: Vec<(u64, u64)> = Vec::new();
            for t in g.tensors() {
                assert!(names.insert(t.name.clone()), "duplicate tensor {}", t.name);
                assert!(!t.name.is_empty() && t.ne.iter().all(|&d| d > 0));
                assert!(ggml_rs::ml::tensor::is_valid_type(t.dtype));
                assert!(t.offset >= g.data_offset() && t.offset + t.size <= g.file_size(), "{t:?}");
                assert_eq!(t.offset % g.alignment(), 0);
                spans.push((t.offset, t.offset + t.size));
            }
            spans.sort();
            assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "overlap");
            for k in g.keys() {
                assert!(g.get(k).is_some(), "key {k}");
            }
            let _ = g.arch();
            "ok".into()
        }
        Err(e) => {
            let want =
                if from_file { [ErrorKind::Format, ErrorKind::Io] } else { [ErrorKind::Format, ErrorKind::Format] };
            assert!(want.contains(&e.kind), "unexpected error kind: {e:?}");
            assert!(!e.message.contains("disagrees"), "{}", e.message);
            assert!(!e.message.contains("ggml rejected"), "the pre-check let through what ggml rejects: {}", e.message);
            // Label: the message without numbers and names.
            let tail = e.message.split_once(": ").map_or(e.message.as_str(), |(_, t)| t);
            let mut label: String = tail.split(['\'', '"']).step_by(2).collect::<Vec<_>>().join("_");
            label.retain(|c| !c.is_ascii_digit());
            let label = label.split([':', '(', '[']).next().unwrap_or("");
            label.split_whitespace().take(8).collect::<Vec<_>>().join(" ")
        }
    }
}

/// Caps the process's data segment (Linux counts private mappings in it),
/// so an unbounded allocation in ggml fails instead of exhausting the box.
fn limit_memory(bytes: u64) {
    let mut cur = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_DATA, &mut cur) == 0
            && (cur.rlim_cur == libc::RLIM_INFINITY || cur.rlim_cur > bytes)
        {
            let new = libc::rlimit { rlim_cur: bytes, rlim_max: cur.rlim_max };
            libc::setrlimit(libc::RLIMIT_DATA, &new);
        }
    }
}

#[test]
fn fuzz_gguf_reader() {
    let secs: f64 = std::env::var("GGML_RS_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let seed_val: u64 =
        std::env::var("GGML_RS_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0067_6775_662d_7273);
    let save = std::env::var("GGML_RS_FUZZ_SAVE").ok();
    limit_memory(4 << 30);
    let seeds = seeds();
    let dir = std::env::temp_dir().join(format!("ggml-rs-gguf-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("input.gguf");
    let fail_dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("gguf-fuzz-failures");

    // Seeds first, unmutated: the valid ones must open.
    for s in &seeds {
        let r = Gguf::from_bytes(&s.bytes);
        let valid = ["full", "minimal", "all-types", "v2-align64", "empty", "tokenizer", "scalar"];
        if valid.contains(&s.name.as_str()) {
            assert!(r.is_ok(), "seed {}: {:?}", s.name, r.err());
        }
    }

    let mut rng = Rng(seed_val | 1);
    let mut outcomes: std::collections::BTreeMap<String, u64> = Default::default();
    let start = Instant::now();
    let budget = Duration::from_secs_f64(secs);
    let mut iters = 0u64;
    let mut input = Vec::new();
    while start.elapsed() < budget {
        for _ in 0..64 {
            let s = &seeds[rng.below(seeds.len())];
            input.clear();
            input.extend_from_slice(&s.bytes);
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &seeds, s, &mut input);
            }
            if let Some(p) = &save {
                std::fs::write(p, &input).unwrap();
            }
            let via_file = iters % 16 == 0;
            LARGEST.store(0, Ordering::Relaxed);
            let res = catch_unwind(AssertUnwindSafe(|| {
                let r = if via_file {
                    std::fs::write(&file, &input).unwrap();
                    Gguf::open(&file)
                } else {
                    Gguf::from_bytes(&input)
                };
                check(&input, r, via_file)
            }));
            let largest = LARGEST.load(Ordering::Relaxed);
            let bound = 64 * input.len() + (1 << 20);
            let outcome = match res {
                Ok(o) if largest <= bound => o,
                other => {
                    std::fs::create_dir_all(&fail_dir).unwrap();
                    let path = fail_dir.join(format!("seed{seed_val}-iter{iters}.gguf"));
                    std::fs::write(&path, &input).unwrap();
                    match other {
                        Ok(_) => panic!(
                            "iteration {iters}: a {largest}-byte allocation for a {}-byte input; input saved to {}",
                            input.len(),
                            path.display()
                        ),
                        Err(p) => {
                            eprintln!("iteration {iters} (seed {}) failed; input saved to {}", s.name, path.display());
                            std::panic::resume_unwind(p)
                        }
                    }
                }
            };
            *outcomes.entry(outcome).or_default() += 1;
            iters += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let el = start.elapsed().as_secs_f64();
    println!(
        "gguf fuzz: {iters} iterations in {el:.1} s ({:.0}/s), seed {seed_val}, {} seeds",
        iters as f64 / el,
        seeds.len()
    );
    let mut by_count: Vec<_> = outcomes.into_iter().collect();
    by_count.sort_by_key(|b| std::cmp::Reverse(b.1));
    for (o, n) in by_count {
        println!("{n:>10}  {o}");
    }
}
