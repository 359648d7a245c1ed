//! Which ggml this library bundles: its private copy's version, commit and
//! CPU features (static strings, never NULL), whatever other ggml shares
//! the process.

use std::ffi::c_char;

use crate::sys;

/// The bundled ggml's version, e.g. "0.26.0".
#[no_mangle]
pub extern "C" fn ggml_rs_ggml_version() -> *const c_char { unsafe { sys::ggml_version() } }

/// The bundled ggml's commit (as its build recorded it: a short git hash).
#[no_mangle]
pub extern "C" fn ggml_rs_ggml_commit() -> *const c_char { unsafe { sys::ggml_commit() } }

/// The bundled ggml's CPU features, as its CPU backend reports them: the
/// instruction sets it was built for and uses, e.g. "SSE3 SSSE3 AVX AVX2
/// F16C FMA BMI2 AVX512 AVX512_VNNI AVX512_BF16 LLAMAFILE REPACK" (a
/// feature with a value other than 1 as NAME=VALUE). The kernels that run,
/// and so the last bits of float results, follow from it. Static, never
/// NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_cpu_features() -> *const c_char { crate::ml::cpu_features::cpu_features().as_ptr() }
