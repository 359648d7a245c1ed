//! Remote devices over ggml's RPC backend, against real `ggml-rs-rpc-server`
//! processes on 127.0.0.1 (free ports, killed at the end of each test).
//!
//! * Servers are enumerated with their memory and type, adding is
//!   idempotent, and backends put them before the CPU.
//! * A graph (matmul + add + softmax + matmul) with its tensors spread over
//!   the CPU and one or two servers gives the CPU-only result (|Δ| <= 1e-6;
//!   the servers run the same CPU kernels).
//! * Bad endpoints (malformed, nothing listening, a foreign service, a
//!   service that never answers) are errors, not aborts or hangs.
//! * A client speaking the wire protocol by hand that names a tensor
//!   outside its buffer (below it, across its end, wrapping around) in
//!   SET_TENSOR, GET_TENSOR or GRAPH_COMPUTE has its connection closed, and
//!   the server lives on and serves (patch 05; its log shows the check).
//! * Killing a server during computes makes compute (or the read of its
//!   result) fail, naming the endpoint, within 30 s; killing it between two
//!   computes makes the next compute fail; later computes and reads on it
//!   fail too; new backends leave it out, CPU-only work goes on, and adding
//!   the restarted server makes it usable again.
//! * Model layers placed on a remote device are loaded there and compute
//!   like the CPU.
//! * A graph alternating between two servers computes again to the same
//!   bits (the scheduler's rewritten sources are restored), and a cancel
//!   ends it at the next split, promptly, with Aborted (patch 04).
//! * GGML_RS_RPC_SERVERS adds servers at first enumeration (in a child
//!   process, since it is read once per process).
//!
//! ggml's device registry is process-wide and not thread-safe, so the tests
//! of this file run one at a time (SERIAL).
#![cfg(feature = "rpc")]

mod common;
use common::server::{free_port, Server};
use common::*;

