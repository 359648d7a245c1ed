//! Remote devices over ggml's RPC backend: when one machine is not enough.
//!
//! A server (`ggml-rs-rpc-server`, or any ggml `rpc-server` speaking the same
//! protocol version) lends its devices over TCP. Once added, its devices are
//! ordinary ggml devices: [`device::list`](super::device::list) enumerates
//! them with their memory (library `"RPC"`, description = the endpoint),
//! [`Backend::new`](super::Backend::new) puts them in the scheduler before the
//! CPU, and [`Context::on_device`](super::Context::on_device) places tensors
//! on them.
//!
//! # Configuration
//!
//! * [`add_server`] / [`add_servers`] (C: `ggml_rs_rpc_add_server`,
//!   `ggml_rs_rpc_add_servers`): add endpoints at run time.
//! * The environment variable `GGML_RS_RPC_SERVERS` ([`SERVERS_ENV`]): a
//!   comma-separated `host:port` list, read once, when devices are first
//!   enumerated (or the first server is added). An endpoint that cannot be
//!   reached is skipped with a warning in the log.
//!
//! Endpoints are IPv4 addresses or host names with a port
//! (`127.0.0.1:50052`, `gpu-box:50052`). Adding is idempotent per endpoint.
//!
//! # Failures
//!
//! Upstream ggml aborts the process when a server cannot be reached or stops
//! answering. ggml-rs avoids that in two layers:
//!
//! * Before ggml sees an endpoint we parse it, connect with a timeout and
//!   perform the protocol handshake ourselves (bounded by a timeout), so a
//!   malformed endpoint, a closed port, a foreign service or a server busy
//!   with another client is an error, not an abort or a hang.
//! * Our patch `scripts/patches/02-rpc-no-abort.sh` turns a connection that
//!   fails later (server stopped mid-compute, malformed reply) into a
//!   *poisoned* connection: every later command completes at once with a
//!   zero reply and ggml's graph compute reports failure. After each compute,
//!   tensor read and tensor write we ask whether a connection the work
//!   touched was lost and report `ErrorKind::Compute`: "compute: RPC server
//!   127.0.0.1:50052 lost: connection lost during GRAPH_COMPUTE (…)".
//!
//! A lost server stays lost: backends made before keep failing on graphs
//! that use it (its memory is gone), new backends leave it out, and it is
//! never reconnected behind the caller's back. Adding the endpoint again
//! (after restarting the server) checks it and makes it usable for new
//! backends.
//!
//! Our patch `scripts/patches/07-rpc-client-checks.sh` checks every reply
//! before ggml uses it (device count, alignment, maximum size, buffer size
//! and base, allocation size; free memory is clamped to the total) and
//! poisons the connection of a server that breaks a rule, with the reason
//! "protocol violation: …"; a reply that does not come within the reply
//! timeout ([`set_reply_timeout`], [`TIMEOUT_ENV`], default
//! [`DEFAULT_REPLY_TIMEOUT`]) does the same.
//!
//! What remains: a host that vanishes without closing the connection
//! (power loss, network partition) is noticed by TCP keepalive after about
//! 30 s on Linux, longer elsewhere. The RPC
//! protocol has no authentication or encryption: only use it on networks
//! you trust. ggml's device registry is not thread-safe: add servers before
//! other threads enumerate devices or create backends.

// Without the `rpc` feature most of this module is unused (the public
// functions report Unsupported).
#![cfg_attr(not(feature = "rpc"), allow(dead_code))]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Once;
use std::time::Duration;

use parking_lot::Mutex;

use super::device_info::{info_of, DeviceInfo};
#[cfg(feature = "rpc")]
use super::Tensor;
use super::{Error, ErrorKind, Result};
use crate::sys;

/// The environment variable with the servers to add at first enumeration:
/// a comma-separated list of `host:port`.
/// cbindgen:ignore
pub const SERVERS_ENV: &str = "GGML_RS_RPC_SERVERS";


/// The environment variable with the reply timeout in seconds
/// ([`set_reply_timeout`]), read when the first server is added.
/// cbindgen:ignore
pub const TIMEOUT_ENV: &str = "GGML_RS_RPC_TIMEOUT";

/// How long a connection waits for a server's reply by default: a graph's
/// compute on the server must finish within it.
/// cbindgen:ignore
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(600);

