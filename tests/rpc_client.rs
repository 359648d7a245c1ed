//! Our RPC client (ggml's, with patches 02 and 07) against broken and
//! hostile servers. A proxy in front of a real `ggml-rs-rpc-server` forwards
//! every command and rewrites chosen replies; the client adds the proxy as a
//! server and computes a small graph (an f32 and a q8_0 matmul, a softmax)
//! on its device.
//!
//! * Each lie that used to abort or hang the client (a buffer smaller than
//!   asked for, an alignment of 3 or 2^40, a NULL, unaligned or wrapping
//!   buffer base, 2^32-1 devices, an absurd allocation size, a reply of the
//!   wrong size, no reply at all) is an error naming the server and the
//!   violated rule; a server reporting more free than total memory is
//!   clamped.
//! * A fuzzer lies at random (values from a list of hostile ones, bit
//!   flips, wrong sizes, closes, stalls) and checks that every run ends with
//!   the right result or an error, never a crash, a panic or a hang, and
//!   that runs without a lie give the CPU's result.
//!
//! Each run is a child process (this binary, the ignored test `client_run`):
//! ggml's device registry is process-wide, a crash is reported with the
//! run's output instead of killing the test binary, and every run starts
//! from a clean state. GGML_RS_RPC_CLIENT_FUZZ_ITERS (default 120) and
//! GGML_RS_RPC_CLIENT_FUZZ_SEED set the fuzzer's runs and seed.
#![cfg(feature = "rpc")]

mod common;
use common::server::Server;
use common::*;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ggml_rs::ml::model::Layout;
use ggml_rs::ml::{data, rpc, Backend, BackendParams, Context, Result};
use ggml_rs::sys;

use common::protocol::{
    ALLOC_BUFFER, BUFFER_GET_BASE, DEVICE_COUNT, GET_ALIGNMENT, GET_ALLOC_SIZE, GET_DEVICE_MEMORY, GET_MAX_SIZE,
    GET_TENSOR, HELLO, WITH_REPLY,
};

// ---- the lying proxy -----------------------------------------------------------

/// What the proxy does with one reply.
enum Act {
    /// Sends the (possibly rewritten) reply.
    Send,
    /// Sends these bytes instead of a framed reply.
    Raw(Vec<u8>),
    /// Closes the connection.
    Close,
    /// Never answers (waits until the client gives up).
    Stall,
}

/// Rewrites the reply `rsp` to command `cmd` with request `req`; returns
/// what to do and whether it lied.
type Liar = dyn FnMut(u8, &[u8], &mut Vec<u8>) -> (Act, bool) + Send;

/// Starts a proxy in front of `upstream` on a free port; each connection
/// gets its own liar from `make`. Returns its endpoint and the number of
/// lies told. The proxy lives as long as the (child) process.
fn proxy(upstream: String, make: impl Fn() -> Box<Liar> + Send + 'static) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = listener.local_addr().unwrap().to_string();
    let lies = Arc::new(AtomicUsize::new(0));
    let told = lies.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let (up, liar, told) = (upstream.clone(), make(), told.clone());
            std::thread::spawn(move || relay(client, &up, liar, &told));
        }
    });
    (endpoint, lies)
}

fn relay(mut client: TcpStream, upstream: &str, mut liar: Box<Liar>, told: &AtomicUsize) -> std::io::Result<()> {
    let mut server = TcpStream::connect(upstream)?;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    loop {
        let mut cmd = [0u8; 1];
        if client.read(&mut cmd)? == 0 {
            return Ok(());
        }
        let req = frame(&mut client)?;
        server.write_all(&cmd)?;
        server.write_all(&(req.len() as u64).to_le_bytes())?;
        server.write_all(&req)?;
        if !WITH_REPLY.contains(&cmd[0]) {
            continue;
        }
        let mut rsp = frame(&mut server)?;
        let (act, lied) = liar(cmd[0], &req, &mut rsp);
        if lied {
            told.fetch_add(1, Ordering::SeqCst);
        }
        match act {
            Act::Send => {
                client.write_all(&(rsp.len() as u64).to_le_bytes())?;
                client.write_all(&rsp)?;
            }
            Act::Raw(bytes) => client.write_all(&bytes)?,
            Act::Close => return Ok(()),
            Act::Stall => {
                // Hold the connection open until the client closes it.
                let mut sink = [0u8; 4096];
                while client.read(&mut sink)? > 0 {}
                return Ok(());
            }
        }
    }
}

