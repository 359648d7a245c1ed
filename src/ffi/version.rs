//! Which ggml this library bundles: its private copy's version and commit
//! (static strings, never NULL), whatever other ggml shares the process.

use std::ffi::c_char;

use crate::sys;

/// The bundled ggml's version, e.g. "0.26.0".
#[no_mangle]
pub extern "C" fn ggml_rs_ggml_version() -> *const c_char { unsafe { sys::ggml_version() } }

/// The bundled ggml's commit (as its build recorded it: a short git hash).
#[no_mangle]
pub extern "C" fn ggml_rs_ggml_commit() -> *const c_char { unsafe { sys::ggml_commit() } }