/// How long connecting and the handshake with a new server may take.
/// cbindgen:ignore
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The RPC protocol version of the pinned ggml (ggml-rpc.h): a server must
/// have this major version and at most this minor version.
const PROTO_MAJOR: u8 = 7;
const PROTO_MINOR: u8 = 0;
/// HELLO: command 14 with a capabilities block of 24 bytes; the reply is
/// major, minor, patch, padding and the server's 24 bytes of capabilities.
const CMD_HELLO: u8 = 14;
const CONN_CAPS_SIZE: usize = 24;

/// C functions that are not ggml's public API: added by our patch, or from
/// our C++ shim. Not part of ggml-rs's C ABI.
/// cbindgen:ignore
mod native {
    #[cfg(feature = "rpc")]
    use std::ffi::c_char;

    #[cfg(feature = "rpc")]
    use crate::sys;

    // Added to ggml by scripts/patches/02-rpc-no-abort.sh.
    #[cfg(feature = "rpc")]
    extern "C" {
        pub fn ggml_backend_rpc_rs_backend_lost(b: sys::ggml_backend_t, reason: *mut c_char, size: usize) -> bool;
        pub fn ggml_backend_rpc_rs_buffer_lost(b: sys::ggml_backend_buffer_t, reason: *mut c_char, size: usize)
            -> bool;
        pub fn ggml_backend_rpc_rs_endpoint_lost(endpoint: *const c_char, reason: *mut c_char, size: usize) -> bool;
        pub fn ggml_backend_rpc_rs_endpoint_reset(endpoint: *const c_char);
    }

    // Added to ggml by scripts/patches/07-rpc-client-checks.sh.
    #[cfg(feature = "rpc")]
    extern "C" {
        pub fn ggml_backend_rpc_rs_set_reply_timeout(seconds: std::ffi::c_uint);
    }
}
#[cfg(feature = "rpc")]
use native as patched;

/// Whether this build has the RPC backend (cargo feature `rpc`, default).
pub fn available() -> bool {
    cfg!(feature = "rpc")
}

#[cfg(not(feature = "rpc"))]
fn unsupported(what: &str) -> Error {
    Error::unsupported(format!(
        "{what}: this build of ggml-rs has no RPC support (cargo feature `rpc`)"
    ))
}

// ---- endpoints ----------------------------------------------------------

/// Splits `host:port` and checks both parts. The host is an IPv4 address or
/// a host name (ggml's client speaks IPv4 only).
pub fn parse_endpoint(endpoint: &str) -> Result<(String, u16)> {
    let s = endpoint.trim();
    let bad = |why: String| Error::invalid(format!("rpc: malformed endpoint {endpoint:?}: {why}"));
    if s.is_empty() {
        return Err(bad("empty (want host:port)".into()));
    }
    if s.starts_with('[') || s.matches(':').count() > 1 {
        return Err(bad(
            "IPv6 addresses are not supported by ggml's RPC client (want an IPv4 host:port)".into(),
        ));
    }
    let Some((host, port)) = s.split_once(':') else {
        return Err(bad("no port (want host:port)".into()));
    };
    if host.is_empty() {
        return Err(bad("no host (want host:port)".into()));
    }
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    {
        return Err(bad(format!("host {host:?} is not an IPv4 address or host name")));
    }
    let port: u16 = match port.parse() {
        Ok(p) if p > 0 => p,
        _ => return Err(bad(format!("port {port:?} is not a number in 1..65535"))),
    };
    Ok((host.to_string(), port))
}

/// The entries of a comma-separated endpoint list (blanks ignored).
pub fn split_list(list: &str) -> Vec<&str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect()
}

// ---- registry -------------------------------------------------------------

struct Server {
    endpoint: String,
    /// ggml device handles this server contributed, in its order.
    devices: Vec<usize>,
}

/// Servers added so far, in order.
static SERVERS: Mutex<Vec<Server>> = Mutex::new(Vec::new());
/// Serialises adding (ggml's RPC registration and the device registry).
static ADD_LOCK: Mutex<()> = Mutex::new(());
static ENV_ONCE: Once = Once::new();
/// Failures while adding the servers of GGML_RS_RPC_SERVERS.
static ENV_ERRORS: Mutex<Vec<Error>> = Mutex::new(Vec::new());

