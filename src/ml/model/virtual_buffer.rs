//! Virtual buffers for sizing-only ("fit") backends: a buffer of a real
//! buffer type and size whose memory does not exist. Tensors get addresses
//! inside it, so ggml's scheduler places and measures graphs exactly as it
//! would with real memory (weights and caches are not counted as graph
//! memory), but nothing can be read or written: reads and writes fail in
//! `data.rs` (the buffer has no get/set operations), memset is a no-op, and a
//! sizing-only backend refuses to load or compute.

use std::ffi::c_void;

use crate::sys;
use crate::sys::internal::{ggml_backend_buffer_i, ggml_backend_buffer_init};

unsafe extern "C" fn base(buf: sys::ggml_backend_buffer_t) -> *mut c_void {
    // The buffer's context holds the fake, aligned, non-NULL base address.
    (*(buf as *const sys::internal::ggml_backend_buffer_layout)).context
}
unsafe extern "C" fn free(_: sys::ggml_backend_buffer_t) {}
unsafe extern "C" fn memset(_: sys::ggml_backend_buffer_t, _: *mut sys::ggml_tensor, _: u8, _: usize, _: usize) {}
unsafe extern "C" fn clear(_: sys::ggml_backend_buffer_t, _: u8) {}

/// A virtual buffer of `size` bytes of `buft`; free it with
/// `ggml_backend_buffer_free`.
pub(crate) fn new(buft: sys::ggml_backend_buffer_type_t, size: usize) -> sys::ggml_backend_buffer_t {
    let align = unsafe { sys::ggml_backend_buft_get_alignment(buft) }.max(64);
    let iface = ggml_backend_buffer_i {
        free_buffer: Some(free),
        get_base: Some(base),
        init_tensor: None,
        memset_tensor: Some(memset),
        set_tensor: None,
        get_tensor: None,
        set_tensor_2d: None,
        get_tensor_2d: None,
        cpy_tensor: None,
        clear: Some(clear),
        reset: None,
    };
    unsafe { ggml_backend_buffer_init(buft, iface, align as *mut c_void, size.max(1)) }
}
