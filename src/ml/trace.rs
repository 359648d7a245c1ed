//! `GGML_RS_TRACE=1`: every node the scheduler computes, printed to stderr
//! as it completes (op, shape, sum and sum of absolute values of its data
//! as f32, name). A debugging aid for finding where two programs' graphs
//! first part: llama.cpp's `tools/llama-ref` prints the same lines under
//! `LLAMA_REF_TRACE=1`. Observing each node splits the graph at every node,
//! so kernels that fuse neighbours do not fuse under the trace.

use crate::sys;

/// Whether the trace was asked for (read once).
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("GGML_RS_TRACE").is_some_and(|v| !v.is_empty() && v != "0"))
}

/// The scheduler's eval callback: asks for every node, prints each.
pub(crate) unsafe extern "C" fn callback(t: *mut sys::ggml_tensor, ask: bool, _: *mut std::ffi::c_void) -> bool {
    if ask {
        return true;
    }
    // No panic may unwind into ggml.
    let _ = std::panic::catch_unwind(|| unsafe { print(&*t) });
    true
}

unsafe fn print(t: &sys::ggml_tensor) {
    let (mut sum, mut abs) = (0f64, 0f64);
    for v in unsafe { values(t) } {
        sum += v as f64;
        abs += (v as f64).abs();
    }
    let op = unsafe { std::ffi::CStr::from_ptr(sys::ggml_op_desc(t)) }.to_string_lossy();
    let name = unsafe { std::ffi::CStr::from_ptr(t.name.as_ptr()) }.to_string_lossy();
    eprintln!("trace {op} [{},{},{},{}] {sum:.6e} {abs:.6e} {name}", t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
}

/// A contiguous tensor's values as f32 (ggml's to_float of its type);
/// none for a view without data of its own or a type without one.
unsafe fn values(t: &sys::ggml_tensor) -> Vec<f32> {
    if t.buffer.is_null() || !unsafe { sys::ggml_is_contiguous(t) } {
        return Vec::new();
    }
    let n = unsafe { sys::ggml_nelements(t) } as usize;
    let mut raw = vec![0u8; unsafe { sys::ggml_nbytes(t) }];
    unsafe { sys::ggml_backend_tensor_get(t, raw.as_mut_ptr().cast(), 0, raw.len()) };
    let mut v = vec![0f32; n];
    match super::quant::to_f32(t.type_, &raw, n as u64, &mut v) {
        Ok(()) => v,
        Err(_) => Vec::new(),
    }
}