/// What ggml-rs knows about one added server.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// `host:port`, as added.
    pub endpoint: String,
    /// Registry indexes of its devices (as in [`DeviceInfo::index`]).
    pub devices: Vec<usize>,
    /// Why the connection was lost, if it was.
    pub lost: Option<String>,
}

fn registry_index(d: sys::ggml_backend_dev_t) -> Option<usize> {
    let n = unsafe { sys::ggml_backend_dev_count() };
    (0..n).find(|&i| unsafe { sys::ggml_backend_dev_get(i) } == d)
}

fn infos(devices: &[usize]) -> Vec<DeviceInfo> {
    devices
        .iter()
        .filter_map(|&d| {
            let d = d as sys::ggml_backend_dev_t;
            registry_index(d).map(|i| info_of(i, d))
        })
        .collect()
}

/// The endpoint of an RPC device that ggml-rs added.
pub(crate) fn endpoint_of(d: sys::ggml_backend_dev_t) -> Option<String> {
    if d.is_null() {
        return None;
    }
    SERVERS
        .lock()
        .iter()
        .find(|s| s.devices.contains(&(d as usize)))
        .map(|s| s.endpoint.clone())
}

fn c_string(what: &str, s: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| Error::invalid(format!("{what}: {s:?} contains a NUL byte")))
}

#[cfg(feature = "rpc")]
fn reason_from(f: impl FnOnce(*mut std::ffi::c_char, usize) -> bool) -> Option<String> {
    let mut buf = [0 as std::ffi::c_char; 512];
    if f(buf.as_mut_ptr(), buf.len()) {
        Some(
            unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
        )
    } else {
        None
    }
}

/// Why the connection to `endpoint` was lost, or None while it is usable
/// (or was never used).
pub fn lost(endpoint: &str) -> Option<String> {
    #[cfg(feature = "rpc")]
    {
        let (host, port) = parse_endpoint(endpoint).ok()?;
        let ep = c_string("rpc", &format!("{host}:{port}")).ok()?;
        reason_from(|buf, n| unsafe { patched::ggml_backend_rpc_rs_endpoint_lost(ep.as_ptr(), buf, n) })
    }
    #[cfg(not(feature = "rpc"))]
    {
        let _ = endpoint;
        None
    }
}

/// The servers added so far (explicitly or from [`SERVERS_ENV`]).
pub fn servers() -> Vec<ServerStatus> {
    init_from_env();
    let list: Vec<(String, Vec<usize>)> = SERVERS
        .lock()
        .iter()
        .map(|s| (s.endpoint.clone(), s.devices.clone()))
        .collect();
    list.into_iter()
        .map(|(endpoint, devs)| ServerStatus {
            devices: devs
                .iter()
                .filter_map(|&d| registry_index(d as sys::ggml_backend_dev_t))
                .collect(),
            lost: lost(&endpoint),
            endpoint,
        })
        .collect()
}

/// Errors from adding the servers named by [`SERVERS_ENV`] (empty when all
/// were added, or the variable is unset).
pub fn env_errors() -> Vec<Error> {
    init_from_env();
    ENV_ERRORS.lock().clone()
}

/// Adds the servers of [`SERVERS_ENV`], once per process. Called when
/// devices are first enumerated.
pub(crate) fn init_from_env() {
    ENV_ONCE.call_once(|| {
        let Ok(list) = std::env::var(SERVERS_ENV) else { return };
        super::log::init();
        for ep in split_list(&list) {
            if let Err(e) = add(ep) {
                log::warn!(target: "ggml_rs", "{SERVERS_ENV}: skipping {ep}: {e}");
                ENV_ERRORS.lock().push(e);
            }
        }
    });
}

/// Sets how long connections made from now on wait for a server's reply
/// (or for room to send) before the connection counts as lost ("no reply
/// to GET_TENSOR within 600 s"); `Duration::ZERO` waits for ever. The
/// default is [`DEFAULT_REPLY_TIMEOUT`], or [`TIMEOUT_ENV`] when set. A
/// graph's compute is awaited by the next command that reads, so the
/// timeout bounds one graph's compute time on the server. Whole seconds,
/// rounded up; at most 2^32 - 1.
pub fn set_reply_timeout(timeout: Duration) -> Result<()> {
    let secs = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    let secs = u32::try_from(secs)
        .map_err(|_| Error::invalid(format!("rpc: reply timeout of {secs} s is too long (at most {} s)", u32::MAX)))?;
    apply_timeout_env();
    set_timeout_secs(secs);
    Ok(())
}