use std::ffi::{c_char, CString};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ggml_rs::ml::{data, device, rpc, Backend, BackendParams, Context, DeviceInfo, DeviceType, ErrorKind, Result};
use ggml_rs::sys;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f` on another thread; fails the test if it takes more than 30 s
/// (a hang) and propagates a panic.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(v)) => v,
        Ok(Err(p)) => std::panic::resume_unwind(p),
        Err(_) => panic!("{what}: still running after 30 s (hang)"),
    }
}

fn new_backend() -> Backend {
    Backend::new(&BackendParams {
        n_threads: 2,
        ..Default::default()
    })
    .expect("backend")
}

/// Position of registry device `info` in the backend's scheduler order.
fn position(b: &Backend, info: &DeviceInfo) -> Option<usize> {
    b.devices().iter().position(|d| d.index == info.index)
}

fn cpu_position(b: &Backend) -> usize {
    let devs = b.devices();
    let i = devs
        .iter()
        .position(|d| d.device_type == DeviceType::Cpu)
        .expect("a CPU device");
    assert_eq!(i, devs.len() - 1, "the CPU comes last");
    i
}

const K: i64 = 64;
const M: i64 = 48;
const N: i64 = 8;
const P: i64 = 32;

struct Data {
    w1: Vec<f32>,
    x: Vec<f32>,
    b1: Vec<f32>,
    w2: Vec<f32>,
}

fn data() -> Data {
    let mut r = Rng::new(7);
    Data {
        w1: r.vec((K * M) as usize),
        x: r.vec((K * N) as usize),
        b1: r.vec(M as usize),
        w2: r.vec((M * P) as usize),
    }
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// y = W2 · softmax(W1 · x + b1), with W1, b1 and W2 on the backend's
/// devices `at[0..3]` (scheduler positions) and x in CPU input memory.
fn run(b: &Backend, at: [usize; 3], d: &Data) -> Result<Vec<f32>> {
    let mut root = Context::new(b, 256)?;
    let w1 = root.on_device(at[0]).from_bytes(F32, &[K, M], &bytes(&d.w1))?;
    let b1 = root.on_device(at[1]).from_bytes(F32, &[M], &bytes(&d.b1))?;
    let w2 = root.on_device(at[2]).from_bytes(F32, &[M, P], &bytes(&d.w2))?;
    let x = root.input().from_bytes(F32, &[K, N], &bytes(&d.x))?;
    let h = root.mul_mat(w1, x)?; // [M, N]
    let h = root.add(h, b1)?;
    let s = root.softmax(h)?;
    let y = root.mul_mat(w2, s)?; // [P, N]
    root.compute(&[y])?;
    data::read_f32(y, "y")
}

fn assert_same(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max);
    assert!(worst <= 1e-6, "{what}: max |Δ| = {worst}");
}

fn rpc_device(info: &DeviceInfo, endpoint: &str) {
    assert_eq!(info.library, "RPC", "{info:?}");
    assert_eq!(info.description, endpoint, "{info:?}");
    assert_eq!(info.device_type, DeviceType::Gpu, "{info:?}");
    assert!(info.memory_total > 0 && info.memory_free > 0, "{info:?}");
}

#[test]
fn remote_devices_compute_like_the_cpu() {
    let _s = serial();
    let a = Server::start(&["--mem", "2048"]);
    let b = Server::start(&[]);
    let before = device::count();

    let da = rpc::add_server(&a.endpoint).expect("add a");
    assert_eq!(da.len(), 1);
    rpc_device(&da[0], &a.endpoint);
    assert_eq!(da[0].memory_total, 2048 << 20, "--mem is what clients see");
    // The list form (the format of GGML_RS_RPC_SERVERS); `a` again is a no-op.
    let both = rpc::add_servers(&format!("{}, {}", a.endpoint, b.endpoint)).expect("add both");
    assert_eq!(both.len(), 2);
    assert_eq!(both[0].index, da[0].index, "adding again returns the same device");
    let db = both[1].clone();
    rpc_device(&db, &b.endpoint);
    assert_eq!(device::count(), before + 2);
    assert_eq!(rpc::add_server(&b.endpoint).unwrap()[0].index, db.index);
    assert_eq!(device::count(), before + 2, "idempotent");
    let listed = device::list();
    assert!(listed
        .iter()
        .any(|d| d.index == db.index && d.description == b.endpoint));
    assert!(rpc::lost(&a.endpoint).is_none() && rpc::lost(&b.endpoint).is_none());

    let be = new_backend();
    let (pa, pb) = (
        position(&be, &da[0]).expect("a in backend"),
        position(&be, &db).expect("b in backend"),
    );
    let cpu = cpu_position(&be);
    assert!(pa < cpu && pb < cpu);

    let d = data();
    let want = bounded("cpu", {
        let be = be.clone();
        let d = data();
        move || run(&be, [cpu, cpu, cpu], &d).unwrap()
    });
    assert_eq!(want.len(), (P * N) as usize);
    for at in [[pa, pa, pa], [pa, pb, pa], [pa, cpu, pb], [cpu, pb, cpu], [pb, pa, cpu]] {
        let got = bounded("remote compute", {
            let be = be.clone();
            let d = data();
            move || run(&be, at, &d).unwrap()
        });
        assert_same(&format!("placement {at:?}"), &got, &want);
    }
    // Data written to a remote device reads back unchanged.
    let root = Context::new(&be, 16).unwrap();
    let t = root.on_device(pb).from_bytes(F32, &[K, M], &bytes(&d.w1)).unwrap();
    assert_eq!(data::read_f32(t, "read").unwrap(), d.w1);
}

#[test]
fn bad_endpoints_are_errors() {
    let _s = serial();
    let before = device::count();
    for bad in ["host:notaport", "127.0.0.1", "", ":50052", "[::1]:50052", "127.0.0.1:0"] {
        let e = rpc::add_server(bad).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{bad}: {e}");
        assert!(e.message.contains("malformed endpoint"), "{}", e.message);
    }
    // Nothing listening.
    let ep = format!("127.0.0.1:{}", free_port());
    let e = bounded("closed port", move || rpc::add_server(&ep).unwrap_err());
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.message.contains("cannot connect"), "{}", e.message);
    // A service that hangs up at once.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let ep = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming().take(1) {
            drop(s);
        }
    });
    let e = bounded("foreign service", move || rpc::add_server(&ep).unwrap_err());
    assert!(e.message.contains("handshake"), "{}", e.message);
    // A service that accepts (the kernel does) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let ep = silent.local_addr().unwrap().to_string();
    let t0 = Instant::now();
    let e = bounded("silent service", move || rpc::add_server(&ep).unwrap_err());
    assert!(e.message.contains("no handshake reply"), "{}", e.message);
    assert!(t0.elapsed() < Duration::from_secs(15));
    drop(silent);
    assert_eq!(device::count(), before, "nothing was added");

    // The C ABI reports the same errors.
    let mut err = CError::new();
    let ep = CString::new("host:notaport").unwrap();
    assert_eq!(unsafe { ggml_rs_rpc_add_server(ep.as_ptr(), &mut err) }, 1);
    assert!(err.text().contains("malformed endpoint"), "{}", err.text());
    assert_eq!(unsafe { ggml_rs_rpc_add_server(std::ptr::null(), &mut err) }, 1);
    assert_eq!(unsafe { ggml_rs_rpc_server_status(ep.as_ptr(), &mut err) }, 1);
    assert!(unsafe { ggml_rs_rpc_available() });

    // Work goes on.
    let be = new_backend();
    let cpu = cpu_position(&be);
    assert_eq!(run(&be, [cpu, cpu, cpu], &data()).unwrap().len(), (P * N) as usize);
}

/// ggml's RPC wire protocol, spoken by hand as a buggy or hostile client
/// would (vendor/ggml/src/ggml-rpc/ggml-rpc.cpp, protocol 7.x, TCP).
///
/// * A request is `cmd: u8 | size: u64 | payload[size]`; a reply (only some
///   commands have one) is `size: u64 | payload[size]`. Payloads are the
///   packed (`#pragma pack(1)`) request structs in host byte order.
/// * The first command on a connection must be HELLO (14) with 24 bytes of
///   transport capabilities (zeros: plain TCP); the reply is major, minor,
///   patch, padding (u8 each) and the server's 24 capability bytes.
/// * The server has no failure reply: a command it cannot carry out ends
///   the connection (and frees the buffers allocated on it: they belong to
///   the connection). SET_TENSOR and GRAPH_COMPUTE have no reply at all.
/// * It serves one connection at a time; others wait in the listen queue.
mod wire {
    use super::*;

