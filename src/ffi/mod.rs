//! The extern "C" surface (`include/ggml_rs.h`). Thin by design: convert
//! arguments, check pointers, call [`crate::ml`], report.
//!
//! Conventions (repeated in the header):
//! * Handles (`ggml_rs_backend`, `ggml_rs_context`) are opaque, created by a
//!   `_new` function and released by the matching `_free`, which accepts
//!   NULL. Calling `_free` twice, or using a handle after its `_free`, is
//!   undefined behaviour (the Go package guards against both).
//! * `ggml_rs_tensor` handles are borrowed: they belong to the context
//!   family that made them and stay valid until its last handle is freed.
//! * Every fallible function takes a trailing `ggml_rs_error *err`
//!   (nullable). On failure it writes a status and a message there (only on
//!   failure) and returns an error status, NULL, or a documented default.
//!   Nothing is kept in thread-local state, so a caller may switch threads
//!   between calls.
//! * No panic crosses the boundary: one is caught and reported as
//!   `GGML_RS_ERR_PANIC`.
#![allow(non_camel_case_types)]

pub mod backend;
pub mod context;
pub mod device;
pub mod log;
pub mod model;
pub mod ops_arith;
pub mod ops_attention;
pub mod ops_conv;
pub mod ops_index;
pub mod ops_linalg;
pub mod ops_matmul;
pub mod ops_moe;
pub mod ops_norm;
pub mod ops_rope;
pub mod ops_shape;
pub mod ops_ssm;
pub mod ops_unary;
pub mod quant;
pub mod rpc;
pub mod tensor;
pub mod version;

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::ml::{Context, Error, ErrorKind, Result, Tensor};

/// Result of a fallible call.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ggml_rs_status {
    GGML_RS_OK = 0,
    /// A NULL or otherwise unusable argument.
    GGML_RS_ERR_INVALID_ARGUMENT = 1,
    /// Shapes, strides or dimension counts the op cannot take.
    GGML_RS_ERR_SHAPE = 2,
    /// A tensor type the op cannot take.
    GGML_RS_ERR_DTYPE = 3,
    /// Memory could not be allocated, or a context/graph is full.
    GGML_RS_ERR_OUT_OF_MEMORY = 4,
    /// ggml failed while computing a graph.
    GGML_RS_ERR_COMPUTE = 5,
    /// The compute was cancelled.
    GGML_RS_ERR_ABORTED = 6,
    /// The object was already closed.
    GGML_RS_ERR_CLOSED = 7,
    /// A file could not be read.
    GGML_RS_ERR_IO = 8,
    /// A file is not a valid model.
    GGML_RS_ERR_FORMAT = 9,
    /// A bug in ggml-rs was caught (a Rust panic); the message says where.
    GGML_RS_ERR_PANIC = 10,
    /// Not supported by this build or device.
    GGML_RS_ERR_UNSUPPORTED = 11,
}

/// Capacity of `ggml_rs_error.message`, including the terminating NUL.
pub const GGML_RS_ERROR_MESSAGE_SIZE: usize = 1024;

/// Where a failed call describes what went wrong. Allocate it yourself
/// (stack or heap) and pass its address; it holds no pointers.
#[repr(C)]
pub struct ggml_rs_error {
    /// The failure's status (never GGML_RS_OK after a failure).
    pub status: ggml_rs_status,
    /// NUL-terminated UTF-8 message naming the operation and its arguments,
    /// truncated to fit.
    pub message: [c_char; GGML_RS_ERROR_MESSAGE_SIZE],
}

/// Opaque handle to a tensor (a graph node, a data tensor or a weight).
/// Borrowed from its context family; never freed on its own.
pub struct ggml_rs_tensor {
    _private: [u8; 0],
}

pub(crate) fn status_of(kind: ErrorKind) -> ggml_rs_status {
    use ggml_rs_status::*;
    match kind {
        ErrorKind::InvalidArgument => GGML_RS_ERR_INVALID_ARGUMENT,
        ErrorKind::Shape => GGML_RS_ERR_SHAPE,
        ErrorKind::DType => GGML_RS_ERR_DTYPE,
        ErrorKind::OutOfMemory => GGML_RS_ERR_OUT_OF_MEMORY,
        ErrorKind::Compute => GGML_RS_ERR_COMPUTE,
        ErrorKind::Aborted => GGML_RS_ERR_ABORTED,
        ErrorKind::Closed => GGML_RS_ERR_CLOSED,
        ErrorKind::Io => GGML_RS_ERR_IO,
        ErrorKind::Format => GGML_RS_ERR_FORMAT,
        ErrorKind::Panic => GGML_RS_ERR_PANIC,
        ErrorKind::Unsupported => GGML_RS_ERR_UNSUPPORTED,
    }
}