#[cfg(feature = "rpc")]
fn set_timeout_secs(secs: u32) {
    unsafe { patched::ggml_backend_rpc_rs_set_reply_timeout(secs) };
}

#[cfg(not(feature = "rpc"))]
fn set_timeout_secs(_secs: u32) {}

/// Applies [`TIMEOUT_ENV`] once per process, before the first connection
/// (and before an explicit [`set_reply_timeout`], which then wins).
fn apply_timeout_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(v) = std::env::var(TIMEOUT_ENV) else { return };
        match v.trim().parse::<u32>() {
            Ok(secs) => set_timeout_secs(secs),
            Err(_) => {
                super::log::init();
                log::warn!(target: "ggml_rs", "{TIMEOUT_ENV}={v:?} is not a number of seconds (0 to {}); keeping {} s",
                    u32::MAX, DEFAULT_REPLY_TIMEOUT.as_secs());
            }
        }
    });
}

/// Adds a server's devices to ggml's device registry and returns them.
///
/// The endpoint is checked first (syntax, TCP connect and the protocol
/// handshake, each bounded by [`HANDSHAKE_TIMEOUT`]), so a bad endpoint is an
/// error, never an abort or a hang. Adding an endpoint again returns the
/// same devices; if its connection was lost, the server is checked again
/// and, when it answers, made usable for backends created from now on.
pub fn add_server(endpoint: &str) -> Result<Vec<DeviceInfo>> {
    super::log::init();
    init_from_env();
    add(endpoint)
}

/// Adds every server of a comma-separated `host:port` list (the format of
/// [`SERVERS_ENV`]). Tries all of them; returns the devices added, or an
/// error naming every endpoint that failed (the others are still added).
pub fn add_servers(list: &str) -> Result<Vec<DeviceInfo>> {
    let mut devices = Vec::new();
    let mut failures = Vec::new();
    let mut kind = ErrorKind::InvalidArgument;
    for ep in split_list(list) {
        match add_server(ep) {
            Ok(d) => devices.extend(d),
            Err(e) => {
                kind = e.kind;
                failures.push(e.message);
            }
        }
    }
    if !failures.is_empty() {
        return Err(Error::new(kind, failures.join("; ")));
    }
    Ok(devices)
}

#[cfg(not(feature = "rpc"))]
fn add(endpoint: &str) -> Result<Vec<DeviceInfo>> {
    let _ = endpoint;
    Err(unsupported("rpc: add_server"))
}

#[cfg(feature = "rpc")]
fn add(endpoint: &str) -> Result<Vec<DeviceInfo>> {
    let (host, port) = parse_endpoint(endpoint)?;
    let ep = format!("{host}:{port}");
    let c_ep = c_string("rpc", &ep)?;
    apply_timeout_env();
    let _guard = ADD_LOCK.lock();

    let known = SERVERS
        .lock()
        .iter()
        .find(|s| s.endpoint == ep)
        .map(|s| s.devices.clone());
    if let Some(devices) = known {
        if let Some(why) = lost(&ep) {
            probe(&host, port).map_err(|e| Error::new(e.kind, format!("{} (lost earlier: {why})", e.message)))?;
            unsafe { patched::ggml_backend_rpc_rs_endpoint_reset(c_ep.as_ptr()) };
        }
        // Reading the devices' memory connects (again) now.
        let infos = infos(&devices);
        if let Some(why) = lost(&ep) {
            return Err(Error::new(ErrorKind::Io, format!("rpc: RPC server {ep} lost: {why}")));
        }
        return Ok(infos);
    }

    probe(&host, port)?;
    // A failed earlier attempt may have marked the endpoint lost.
    unsafe { patched::ggml_backend_rpc_rs_endpoint_reset(c_ep.as_ptr()) };
    let reg = unsafe { sys::ggml_backend_rpc_add_server(c_ep.as_ptr()) };
    if let Some(why) = lost(&ep) {
        return Err(Error::new(
            ErrorKind::Io,
            format!("rpc: RPC server {ep} lost while adding it: {why}"),
        ));
    }
    if reg.is_null() {
        return Err(Error::unsupported(format!("rpc: RPC server {ep} reports no devices")));
    }
    let n = unsafe { sys::ggml_backend_reg_dev_count(reg) };
    let devices: Vec<usize> = (0..n)
        .map(|i| unsafe { sys::ggml_backend_reg_dev_get(reg, i) } as usize)
        .collect();
    unsafe { sys::ggml_backend_register(reg) };
    SERVERS.lock().push(Server {
        endpoint: ep.clone(),
        devices: devices.clone(),
    });
    let infos = infos(&devices);
    if let Some(why) = lost(&ep) {
        return Err(Error::new(
            ErrorKind::Io,
            format!("rpc: RPC server {ep} lost while adding it: {why}"),
        ));
    }
    log::info!(target: "ggml_rs", "rpc: added {ep} with {} device(s)", infos.len());
    Ok(infos)
}