    pub use crate::common::protocol::{
        ALLOC_BUFFER, BUFFER_GET_BASE, CAPS, GET_TENSOR, GRAPH_COMPUTE, HELLO, MAJOR, SET_TENSOR, TENSOR,
    };

    /// The rpc_tensor of a 1-D F32 tensor of `n` elements (no op) claiming
    /// to lie at `data` in the server's buffer `buffer`.
    pub fn tensor(id: u64, buffer: u64, data: u64, n: u32) -> Vec<u8> {
        let dims = sys::GGML_MAX_DIMS as usize;
        let mut t = Vec::with_capacity(TENSOR);
        t.extend(id.to_ne_bytes());
        t.extend(sys::GGML_TYPE_F32.to_ne_bytes());
        t.extend(buffer.to_ne_bytes());
        for i in 0..dims {
            t.extend((if i == 0 { n } else { 1 }).to_ne_bytes()); // ne
        }
        for i in 0..dims {
            t.extend((if i == 0 { 4 } else { 4 * n }).to_ne_bytes()); // nb
        }
        t.extend(sys::GGML_OP_NONE.to_ne_bytes());
        t.extend([0u8; sys::GGML_MAX_OP_PARAMS as usize]);
        t.extend(0i32.to_ne_bytes()); // flags
        t.extend([0u8; 8 * sys::GGML_MAX_SRC as usize]);
        t.extend(0u64.to_ne_bytes()); // view_src
        t.extend(0u64.to_ne_bytes()); // view_offs
        t.extend(data.to_ne_bytes());
        let mut name = [0u8; sys::GGML_MAX_NAME as usize];
        name[..4].copy_from_slice(b"wire");
        t.extend(name);
        t.extend(0i32.to_ne_bytes()); // use_count
        assert_eq!(t.len(), TENSOR);
        t
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// A connection after HELLO, with a buffer allocated on device 0.
    pub struct Conn {
        s: TcpStream,
        /// The buffer's handle (remote_ptr), its base address and size.
        pub buffer: u64,
        pub base: u64,
        pub size: u64,
    }

    impl Conn {
        /// Fails when the server cannot be reached; panics when it
        /// answers but not as expected.
        pub fn open(endpoint: &str, buffer_size: u64) -> std::io::Result<Conn> {
            let addr: SocketAddr = endpoint.parse().unwrap();
            let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
            // Every read and write is bounded: a server that neither
            // answers nor closes fails the test instead of hanging it.
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut c = Conn { s, buffer: 0, base: 0, size: 0 };
            let hello = c.call(HELLO, &[0u8; CAPS])?;
            assert_eq!(hello.len(), 4 + CAPS, "HELLO reply");
            let v = format!("{}.{}.{}", hello[0], hello[1], hello[2]);
            assert_eq!(hello[0], MAJOR, "server protocol {v}: update this layout");
            let mut req = 0u32.to_ne_bytes().to_vec(); // device
            req.extend(buffer_size.to_ne_bytes());
            let r = c.call(ALLOC_BUFFER, &req).expect("ALLOC_BUFFER");
            assert_eq!(r.len(), 16, "ALLOC_BUFFER reply");
            (c.buffer, c.size) = (u64_at(&r, 0), u64_at(&r, 8));
            let ok = c.buffer != 0 && c.size >= buffer_size;
            assert!(ok, "ALLOC_BUFFER: {:#x}, {} bytes", c.buffer, c.size);
            let r = c.call(BUFFER_GET_BASE, &c.buffer.to_ne_bytes()).expect("BUFFER_GET_BASE");
            assert_eq!(r.len(), 8, "BUFFER_GET_BASE reply");
            c.base = u64_at(&r, 0);
            assert!(c.base != 0);
            Ok(c)
        }

        pub fn send(&mut self, cmd: u8, payload: &[u8]) -> std::io::Result<()> {
            let mut m = vec![cmd];
            m.extend((payload.len() as u64).to_ne_bytes());
            m.extend(payload);
            self.s.write_all(&m)
        }

        pub fn reply(&mut self) -> std::io::Result<Vec<u8>> {
            let mut n = [0u8; 8];
            self.s.read_exact(&mut n)?;
            let n = u64::from_ne_bytes(n);
            assert!(n <= 1 << 20, "reply of {n} bytes");
            let mut b = vec![0u8; n as usize];
            self.s.read_exact(&mut b)?;
            Ok(b)
        }

        pub fn call(&mut self, cmd: u8, payload: &[u8]) -> std::io::Result<Vec<u8>> {
            self.send(cmd, payload)?;
            self.reply()
        }

        /// SET_TENSOR: rpc_tensor | cache flag u8 | offset u64 | bytes.
        pub fn set(&mut self, tensor: &[u8], bytes: &[u8]) -> std::io::Result<()> {
            let mut req = tensor.to_vec();
            req.push(0);
            req.extend(0u64.to_ne_bytes());
            req.extend(bytes);
            self.send(SET_TENSOR, &req)
        }

        /// GET_TENSOR: rpc_tensor | offset u64 | size u64; the reply is the
        /// bytes. `send_get` only sends the request.
        pub fn send_get(&mut self, tensor: &[u8], size: u64) -> std::io::Result<()> {
            let mut req = tensor.to_vec();
            req.extend(0u64.to_ne_bytes());
            req.extend(size.to_ne_bytes());
            self.send(GET_TENSOR, &req)
        }

        pub fn get(&mut self, tensor: &[u8], size: u64) -> std::io::Result<Vec<u8>> {
            self.send_get(tensor, size)?;
            self.reply()
        }

        /// GRAPH_COMPUTE on device 0 of a graph whose one node is `tensor`:
        /// device u32 | n_nodes u32 | node ids u64[] | n_tensors u32 |
        /// rpc_tensor[].
        pub fn compute(&mut self, id: u64, tensor: &[u8]) -> std::io::Result<()> {
            let mut req = 0u32.to_ne_bytes().to_vec();
            req.extend(1u32.to_ne_bytes());
            req.extend(id.to_ne_bytes());
            req.extend(1u32.to_ne_bytes());
            req.extend(tensor);
            self.send(GRAPH_COMPUTE, &req)
        }

        /// Whether the server closed the connection (EOF or reset) rather
        /// than answering; a read timeout (5 s) fails the test.
        pub fn closed_by_server(&mut self) -> bool {
            use std::io::ErrorKind::{ConnectionAborted, ConnectionReset};
            let mut b = [0u8; 1];
            match self.s.read(&mut b) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) if matches!(e.kind(), ConnectionReset | ConnectionAborted) => true,
                Err(e) => panic!("neither a reply nor a closed connection: {e}"),
            }
        }
    }
}

