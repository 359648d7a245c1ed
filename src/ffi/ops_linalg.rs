//! Linear algebra and miscellaneous ops: softplus, sigmoid_out,
//! silu_alpha_limit, fill, cumsum, variance, stddev, diag, tri, solve_tri,
//! pad_ext, set_inplace, repeat_4d. Every op here returns a new tensor owned
//! by `ctx`'s family, or NULL with `err` set (and the error recorded on
//! `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, tensor_arg};

/// Softplus `ln(1 + e^a)` element-wise (ggml returns `a` itself for
/// `a > 20`). `a`: f32 or f16, any shape, dim-0 stride equal to the element
/// size (permuted views are fine, transposed ones are not). The result has
/// `a`'s type and shape. Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_softplus(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "softplus", |c| c.softplus(tensor_arg("softplus", "a", a)?))
}

/// Sigmoid `1 / (1 + e^-a)` element-wise, out of place (Ollama's
/// SigmoidOut; identical to ggml_rs_sigmoid, which is out of place too).
/// `a` as in ggml_rs_softplus. Returns a new tensor owned by ctx's family,
/// or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_sigmoid_out(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "sigmoid_out", |c| c.sigmoid_out(tensor_arg("sigmoid_out", "a", a)?))
}

/// gpt-oss's clamped SwiGLU (ggml_swiglu_oai, Ollama's SILUAlphaLimit):
/// with `x = min(a, limit)` and `y = clamp(up, -limit, limit)`, the result
/// is `x * sigmoid(alpha * x) * (y + 1)`. `a`, `up`: f32, same shape, each
/// with contiguous rows at a fixed stride (padded rows are fine, permuted
/// dims are not); `up` is required. `alpha` finite; `limit >= 0` (+inf: no
/// clamping). Returns a new f32 tensor of `a`'s shape owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_silu_alpha_limit(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    up: *mut ggml_rs_tensor,
    alpha: f32,
    limit: f32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "silu_alpha_limit";
    op(ctx, err, OP, |c| c.silu_alpha_limit(tensor_arg(OP, "a", a)?, tensor_arg(OP, "up", up)?, alpha, limit))
}

/// Every element set to `value`. `a`: f32 or f16, contiguous (its values
/// are not read). `inplace` false: a new tensor of `a`'s type and shape.
/// `inplace` true (Ollama's Fill, ggml_fill_inplace): the result is a view
/// of `a`, and computing it overwrites `a`'s memory; `a` itself then holds
/// `value` everywhere. Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_fill(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    value: f32,
    inplace: bool,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    let name = if inplace { "fill_inplace" } else { "fill" };
    op(ctx, err, name, |c| {
        let a = tensor_arg(name, "a", a)?;
        if inplace {
            c.fill_inplace(a, value)
        } else {
            c.fill(a, value)
        }
    })
}

/// Running sum along dim 0: `out[i, …] = a[0, …] + … + a[i, …]`. `a`: f32
/// with a dim-0 stride of 4 bytes (other strides are free). Returns a new
/// f32 tensor of `a`'s shape owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_cumsum(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "cumsum", |c| c.cumsum(tensor_arg("cumsum", "a", a)?))
}

/// Population variance along dim 0 (Ollama's Variance):
/// `[n0, n1, n2, n3]` → f32 `[1, n1, n2, n3]`, `Σ (a - mean)² / n0`, built
/// from ggml ops (mean, sub, sqr, sum_rows, scale). `a`: f32 with a dim-0
/// stride of 4 bytes and at least one element. Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_variance(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "variance", |c| c.variance(tensor_arg("variance", "a", a)?))
}

/// Population standard deviation along dim 0 (Ollama's Stddev): the square
/// root of ggml_rs_variance. `a` as there. Returns a new tensor owned by
/// ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_stddev(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "stddev", |c| c.stddev(tensor_arg("stddev", "a", a)?))
}

/// Diagonal matrices: `a` = f32 `[n, 1, n2, n3]` (dim-0 stride 4 bytes) →
/// f32 `[n, n, n2, n3]` holding `a[i]` at `(i, i)` and zeros elsewhere.
/// Returns a new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_diag(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "diag", |c| c.diag(tensor_arg("diag", "a", a)?))
}