/// Connects to `host:port` and performs the protocol handshake, each step
/// bounded by [`HANDSHAKE_TIMEOUT`], then closes the connection (a ggml RPC
/// server serves one client at a time and goes back to accepting).
fn probe(host: &str, port: u16) -> Result<()> {
    let ep = format!("{host}:{port}");
    let io = |what: String| Error::new(ErrorKind::Io, format!("rpc: RPC server {ep}: {what}"));
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| io(format!("cannot resolve {host:?}: {e}")))?
        .filter(SocketAddr::is_ipv4)
        .collect();
    if addrs.is_empty() {
        return Err(io(format!("{host:?} has no IPv4 address")));
    }
    let mut last = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, HANDSHAKE_TIMEOUT) {
            Ok(s) => return hello(s).map_err(io),
            Err(e) => last = Some(e),
        }
    }
    Err(io(format!(
        "cannot connect: {}",
        last.map(|e| e.to_string()).unwrap_or_default()
    )))
}

fn hello(mut s: TcpStream) -> std::result::Result<(), String> {
    let timeout = HANDSHAKE_TIMEOUT.as_secs();
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    let _ = s.set_nodelay(true);
    let mut req = Vec::with_capacity(1 + 8 + CONN_CAPS_SIZE);
    req.push(CMD_HELLO);
    req.extend_from_slice(&(CONN_CAPS_SIZE as u64).to_le_bytes());
    req.extend_from_slice(&[0u8; CONN_CAPS_SIZE]);
    let explain = |e: std::io::Error| {
        match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "no handshake reply within {timeout} s (busy with another client? a ggml RPC server serves one client at a time)"
        ),
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
            "closed the connection during the handshake (not a ggml RPC server, or another protocol version)".to_string()
        }
        _ => format!("handshake failed: {e}"),
    }
    };
    s.write_all(&req).map_err(explain)?;
    let mut size = [0u8; 8];
    s.read_exact(&mut size).map_err(explain)?;
    let want = 4 + CONN_CAPS_SIZE;
    if u64::from_le_bytes(size) != want as u64 {
        return Err("unexpected handshake reply (not a ggml RPC server, or another protocol version)".into());
    }
    let mut rsp = vec![0u8; want];
    s.read_exact(&mut rsp).map_err(explain)?;
    let (major, minor, patch) = (rsp[0], rsp[1], rsp[2]);
    if major != PROTO_MAJOR || minor > PROTO_MINOR {
        return Err(format!(
            "speaks RPC protocol {major}.{minor}.{patch}; this build needs {PROTO_MAJOR}.x with x <= {PROTO_MINOR}"
        ));
    }
    Ok(())
}

// ---- hooks for the rest of the safe layer ----------------------------------

/// For `Backend::new`: false for an RPC device whose server was lost.
pub(crate) fn device_usable(d: sys::ggml_backend_dev_t) -> bool {
    match endpoint_of(d) {
        Some(ep) => lost(&ep).is_none(),
        None => true,
    }
}

