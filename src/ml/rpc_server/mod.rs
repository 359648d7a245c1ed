//! ggml-rs's RPC server: lends this machine's CPU to ggml RPC clients
//! (protocol 7, as the pinned ggml speaks it) without trusting them.
//!
//! Upstream's server (`ggml_backend_rpc_start_server`) trusts its client:
//! one request announcing 2^63 bytes, a tensor whose dimensions overflow, a
//! graph node with an unknown op or too few sources, a deep graph or a
//! source type its kernel asserts on each killed it, and one idle client
//! blocked every other. This server speaks the same protocol and
//!
//! * checks every request whole before it allocates, writes or computes:
//!   sizes are bounded before reading and buffers grow only as bytes arrive
//!   ([`wire`]); every tensor has a known type, a size that fits in 64 bits
//!   and bytes inside a buffer of the same connection ([`graph`]); every
//!   graph node comes after its sources and passes its op's rules
//!   ([`rules`]: the result ggml's constructor would make, the layouts its
//!   CPU kernel asserts; ops without rules, custom ops among them, are
//!   refused);
//! * serves each connection in its own process (forked from a listener that
//!   never touches ggml's compute), so clients run side by side, a client
//!   that idles or stalls holds only its own connection, and a request that
//!   gets past the checks and still crashes a kernel ends only the
//!   connection that sent it (the listener logs the signal);
//! * bounds what clients may take: connections (`max_clients`), buffer
//!   memory for all of them together ([`budget`]), the time HELLO may take,
//!   and the time of each request and reply (no wait longer than
//!   `io_timeout`, and all its bytes within that plus their time at
//!   64 KiB/s: a peer trickling a byte now and then cannot hold on);
//! * lends the slot of a connection that has waited for its next command
//!   longer than `idle_timeout` to a new client when every slot is taken
//!   ([`idle`]). An idle connection otherwise keeps its slot for as long
//!   as it likes: ggml's RPC client holds one connection per server for the
//!   life of a model, with its weights in that connection's buffers, and
//!   may idle for hours between requests.
//!
//! A refused request ends its connection with the reason in the server's
//! log: the protocol has no error reply (upstream closes the connection
//! too), and ggml-rs's client then reports the server lost with its cause.

mod budget;
mod graph;
mod idle;
mod rules;
mod session;
mod wire;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{Error, ErrorKind, Result};
use crate::sys;

/// The port `ggml-rs-rpc-server` listens on by default.
/// cbindgen:ignore
pub const DEFAULT_PORT: u16 = 50052;

/// The default of [`ServerOptions::idle_timeout`], in seconds.
/// cbindgen:ignore
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 300;

/// Options of [`serve`] (the `ggml-rs-rpc-server` program).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// IPv4 address to listen on, or "localhost".
    pub host: String,
    pub port: u16,
    /// CPU threads per connection; 0 picks [`super::threads::default_threads`].
    pub threads: usize,
    /// Memory to report to clients in MiB, and the most their buffers may
    /// hold together; None: the host's memory.
    pub mem_mib: Option<u64>,
    /// Where the server caches large tensors by hash, so a client reloading
    /// the same weights skips sending them.
    pub cache_dir: Option<PathBuf>,
    /// Listen on a non-loopback address. The RPC protocol has no
    /// authentication or encryption: anyone who can connect can use the
    /// machine's devices and read and write the tensors it holds.
    pub allow_remote: bool,
    /// Connections served at once; more are closed at once (logged).
    pub max_clients: usize,
    /// How long a new connection may take to send HELLO (all of it).
    pub hello_timeout: Duration,
    /// How long one read or write of a request or reply may wait, and the
    /// time a request (or reply) may take besides its bytes' time at
    /// 64 KiB/s.
    pub io_timeout: Duration,
    /// A connection that has waited longer than this for its next command
    /// gives its slot to a new client when all are taken; zero: never.
    pub idle_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            host: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            threads: 0,
            mem_mib: None,
            cache_dir: None,
            allow_remote: false,
            max_clients: 16,
            hello_timeout: Duration::from_secs(10),
            io_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
        }
    }
}