#[test]
fn a_tensor_outside_its_buffer_is_rejected_not_fatal() {
    // Patch 05: the server's bounds check on a tensor named in a request
    // (deserialize_tensor) aborted the whole process; now the request fails.
    // The protocol has no failure reply, so a failed request ends its
    // connection: that is what a bad client sees (see `wire`).
    let _s = serial();
    let log = std::env::temp_dir().join(format!("ggml-rs-rpc-bounds-{}.log", std::process::id()));
    let mut server = Server::start_logged(&[], &log);
    let ep = server.endpoint.clone();
    const ELEMS: u32 = 16; // 64-byte tensors in 4 KiB buffers
    const BYTES: u64 = 4 * ELEMS as u64;
    let value: Vec<u8> = bytes(&Rng::new(11).vec(ELEMS as usize));

    let rejected = bounded("requests out of bounds", {
        let ep = ep.clone();
        let value = value.clone();
        move || {
            let mut rejected = 0;
            let mut last = "nothing".to_string();
            // A new connection each time: a failed request ends its own.
            let open = |last: &str| {
                wire::Conn::open(&ep, 4096)
                    .unwrap_or_else(|e| panic!("the server is gone after {last}: {e}"))
            };
            // Below the base, straddling the end, and wrapping around the
            // address space (data + size overflows).
            let places: [(&str, fn(&wire::Conn) -> u64); 3] = [
                ("below the buffer", |c| c.base.wrapping_sub(BYTES)),
                ("across its end", |c| c.base + c.size - BYTES / 2),
                ("wrapping around", |_| u64::MAX - BYTES / 2 + 1),
            ];
            for (what, at) in places {
                for op in ["SET_TENSOR", "GET_TENSOR"] {
                    let mut c = open(&last);
                    let t = wire::tensor(1, c.buffer, at(&c), ELEMS);
                    match op {
                        "SET_TENSOR" => c.set(&t, &value).unwrap(),
                        _ => c.send_get(&t, BYTES).unwrap(),
                    }
                    assert!(c.closed_by_server(), "{op} {what}: the connection goes on");
                    rejected += 1;
                    last = format!("{op} {what}");
                }
            }
            let mut c = open(&last);
            let t = wire::tensor(1, c.buffer, c.base.wrapping_sub(BYTES), ELEMS);
            c.compute(1, &t).unwrap();
            assert!(c.closed_by_server(), "GRAPH_COMPUTE below the buffer: the connection goes on");
            rejected + 1
        }
    });
    assert!(server.child.try_wait().unwrap().is_none(), "the server died");

    // It still serves: raw requests in bounds, then ggml's own client.
    let got = bounded("a valid round trip", {
        let (ep, value) = (ep.clone(), value.clone());
        move || {
            let mut c = wire::Conn::open(&ep, 4096).expect("the server is gone");
            let t = wire::tensor(1, c.buffer, c.base + c.size - BYTES, ELEMS); // the last bytes
            c.set(&t, &value).unwrap();
            c.get(&t, BYTES).expect("GET_TENSOR in bounds")
        }
    });
    assert_eq!(got, value, "read back what was written");
    let info = rpc::add_server(&ep).expect("add").remove(0);
    let be = new_backend();
    let (dev, cpu) = (position(&be, &info).expect("device in backend"), cpu_position(&be));
    let (want, got) = bounded("compute after bad requests", move || {
        let d = data();
        (run(&be, [cpu, cpu, cpu], &d).unwrap(), run(&be, [dev, dev, cpu], &d).unwrap())
    });
    assert_same("remote after bad requests", &got, &want);
    assert!(server.child.try_wait().unwrap().is_none(), "the server died");
    server.kill();

    // Each bad request reached the bounds check of patch 05 (and not some
    // other check before it), and nothing aborted.
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).ok();
    assert_eq!(
        text.matches("outside its buffer").count(),
        rejected,
        "server stderr:\n{text}"
    );
    assert!(!text.contains("GGML_ASSERT"), "server stderr:\n{text}");
}