/// A size-prefixed message (our client is trusted: sizes are real).
fn frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut size = [0u8; 8];
    s.read_exact(&mut size)?;
    let mut v = vec![0u8; u64::from_le_bytes(size) as usize];
    s.read_exact(&mut v)?;
    Ok(v)
}

fn u64_at(v: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(v[at..at + 8].try_into().unwrap())
}

fn put_u64(v: &mut [u8], at: usize, x: u64) {
    v[at..at + 8].copy_from_slice(&x.to_le_bytes());
}

/// The named lies of `each_lie_is_an_error_not_a_crash`: told to the first
/// reply to their command on each connection, or to the n-th with a suffix
/// "@n" (the weights take the first buffer, the graph the second).
fn named_liar(lie: &str) -> Box<Liar> {
    let (name, nth) = match lie.split_once('@') {
        Some((n, k)) => (n.to_string(), k.parse::<usize>().unwrap()),
        None => (lie.to_string(), 1),
    };
    let mut seen = [0usize; 256];
    Box::new(move |cmd, req, rsp| {
        seen[cmd as usize] += 1;
        let n = seen[cmd as usize];
        let once = |c: u8, _: &mut ()| cmd == c && n == nth;
        let mut done = ();
        let lied = match name.as_str() {
            "devices" if once(DEVICE_COUNT, &mut done) => {
                rsp.copy_from_slice(&u32::MAX.to_le_bytes());
                true
            }
            "alignment-3" if once(GET_ALIGNMENT, &mut done) => {
                put_u64(rsp, 0, 3);
                true
            }
            "alignment-2^40" if once(GET_ALIGNMENT, &mut done) => {
                put_u64(rsp, 0, 1 << 40);
                true
            }
            "max-size-0" if once(GET_MAX_SIZE, &mut done) => {
                put_u64(rsp, 0, 0);
                true
            }
            "short-buffer" if once(ALLOC_BUFFER, &mut done) => {
                let asked = u64_at(req, 4);
                put_u64(rsp, 8, asked / 2);
                true
            }
            "null-base" if once(BUFFER_GET_BASE, &mut done) => {
                put_u64(rsp, 0, 0);
                true
            }
            "unaligned-base" if once(BUFFER_GET_BASE, &mut done) => {
                let b = u64_at(rsp, 0);
                put_u64(rsp, 0, b + 1);
                true
            }
            "wrapping-base" if once(BUFFER_GET_BASE, &mut done) => {
                put_u64(rsp, 0, u64::MAX - 4095);
                true
            }
            "alloc-size-2^60" if once(GET_ALLOC_SIZE, &mut done) => {
                put_u64(rsp, 0, 1 << 60);
                true
            }
            "free-over-total" if cmd == GET_DEVICE_MEMORY => {
                let total = u64_at(rsp, 8);
                put_u64(rsp, 0, total * 3);
                true
            }
            "reply-size" if once(GET_ALIGNMENT, &mut done) => {
                let mut raw = 9u64.to_le_bytes().to_vec();
                raw.extend([0u8; 9]);
                return (Act::Raw(raw), true);
            }
            "no-reply" if once(GET_TENSOR, &mut done) => return (Act::Stall, true),
            _ => false,
        };
        (Act::Send, lied)
    })
}

// ---- the workload ------------------------------------------------------------

const K: i64 = 64;
const M: i64 = 48;
const N: i64 = 8;