/// The address `serve` would listen on, after the loopback check.
pub fn server_address(opts: &ServerOptions) -> Result<Ipv4Addr> {
    let ip: Ipv4Addr = if opts.host == "localhost" {
        Ipv4Addr::LOCALHOST
    } else {
        opts.host.parse().map_err(|_| {
            Error::invalid(format!("rpc server: host {:?} is not an IPv4 address (or \"localhost\")", opts.host))
        })?
    };
    if !ip.is_loopback() && !opts.allow_remote {
        return Err(Error::invalid(format!(
            "rpc server: refusing to listen on {ip}: the RPC protocol has no authentication, so anyone who can \
             reach the port can use this machine; pass --allow-remote (allow_remote) on a network you trust"
        )));
    }
    if opts.port == 0 {
        return Err(Error::invalid("rpc server: port must be in 1..65535"));
    }
    if opts.max_clients == 0 || opts.max_clients > 4096 {
        return Err(Error::invalid(format!("rpc server: {} clients at once (1 to 4096)", opts.max_clients)));
    }
    if opts.hello_timeout.is_zero() || opts.io_timeout.is_zero() {
        return Err(Error::invalid("rpc server: timeouts must be positive"));
    }
    Ok(ip)
}

/// Our C++ shim (cmake/ggml/shim.cpp): a device like another with a memory
/// cap. Not part of ggml-rs's C ABI.
/// cbindgen:ignore
mod native {
    use crate::sys;
    extern "C" {
        pub fn ggml_rs_shim_device_with_memory(inner: sys::ggml_backend_dev_t, limit: usize) -> sys::ggml_backend_dev_t;
    }
}
use native::ggml_rs_shim_device_with_memory;

fn log(msg: &str) {
    eprintln!("ggml-rs-rpc-server: {msg}");
}

/// Serves this machine's CPU to RPC clients until the process is stopped.
/// `ready` is called with the endpoint and a description of the device once
/// the port is bound. Returns an error when the options are bad or the port
/// cannot be used.
///
/// Each connection is served by a forked process: call this from a process
/// that runs no other threads (the `ggml-rs-rpc-server` program).
pub fn serve(opts: &ServerOptions, ready: impl FnOnce(&str, &str)) -> Result<()> {
    super::log::init();
    let ip = server_address(opts)?;
    let endpoint = format!("{ip}:{}", opts.port);
    let threads = if opts.threads == 0 { super::threads::default_threads() } else { opts.threads };
    if threads > sys::GGML_MAX_N_THREADS as usize {
        return Err(Error::invalid(format!(
            "rpc server: {threads} threads, more than ggml's limit of {}",
            sys::GGML_MAX_N_THREADS
        )));
    }
    if let Some(dir) = &opts.cache_dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::new(ErrorKind::Io, format!("rpc server: cannot create cache folder {}: {e}", dir.display()))
        })?;
    }
    let mut dev = unsafe { sys::ggml_backend_dev_by_type(sys::GGML_BACKEND_DEVICE_TYPE_CPU) };
    if dev.is_null() {
        return Err(Error::unsupported("rpc server: ggml reports no CPU device"));
    }
    if let Some(mib) = opts.mem_mib {
        let bytes = mib
            .checked_mul(1 << 20)
            .filter(|&b| b > 0 && b <= usize::MAX as u64)
            .ok_or_else(|| Error::invalid(format!("rpc server: --mem {mib} MiB is not a usable size")))?;
        dev = unsafe { ggml_rs_shim_device_with_memory(dev, bytes as usize) };
        if dev.is_null() {
            return Err(Error::oom("rpc server: cannot create the memory-capped device"));
        }
    }
    let listener = TcpListener::bind((ip, opts.port))
        .map_err(|e| Error::new(ErrorKind::Io, format!("rpc server: cannot listen on {endpoint}: {e}")))?;
    let (mut free, mut total) = (0usize, 0usize);
    unsafe { sys::ggml_backend_dev_memory(dev, &mut free, &mut total) };
    let shared = budget::Shared::new(total as u64, opts.max_clients).map_err(|e| Error::oom(format!("rpc server: {e}")))?;
    let idle = idle::Idle::new(opts.max_clients).map_err(|e| Error::oom(format!("rpc server: {e}")))?;
    let desc = unsafe { std::ffi::CStr::from_ptr(sys::ggml_backend_dev_description(dev)) }.to_string_lossy();
    ready(
        &endpoint,
        &format!("{desc}, {} MiB ({} MiB free), {threads} threads per client, up to {} clients", total >> 20, free >> 20, opts.max_clients),
    );
    let mut slots: Vec<Option<Client>> = vec![None; opts.max_clients];
    loop {
        reap(&mut slots, &shared, &idle);
        if !readable(&listener, 500) {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) => {
                log(&format!("accept: {e}"));
                continue;
            }
        };
        // A client that has just left may not have been collected yet:
        // look again before refusing anyone.
        if slots.iter().all(Option::is_some) {
            reap(&mut slots, &shared, &idle);
        }
        let Some(i) = slots.iter().position(Option::is_none).or_else(|| evict(&mut slots, &shared, &idle, opts.idle_timeout, peer)) else {
            log(&format!("client {peer}: refused, {} clients are connected", opts.max_clients));
            continue;
        };
        idle.reset(i);
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let listener_pid = unsafe { libc::getpid() };
        match unsafe { libc::fork() } {
            -1 => log(&format!("client {peer}: cannot start its process: {}", std::io::Error::last_os_error())),
            0 => {
                // A connection lives no longer than its listener: stopping
                // the server stops its work.
                #[cfg(target_os = "linux")]
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                }
                if unsafe { libc::getppid() } != listener_pid {
                    unsafe { libc::_exit(1) };
                }
                drop(listener);
                let code = serve_one(stream, peer, dev, threads, opts, &shared.budget(i), &idle.slot(i));
                let _ = std::io::stdout().flush();
                unsafe { libc::_exit(code) };
            }
            pid => slots[i] = Some(Client { pid, peer, evicted: false }),
        }
    }
}