/// For `Backend::new`: an error (after freeing the backend) when a
/// just-initialised RPC device could not reach its server.
pub(crate) fn check_init(backend: sys::ggml_backend_t, info: &DeviceInfo) -> Result<()> {
    #[cfg(feature = "rpc")]
    if let Some(why) = backend_lost(backend) {
        unsafe { sys::ggml_backend_free(backend) };
        return Err(Error::new(
            ErrorKind::Io,
            format!(
                "backend: device {} ({}): RPC server lost: {why}",
                info.name, info.description
            ),
        ));
    }
    let _ = (backend, info);
    Ok(())
}

#[cfg(feature = "rpc")]
fn backend_lost(b: sys::ggml_backend_t) -> Option<String> {
    if b.is_null() || !unsafe { sys::ggml_backend_is_rpc(b) } {
        return None;
    }
    reason_from(|buf, n| unsafe { patched::ggml_backend_rpc_rs_backend_lost(b, buf, n) })
}

#[cfg(feature = "rpc")]
fn buffer_lost(buf: sys::ggml_backend_buffer_t) -> Option<(String, String)> {
    if buf.is_null() {
        return None;
    }
    let why = reason_from(|s, n| unsafe { patched::ggml_backend_rpc_rs_buffer_lost(buf, s, n) })?;
    let dev = unsafe { sys::ggml_backend_buft_get_device(sys::ggml_backend_buffer_get_type(buf)) };
    Some((endpoint_name(dev), why))
}

#[cfg(feature = "rpc")]
fn endpoint_name(dev: sys::ggml_backend_dev_t) -> String {
    endpoint_of(dev)
        .or_else(|| {
            (!dev.is_null()).then(|| {
                let p = unsafe { sys::ggml_backend_dev_description(dev) };
                if p.is_null() {
                    String::new()
                } else {
                    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
                }
            })
        })
        .unwrap_or_else(|| "(unknown endpoint)".into())
}

#[cfg(feature = "rpc")]
fn lost_error(what: &str, endpoint: &str, why: &str) -> Error {
    Error::new(ErrorKind::Compute, format!("{what}: RPC server {endpoint} lost: {why}"))
}

/// After a compute or reserve (successful or not): fails when the graph
/// used a remote device whose connection is lost, since its results (zeros)
/// are not real. Graphs that never touched the lost device pass.
#[cfg(feature = "rpc")]
pub(crate) fn check_graph(
    sched: sys::ggml_backend_sched_t,
    backends: impl Iterator<Item = sys::ggml_backend_t>,
    graph: *mut sys::ggml_cgraph,
    what: &str,
) -> Result<()> {
    let rpc: Vec<sys::ggml_backend_t> = backends.filter(|&b| unsafe { sys::ggml_backend_is_rpc(b) }).collect();
    if rpc.is_empty() || graph.is_null() {
        return Ok(());
    }
    let lost: Vec<(sys::ggml_backend_t, String)> = rpc
        .into_iter()
        .filter_map(|b| backend_lost(b).map(|why| (b, why)))
        .collect();
    let n = unsafe { sys::ggml_graph_n_nodes(graph) };
    for i in 0..n {
        let node = unsafe { sys::ggml_graph_node(graph, i) };
        if node.is_null() {
            continue;
        }
        if !lost.is_empty() {
            let assigned = unsafe { sys::ggml_backend_sched_get_tensor_backend(sched, node) };
            if let Some((b, why)) = lost.iter().find(|(b, _)| *b == assigned) {
                let dev = unsafe { sys::ggml_backend_get_device(*b) };
                return Err(lost_error(what, &endpoint_name(dev), why));
            }
        }
        let r = unsafe { &*node };
        for t in std::iter::once(node).chain(r.src.iter().copied()) {
            if t.is_null() {
                continue;
            }
            if let Some((ep, why)) = buffer_lost(unsafe { (*t).buffer }) {
                return Err(lost_error(what, &ep, &why));
            }
        }
    }
    Ok(())
}

/// After a tensor read or write: fails when the tensor lives on a remote
/// device whose connection is lost (a read would have returned zeros, a
/// write was dropped).
#[cfg(feature = "rpc")]
pub(crate) fn check_tensor(t: Tensor, what: &str) -> Result<()> {
    let r = unsafe { &*t.as_ptr() };
    let mut buf = r.buffer;
    if buf.is_null() && !r.view_src.is_null() {
        buf = unsafe { (*r.view_src).buffer };
    }
    match buffer_lost(buf) {
        Some((ep, why)) => Err(lost_error(what, &ep, &why)),
        None => Ok(()),
    }
}

