//! `GGML_RS_TRACE=1`: every node the scheduler computes, printed to stderr
//! as it completes (op, shape, sum and sum of absolute values of its F32 or
//! F16 data, name). A debugging aid for finding where two programs' graphs
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
    let n = unsafe { sys::ggml_nelements(t) } as usize;
    let (mut sum, mut abs) = (0f64, 0f64);
    let readable = unsafe { sys::ggml_is_contiguous(t) } && !t.buffer.is_null();
    let mut add = |v: f64| {
        sum += v;
        abs += v.abs();
    };
    if readable && t.type_ == sys::GGML_TYPE_F32 {
        let mut v = vec![0f32; n];
        unsafe { sys::ggml_backend_tensor_get(t, v.as_mut_ptr().cast(), 0, n * 4) };
        v.iter().for_each(|&x| add(x as f64));
    } else if readable && t.type_ == sys::GGML_TYPE_F16 {
        let mut v = vec![0u16; n];
        unsafe { sys::ggml_backend_tensor_get(t, v.as_mut_ptr().cast(), 0, n * 2) };
        v.iter().for_each(|&x| add(unsafe { sys::ggml_fp16_to_fp32(x) } as f64));
    }
    let op = unsafe { std::ffi::CStr::from_ptr(sys::ggml_op_desc(t)) }.to_string_lossy();
    let name = unsafe { std::ffi::CStr::from_ptr(t.name.as_ptr()) }.to_string_lossy();
    eprintln!("trace {op} [{},{},{},{}] {sum:.6e} {abs:.6e} {name}", t.ne[0], t.ne[1], t.ne[2], t.ne[3]);
}
