//! Element-wise arithmetic. Every op here returns a new tensor owned by
//! `ctx`'s family, or NULL with `err` set (and the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, tensor_arg};
use crate::ml::{Context, Result, Tensor};

fn binary(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    b: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
    label: &str,
    f: fn(&mut Context, Tensor, Tensor) -> Result<Tensor>,
) -> *mut ggml_rs_tensor {
    op(ctx, err, label, |c| f(c, tensor_arg(label, "a", a)?, tensor_arg(label, "b", b)?))
}

/// `a + b`, `b` broadcast to `a`'s shape (each dim of `a` a multiple of
/// `b`'s). An f32 `a` takes an f32 `b`; an f16 `a` takes f16 or f32. Both
/// need contiguous rows (dim-0 stride = element size: a permuted view is
/// fine, a transposed one is not). The result has `a`'s type and shape.
/// Returns a new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_add(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, b: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    binary(ctx, a, b, err, "add", Context::add)
}

/// `a - b` with broadcasting, as ggml_rs_add.
#[no_mangle]
pub extern "C" fn ggml_rs_sub(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, b: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    binary(ctx, a, b, err, "sub", Context::sub)
}

/// `a * b` element-wise with broadcasting, as ggml_rs_add.
#[no_mangle]
pub extern "C" fn ggml_rs_mul(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, b: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    binary(ctx, a, b, err, "mul", Context::mul)
}

/// `a / b` element-wise with broadcasting, as ggml_rs_add.
#[no_mangle]
pub extern "C" fn ggml_rs_div(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, b: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    binary(ctx, a, b, err, "div", Context::div)
}

/// `a * s`. `a`: f32, contiguous. Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_scale(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, s: f32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "scale", |c| c.scale(tensor_arg("scale", "a", a)?, s))
}

/// `min(max(a, lo), hi)` element-wise; `lo <= hi`, neither NaN (infinite
/// bounds are fine). `a`: f32 or f16 with contiguous rows at a fixed stride
/// (padded rows are fine, permuted dims are not). Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_clamp(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, lo: f32, hi: f32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "clamp", |c| c.clamp(tensor_arg("clamp", "a", a)?, lo, hi))
}