#[test]
fn a_killed_server_is_an_error_not_a_crash() {
    let _s = serial();
    let mut server = Server::start(&[]);
    let ep = server.endpoint.clone();
    let info = rpc::add_server(&ep).expect("add").remove(0);
    let be = new_backend();
    let dev = position(&be, &info).expect("device in backend");
    let cpu = cpu_position(&be);
    let d = data();
    let want = run(&be, [cpu, cpu, cpu], &d).unwrap();
    assert_same("before the kill", &run(&be, [dev, dev, dev], &d).unwrap(), &want);

    // A graph on the remote device, computed before the kill.
    let mut pre_built = {
        let mut root = Context::new(&be, 64).unwrap();
        let w = root.on_device(dev).from_bytes(F32, &[K, M], &bytes(&d.w1)).unwrap();
        let x = root.input().from_bytes(F32, &[K, N], &bytes(&d.x)).unwrap();
        let y = root.mul_mat(w, x).unwrap();
        root.compute(&[y]).unwrap();
        Some((root, w, y))
    };

    // Compute in a loop on the remote device and kill the server meanwhile.
    let (tx, rx) = mpsc::channel();
    {
        let be = be.clone();
        std::thread::spawn(move || {
            let r = (|| -> Result<usize> {
                let mut r = Rng::new(3);
                let (k, m, n) = (512i64, 512i64, 32i64);
                let mut root = Context::new(&be, 64)?;
                let w = root
                    .on_device(dev)
                    .from_bytes(F32, &[k, m], &bytes(&r.vec((k * m) as usize)))?;
                let x = root
                    .input()
                    .from_bytes(F32, &[k, n], &bytes(&r.vec((k * n) as usize)))?;
                let y = root.mul_mat(w, x)?;
                let s = root.softmax(y)?;
                let started = Instant::now();
                let mut done = 0;
                while started.elapsed() < Duration::from_secs(20) {
                    root.compute(&[s])?;
                    data::read_f32(s, "loop")?;
                    done += 1;
                }
                Ok(done)
            })();
            let _ = tx.send(r);
        });
    }
    std::thread::sleep(Duration::from_millis(400));
    server.kill();
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("compute hung after the server was killed");
    let e = r.expect_err("compute kept succeeding without its server");
    assert_eq!(e.kind, ErrorKind::Compute, "{e}");
    assert!(e.message.contains(&format!("RPC server {ep} lost")), "{}", e.message);

    // It stays an error on the old backend: a graph built before the kill,
    // reading its remote data, new tensors there, any graph using it.
    let (mut pre, pre_w, pre_y) = pre_built.take().unwrap();
    // (the context comes back: its tensors live as long as it does)
    let (e, _pre) = bounded("graph built before the kill", move || {
        (pre.compute(&[pre_y]).unwrap_err(), pre)
    });
    assert_eq!(e.kind, ErrorKind::Compute);
    assert!(
        e.message.contains(&format!("compute: RPC server {ep} lost")),
        "{}",
        e.message
    );
    let e = data::read_f32(pre_w, "read").unwrap_err();
    assert!(
        e.message.contains(&format!("read: RPC server {ep} lost")),
        "{}",
        e.message
    );
    let e = bounded("compute after the kill", {
        let be = be.clone();
        let d = data();
        move || run(&be, [dev, cpu, cpu], &d).unwrap_err()
    });
    assert!(e.message.contains(&ep), "{}", e.message);
    assert!(rpc::lost(&ep).is_some());
    let s = rpc::servers().into_iter().find(|s| s.endpoint == ep).unwrap();
    assert!(s.lost.is_some() && s.devices == vec![info.index]);
    let mut err = CError::new();
    let c_ep = CString::new(ep.clone()).unwrap();
    assert_eq!(
        unsafe { ggml_rs_rpc_server_status(c_ep.as_ptr(), &mut err) },
        5,
        "GGML_RS_ERR_COMPUTE"
    );
    assert!(err.text().contains("lost"), "{}", err.text());
    // The old backend still computes on the CPU.
    assert_same("cpu on the old backend", &run(&be, [cpu, cpu, cpu], &d).unwrap(), &want);

    // New backends leave the lost device out; CPU-only work goes on.
    let be2 = new_backend();
    assert!(position(&be2, &info).is_none(), "the lost device is left out");
    let cpu2 = cpu_position(&be2);
    assert_same("cpu after the kill", &run(&be2, [cpu2, cpu2, cpu2], &d).unwrap(), &want);
    drop(be);

    // Adding it while it is down fails; after a restart it is usable again.
    let e = bounded("re-add while down", {
        let ep = ep.clone();
        move || rpc::add_server(&ep).unwrap_err()
    });
    assert!(e.message.contains("lost earlier"), "{}", e.message);
    let port = server.port;
    let _restarted = (0..50)
        .find_map(|_| {
            Server::try_start(port, &[]).or_else(|| {
                std::thread::sleep(Duration::from_millis(100));
                None
            })
        })
        .expect("restart on the same port");
    let again = rpc::add_server(&ep).expect("re-add after restart");
    assert_eq!(again[0].index, info.index);
    assert!(rpc::lost(&ep).is_none());
    assert_eq!(unsafe { ggml_rs_rpc_server_status(c_ep.as_ptr(), &mut err) }, 0);
    let be3 = new_backend();
    let dev3 = position(&be3, &info).expect("back in new backends");
    let cpu3 = cpu_position(&be3);
    let got = bounded("compute after restart", move || {
        run(&be3, [dev3, dev3, cpu3], &data()).unwrap()
    });
    assert_same("after restart", &got, &want);
}

