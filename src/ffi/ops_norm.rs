//! Normalisations and row reductions, all along dim 0. Every op here
//! returns a new tensor owned by `ctx`'s family, or NULL with `err` set (and
//! the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, opt_tensor, tensor_arg};

/// Softmax along dim 0: each row `r` becomes `e^(r - max r) / Σ e^(r - max r)`.
/// `a`: f32, contiguous, any shape. The result is f32 of `a`'s shape.
/// Returns a new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_softmax(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "softmax", |c| c.softmax(tensor_arg("softmax", "a", a)?))
}

/// RMS norm along dim 0: `a / sqrt(mean(a²) + eps)` per row, then times
/// `weight` when given. `a`: f32 with contiguous rows (dim-0 stride = 4
/// bytes; permuted dims 1..3 are fine). `weight` (nullable): f32 with
/// contiguous rows, broadcast to `a`'s shape (usually `[a.ne[0]]`). `eps`:
/// finite, >= 0. The result is f32 of `a`'s shape. Returns a new tensor
/// owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_rms_norm(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    weight: *mut ggml_rs_tensor,
    eps: f32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "rms_norm", |c| c.rms_norm(tensor_arg("rms_norm", "a", a)?, opt_tensor(weight), eps))
}

/// Layer norm along dim 0: `(a - mean) / sqrt(var + eps)` per row (biased
/// variance); when `weight` is given, times `weight`, then plus `bias` if
/// given. As in Ollama, `bias` is ignored when `weight` is NULL. `a`: f32,
/// any layout. `weight`, `bias` (nullable): f32 with contiguous rows,
/// broadcast to `a`'s shape. `eps`: finite, >= 0. The result is f32 of
/// `a`'s shape. Returns a new tensor owned by ctx's family, or NULL with err
/// set.
#[no_mangle]
pub extern "C" fn ggml_rs_layer_norm(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    weight: *mut ggml_rs_tensor,
    bias: *mut ggml_rs_tensor,
    eps: f32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "layer_norm", |c| {
        c.layer_norm(tensor_arg("layer_norm", "a", a)?, opt_tensor(weight), opt_tensor(bias), eps)
    })
}

/// L2 norm along dim 0: `a / max(‖row‖₂, eps)` per row. `a`: f32, any
/// layout. `eps`: finite, >= 0. The result is f32 of `a`'s shape. Returns a
/// new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_l2_norm(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, eps: f32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "l2_norm", |c| c.l2_norm(tensor_arg("l2_norm", "a", a)?, eps))
}

/// Sum of each row: `[n0, n1, n2, n3]` → f32 `[1, n1, n2, n3]`. `a`: f32
/// with contiguous rows (dim-0 stride = 4 bytes). Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_sum_rows(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "sum_rows", |c| c.sum_rows(tensor_arg("sum_rows", "a", a)?))
}

/// Mean of each row: `[n0, n1, n2, n3]` → f32 `[1, n1, n2, n3]`. `a` as in
/// ggml_rs_sum_rows. Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_mean(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "mean", |c| c.mean(tensor_arg("mean", "a", a)?))
}