struct Data {
    w: Vec<u8>,
    q: Vec<u8>,
    x: Vec<u8>,
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn data() -> Data {
    let mut r = Rng::new(11);
    // q8_0: blocks of 32 weights, an f16 scale and 32 signed bytes.
    let mut q = Vec::new();
    for _ in 0..(K * M / 32) {
        q.extend(f16_bits(1.0 / 64.0).to_le_bytes());
        q.extend((0..32).map(|_| (r.next_u64() % 255) as u8));
    }
    Data { w: bytes(&r.vec((K * M) as usize)), q, x: bytes(&r.vec((K * N) as usize)) }
}

/// A one-layer model file holding W (f32), Q (q8_0) and two odd-sized
/// tensors between them, so that placing them in one buffer needs the
/// device's alignment.
fn model_file(d: &Data) -> std::path::PathBuf {
    use common::gguf_write::{TensorSpec, Writer};
    use ggml_rs::ml::gguf::Value;
    let spec = |name: &str, dtype: u32, ne: &[i64], data: Vec<u8>| TensorSpec {
        name: name.as_bytes().to_vec(),
        dtype,
        ne: ne.to_vec(),
        n_dims: None,
        offset: None,
        data: Some(data),
    };
    let w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(1))
        .tensor_spec(spec("blk.0.w.weight", F32, &[K, M], d.w.clone()))
        .tensor_spec(spec("blk.0.odd.weight", F32, &[33], vec![0; 33 * 4]))
        .tensor_spec(spec("blk.0.q.weight", sys::GGML_TYPE_Q8_0, &[K, M], d.q.clone()))
        .tensor_spec(spec("blk.0.odd2.weight", F16, &[7, 3], vec![0; 7 * 3 * 2]));
    let path = std::env::temp_dir().join(format!("ggml-rs-rpc-client-{}.gguf", std::process::id()));
    w.write_to(&path).unwrap();
    path
}

/// Loads the model with its layer on registry device `device` (None: the
/// CPU) and computes softmax(W·x + Q·x): the weights go through ggml's
/// tensor allocator, the graph's intermediates through its graph allocator.
fn workload(path: &std::path::Path, device: Option<usize>, d: &Data) -> Result<Vec<f32>> {
    let layout = Layout { layer_devices: vec![device, None], ..Default::default() };
    let params = BackendParams { n_threads: 1, ..Default::default() };
    let b = Backend::open(Some(path.to_str().unwrap()), &params, &layout)?;
    b.load(&mut |_| true)?;
    if let Some(dev) = device {
        for (name, buft, at, _) in b.placements() {
            assert!(at == dev && buft.starts_with("RPC"), "{name} in {buft} on device {at}");
        }
    }
    let (w, q) = (b.get("blk.0.w.weight").unwrap(), b.get("blk.0.q.weight").unwrap());
    let mut root = Context::new(&b, 64)?;
    let x = root.input().from_bytes(F32, &[K, N], &d.x)?;
    let h = root.mul_mat(w, x)?;
    let g = root.mul_mat(q, x)?;
    let s = root.add(h, g)?;
    let y = root.softmax(s)?;
    root.compute(&[y])?;
    data::read_f32(y, "y")
}

/// One client run in this (child) process: the CPU result first, then
/// through a proxy telling the lie `RPC_LIE` (a name, or `fuzz:SEED`) to
/// `RPC_UPSTREAM`. Prints "RUN ok|err lies=N: message".
fn client_run(lie: &str, upstream: &str) {
    // The fuzzer's runs take the timeout from GGML_RS_RPC_TIMEOUT (2 s);
    // the named lies set it through the C ABI.
    if !lie.starts_with("fuzz:") {
        let mut err = CError { status: 0, message: [0; 1024] };
        assert_eq!(unsafe { ggml_rs_rpc_set_reply_timeout(2, &mut err) }, 0);
    }
    let d = data();
    let path = model_file(&d);
    let want = workload(&path, None, &d).unwrap();
    let lie = lie.to_string();
    let (endpoint, lies) = proxy(upstream.to_string(), move || match lie.strip_prefix("fuzz:") {
        Some(seed) => fuzz_liar(seed.parse().unwrap()),
        None => named_liar(&lie),
    });
    let outcome = (|| -> Result<String> {
        let infos = rpc::add_server(&endpoint)?;
        for i in &infos {
            assert!(i.memory_free <= i.memory_total, "free > total: {i:?}");
        }
        let got = workload(&path, Some(infos[0].index), &d)?;
        let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
        Ok(format!("max |Δ| to the CPU {worst:e}"))
    })();
    let n = lies.load(Ordering::SeqCst);
    let _ = std::fs::remove_file(&path);
    match outcome {
        Ok(m) => println!("RUN ok lies={n}: {m}"),
        Err(e) => println!("RUN err lies={n}: {}", e.message),
    }
}