#[test]
fn compute_after_a_kill_fails_naming_the_server() {
    let _s = serial();
    let mut server = Server::start(&[]);
    let ep = server.endpoint.clone();
    let info = rpc::add_server(&ep).expect("add").remove(0);
    let be = new_backend();
    let dev = position(&be, &info).expect("device in backend");
    let cpu = cpu_position(&be);
    let d = data();
    // Output on the remote device: ggml sends the compute without awaiting a
    // reply, so only the check for a closed connection can notice the kill.
    let mut root = Context::new(&be, 64).unwrap();
    let w = root.on_device(dev).from_bytes(F32, &[K, M], &bytes(&d.w1)).unwrap();
    let x = root.input().from_bytes(F32, &[K, N], &bytes(&d.x)).unwrap();
    let y = root.mul_mat(w, x).unwrap();
    root.compute(&[y]).unwrap();
    let want = data::read_f32(y, "y").unwrap();
    server.kill();
    let (e, _root) = bounded("compute after the kill", move || {
        (root.compute(&[y]).unwrap_err(), root)
    });
    assert_eq!(e.kind, ErrorKind::Compute, "{e}");
    assert!(
        e.message.contains(&format!("compute: RPC server {ep} lost")),
        "{}",
        e.message
    );
    assert!(
        data::read_f32(y, "y").is_err(),
        "a lost remote tensor never reads as data"
    );
    // CPU-only work goes on, on this backend and on a new one.
    let mut root = Context::new(&be, 64).unwrap();
    let w = root.on_device(cpu).from_bytes(F32, &[K, M], &bytes(&d.w1)).unwrap();
    let x = root.input().from_bytes(F32, &[K, N], &bytes(&d.x)).unwrap();
    let y = root.mul_mat(w, x).unwrap();
    root.compute(&[y]).unwrap();
    assert_same("cpu after the kill", &data::read_f32(y, "y").unwrap(), &want);
    let be2 = new_backend();
    assert!(position(&be2, &info).is_none());
}

