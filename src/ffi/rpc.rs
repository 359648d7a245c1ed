//! Remote devices over ggml's RPC backend (see `ml::rpc` for the design).

use std::ffi::{c_char, CStr};

use super::{ggml_rs_error, ggml_rs_status, guard, guard_status};
use crate::ml::{rpc, Error, ErrorKind, Result};

fn str_arg<'a>(op: &str, what: &str, p: *const c_char) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::invalid(format!("{op}: {what} is NULL")));
    }
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::invalid(format!("{op}: {what} is not valid UTF-8")))
}

/// True when this build has the RPC backend (remote devices).
#[no_mangle]
pub extern "C" fn ggml_rs_rpc_available() -> bool {
    rpc::available()
}

/// Adds the devices of the ggml RPC server at `endpoint` ("host:port", IPv4
/// address or host name) to the devices of this process; they then appear
/// in ggml_rs_device_count/ggml_rs_device_get (library "RPC", description =
/// the endpoint) and in backends created afterwards, before the CPU.
///
/// The endpoint is checked first: syntax, TCP connect and the protocol
/// handshake, each within 5 seconds. Adding the same endpoint again is a
/// no-op; if its server was lost, it is checked again and, when it answers,
/// usable by backends created from then on.
///
/// Servers can also be named in the environment variable
/// GGML_RS_RPC_SERVERS (comma-separated host:port), read once when devices
/// are first enumerated.
///
/// The RPC protocol has no authentication or encryption: only use servers
/// on networks you trust. Add servers before other threads enumerate
/// devices or create backends (ggml's device registry is not thread-safe).
///
/// Errors: GGML_RS_ERR_INVALID_ARGUMENT (NULL or malformed endpoint),
/// GGML_RS_ERR_IO (unreachable, not a ggml RPC server, busy, incompatible
/// protocol version), GGML_RS_ERR_UNSUPPORTED (built without RPC, or the
/// server has no devices).
#[no_mangle]
pub extern "C" fn ggml_rs_rpc_add_server(endpoint: *const c_char, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let ep = str_arg("rpc_add_server", "endpoint", endpoint)?;
        rpc::add_server(ep).map(|_| ())
    })
}

/// Adds every server of a comma-separated "host:port" list (the format of
/// GGML_RS_RPC_SERVERS), as ggml_rs_rpc_add_server does for one. All are
/// tried; on failure the message names every endpoint that failed (the
/// others were added).
#[no_mangle]
pub extern "C" fn ggml_rs_rpc_add_servers(endpoints: *const c_char, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let list = str_arg("rpc_add_servers", "endpoints", endpoints)?;
        rpc::add_servers(list).map(|_| ())
    })
}

/// The state of the connection to an added server: GGML_RS_OK while it is
/// usable; GGML_RS_ERR_COMPUTE when it was lost (the server stopped, or the
/// connection broke), with the reason in `err`; GGML_RS_ERR_INVALID_ARGUMENT
/// for a NULL, malformed or never added endpoint. Computes that use a lost
/// server fail with GGML_RS_ERR_COMPUTE and a message naming the endpoint;
/// backends created later leave its devices out until it is added again.
#[no_mangle]
pub extern "C" fn ggml_rs_rpc_server_status(endpoint: *const c_char, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let ep = str_arg("rpc_server_status", "endpoint", endpoint)?;
        let (host, port) = rpc::parse_endpoint(ep)?;
        let ep = format!("{host}:{port}");
        if !rpc::servers().iter().any(|s| s.endpoint == ep) {
            return Err(Error::invalid(format!("rpc_server_status: {ep} was never added")));
        }
        match rpc::lost(&ep) {
            Some(why) => Err(Error::new(ErrorKind::Compute, format!("RPC server {ep} lost: {why}"))),
            None => Ok(()),
        }
    })
}

/// Sets how long connections to servers made from now on wait for a reply
/// (or for room to send), in seconds; 0 waits for ever. When the time
/// passes, the connection counts as lost and the command fails with
/// GGML_RS_ERR_COMPUTE ("no reply to GET_TENSOR within 600 s"). A graph's
/// compute is awaited by the next command that reads, so this bounds one
/// graph's compute time on the server. Default 600 s, or the environment
/// variable GGML_RS_RPC_TIMEOUT (read when the first server is added).
#[no_mangle]
pub extern "C" fn ggml_rs_rpc_set_reply_timeout(seconds: u32, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || rpc::set_reply_timeout(std::time::Duration::from_secs(seconds.into())))
}

/// Number of servers added so far (explicitly or from GGML_RS_RPC_SERVERS).
#[no_mangle]
pub extern "C" fn ggml_rs_rpc_server_count() -> usize {
    guard(std::ptr::null_mut(), 0, || Ok(rpc::servers().len()))
}
