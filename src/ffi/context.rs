//! Contexts: graph building, data tensors, compute.

use super::backend::ggml_rs_backend;
use super::{guard, guard_status, ggml_rs_error, ggml_rs_status, ggml_rs_tensor, slice_arg, tensor_arg};
use crate::ml::{Context, Error, Result, Tensor};

/// Opaque context handle. Contexts of one family (a root and the siblings
/// made by ggml_rs_ctx_input / ggml_rs_ctx_layer) share tensor memory.
/// A context must not be used from two threads at the same time.
pub struct ggml_rs_context {
    pub(crate) ctx: Context,
}

fn ctx_ref<'a>(c: *mut ggml_rs_context, op: &str) -> Result<&'a mut Context> {
    unsafe { c.as_mut() }
        .map(|h| &mut h.ctx)
        .ok_or_else(|| Error::invalid(format!("{op}: context is NULL")))
}

fn new_handle(ctx: Context) -> *mut ggml_rs_context {
    Box::into_raw(Box::new(ggml_rs_context { ctx }))
}

/// Creates a root context that can hold `size` tensors and a graph of
/// `size` nodes (0: the backend's maximum). The root has no placement:
/// data tensors need ggml_rs_ctx_input or ggml_rs_ctx_layer. The context
/// keeps the backend alive. Returns a new handle (free with
/// ggml_rs_ctx_free), or NULL with `err` set (size above the backend's
/// maximum, out of memory).
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_new(b: *const ggml_rs_backend, size: usize, err: *mut ggml_rs_error) -> *mut ggml_rs_context {
    guard(err, std::ptr::null_mut(), || {
        let b = unsafe { b.as_ref() }.ok_or_else(|| Error::invalid("ctx_new: backend is NULL"))?;
        Ok(new_handle(Context::new(&b.backend, size)?))
    })
}

/// A new handle in the same family whose data tensors go to CPU host
/// memory (model inputs). Free it with ggml_rs_ctx_free. NULL if `c` is NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_input(c: *mut ggml_rs_context) -> *mut ggml_rs_context {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || Ok(new_handle(ctx_ref(c, "ctx_input")?.input())))
}

/// A new handle in the same family whose data tensors go to the device of
/// repeating layer `layer` (KV caches, recurrent state). Free it with
/// ggml_rs_ctx_free. NULL if `c` is NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_layer(c: *mut ggml_rs_context, layer: usize) -> *mut ggml_rs_context {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || Ok(new_handle(ctx_ref(c, "ctx_layer")?.layer(layer))))
}

/// A new handle in the same family whose data tensors go to the backend's
/// `device`-th scheduler device (see ggml_rs_backend_device_index; the CPU
/// is last). An index out of range makes data-tensor creation fail. Free it
/// with ggml_rs_ctx_free. NULL if `c` is NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_device(c: *mut ggml_rs_context, device: usize) -> *mut ggml_rs_context {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || Ok(new_handle(ctx_ref(c, "ctx_device")?.on_device(device))))
}

/// Releases one handle. The family's tensors and buffers are freed with
/// its last handle; their ggml_rs_tensor handles die then. NULL is ignored;
/// freeing twice is undefined behaviour.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_free(c: *mut ggml_rs_context) {
    guard(std::ptr::null_mut(), (), || {
        if !c.is_null() {
            drop(unsafe { Box::from_raw(c) });
        }
        Ok(())
    })
}

/// The node capacity the family was created with; 0 for NULL.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_max_graph_nodes(c: *const ggml_rs_context) -> usize {
    unsafe { c.as_ref() }.map(|h| h.ctx.max_graph_nodes()).unwrap_or(0)
}

/// Stores a batch-size hint for later computes of this handle (Ollama's
/// API; upstream ggml decides offload per op): below 32 tokens, the norms
/// of `ggml_rs_ctx_set_norm_layer` are pinned to their layers' devices.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_set_batch_size(c: *mut ggml_rs_context, n: i32) {
    if let Some(h) = unsafe { c.as_mut() } {
        h.ctx.set_batch_size(n);
    }
}

/// The layer whose ops the handle builds next (`layer` < 0: none, e.g. the
/// output head): its RMS and layer norms with a weight then run on that
/// layer's device when the batch hint is below 32 tokens or every layer is
/// offloaded, as llama.cpp pins its layers' norms.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_set_norm_layer(c: *mut ggml_rs_context, layer: i64) {
    if let Some(h) = unsafe { c.as_mut() } {
        h.ctx.set_norm_layer(usize::try_from(layer).ok());
    }
}

/// Row-wise mode for the handle's whole family (its root and siblings):
/// `mul_mat` of a 2-D `b` of several rows is built so that each row's
/// product is computed as a one-row product would be (bit-identical
/// logits for a batch and for one-token batches, on the CPU). Off by
/// default.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_set_row_wise(c: *mut ggml_rs_context, on: bool) {
    if let Some(h) = unsafe { c.as_ref() } {
        h.ctx.set_row_wise(on);
    }
}

/// Copies the first op error recorded on this handle (an op that failed
/// since the last compute or clear) into `err` and returns its status, or
/// GGML_RS_OK if there is none. The error stays recorded.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_recorded_error(c: *const ggml_rs_context, err: *mut ggml_rs_error) -> ggml_rs_status {
    match unsafe { c.as_ref() }.and_then(|h| h.ctx.recorded_error()) {
        Some(e) => super::report(err, e),
        None => ggml_rs_status::GGML_RS_OK,
    }
}