#[test]
fn model_layers_placed_on_a_remote_device() {
    use common::gguf_write::Writer;
    use ggml_rs::ml::gguf::Value;
    use ggml_rs::ml::model::Layout;
    let _s = serial();
    let server = Server::start(&[]);
    let info = rpc::add_server(&server.endpoint).expect("add").remove(0);
    // Three layers; layers 1 and 2 go to the server.
    let mut w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(3))
        .tensor("token_embd.weight", F32, &[64, 16])
        .tensor("output_norm.weight", F32, &[64]);
    for i in 0..3 {
        w = w
            .tensor(format!("blk.{i}.attn_norm.weight"), F32, &[64])
            .tensor(format!("blk.{i}.attn_q.weight"), F16, &[64, 64])
            .tensor(format!("blk.{i}.ffn_up.weight"), sys::GGML_TYPE_Q4_0, &[64, 128]);
    }
    let dir = std::env::temp_dir().join(format!("ggml-rs-rpc-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.gguf");
    w.write_to(&path).unwrap();
    let layout = Layout {
        layer_devices: vec![None, Some(info.index), Some(info.index), None],
        ..Default::default()
    };
    let params = BackendParams {
        n_threads: 2,
        ..Default::default()
    };
    let b = Backend::open(Some(path.to_str().unwrap()), &params, &layout).expect("open");
    bounded("load", {
        let b = b.clone();
        move || b.load(&mut |_| true).unwrap()
    });
    for (name, buft, dev, layer) in b.placements() {
        let remote = matches!(layer, Some(1) | Some(2));
        assert_eq!(dev == info.index, remote, "{name} in {buft} on device {dev}");
        if remote {
            assert!(buft.starts_with("RPC"), "{name} in {buft}");
        }
    }
    // Weights read back from the server as written (F16 exactly), and a
    // product with a remote weight equals the same product on the CPU.
    let q = b.get("blk.1.attn_q.weight").unwrap();
    let qv = data::read_f32(q, "q").unwrap();
    let x = Rng::new(5).vec(64 * 4);
    let mut root = Context::new(&b, 64).unwrap();
    let xt = upload(&mut root.input(), F32, &[64, 4], &x);
    let y = root.mul_mat(q, xt).unwrap();
    let got = bounded("remote weight", move || {
        let v = eval(&mut root, y);
        (v, root)
    })
    .0;
    let mut cpu_ctx = Context::new(&b, 64).unwrap();
    let cpu = cpu_position(&b);
    let qc = upload(&mut cpu_ctx.on_device(cpu), F16, &[64, 64], &qv);
    let xc = upload(&mut cpu_ctx.input(), F32, &[64, 4], &x);
    let yc = cpu_ctx.mul_mat(qc, xc).unwrap();
    assert_same("remote weight vs cpu", &got, &eval(&mut cpu_ctx, yc));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn cancel_stops_a_graph_split_over_remote_devices() {
    // Weights of layers 0 and 2 on one server, 1 and 3 on another: a chain
    // through them alternates splits, none on the CPU. The RPC backend has
    // no abort callback; the cancel must end the graph at a split boundary.
    use common::gguf_write::Writer;
    use ggml_rs::ml::gguf::Value;
    use ggml_rs::ml::model::Layout;
    let _s = serial();
    let (sa, sb) = (Server::start(&[]), Server::start(&[]));
    let a = rpc::add_server(&sa.endpoint).expect("add a").remove(0);
    let bdev = rpc::add_server(&sb.endpoint).expect("add b").remove(0);
    const D: i64 = 512;
    let mut w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(4))
        .tensor("token_embd.weight", F32, &[D, 4]);
    for i in 0..4 {
        w = w.tensor(format!("blk.{i}.attn_q.weight"), F32, &[D, D]);
    }
    let dir = std::env::temp_dir().join(format!("ggml-rs-rpc-cancel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.gguf");
    w.write_to(&path).unwrap();
    let (ra, rb) = (Some(a.index), Some(bdev.index));
    let layout = Layout { layer_devices: vec![ra, rb, ra, rb, None], ..Default::default() };
    let b = Backend::open(Some(path.to_str().unwrap()), &BackendParams { n_threads: 2, ..Default::default() }, &layout).unwrap();
    let ws: Vec<_> = (0..4).map(|i| b.get(&format!("blk.{i}.attn_q.weight")).unwrap()).collect();
    let x0 = bounded("load", {
        let b = b.clone();
        let ws = ws.clone();
        move || {
            b.load(&mut |_| true).unwrap();
            let mut r = Rng::new(9);
            for &t in &ws {
                data::write(t, &bytes(&r.vec((D * D) as usize)), "w").unwrap();
            }
            r.vec((D * 256) as usize)
        }
    });
    // Rounds through the 4 layers: 4 matmuls of 512x512 by 512x256 each.
    let build = move |b: &Backend, rounds: usize| {
        let mut root = Context::new(b, 8 * rounds + 16).unwrap();
        let mut x = upload(&mut root.input(), F32, &[D, 256], &x0);
        for _ in 0..rounds {
            for &wt in &ws {
                x = root.mul_mat(wt, x).unwrap();
                x = root.rms_norm(x, None, 1e-6).unwrap();
            }
        }
        (root, x)
    };
    let (want, first, again) = bounded("cancelled compute", {
        let b = b.clone();
        move || {
            // The reference: a short graph, computed to the end.
            let (mut small, y) = build(&b, 4);
            small.compute(&[y]).unwrap();
            let want = data::read_f32(y, "y").unwrap();
            // Independent of the machine's speed and load: a graph far
            // longer than any delay the cancel can suffer (800 rounds:
            // 3,200 splits over the two servers, ~430 GFLOP), cancelled
            // once its compute is under way (or, on a loaded machine, just
            // before: it then stops at its first split).
            let (mut root, x) = build(&b, 800);
            let t = cancel_soon(&b);
            let first = root.compute(&[x]).map(|_| ());
            t.join().unwrap();
            // The request was consumed: the short graph computes to the
            // same bits.
            small.compute(&[y]).unwrap();
            (want, first, data::read_f32(y, "y").unwrap())
        }
    });
    let e = first.expect_err("the cancelled compute fails");
    assert_eq!(e.kind, ErrorKind::Aborted, "{}", e.message);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(want.iter().all(|x| x.is_finite()));
    assert_eq!(bits(&again), bits(&want), "a compute after the cancel");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn servers_from_the_environment() {
    let _s = serial();
    let server = Server::start(&[]);
    let unreachable = format!("127.0.0.1:{}", free_port());
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "env_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(rpc::SERVERS_ENV, format!("{}, {unreachable}", server.endpoint))
        .env("GGML_RS_TEST_EXPECT", format!("{} {unreachable}", server.endpoint))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("1 passed"), "the child test did not run:\n{text}");
}

/// Runs in the child process of `servers_from_the_environment`.
#[test]
#[ignore = "run by servers_from_the_environment with GGML_RS_RPC_SERVERS set"]
fn env_child() {
    let Ok(expect) = std::env::var("GGML_RS_TEST_EXPECT") else {
        return;
    };
    let (good, bad) = expect.split_once(' ').unwrap();
    // The first enumeration adds the servers of the variable.
    let devs = device::list();
    let remote: Vec<_> = devs.iter().filter(|d| d.library == "RPC").collect();
    assert_eq!(remote.len(), 1, "{devs:?}");
    rpc_device(remote[0], good);
    let errors = rpc::env_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains(bad), "{}", errors[0].message);
    assert_eq!(rpc::servers().len(), 1);
    let be = new_backend();
    let dev = be
        .devices()
        .iter()
        .position(|d| d.library == "RPC")
        .expect("remote device in the backend");
    let cpu = cpu_position(&be);
    let d = data();
    let want = run(&be, [cpu, cpu, cpu], &d).unwrap();
    assert_same("env server", &run(&be, [dev, dev, cpu], &d).unwrap(), &want);
}

#[repr(C)]
struct CError {
    status: i32,
    message: [c_char; 1024],
}
impl CError {
    fn new() -> CError {
        CError {
            status: 0,
            message: [0; 1024],
        }
    }
    fn text(&self) -> String {
        unsafe { std::ffi::CStr::from_ptr(self.message.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}
extern "C" {
    fn ggml_rs_rpc_add_server(endpoint: *const c_char, err: *mut CError) -> i32;
    fn ggml_rs_rpc_server_status(endpoint: *const c_char, err: *mut CError) -> i32;
    fn ggml_rs_rpc_available() -> bool;
}