/// Waits up to `ms` for a connection.
fn readable(l: &TcpListener, ms: i32) -> bool {
    let mut p = libc::pollfd { fd: l.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// A connection's process, as the listener knows it.
#[derive(Clone, Copy)]
struct Client {
    pid: libc::pid_t,
    peer: SocketAddr,
    /// Ended by the listener to free its slot.
    evicted: bool,
}

/// Collects ended connection processes, gives back their memory and slots
/// and logs those that did not end normally.
fn reap(slots: &mut [Option<Client>], shared: &budget::Shared, idle: &idle::Idle) {
    loop {
        let mut status = 0;
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        let Some(i) = slots.iter().position(|s| matches!(s, Some(c) if c.pid == pid)) else {
            continue;
        };
        let Client { peer, evicted, .. } = slots[i].take().unwrap();
        shared.reclaim(i);
        idle.reset(i);
        if libc::WIFSIGNALED(status) && !evicted {
            log(&format!(
                "client {peer}: its process died of signal {} (a request the checks let through; the server goes on)",
                libc::WTERMSIG(status)
            ));
        }
    }
}

/// Frees a slot for `newcomer` when every slot is taken: ends the process
/// of the connection that has waited longest for its next command, if
/// longer than `limit`, and waits (a moment) until it is collected.
fn evict(slots: &mut [Option<Client>], shared: &budget::Shared, idle: &idle::Idle, limit: Duration, newcomer: SocketAddr) -> Option<usize> {
    if limit.is_zero() {
        return None;
    }
    let (i, waited) = idle.evict_longest(limit)?;
    let Some(c) = slots[i].as_mut() else {
        idle.reset(i);
        return Some(i);
    };
    c.evicted = true;
    unsafe { libc::kill(c.pid, libc::SIGKILL) };
    log(&format!("client {}: idle for {} s, closed to serve {newcomer} (--idle-timeout)", c.peer, waited.as_secs()));
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        reap(slots, shared, idle);
        if slots[i].is_none() {
            return Some(i);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The process of one connection: a backend of its own, the session, the
/// outcome in the log. Returns the exit code.
fn serve_one(
    stream: TcpStream,
    peer: SocketAddr,
    dev: sys::ggml_backend_dev_t,
    threads: usize,
    opts: &ServerOptions,
    budget: &budget::Budget,
    idle: &idle::Slot,
) -> i32 {
    let _ = stream.set_nodelay(true);
    let backend = unsafe { sys::ggml_backend_dev_init(dev, std::ptr::null()) };
    if backend.is_null() {
        log(&format!("client {peer}: cannot start a backend"));
        return 1;
    }
    unsafe {
        let reg = sys::ggml_backend_dev_backend_reg(dev);
        let f = if reg.is_null() {
            std::ptr::null_mut()
        } else {
            sys::ggml_backend_reg_get_proc_address(reg, c"ggml_backend_set_n_threads".as_ptr())
        };
        if !f.is_null() {
            let set: unsafe extern "C" fn(sys::ggml_backend_t, i32) = std::mem::transmute(f);
            set(backend, threads as i32);
        }
    }
    let end = {
        let conn = wire::Conn::new(stream, opts.io_timeout);
        let mut s = session::Session::new(conn, backend, dev, opts.cache_dir.clone(), budget, opts.io_timeout);
        s.run(opts.hello_timeout, idle)
    };
    unsafe { sys::ggml_backend_free(backend) };
    match end {
        session::End::Closed | session::End::Evicted => 0,
        session::End::Refused(why) => {
            log(&format!("client {peer}: refused: {why}"));
            2
        }
    }
}