/// One triangle of each square matrix `a = [n, n, b2, b3]` (f32,
/// contiguous), zeros elsewhere. With column `i` (dim 0) and row `r` (dim
/// 1), `tri_type` keeps: 0 `i >= r` (upper with the diagonal), 1 `i > r`
/// (strictly upper), 2 `i <= r` (lower with the diagonal), 3 `i < r`
/// (strictly lower); these are ggml's GGML_TRI_TYPE_* values, as Ollama
/// passes them. Other values are an error. Returns a new tensor owned by
/// ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_tri(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, tri_type: i32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "tri", |c| c.tri(tensor_arg("tri", "a", a)?, tri_type))
}

/// Triangular solve (ggml_solve_tri), arguments in ggml's order: for each
/// batch, `X` with `A X = B`, where `A` = `a` = `[n, n, b2, b3]` (row `r` is
/// `a[:, r]`; only the lower triangle and the diagonal are read) and `B` =
/// `b` = `[k, n, b2, b3]` (`k` right-hand sides). `left`: solve `A X = B`
/// (false: `X A = B`); `lower`: `A` lower triangular (false: upper);
/// `unit_diag`: assume ones on the diagonal. ggml implements only
/// `left && lower && !unit_diag`; other combinations fail with
/// GGML_RS_ERR_UNSUPPORTED. A zero on the diagonal gives inf/NaN. Both f32,
/// contiguous. (Ollama's Go SolveTri(b, lower, left, unitDiag) passes its
/// `lower` as ggml's `left` and its `left` as `lower`; the Go package keeps
/// that.) Returns a new f32 tensor of `b`'s shape owned by ctx's family, or
/// NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_solve_tri(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    b: *mut ggml_rs_tensor,
    left: bool,
    lower: bool,
    unit_diag: bool,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "solve_tri";
    op(ctx, err, OP, |c| c.solve_tri(tensor_arg(OP, "a", a)?, tensor_arg(OP, "b", b)?, left, lower, unit_diag))
}

/// Zero padding before and after each dim: `lpN` zeros before and `rpN`
/// after the elements of dim N (all >= 0). `a`: f32, any layout, with
/// elements. Returns a new contiguous f32 tensor of shape
/// `ne[i] + lp_i + rp_i` owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_pad_ext(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    lp0: i32,
    rp0: i32,
    lp1: i32,
    rp1: i32,
    lp2: i32,
    rp2: i32,
    lp3: i32,
    rp3: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "pad_ext", |c| c.pad_ext(tensor_arg("pad_ext", "a", a)?, [lp0, lp1, lp2, lp3], [rp0, rp1, rp2, rp3]))
}

/// Writes `b` into `a`'s memory (ggml_set_inplace, Ollama's SetInplace):
/// element `(i0, i1, i2, i3)` of `b` goes to byte
/// `offset + i0*elem + i1*nb1 + i2*nb2 + i3*nb3` of `a`. The result is a
/// view of `a` with `a`'s shape; the write happens when it is computed.
/// `a`: f32 or i32, contiguous; `b`: the same type, dim-0 stride equal to
/// the element size. The whole region must lie inside `a`; `nb1..nb3` and
/// `offset` are multiples of the element size, strides below 2^31 and
/// `offset` below 2^30 (ggml stores them as 32-bit parameters). Returns a
/// new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_set_inplace(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    b: *mut ggml_rs_tensor,
    nb1: usize,
    nb2: usize,
    nb3: usize,
    offset: usize,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "set_inplace";
    op(ctx, err, OP, |c| c.set_inplace(tensor_arg(OP, "a", a)?, tensor_arg(OP, "b", b)?, nb1, nb2, nb3, offset))
}

/// `a` tiled to the shape `[ne0, ne1, ne2, ne3]` (ggml_repeat_4d, Ollama's
/// Repeat4D): each target dim >= 1, below 2^31 and a multiple of `a`'s;
/// whole blocks are repeated (not interleaved). `a`: f32, f16, bf16 or i32
/// with a dim-0 stride equal to the element size and at least one element.
/// Returns a new tensor of `a`'s type owned by ctx's family, or NULL with
/// err set.
#[no_mangle]
pub extern "C" fn ggml_rs_repeat_4d(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    ne0: i64,
    ne1: i64,
    ne2: i64,
    ne3: i64,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "repeat_4d", |c| c.repeat_4d(tensor_arg("repeat_4d", "a", a)?, [ne0, ne1, ne2, ne3]))
}