/// Forgets the op error recorded on this handle, for callers that handled
/// it when the op failed.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_clear_error(c: *mut ggml_rs_context) {
    if let Some(h) = unsafe { c.as_mut() } {
        h.ctx.clear_error();
    }
}

/// A new tensor of `type` (a ggml type id) and shape `ne[0..n_dims]` (ggml
/// order, 1 to 4 dims, each ≥ 0) with its own buffer of this handle's
/// placement; contents undefined. `n_dims == 0` or `ne[0] == 0` gives a 1-D
/// zero-element tensor without memory; a 0 in another dim, a zero-element
/// tensor of that shape (e.g. no rows). The tensor belongs to the family.
/// NULL on error (no placement, bad shape or type, out of memory).
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_empty(c: *mut ggml_rs_context, type_: i32, ne: *const i64, n_dims: usize, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    super::op(c, err, "empty", |ctx| {
        let shape = slice_arg("empty", "ne", ne, n_dims)?;
        ctx.empty(type_ as u32, shape)
    })
}

/// Like ggml_rs_ctx_empty, with the memory set to zero.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_zeros(c: *mut ggml_rs_context, type_: i32, ne: *const i64, n_dims: usize, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    super::op(c, err, "zeros", |ctx| {
        let shape = slice_arg("zeros", "ne", ne, n_dims)?;
        ctx.zeros(type_ as u32, shape)
    })
}

/// Like ggml_rs_ctx_empty, then copies `len` bytes from `data`, which must
/// be exactly the tensor's size (`len == 0` copies nothing). The caller
/// keeps ownership of `data`.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_from_data(
    c: *mut ggml_rs_context,
    type_: i32,
    ne: *const i64,
    n_dims: usize,
    data: *const u8,
    len: usize,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    super::op(c, err, "from_data", |ctx| {
        let shape = slice_arg("from_data", "ne", ne, n_dims)?;
        let bytes = slice_arg("from_data", "data", data, len)?;
        ctx.from_bytes(type_ as u32, shape, bytes)
    })
}

/// Values `start, start+step, …` below `stop`. F32 (type 0): a graph node
/// computed at run time. I32 (type 26): a host tensor in this family.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_arange(c: *mut ggml_rs_context, start: f32, stop: f32, step: f32, type_: i32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    super::op(c, err, "arange", |ctx| ctx.arange(start, stop, step, type_ as u32))
}

fn tensors(op: &str, ts: *const *mut ggml_rs_tensor, n: usize) -> Result<Vec<Tensor>> {
    let ps = slice_arg(op, "tensors", ts, n)?;
    ps.iter().enumerate().map(|(i, &p)| tensor_arg(op, &format!("tensor {i}"), p)).collect()
}

/// Adds `ts[0..n]` and everything they depend on to this handle's graph
/// (tensors of other live contexts and backend weights are allowed).
/// Errors: NULL tensors, a graph over the context's capacity.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_forward(c: *mut ggml_rs_context, ts: *const *mut ggml_rs_tensor, n: usize, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let ctx = ctx_ref(c, "forward")?;
        let ts = tensors("forward", ts, n)?;
        ctx.forward(&ts)
    })
}

/// Forwards `outputs[0..n]`, then computes this handle's whole graph on the
/// backend (one compute at a time per backend; others wait). The outputs
/// can be read with ggml_rs_tensor_get until the backend computes another
/// graph. Fails with the first op error recorded on this handle, if any
/// (and forgets it), or with GGML_RS_ERR_OUT_OF_MEMORY, _COMPUTE, _ABORTED,
/// _UNSUPPORTED (an op no device can run), or GGML_RS_ERR_INVALID_ARGUMENT when
/// the graph reads model weights that are not loaded (before
/// ggml_rs_backend_load, or after one that was cancelled or failed).
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_compute(c: *mut ggml_rs_context, outputs: *const *mut ggml_rs_tensor, n: usize, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let ctx = ctx_ref(c, "compute")?;
        let ts = tensors("compute", outputs, n)?;
        ctx.compute(&ts)
    })
}

/// Sizes (and, unless the backend was made without memory allocation,
/// allocates) the scheduler's compute buffers for this handle's graph as a
/// worst case. Writes the bytes per scheduler device into
/// `sizes[0..n_sizes]` (n_sizes should be ggml_rs_backend_device_count; extra
/// entries are left alone; `sizes` may be NULL when n_sizes is 0). When the
/// allocation fails (GGML_RS_ERR_OUT_OF_MEMORY), `sizes` holds the sizes that
/// were attempted.
#[no_mangle]
pub extern "C" fn ggml_rs_ctx_reserve(c: *mut ggml_rs_context, sizes: *mut u64, n_sizes: usize, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let ctx = ctx_ref(c, "reserve")?;
        if sizes.is_null() && n_sizes > 0 {
            return Err(Error::invalid("reserve: sizes is NULL"));
        }
        // Measured sizes first, so a failed reservation still tells the
        // caller what it tried (to retry with fewer layers on the device).
        let write = |got: Vec<u64>| {
            for (i, s) in got.into_iter().take(n_sizes).enumerate() {
                unsafe { *sizes.add(i) = s };
            }
        };
        write(ctx.measure()?);
        write(ctx.reserve()?);
        Ok(())
    })
}