/// After a failed buffer allocation: an error naming the server when the
/// buffer type belongs to a lost remote device.
pub(crate) fn check_buft(buft: sys::ggml_backend_buffer_type_t, what: &str) -> Result<()> {
    #[cfg(feature = "rpc")]
    if !buft.is_null() {
        let dev = unsafe { sys::ggml_backend_buft_get_device(buft) };
        if let Some(ep) = endpoint_of(dev) {
            if let Some(why) = lost(&ep) {
                return Err(lost_error(what, &ep, &why));
            }
        }
    }
    let _ = (buft, what);
    Ok(())
}

/// After a buffer was allocated and placed: an error naming the server
/// when it is a remote buffer whose connection is lost.
pub(crate) fn check_buffer(buf: sys::ggml_backend_buffer_t, what: &str) -> Result<()> {
    #[cfg(feature = "rpc")]
    if let Some((ep, why)) = buffer_lost(buf) {
        return Err(lost_error(what, &ep, &why));
    }
    let _ = (buf, what);
    Ok(())
}

#[cfg(not(feature = "rpc"))]
pub(crate) fn check_graph(
    _sched: sys::ggml_backend_sched_t,
    _backends: impl Iterator<Item = sys::ggml_backend_t>,
    _graph: *mut sys::ggml_cgraph,
    _what: &str,
) -> Result<()> {
    Ok(())
}

#[cfg(not(feature = "rpc"))]
pub(crate) fn check_tensor(_t: super::Tensor, _what: &str) -> Result<()> {
    Ok(())
}

// ---- serving ------------------------------------------------------------------

// The server is its own module (it needs nothing of ggml's RPC client).
pub use super::rpc_server::{serve, server_address, ServerOptions, DEFAULT_IDLE_TIMEOUT_SECS, DEFAULT_PORT};

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn endpoints_parse() {
        assert_eq!(parse_endpoint("127.0.0.1:50052").unwrap(), ("127.0.0.1".into(), 50052));
        assert_eq!(parse_endpoint(" gpu-box:1 ").unwrap(), ("gpu-box".into(), 1));
        for bad in [
            "",
            "host",
            "host:",
            ":50052",
            "host:notaport",
            "host:0",
            "host:65536",
            "[::1]:5",
            "::1",
            "a b:1",
        ] {
            let e = parse_endpoint(bad).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgument, "{bad}");
            assert!(e.message.contains("malformed endpoint"), "{}", e.message);
        }
        assert_eq!(split_list(" a:1, ,b:2,"), vec!["a:1", "b:2"]);
    }

    #[test]
    fn reply_timeouts_fit_in_32_bits_of_seconds() {
        let e = set_reply_timeout(Duration::from_secs(1 << 32)).unwrap_err();
        assert!(e.message.contains("too long"), "{}", e.message);
        // rounded up to whole seconds; restore the default afterwards
        set_reply_timeout(Duration::from_millis(1)).unwrap();
        set_reply_timeout(DEFAULT_REPLY_TIMEOUT).unwrap();
    }

    #[test]
    fn server_refuses_remote_hosts() {
        let mut o = ServerOptions {
            host: "0.0.0.0".into(),
            ..Default::default()
        };
        assert!(server_address(&o).unwrap_err().message.contains("--allow-remote"));
        o.allow_remote = true;
        assert!(server_address(&o).is_ok());
        o.host = "localhost".into();
        o.allow_remote = false;
        assert_eq!(server_address(&o).unwrap(), Ipv4Addr::LOCALHOST);
        o.port = 0;
        assert!(server_address(&o).is_err());
        o.port = 1;
        for (clients, ok) in [(0, false), (1, true), (4096, true), (4097, false)] {
            o.max_clients = clients;
            assert_eq!(server_address(&o).is_ok(), ok, "{clients} clients");
        }
        o.max_clients = 16;
        o.hello_timeout = Duration::ZERO;
        assert!(server_address(&o).unwrap_err().message.contains("timeouts"));
        o.hello_timeout = Duration::from_secs(1);
        o.host = "example.com".into();
        assert!(server_address(&o).is_err());
    }
}
