//! Backends: the devices and scheduler that run graphs.

use super::{guard, guard_status, ggml_rs_error, ggml_rs_status};
use crate::ml::{Backend, BackendParams, Error, FlashAttention};

/// Opaque backend handle.
pub struct ggml_rs_backend {
    pub(crate) backend: Backend,
}

/// Options for ggml_rs_backend_new. Start from ggml_rs_backend_params_default().
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ggml_rs_backend_params {
    /// CPU threads; 0 = ggml_rs_default_threads().
    pub n_threads: u32,
    /// Node capacity of a context created with size 0; 0 = max(8192, 32 x
    /// the model's tensors).
    pub max_graph_nodes: u32,
    /// -1 auto, 0 disabled, 1 enabled (ScaledDotProductAttention's path).
    pub flash_attention: i32,
    /// false: only size memory, never compute (fit checks).
    pub alloc_memory: bool,
}

/// The default parameters: automatic threads, 8192 nodes, flash attention
/// auto, memory allocated.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_params_default() -> ggml_rs_backend_params {
    ggml_rs_backend_params { n_threads: 0, max_graph_nodes: 0, flash_attention: -1, alloc_memory: true }
}

/// Creates a backend over every device ggml knows (GPUs, accelerators, then
/// the CPU) with one scheduler. `params` may be NULL (defaults).
/// On success stores a new handle in `*out` (free it with
/// ggml_rs_backend_free) and returns GGML_RS_OK; on failure leaves `*out`
/// unchanged and reports into `err`.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_new(
    params: *const ggml_rs_backend_params,
    out: *mut *mut ggml_rs_backend,
    err: *mut ggml_rs_error,
) -> ggml_rs_status {
    guard_status(err, || {
        if out.is_null() {
            return Err(Error::invalid("backend_new: out is NULL"));
        }
        let backend = Backend::new(&convert_params(unsafe { params.as_ref() })?)?;
        unsafe { *out = Box::into_raw(Box::new(ggml_rs_backend { backend })) };
        Ok(())
    })
}

/// The safe layer's parameters from the C struct (NULL: defaults).
pub(crate) fn convert_params(p: Option<&ggml_rs_backend_params>) -> crate::ml::Result<BackendParams> {
    let p = p.copied().unwrap_or_else(|| ggml_rs_backend_params_default());
    let flash_attention = match p.flash_attention {
        -1 => FlashAttention::Auto,
        0 => FlashAttention::Disabled,
        1 => FlashAttention::Enabled,
        v => return Err(Error::invalid(format!("backend: flash_attention must be -1, 0 or 1, got {v}"))),
    };
    Ok(BackendParams {
        n_threads: p.n_threads as usize,
        max_graph_nodes: p.max_graph_nodes as usize,
        flash_attention,
        alloc_memory: p.alloc_memory,
    })
}

/// Releases the handle. Contexts made from it stay usable (they keep the
/// devices alive) until they are freed. NULL is ignored. Freeing twice is
/// undefined behaviour.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_free(b: *mut ggml_rs_backend) {
    guard(std::ptr::null_mut(), (), || {
        if !b.is_null() {
            drop(unsafe { Box::from_raw(b) });
        }
        Ok(())
    })
}

/// Cancels the backend's compute in progress at its next node (or, when
/// none is running, the next one): that ggml_rs_ctx_compute returns
/// GGML_RS_ERR_ABORTED and the request is consumed; the backend stays
/// usable. Safe to call from any thread while another computes. NULL is
/// ignored. CPU work stops at its next node and remote (RPC) work at its
/// next split; CUDA and Vulkan work, which ggml cannot interrupt, finishes
/// its graph and the request fails the next compute.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_cancel(b: *const ggml_rs_backend) {
    if let Some(b) = unsafe { b.as_ref() } {
        b.backend.cancel();
    }
}

/// CPU threads the backend uses; 0 for a NULL handle.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_n_threads(b: *const ggml_rs_backend) -> usize {
    unsafe { b.as_ref() }.map(|b| b.backend.n_threads()).unwrap_or(0)
}

/// The largest context size (graph nodes) this backend allows; 0 for NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_max_graph_nodes(b: *const ggml_rs_backend) -> usize {
    unsafe { b.as_ref() }.map(|b| b.backend.max_graph_nodes()).unwrap_or(0)
}

/// Whether the backend's attention uses flash attention: 1 or 0, with
/// "auto" (-1 at creation) already resolved by asking each device that
/// runs attention whether it supports the op; -1 for NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_flash_attention(b: *const ggml_rs_backend) -> i32 {
    unsafe { b.as_ref() }
        .map(|b| match b.backend.flash_attention() {
            FlashAttention::Enabled => 1,
            _ => 0,
        })
        .unwrap_or(-1)
}

/// Whether every device of the backend's scheduler is a CPU (then
/// ggml_rs_gated_delta_net_in_place is available); false for NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_cpu_only(b: *const ggml_rs_backend) -> bool {
    unsafe { b.as_ref() }.map(|b| b.backend.cpu_only()).unwrap_or(false)
}

/// Number of devices the backend's scheduler uses (CPU last); 0 for NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_device_count(b: *const ggml_rs_backend) -> usize {
    unsafe { b.as_ref() }.map(|b| b.backend.devices().len()).unwrap_or(0)
}

/// ggml registry index of the backend's `i`-th scheduler device, or -1.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_device_index(b: *const ggml_rs_backend, i: usize) -> i64 {
    unsafe { b.as_ref() }
        .and_then(|b| b.backend.devices().get(i).map(|d| d.index as i64))
        .unwrap_or(-1)
}