#[repr(C)]
struct CError {
    status: i32,
    message: [std::ffi::c_char; 1024],
}

extern "C" {
    fn ggml_rs_rpc_set_reply_timeout(seconds: u32, err: *mut CError) -> i32;
}

#[test]
#[ignore = "run in a child process by the tests of this file, with RPC_LIE set"]
fn client_run_child() {
    let (Ok(lie), Ok(up)) = (std::env::var("RPC_LIE"), std::env::var("RPC_UPSTREAM")) else {
        return;
    };
    client_run(&lie, &up);
}

/// Runs one client run in a child process; fails the test if it crashes,
/// panics or takes more than 60 s. Returns (ok, lies, message).
fn run_child(lie: &str, upstream: &str) -> (bool, usize, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["client_run_child", "--exact", "--ignored", "--nocapture", "--test-threads", "1"])
        .env("RPC_LIE", lie)
        .env("RPC_UPSTREAM", upstream)
        // the named lies must set their 2 s through the C ABI
        .env(rpc::TIMEOUT_ENV, if lie.starts_with("fuzz:") { "2" } else { "600" })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        let _ = out.read_to_string(&mut o);
        let _ = err.read_to_string(&mut e);
        let _ = tx.send((o, e));
    });
    let (o, e) = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(v) => v,
        Err(_) => {
            let _ = child.kill();
            panic!("{lie}: the client still runs after 60 s (a hang)");
        }
    };
    let status = child.wait().unwrap();
    let text = format!("{o}\n--- stderr ---\n{e}");
    assert!(status.success(), "{lie}: the client process failed ({status}):\n{text}");
    let line = o.lines().find_map(|l| l.split_once("RUN ").map(|(_, r)| r)).unwrap_or_else(|| panic!("{lie}: no outcome:\n{text}"));
    let (head, msg) = line.split_once(": ").unwrap();
    let (kind, lies) = head.split_once(" lies=").unwrap();
    (kind == "ok", lies.parse().unwrap(), msg.to_string())
}

#[test]
fn each_lie_is_an_error_not_a_crash() {
    let server = Server::start(&[]);
    // Without a lie, the proxy changes nothing.
    let (ok, lies, msg) = run_child("none", &server.endpoint);
    assert!(ok && lies == 0, "{msg}");
    assert!(msg.ends_with("0e0"), "the remote device differs from the CPU: {msg}");
    let cases = [
        ("devices", "DEVICE_COUNT returned 4294967295"),
        ("alignment-3", "GET_ALIGNMENT returned 3 "),
        ("alignment-2^40", "GET_ALIGNMENT returned 1099511627776"),
        ("max-size-0", "GET_MAX_SIZE returned 0 "),
        ("short-buffer", "returned a buffer of"),
        ("short-buffer@2", "returned a buffer of"),
        ("null-base", "BUFFER_GET_BASE returned 0, which is NULL"),
        ("unaligned-base", "is not aligned"),
        ("unaligned-base@2", "is not aligned"),
        ("wrapping-base", "wraps around the address space"),
        ("alloc-size-2^60", "GET_ALLOC_SIZE returned 1152921504606846976"),
        ("reply-size", "connection lost during GET_ALIGNMENT"),
        ("no-reply", "no reply to GET_TENSOR within 2 s"),
    ];
    for (lie, want) in cases {
        let t = Instant::now();
        let (ok, lies, msg) = run_child(lie, &server.endpoint);
        assert!(lies > 0, "{lie}: the lie was never told ({msg})");
        assert!(!ok, "{lie}: no error ({msg})");
        assert!(msg.contains(want), "{lie}: want {want:?} in the error, got: {msg}");
        assert!(msg.contains("127.0.0.1:"), "{lie}: the error does not name the server: {msg}");
        eprintln!("{lie}: {msg} ({:.1} s)", t.elapsed().as_secs_f64());
    }
    // More free than total memory is clamped, and the run succeeds.
    let (ok, lies, msg) = run_child("free-over-total", &server.endpoint);
    assert!(ok && lies > 0, "free-over-total: {msg}");
}

