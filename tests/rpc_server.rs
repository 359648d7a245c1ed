//! ggml-rs-rpc-server against hostile clients, over real sockets on
//! 127.0.0.1 (each test starts its own server on a free port).
//!
//! * Each class of request that killed upstream's server (a header
//!   announcing 2^63 bytes, a shape whose size overflows, an unknown op, a
//!   node missing a source, a source type its kernel asserts on, a custom
//!   op, a cycle) ends only its own connection, with the reason in the log;
//!   the server answers the next client.
//! * A graph 100,000 nodes deep computes (upstream's recursive rebuild
//!   overflowed its stack), to the right value.
//! * An idle client, or one that never says HELLO, blocks nobody; a client
//!   that announces 2 GiB and sends nothing costs no 2 GiB.
//! * When every client slot is taken, a connection idle past
//!   --idle-timeout gives its slot to a new client (one that keeps working
//!   does not, and an idle one keeps its slot while nobody needs it); HELLO
//!   and each request must be through in time, however their bytes trickle.
//! * Clients together stay within --mem, and within --max-clients.
//! * A fuzzer sends random and mutated requests and graphs (bounded by count
//!   and time; GGML_RS_RPC_FUZZ_ITERS for more) and after each checks that a
//!   new client gets served, and at the end that no connection's process
//!   died: every bad request was refused by the checks, not by a crash.
#![cfg(feature = "rpc")]

mod common;
use common::Rng;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ggml_rs::sys;

use common::protocol::{ALLOC_BUFFER, BUFFER_GET_BASE, GET_TENSOR, GRAPH_COMPUTE, HELLO, SET_TENSOR, TENSOR};

