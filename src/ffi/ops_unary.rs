//! Element-wise functions and activations. Every op here returns a new
//! tensor owned by `ctx`'s family, or NULL with `err` set (and the error
//! recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, opt_tensor, tensor_arg};

/// `a * a` element-wise. `a`: f32 or f16, any shape, with contiguous rows
/// (dim-0 stride = element size: a permuted view is fine, a transposed one
/// is not). The result has `a`'s type and shape. Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_sqr(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "sqr", |c| c.sqr(tensor_arg("sqr", "a", a)?))
}

/// `sqrt(a)` element-wise (NaN for negative elements). `a` as in
/// ggml_rs_sqr. Returns a new tensor owned by ctx's family, or NULL with err
/// set.
#[no_mangle]
pub extern "C" fn ggml_rs_sqrt(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "sqrt", |c| c.sqrt(tensor_arg("sqrt", "a", a)?))
}

/// `e^a` element-wise. `a` as in ggml_rs_sqr. Returns a new tensor owned by
/// ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_exp(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "exp", |c| c.exp(tensor_arg("exp", "a", a)?))
}

/// `-a` element-wise. `a` as in ggml_rs_sqr. Returns a new tensor owned by
/// ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_neg(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "neg", |c| c.neg(tensor_arg("neg", "a", a)?))
}

/// `sin(a)` element-wise. `a` as in ggml_rs_sqr. Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_sin(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "sin", |c| c.sin(tensor_arg("sin", "a", a)?))
}

/// `cos(a)` element-wise. `a` as in ggml_rs_sqr. Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_cos(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "cos", |c| c.cos(tensor_arg("cos", "a", a)?))
}

/// `tanh(a)` element-wise. `a` as in ggml_rs_sqr. Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_tanh(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "tanh", |c| c.tanh(tensor_arg("tanh", "a", a)?))
}

/// `1 / (1 + e^-a)` element-wise. `a` as in ggml_rs_sqr. Returns a new
/// tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_sigmoid(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "sigmoid", |c| c.sigmoid(tensor_arg("sigmoid", "a", a)?))
}

/// SiLU `a * sigmoid(a)`. `up` (nullable): when given, the fused gated form
/// `silu(a) * up` (SwiGLU). Without `up`, `a` is as in ggml_rs_sqr. With
/// `up`: `a` and `up` are both f32 or both f16, of the same shape, each with
/// contiguous rows at a fixed stride (padded rows are fine, permuted dims
/// are not). The result has `a`'s type and shape. Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_silu(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    up: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "silu", |c| c.silu(tensor_arg("silu", "a", a)?, opt_tensor(up)))
}

/// GELU, tanh approximation `a/2 * (1 + tanh(√(2/π) (a + 0.044715 a³)))`
/// (ggml's CPU kernel evaluates it through an f16 table: about 3 decimal
/// digits). `up` (nullable): when given, `gelu(a) * up` (GeGLU). Arguments
/// as in ggml_rs_silu. Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_gelu(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    up: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "gelu", |c| c.gelu(tensor_arg("gelu", "a", a)?, opt_tensor(up)))
}

/// Exact GELU `a/2 * (1 + erf(a/√2))`. `up` (nullable): when given,
/// `gelu_erf(a) * up`. Arguments as in ggml_rs_silu. Returns a new tensor
/// owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_gelu_erf(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    up: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "gelu_erf", |c| c.gelu_erf(tensor_arg("gelu_erf", "a", a)?, opt_tensor(up)))
}

/// Quick GELU `a * sigmoid(1.702 a)` (through an f16 table on the CPU, as
/// ggml_rs_gelu). `up` (nullable): when given, `gelu_quick(a) * up`.
/// Arguments as in ggml_rs_silu. Returns a new tensor owned by ctx's family,
/// or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_gelu_quick(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    up: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "gelu_quick", |c| c.gelu_quick(tensor_arg("gelu_quick", "a", a)?, opt_tensor(up)))
}

/// ReLU `a > 0 ? a : 0` (NaN gives 0). `up` (nullable): when given,
/// `relu(a) * up` (ReGLU; 0 wherever `a <= 0`, whatever `up` holds).
/// Arguments as in ggml_rs_silu. Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_relu(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    up: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "relu", |c| c.relu(tensor_arg("relu", "a", a)?, opt_tensor(up)))
}