/// Writes `e` into `err` (if non-NULL), truncating on a char boundary.
pub(crate) fn report(err: *mut ggml_rs_error, e: &Error) -> ggml_rs_status {
    let status = status_of(e.kind);
    if let Some(err) = unsafe { err.as_mut() } {
        err.status = status;
        let mut n = e.message.len().min(GGML_RS_ERROR_MESSAGE_SIZE - 1);
        while !e.message.is_char_boundary(n) {
            n -= 1;
        }
        for (dst, &b) in err.message.iter_mut().zip(&e.message.as_bytes()[..n]) {
            *dst = if b == 0 { b' ' as c_char } else { b as c_char };
        }
        err.message[n] = 0;
    }
    status
}

fn panic_error(p: Box<dyn std::any::Any + Send>) -> Error {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    Error::new(ErrorKind::Panic, format!("internal error (panic) in ggml-rs: {what}"))
}

/// Runs `f` behind the panic boundary; on failure reports into `err` and
/// returns `default`.
pub(crate) fn guard<T>(err: *mut ggml_rs_error, default: T, f: impl FnOnce() -> Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            report(err, &e);
            default
        }
        Err(p) => {
            report(err, &panic_error(p));
            default
        }
    }
}

/// `guard` for functions that return a status.
pub(crate) fn guard_status(err: *mut ggml_rs_error, f: impl FnOnce() -> Result<()>) -> ggml_rs_status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => ggml_rs_status::GGML_RS_OK,
        Ok(Err(e)) => report(err, &e),
        Err(p) => report(err, &panic_error(p)),
    }
}

/// A tensor argument: NULL is an error naming the op and the argument.
pub(crate) fn tensor_arg(op: &str, what: &str, p: *mut ggml_rs_tensor) -> Result<Tensor> {
    unsafe { Tensor::from_raw(p.cast()) }
        .ok_or_else(|| Error::invalid(format!("{op}: {what} is NULL")))
}

/// An optional tensor argument (NULL means absent).
pub(crate) fn opt_tensor(p: *mut ggml_rs_tensor) -> Option<Tensor> {
    unsafe { Tensor::from_raw(p.cast()) }
}

pub(crate) fn out_tensor(t: Tensor) -> *mut ggml_rs_tensor {
    t.as_ptr().cast()
}

/// The body of every op: resolve the context, run `f`, and on failure
/// report into `err`, record the error on the context (so `compute` fails
/// with it if the caller ignored it) and return NULL.
pub(crate) fn op(
    ctx: *mut context::ggml_rs_context,
    err: *mut ggml_rs_error,
    name: &str,
    f: impl FnOnce(&mut Context) -> Result<Tensor>,
) -> *mut ggml_rs_tensor {
    let Some(handle) = (unsafe { ctx.as_mut() }) else {
        report(err, &Error::invalid(format!("{name}: context is NULL")));
        return std::ptr::null_mut();
    };
    let c = &mut handle.ctx;
    match catch_unwind(AssertUnwindSafe(|| f(c))) {
        Ok(Ok(t)) => out_tensor(t),
        Ok(Err(e)) => {
            report(err, &e);
            handle.ctx.record(&e);
            std::ptr::null_mut()
        }
        Err(p) => {
            let e = panic_error(p);
            report(err, &e);
            handle.ctx.record(&e);
            std::ptr::null_mut()
        }
    }
}

/// A slice argument: NULL is allowed only with length 0.
pub(crate) fn slice_arg<'a, T>(op: &str, what: &str, p: *const T, n: usize) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::invalid(format!("{op}: {what} is NULL with length {n}")));
    }
    if n > (1usize << 40) {
        return Err(Error::invalid(format!("{op}: {what} length {n} is not plausible")));
    }
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Copies `s` into the fixed C string `dst` (non-empty), truncated at a
/// character boundary to leave room for the terminating NUL.
pub(crate) fn copy_str(dst: &mut [std::ffi::c_char], s: &str) {
    let mut n = s.len().min(dst.len() - 1);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    for (d, &b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = b as std::ffi::c_char;
    }
    dst[n] = 0;
}