struct Server {
    child: Child,
    endpoint: String,
    log: PathBuf,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        for attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let log = std::env::temp_dir().join(format!("ggml-rs-rpc-server-{}-{port}-{attempt}.log", std::process::id()));
            let file = std::fs::File::create(&log).unwrap();
            let child = Command::new(env!("CARGO_BIN_EXE_ggml-rs-rpc-server"))
                .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--threads", "1"])
                .args(extra)
                .stdout(Stdio::from(file.try_clone().unwrap()))
                .stderr(Stdio::from(file))
                .spawn()
                .expect("spawn ggml-rs-rpc-server");
            let mut s = Server { child, endpoint: format!("127.0.0.1:{port}"), log };
            // Ready once it says so: a probe connection would hold one of
            // the server's client slots until its process is collected.
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && s.child.try_wait().unwrap().is_none() {
                if s.text().contains("listening on") {
                    return s;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("could not start ggml-rs-rpc-server");
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// A full round trip on a new connection: HELLO, a buffer, 64 bytes
    /// written and read back.
    fn serves(&self) -> Result<(), String> {
        let mut c = Conn::open(&self.endpoint, 4096).map_err(|e| format!("open: {e}"))?;
        let data: Vec<u8> = (0..64u8).collect();
        let t = tensor_1d(1, c.buffer, c.base, 16);
        c.set(&t, &data).map_err(|e| format!("set: {e}"))?;
        let got = c.get(&t, 64).map_err(|e| format!("get: {e}"))?;
        if got != data {
            return Err("read back other bytes".into());
        }
        Ok(())
    }

    /// Waits until the log has `n` lines containing `what` (the connection
    /// processes write their refusals as they end).
    fn wait_log(&self, what: &str, n: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let t = self.text();
            if t.matches(what).count() >= n || Instant::now() > deadline {
                return t;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// An rpc_tensor with every field given.
#[allow(clippy::too_many_arguments)]
fn wire_tensor(id: u64, ty: u32, buffer: u64, ne: [u32; 4], nb: [u32; 4], op: u32, params: &[i32], src: &[u64], data: u64) -> Vec<u8> {
    let mut t = Vec::with_capacity(TENSOR);
    t.extend(id.to_ne_bytes());
    t.extend(ty.to_ne_bytes());
    t.extend(buffer.to_ne_bytes());
    ne.iter().for_each(|v| t.extend(v.to_ne_bytes()));
    nb.iter().for_each(|v| t.extend(v.to_ne_bytes()));
    t.extend(op.to_ne_bytes());
    for i in 0..16 {
        t.extend(params.get(i).copied().unwrap_or(0).to_ne_bytes());
    }
    // ggml's CPU backend computes only nodes marked for it (as
    // ggml_build_forward_expand marks them).
    let flags = if op == 0 { 0 } else { sys::GGML_TENSOR_FLAG_COMPUTE as i32 };
    t.extend(flags.to_ne_bytes());
    for i in 0..10 {
        t.extend(src.get(i).copied().unwrap_or(0).to_ne_bytes());
    }
    t.extend([0u8; 16]); // view_src, view_offs
    t.extend(data.to_ne_bytes());
    t.extend([0u8; 64]);
    t.extend(0i32.to_ne_bytes());
    assert_eq!(t.len(), TENSOR);
    t
}

/// A contiguous F32 tensor of shape `ne` at `data`.
fn f32_tensor(id: u64, buffer: u64, data: u64, ne: [u32; 4], op: u32, src: &[u64], params: &[i32]) -> Vec<u8> {
    let nb = [4, 4 * ne[0], 4 * ne[0] * ne[1], 4 * ne[0] * ne[1] * ne[2]];
    wire_tensor(id, sys::GGML_TYPE_F32 as u32, buffer, ne, nb, op, params, src, data)
}

fn tensor_1d(id: u64, buffer: u64, data: u64, n: u32) -> Vec<u8> {
    f32_tensor(id, buffer, data, [n, 1, 1, 1], sys::GGML_OP_NONE as u32, &[], &[])
}

/// GRAPH_COMPUTE's payload: device 0, the node ids, the tensors.
fn graph(nodes: &[u64], tensors: &[Vec<u8>]) -> Vec<u8> {
    let mut g = 0u32.to_ne_bytes().to_vec();
    g.extend((nodes.len() as u32).to_ne_bytes());
    nodes.iter().for_each(|n| g.extend(n.to_ne_bytes()));
    g.extend((tensors.len() as u32).to_ne_bytes());
    tensors.iter().for_each(|t| g.extend(t));
    g
}

struct Conn {
    s: TcpStream,
    buffer: u64,
    base: u64,
    size: u64,
}

impl Conn {
    fn connect(endpoint: &str) -> std::io::Result<Conn> {
        let addr: SocketAddr = endpoint.parse().unwrap();
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        s.set_write_timeout(Some(Duration::from_secs(20)))?;
        Ok(Conn { s, buffer: 0, base: 0, size: 0 })
    }

    /// A connection after HELLO with a buffer of `size` bytes.
    fn open(endpoint: &str, size: u64) -> std::io::Result<Conn> {
        let mut c = Conn::connect(endpoint)?;
        let r = c.call(HELLO, &[0u8; 24])?;
        assert_eq!(&r[..3], &[7, 0, 0], "HELLO reply");
        let (b, n) = c.alloc(size)?;
        assert!(b != 0 && n >= size, "ALLOC_BUFFER of {size}: {b:#x}, {n}");
        c.buffer = b;
        c.size = n;
        let r = c.call(BUFFER_GET_BASE, &b.to_ne_bytes())?;
        c.base = u64::from_ne_bytes(r[..8].try_into().unwrap());
        Ok(c)
    }

    fn alloc(&mut self, size: u64) -> std::io::Result<(u64, u64)> {
        let mut req = 0u32.to_ne_bytes().to_vec();
        req.extend(size.to_ne_bytes());
        let r = self.call(ALLOC_BUFFER, &req)?;
        Ok((u64::from_ne_bytes(r[..8].try_into().unwrap()), u64::from_ne_bytes(r[8..16].try_into().unwrap())))
    }

    fn send(&mut self, cmd: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut m = vec![cmd];
        m.extend((payload.len() as u64).to_ne_bytes());
        m.extend(payload);
        self.s.write_all(&m)
    }

    fn reply(&mut self) -> std::io::Result<Vec<u8>> {
        let mut n = [0u8; 8];
        self.s.read_exact(&mut n)?;
        let n = u64::from_ne_bytes(n);
        assert!(n <= 1 << 24, "reply of {n} bytes");
        let mut b = vec![0u8; n as usize];
        self.s.read_exact(&mut b)?;
        Ok(b)
    }

    fn call(&mut self, cmd: u8, payload: &[u8]) -> std::io::Result<Vec<u8>> {
        self.send(cmd, payload)?;
        self.reply()
    }

    fn set(&mut self, t: &[u8], bytes: &[u8]) -> std::io::Result<()> {
        let mut req = t.to_vec();
        req.push(0);
        req.extend(0u64.to_ne_bytes());
        req.extend(bytes);
        self.send(SET_TENSOR, &req)
    }

    fn get(&mut self, t: &[u8], size: u64) -> std::io::Result<Vec<u8>> {
        let mut req = t.to_vec();
        req.extend(0u64.to_ne_bytes());
        req.extend(size.to_ne_bytes());
        self.call(GET_TENSOR, &req)
    }

    /// True when the server closed the connection (EOF or reset).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted),
        }
    }
}

fn op(o: sys::ggml_op) -> u32 {
    o as u32
}

#[test]
fn each_class_of_bad_request_ends_only_its_connection() {
    let mut srv = Server::start(&[]);
    type Case = (&'static str, &'static str, fn(&mut Conn) -> std::io::Result<()>);
    let cases: Vec<Case> = vec![
        ("a header announcing 2^63 bytes", "more than this request may hold", |c| {
            let mut m = vec![GRAPH_COMPUTE];
            m.extend((1u64 << 63).to_ne_bytes());
            c.s.write_all(&m)
        }),
        ("a SET_TENSOR of 2^63 bytes", "outside its buffer", |c| {
            let mut m = vec![SET_TENSOR];
            m.extend((1u64 << 63).to_ne_bytes());
            m.extend(tensor_1d(1, c.buffer, c.base, 16));
            m.push(0);
            m.extend(0u64.to_ne_bytes());
            c.s.write_all(&m)
        }),
        ("a shape whose size overflows", "more than 2^63 elements", |c| {
            let t = f32_tensor(1, c.buffer, c.base, [u32::MAX; 4], op(sys::GGML_OP_NONE), &[], &[]);
            c.get(&t, 4).map(drop)
        }),
        ("strides spanning past the buffer", "outside its buffer", |c| {
            let t = wire_tensor(1, 0, c.buffer, [2, 2, 1, 1], [4, u32::MAX, 0, 0], 0, &[], &[], c.base);
            c.get(&t, 4).map(drop)
        }),
        ("an unknown type", "unknown type", |c| {
            let t = wire_tensor(1, 9999, c.buffer, [1, 1, 1, 1], [4, 4, 4, 4], 0, &[], &[], c.base);
            c.get(&t, 4).map(drop)
        }),
        ("an unknown op", "op #200 is not served", |c| {
            let a = tensor_1d(1, c.buffer, c.base, 4);
            let n = f32_tensor(2, c.buffer, c.base + 64, [4, 1, 1, 1], 200, &[1], &[]);
            c.send(GRAPH_COMPUTE, &graph(&[2], &[a, n]))
        }),
        ("a node missing a source", "source 1 is missing", |c| {
            let a = tensor_1d(1, c.buffer, c.base, 4);
            let n = f32_tensor(2, c.buffer, c.base + 64, [4, 1, 1, 1], op(sys::GGML_OP_ADD), &[1], &[]);
            c.send(GRAPH_COMPUTE, &graph(&[2], &[a, n]))
        }),
        ("a source type the kernel asserts on", "expected f32 or f16", |c| {
            // rope of Q8_0 data (the CPU kernel's GGML_ASSERT).
            let a = wire_tensor(1, sys::GGML_TYPE_Q8_0 as u32, c.buffer, [32, 1, 1, 1], [34, 34, 34, 34], 0, &[], &[], c.base);
            let pos = wire_tensor(2, sys::GGML_TYPE_I32 as u32, c.buffer, [1, 1, 1, 1], [4, 4, 4, 4], 0, &[], &[], c.base + 64);
            let n = wire_tensor(3, sys::GGML_TYPE_Q8_0 as u32, c.buffer, [32, 1, 1, 1], [34, 34, 34, 34], op(sys::GGML_OP_ROPE), &[0, 32], &[1, 2], c.base + 128);
            c.send(GRAPH_COMPUTE, &graph(&[3], &[a, pos, n]))
        }),
        ("a parameter the kernel asserts on", "eps must be >= 0", |c| {
            // rms_norm with eps NaN (found by the fuzzer, seed 2): the CPU
            // kernel's GGML_ASSERT(eps >= 0)
            let a = tensor_1d(1, c.buffer, c.base, 4);
            let n = f32_tensor(2, c.buffer, c.base + 64, [4, 1, 1, 1], op(sys::GGML_OP_RMS_NORM), &[1], &[f32::NAN.to_bits() as i32]);
            c.send(GRAPH_COMPUTE, &graph(&[2], &[a, n]))
        }),
        ("a result shape the op does not give", "the op gives", |c| {
            let a = tensor_1d(1, c.buffer, c.base, 4);
            let b = f32_tensor(2, c.buffer, c.base + 64, [4, 4, 1, 1], op(sys::GGML_OP_NONE), &[], &[]);
            let n = f32_tensor(3, c.buffer, c.base + 256, [64, 64, 1, 1], op(sys::GGML_OP_MUL_MAT), &[1, 2], &[]);
            c.send(GRAPH_COMPUTE, &graph(&[3], &[a, b, n]))
        }),
        ("a custom op (its parameters are function pointers)", "is not served", |c| {
            let a = tensor_1d(1, c.buffer, c.base, 4);
            let n = f32_tensor(2, c.buffer, c.base + 64, [4, 1, 1, 1], op(sys::GGML_OP_MAP_CUSTOM1), &[1], &[0x1234, 0x5678]);
            c.send(GRAPH_COMPUTE, &graph(&[2], &[a, n]))
        }),
        ("a cycle", "does not come before it", |c| {
            let a = f32_tensor(1, c.buffer, c.base, [4, 1, 1, 1], op(sys::GGML_OP_SCALE), &[2], &[]);
            let b = f32_tensor(2, c.buffer, c.base + 64, [4, 1, 1, 1], op(sys::GGML_OP_SCALE), &[1], &[]);
            c.send(GRAPH_COMPUTE, &graph(&[1, 2], &[a, b]))
        }),
        ("a graph announcing more tensors than it sends", "tensors announced", |c| {
            let mut g = graph(&[1], &[tensor_1d(1, c.buffer, c.base, 4)]);
            let at = 4 + 4 + 8;
            g[at..at + 4].copy_from_slice(&1000u32.to_ne_bytes());
            c.send(GRAPH_COMPUTE, &g)
        }),
        ("another connection's buffer", "not one of this connection's", |c| {
            let t = tensor_1d(1, c.buffer ^ 0x1000, c.base, 4);
            c.get(&t, 16).map(drop)
        }),
        ("a second HELLO", "HELLO again", |c| c.send(HELLO, &[0u8; 24])),
        ("an unknown command", "unknown command 99", |c| c.send(99, &[])),
    ];
    for (i, (what, reason, send)) in cases.iter().enumerate() {
        let mut c = Conn::open(&srv.endpoint, 1 << 16).unwrap_or_else(|e| panic!("before {what}: the server is gone: {e}"));
        let _ = send(&mut c);
        assert!(c.closed(), "{what}: the connection goes on");
        let log = srv.wait_log("refused", i + 1);
        let last = log.lines().filter(|l| l.contains("refused")).nth(i).unwrap_or("");
        assert!(last.contains(reason), "{what}: the log says {last:?}, want {reason:?}\n{log}");
        assert!(srv.alive(), "{what}: the server died");
        srv.serves().unwrap_or_else(|e| panic!("after {what}: {e}\n{}", srv.text()));
    }
    assert!(!srv.text().contains("died"), "{}", srv.text());
}

#[test]
fn a_graph_100000_nodes_deep_computes() {
    let srv = Server::start(&[]);
    const N: usize = 100_000;
    let mut c = Conn::open(&srv.endpoint, 1 << 16).unwrap();
    // x, then x*2, x*2*0.5, ... alternately: the last node is x again
    // (N even), each node in a 16-byte slot of its own, slots reused.
    let x = [1.5f32, -2.0, 3.25, 0.0];
    let input = tensor_1d(1, c.buffer, c.base, 4);
    c.set(&input, &x.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>()).unwrap();
    let mut tensors = vec![input];
    let mut nodes = Vec::with_capacity(N);
    for i in 0..N {
        let id = 2 + i as u64;
        let s = if i % 2 == 0 { 2.0f32 } else { 0.5 };
        let slot = c.base + 16 * (1 + (i as u64 % 1000));
        tensors.push(f32_tensor(id, c.buffer, slot, [4, 1, 1, 1], op(sys::GGML_OP_SCALE), &[id - 1], &[s.to_bits() as i32, 0]));
        nodes.push(id);
    }
    c.send(GRAPH_COMPUTE, &graph(&nodes, &tensors)).unwrap();
    let last = c.base + 16 * (1 + ((N - 1) as u64 % 1000));
    let got = c.get(&tensor_1d(9, c.buffer, last, 4), 16).unwrap_or_else(|e| panic!("{e}\n{}", srv.text()));
    let got: Vec<f32> = got.chunks(4).map(|b| f32::from_ne_bytes(b.try_into().unwrap())).collect();
    assert_eq!(got, x, "{}", srv.text());
}

#[test]
fn idle_and_silent_clients_block_nobody() {
    let srv = Server::start(&[]);
    // One that said HELLO and idles, one that never says anything, one
    // that started a request and stalls.
    let _idle = Conn::open(&srv.endpoint, 4096).unwrap();
    let _silent = Conn::connect(&srv.endpoint).unwrap();
    let mut stalled = Conn::open(&srv.endpoint, 4096).unwrap();
    stalled.s.write_all(&[SET_TENSOR]).unwrap();
    let t0 = Instant::now();
    srv.serves().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "served after {:?}", t0.elapsed());
}

/// Tries new clients (a full round trip each) until one is served, for up
/// to `limit`.
fn served_within(srv: &Server, limit: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        match srv.serves() {
            Ok(()) => return Ok(()),
            Err(e) if t0.elapsed() > limit => {
                let log = srv.text();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                return Err(format!("no client served in {limit:?}: {e}; the server's log ends:\n{}", tail.join("\n")));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// A round trip on an open connection: 64 bytes written and read back.
fn round_trip(c: &mut Conn, fill: u8) -> std::io::Result<()> {
    let data = vec![fill; 64];
    let t = tensor_1d(1, c.buffer, c.base, 16);
    c.set(&t, &data)?;
    let got = c.get(&t, 64)?;
    assert_eq!(got, data, "read back other bytes");
    Ok(())
}

#[test]
fn an_idle_client_gives_its_slot_to_a_new_one() {
    let mut srv = Server::start(&["--max-clients", "2", "--idle-timeout", "1"]);
    let mut a = Conn::open(&srv.endpoint, 4096).unwrap();
    let mut b = Conn::open(&srv.endpoint, 4096).unwrap();
    // Idle past the timeout with nobody waiting: both keep their slots
    // (ggml's client keeps its model in its connection, however long it
    // idles).
    std::thread::sleep(Duration::from_millis(2500));
    round_trip(&mut b, 7).unwrap_or_else(|e| panic!("b lost its connection while nobody needed its slot: {e}\n{}", srv.text()));
    // Now a third client needs a slot: a, idle longest, gives it up.
    served_within(&srv, Duration::from_secs(30)).unwrap();
    assert!(a.closed(), "a kept its slot\n{}", srv.text());
    assert!(srv.wait_log("idle for", 1).contains("closed to serve"), "{}", srv.text());
    round_trip(&mut b, 9).unwrap_or_else(|e| panic!("b, which had just worked, lost its connection: {e}\n{}", srv.text()));
    assert!(srv.alive());
    assert!(!srv.text().contains("died"), "{}", srv.text());
}

#[test]
fn a_client_that_keeps_working_keeps_its_slot() {
    let mut srv = Server::start(&["--max-clients", "2", "--idle-timeout", "2"]);
    let mut busy = Conn::open(&srv.endpoint, 4096).unwrap();
    let mut idle = Conn::open(&srv.endpoint, 4096).unwrap();
    // busy works every 200 ms, longer in all than the idle timeout, while
    // a third client knocks: the slot it gets is idle's, never busy's.
    let t0 = Instant::now();
    let mut served = false;
    while t0.elapsed() < Duration::from_secs(30) && !(served && t0.elapsed() > Duration::from_secs(5)) {
        round_trip(&mut busy, t0.elapsed().as_millis() as u8)
            .unwrap_or_else(|e| panic!("the working client lost its connection after {:?}: {e}\n{}", t0.elapsed(), srv.text()));
        served = served || srv.serves().is_ok();
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(served, "no third client was served in {:?}\n{}", t0.elapsed(), srv.text());
    assert!(idle.closed(), "the idle client kept its slot\n{}", srv.text());
    round_trip(&mut busy, 1).unwrap();
    assert!(srv.alive());
}

/// Sends `bytes` one at a time, `gap` apart, until the server closes the
/// connection (then how long that took) or `limit` has passed (None).
fn trickle(c: &mut Conn, bytes: &[u8], gap: Duration, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    c.s.set_read_timeout(Some(gap)).unwrap();
    for b in bytes {
        // The read waits out the gap (the server sends nothing meanwhile,
        // or a reply, which does not count as closing).
        if c.s.write_all(&[*b]).is_err() || c.closed() {
            return Some(t0.elapsed());
        }
        if t0.elapsed() > limit {
            return None;
        }
    }
    None
}

#[test]
fn hello_and_requests_must_arrive_in_time() {
    let srv = Server::start(&["--io-timeout", "2"]);
    // HELLO (33 bytes) a byte a second: every byte comes within the wait
    // allowed, but HELLO as a whole must be through within 10 s.
    let mut c = Conn::connect(&srv.endpoint).unwrap();
    let mut hello = vec![HELLO];
    hello.extend(24u64.to_ne_bytes());
    hello.extend([0u8; 24]);
    let t = trickle(&mut c, &hello, Duration::from_secs(1), Duration::from_secs(60));
    assert!(t.is_some(), "a HELLO trickled over 33 s was served\n{}", srv.text());
    assert!(srv.wait_log("refused: HELLO", 1).contains("in the time allowed"), "{}", srv.text());
    // A request trickled a byte every 0.5 s: each within --io-timeout 2,
    // but the request must be through within 2 s plus its bytes' time.
    let mut c = Conn::open(&srv.endpoint, 4096).unwrap();
    let mut req = vec![GET_TENSOR];
    req.extend(((TENSOR + 16) as u64).to_ne_bytes());
    req.extend(tensor_1d(1, c.buffer, c.base, 4));
    req.extend([0u8; 16]);
    let t = trickle(&mut c, &req, Duration::from_millis(500), Duration::from_secs(30));
    assert!(t.is_some(), "a request trickled for 30 s was still being read\n{}", srv.text());
    assert!(srv.wait_log("refused: GET_TENSOR", 1).contains("in the time allowed"), "{}", srv.text());
    srv.serves().unwrap();
}

/// Resident memory (KiB) of the server's connection processes together.
fn children_rss_kib(pid: u32) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let kids = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for kid in kids.split_whitespace() {
            let status = std::fs::read_to_string(format!("/proc/{kid}/status")).unwrap_or_default();
            if let Some(l) = status.lines().find(|l| l.starts_with("VmRSS:")) {
                total += l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
            }
        }
    }
    total
}

#[test]
fn announced_bytes_are_not_allocated_before_they_arrive() {
    let srv = Server::start(&[]);
    let before = children_rss_kib(srv.child.id());
    let mut conns = Vec::new();
    for _ in 0..4 {
        let mut c = Conn::open(&srv.endpoint, 4096).unwrap();
        let mut m = vec![GRAPH_COMPUTE];
        m.extend((2u64 << 30).to_ne_bytes());
        m.extend([0u8; 64]);
        c.s.write_all(&m).unwrap();
        conns.push(c);
    }
    std::thread::sleep(Duration::from_millis(300));
    let after = children_rss_kib(srv.child.id());
    // Four processes, each with a backend and a 4 KiB buffer: far below
    // one announced 2 GiB.
    assert!(after < before + 256 * 1024, "connection processes hold {after} KiB (before: {before} KiB)");
    srv.serves().unwrap();
}

#[test]
fn clients_stay_within_the_memory_and_client_limits() {
    let mut srv = Server::start(&["--mem", "64", "--max-clients", "3"]);
    let mut a = Conn::open(&srv.endpoint, 40 << 20).unwrap();
    let mut b = Conn::open(&srv.endpoint, 4096).unwrap();
    // 40 MiB held by a: b cannot have 32 more, nor can a.
    assert_eq!(b.alloc(32 << 20).unwrap().0, 0, "b got a buffer past --mem");
    assert_eq!(a.alloc(32 << 20).unwrap().0, 0, "a got a buffer past --mem");
    assert!(b.alloc(16 << 20).unwrap().0 != 0, "b cannot have what is left");
    // A third client fits; a fourth is refused at once.
    let _c = Conn::open(&srv.endpoint, 4096).unwrap();
    let mut d = Conn::connect(&srv.endpoint).unwrap();
    assert!(d.closed(), "a fourth client was served");
    assert!(srv.wait_log("clients are connected", 1).contains("refused, 3 clients are connected"));
    // When a leaves (even killed mid-way), its memory and slot come back.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut e) = Conn::open(&srv.endpoint, 4096) {
            // Until a's process is reaped, a new connection may be refused
            // (seen once in 20 runs under load as an end of stream on this
            // request); what counts is that the memory comes back.
            if matches!(e.alloc(32 << 20), Ok((b, _)) if b != 0) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "a's memory never came back\n{}", srv.text());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(srv.alive());
    assert!(!srv.text().contains("died"), "{}", srv.text());
}

/// A tensor of a template graph: type, shape, op, parameters, sources
/// (indices into the template), laid out contiguously in its own 2 KiB slot.
#[derive(Clone)]
struct T {
    ty: u32,
    ne: [u32; 4],
    nb: Option<[u32; 4]>,
    op: u32,
    params: Vec<i32>,
    src: Vec<usize>,
}

fn t(ty: sys::ggml_type, ne: [u32; 4]) -> T {
    T { ty: ty as u32, ne, nb: None, op: 0, params: vec![], src: vec![] }
}
fn node(ty: sys::ggml_type, ne: [u32; 4], o: sys::ggml_op, params: &[i32], src: &[usize]) -> T {
    T { ty: ty as u32, ne, nb: None, op: o as u32, params: params.to_vec(), src: src.to_vec() }
}
fn fbits(v: f32) -> i32 {
    v.to_bits() as i32
}

/// Valid one-node graphs of the ops our models send (the node last).
fn templates() -> Vec<Vec<T>> {
    use sys::*;
    let (f32_, f16_, q8, i32_, i64_) = (GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_I32, GGML_TYPE_I64);
    vec![
        vec![t(f32_, [8, 4, 2, 1]), t(f32_, [8, 1, 1, 1]), node(f32_, [8, 4, 2, 1], GGML_OP_ADD, &[], &[0, 1])],
        vec![t(f16_, [8, 4, 1, 1]), t(f32_, [8, 4, 1, 1]), node(f16_, [8, 4, 1, 1], GGML_OP_MUL, &[], &[0, 1])],
        vec![t(f32_, [8, 4, 1, 1]), node(f32_, [8, 4, 1, 1], GGML_OP_SCALE, &[fbits(2.0), 0], &[0])],
        vec![t(f32_, [8, 4, 1, 1]), node(f32_, [8, 4, 1, 1], GGML_OP_UNARY, &[GGML_UNARY_OP_SILU as i32], &[0])],
        vec![t(f32_, [16, 4, 1, 1]), node(f32_, [8, 4, 1, 1], GGML_OP_GLU, &[GGML_GLU_OP_SWIGLU as i32, 0], &[0])],
        vec![t(f32_, [8, 4, 1, 1]), t(f32_, [8, 4, 1, 1]), node(f32_, [8, 4, 1, 1], GGML_OP_GLU, &[GGML_GLU_OP_GEGLU as i32, 0], &[0, 1])],
        vec![t(f32_, [8, 4, 1, 1]), node(f32_, [8, 4, 1, 1], GGML_OP_RMS_NORM, &[fbits(1e-6)], &[0])],
        vec![t(f32_, [8, 4, 2, 1]), t(f16_, [8, 4, 1, 1]), node(f32_, [8, 4, 2, 1], GGML_OP_SOFT_MAX, &[fbits(1.0), 0], &[0, 1])],
        vec![t(q8, [32, 4, 1, 1]), t(f32_, [32, 3, 1, 1]), node(f32_, [4, 3, 1, 1], GGML_OP_MUL_MAT, &[], &[0, 1])],
        vec![t(f16_, [8, 4, 2, 1]), t(f32_, [8, 3, 4, 1]), node(f32_, [4, 3, 4, 1], GGML_OP_MUL_MAT, &[], &[0, 1])],
        vec![t(q8, [32, 6, 1, 1]), t(i32_, [3, 1, 1, 1]), node(f32_, [32, 3, 1, 1], GGML_OP_GET_ROWS, &[], &[0, 1])],
        vec![t(f32_, [8, 2, 1, 1]), t(i64_, [2, 1, 1, 1]), t(f16_, [8, 6, 1, 1]), node(f16_, [8, 6, 1, 1], GGML_OP_SET_ROWS, &[], &[0, 1, 2])],
        vec![t(f32_, [8, 4, 1, 1]), t(f16_, [8, 4, 1, 1]), node(f16_, [8, 4, 1, 1], GGML_OP_CPY, &[], &[0, 1])],
        vec![t(f32_, [32, 2, 1, 1]), t(q8, [32, 2, 1, 1]), node(q8, [32, 2, 1, 1], GGML_OP_CPY, &[], &[0, 1])],
        vec![t(f32_, [8, 4, 2, 1]), node(f32_, [8, 4, 2, 1], GGML_OP_CONT, &[], &[0])],
        vec![
            t(f32_, [8, 2, 3, 1]),
            t(i32_, [3, 1, 1, 1]),
            node(f32_, [8, 2, 3, 1], GGML_OP_ROPE, &[0, 8, 0, 0, 4096, fbits(10000.0), fbits(1.0), 0, fbits(1.0), fbits(32.0), fbits(1.0)], &[0, 1]),
        ],
        vec![
            t(f32_, [8, 3, 2, 1]),
            t(f16_, [8, 5, 1, 1]),
            t(f16_, [8, 5, 1, 1]),
            t(f16_, [5, 3, 1, 1]),
            node(f32_, [8, 2, 3, 1], GGML_OP_FLASH_ATTN_EXT, &[fbits(0.35), 0, 0], &[0, 1, 2, 3]),
        ],
        vec![t(f32_, [8, 4, 1, 1]), node(i32_, [8, 4, 1, 1], GGML_OP_ARGSORT, &[1], &[0])],
        vec![t(f32_, [8, 4, 1, 1]), node(i32_, [3, 4, 1, 1], GGML_OP_TOP_K, &[], &[0])],
        vec![t(f32_, [8, 2, 1, 1]), t(f32_, [8, 3, 1, 1]), node(f32_, [8, 5, 1, 1], GGML_OP_CONCAT, &[1], &[0, 1])],
        vec![t(f32_, [8, 4, 3, 1]), t(f32_, [8, 1, 2, 1]), t(i32_, [2, 2, 1, 1]), node(f32_, [4, 2, 2, 1], GGML_OP_MUL_MAT_ID, &[], &[0, 1, 2])],
        vec![t(f32_, [8, 2, 3, 1]), t(f32_, [8, 4, 1, 1]), t(i32_, [2, 3, 1, 1]), node(f32_, [8, 2, 3, 1], GGML_OP_ADD_ID, &[], &[0, 1, 2])],
        vec![t(f32_, [6, 4, 2, 1]), t(f32_, [4, 4, 1, 1]), node(f32_, [4, 3, 2, 1], GGML_OP_SSM_CONV, &[], &[0, 1])],
        vec![
            t(f32_, [4, 1, 3, 1]),
            t(f32_, [4, 1, 3, 1]),
            t(f32_, [4, 2, 3, 1]),
            t(f32_, [1, 2, 3, 1]),
            t(f32_, [1, 2, 3, 1]),
            t(f32_, [4, 4, 2, 1]),
            node(f32_, [8, 3 + 4, 1, 1], GGML_OP_GATED_DELTA_NET, &[1], &[0, 1, 2, 3, 4, 5]),
        ],
        vec![t(f32_, [6, 6, 1, 1]), node(f32_, [6, 6, 1, 1], GGML_OP_TRI, &[1], &[0])],
        vec![t(f32_, [8, 4, 1, 1]), node(f32_, [1, 4, 1, 1], GGML_OP_SUM_ROWS, &[], &[0])],
        vec![t(f32_, [8, 4, 1, 1]), node(f32_, [10, 5, 1, 1], GGML_OP_PAD, &[1, 1, 0, 1], &[0])],
        vec![t(f32_, [8, 1, 1, 1]), node(f32_, [8, 4, 1, 1], GGML_OP_REPEAT, &[], &[0])],
    ]
}

/// Bytes per element or block, and elements per block.
fn type_size(ty: u32) -> (u32, u32) {
    let t = ty as sys::ggml_type;
    if !ggml_rs::ml::tensor::is_valid_type(t) {
        return (4, 1);
    }
    unsafe { (sys::ggml_type_size(t) as u32, sys::ggml_blck_size(t) as u32) }
}

/// Changes one thing in a template graph: a dimension, a type, strides, a
/// parameter, a source, the op.
fn mutate(r: &mut Rng, g: &mut [T]) {
    let pick = |r: &mut Rng, n: usize| (r.next_u64() % n as u64) as usize;
    let i = pick(r, g.len());
    let x = &mut g[i];
    match pick(r, 7) {
        0 => {
            let d = pick(r, 4);
            x.ne[d] = [0, 1, 2, x.ne[d] + 1, x.ne[d].saturating_sub(1), x.ne[d] * 2, 33, 64][pick(r, 8)];
        }
        1 => {
            x.ty = [0, 1, 2, 8, 24, 26, 27, 30, 39, 3][pick(r, 10)];
        }
        2 => {
            let (es, bl) = type_size(x.ty);
            let mut nb = [es, es * x.ne[0] / bl.max(1), 0, 0];
            nb[2] = nb[1] * x.ne[1];
            nb[3] = nb[2] * x.ne[2];
            let (a, b) = (pick(r, 4), pick(r, 4));
            nb.swap(a, b);
            if pick(r, 3) == 0 {
                nb[pick(r, 4)] = [0, 1, 3, es / 2][pick(r, 4)];
            }
            x.nb = Some(nb);
        }
        3 => {
            let k = pick(r, 16);
            x.params.resize(16, 0);
            x.params[k] = [0, 1, -1, 2, 7, 64, i32::MAX, i32::MIN, fbits(f32::NAN), fbits(1e30), r.next_u64() as i32][pick(r, 11)];
        }
        4 => {
            if !x.src.is_empty() && pick(r, 2) == 0 {
                x.src.remove(pick(r, x.src.len()));
            } else if i > 0 {
                x.src.push(pick(r, i));
            }
        }
        5 => {
            if x.op != 0 {
                x.op = (x.op as i64 + [-1, 1, 2][pick(r, 3)]).clamp(1, sys::GGML_OP_COUNT as i64 - 1) as u32;
            }
        }
        _ => {
            if i > 0 && !x.src.is_empty() {
                let s = pick(r, x.src.len());
                x.src[s] = pick(r, i);
            }
        }
    }
}

/// GRAPH_COMPUTE of a template graph in `c`'s buffer (2 KiB per tensor).
fn encode(c: &Conn, g: &[T]) -> Vec<u8> {
    let tensors: Vec<Vec<u8>> = g
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let (es, bl) = type_size(x.ty);
            let nb = x.nb.unwrap_or_else(|| {
                let n1 = es.wrapping_mul(x.ne[0] / bl.max(1));
                [es, n1, n1.wrapping_mul(x.ne[1]), n1.wrapping_mul(x.ne[1]).wrapping_mul(x.ne[2])]
            });
            let src: Vec<u64> = x.src.iter().map(|&s| 1 + s as u64).collect();
            wire_tensor(1 + i as u64, x.ty, c.buffer, x.ne, nb, x.op, &x.params, &src, c.base + 2048 * i as u64)
        })
        .collect();
    graph(&[g.len() as u64], &tensors)
}

/// A random request: mostly a template graph with one or two things
/// changed (so that the op rules, not only the bounds, decide), sometimes
/// an unchanged one (it must compute), a graph with random bytes flipped,
/// or a random command with random bytes.
fn random_request(r: &mut Rng, c: &Conn, templates: &[Vec<T>]) -> (u8, Vec<u8>) {
    let mut g = templates[(r.next_u64() % templates.len() as u64) as usize].clone();
    match r.next_u64() % 20 {
        0 => {
            let cmd = (r.next_u64() % 20) as u8;
            let n = (r.next_u64() % 700) as usize;
            (cmd, (0..n).map(|_| r.next_u64() as u8).collect())
        }
        1 | 2 => {
            let mut b = encode(c, &g);
            for _ in 0..1 + r.next_u64() % 8 {
                let i = (r.next_u64() % b.len() as u64) as usize;
                b[i] ^= 1 << (r.next_u64() % 8);
            }
            (GRAPH_COMPUTE, b)
        }
        3 | 4 => (GRAPH_COMPUTE, encode(c, &g)),
        _ => {
            for _ in 0..1 + r.next_u64() % 2 {
                mutate(r, &mut g);
            }
            (GRAPH_COMPUTE, encode(c, &g))
        }
    }
}

#[test]
fn fuzzed_requests_never_stop_the_server() {
    let mut srv = Server::start(&[]);
    let iters: usize = std::env::var("GGML_RS_RPC_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let budget = Duration::from_secs(if iters > 1500 { 3600 } else { 120 });
    let seed = std::env::var("GGML_RS_RPC_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x5eed);
    let mut r = Rng::new(seed);
    let tpl = templates();
    // Every template computes as it is (the fuzzer's starting points are
    // valid, so what it refuses is what its changes broke).
    for (i, g) in tpl.iter().enumerate() {
        let mut c = Conn::open(&srv.endpoint, 1 << 16).unwrap();
        c.send(GRAPH_COMPUTE, &encode(&c, g)).unwrap();
        let t = tensor_1d(1, c.buffer, c.base, 4);
        assert!(c.get(&t, 16).is_ok(), "template {i} (op {}) was refused:\n{}", g.last().unwrap().op, srv.text());
    }
    let t0 = Instant::now();
    let (mut done, mut computed) = (0, 0);
    while done < iters && t0.elapsed() < budget {
        let mut c = Conn::open(&srv.endpoint, 1 << 16).unwrap_or_else(|e| panic!("iteration {done}: the server is gone: {e}"));
        let (cmd, payload) = random_request(&mut r, &c, &tpl);
        let _ = c.send(cmd, &payload);
        // A request the server accepts leaves the connection open: check
        // it answers the next one, else that it closed.
        let t = tensor_1d(1, c.buffer, c.base, 4);
        match c.get(&t, 16) {
            Ok(b) if b.len() == 16 => computed += 1,
            _ => {}
        }
        drop(c);
        assert!(srv.alive(), "iteration {done} (seed {seed}): the server died\n{}", srv.text());
        done += 1;
    }
    srv.serves().unwrap();
    let text = srv.text();
    let died: Vec<&str> = text.lines().filter(|l| l.contains("died")).collect();
    eprintln!(
        "rpc fuzz: {done} requests in {:.1} s (seed {seed}): {computed} accepted, {} refused, {} connection processes died",
        t0.elapsed().as_secs_f64(),
        text.matches("refused").count(),
        died.len()
    );
    let asserts: Vec<&str> = text.lines().filter(|l| !l.contains("refused")).collect();
    assert!(died.is_empty(), "a request got past the checks and crashed its process:\n{}\n{}", died.join("\n"), asserts.join("\n"));
    assert!(done >= iters.min(100), "only {done} iterations in {budget:?}");
}