// ---- the fuzzer ----------------------------------------------------------------

/// Values a hostile server might send in a size or pointer field.
const HOSTILE: [u64; 12] =
    [0, 1, 3, 63, 4096, 1 << 31, 1 << 32, 1 << 40, 1 << 60, u32::MAX as u64, u64::MAX, u64::MAX - 4095];

/// Lies at random: each reply (HELLO excepted, rarely) with probability
/// 1/6, in one of several ways.
fn fuzz_liar(seed: u64) -> Box<Liar> {
    let mut r = Rng::new(seed);
    Box::new(move |cmd, _req, rsp| {
        if r.next_u64() % 6 != 0 || (cmd == HELLO && r.next_u64() % 8 != 0) {
            return (Act::Send, false);
        }
        let act = match r.next_u64() % 16 {
            // a field replaced by a hostile value, or scaled
            0..=5 if rsp.len() >= 4 => {
                let slots = rsp.len() / 8;
                if slots == 0 {
                    let v = HOSTILE[(r.next_u64() % 12) as usize] as u32;
                    rsp[..4].copy_from_slice(&v.to_le_bytes());
                } else {
                    let at = 8 * (r.next_u64() as usize % slots);
                    let old = u64_at(rsp, at);
                    let v = match r.next_u64() % 4 {
                        0 => old / 2,
                        1 => old.wrapping_add(1),
                        2 => old.wrapping_sub(1),
                        _ => HOSTILE[(r.next_u64() % 12) as usize],
                    };
                    put_u64(rsp, at, v);
                }
                Act::Send
            }
            // flipped bits
            0..=9 if !rsp.is_empty() => {
                for _ in 0..1 + r.next_u64() % 3 {
                    let i = r.next_u64() as usize % rsp.len();
                    rsp[i] ^= 1 << (r.next_u64() % 8);
                }
                Act::Send
            }
            // a reply of another size, announced or not
            10 | 11 => {
                let n = rsp.len() as u64;
                let size = [n + 1, n.saturating_sub(1), 0, 1 << 40, u64::MAX][(r.next_u64() % 5) as usize];
                let mut raw = size.to_le_bytes().to_vec();
                raw.extend(rsp.iter().take(64));
                Act::Raw(raw)
            }
            12 | 13 => Act::Close,
            14 if r.next_u64() % 4 == 0 => Act::Stall,
            _ => return (Act::Send, false),
        };
        (act, true)
    })
}

#[test]
fn a_fuzzing_server_never_crashes_the_client() {
    let iters: u64 = std::env::var("GGML_RS_RPC_CLIENT_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(120);
    let seed: u64 = std::env::var("GGML_RS_RPC_CLIENT_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let server = Server::start(&[]);
    let t = Instant::now();
    let (mut clean, mut survived, mut errors) = (0, 0, 0);
    for i in 0..iters {
        let run_seed = seed.wrapping_mul(1_000_003).wrapping_add(i);
        let (ok, lies, msg) = run_child(&format!("fuzz:{run_seed}"), &server.endpoint);
        match (ok, lies) {
            (true, 0) => {
                assert!(msg.ends_with("0e0"), "run seed {run_seed}: no lie, yet {msg}");
                clean += 1;
            }
            (true, _) => survived += 1,
            (false, _) => {
                assert!(lies > 0, "run seed {run_seed}: an error without a lie: {msg}");
                errors += 1;
            }
        }
    }
    eprintln!(
        "client fuzzer: {iters} runs (seed {seed}) in {:.1} s: {clean} without a lie, {survived} lied to \
         and computed, {errors} lied to and failed with an error",
        t.elapsed().as_secs_f64()
    );
    assert!(errors > 0 && clean > 0, "the fuzzer exercised too little");
}
