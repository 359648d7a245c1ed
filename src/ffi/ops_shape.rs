//! Shape, layout and view ops. Every op here returns a new tensor owned by
//! `ctx`'s family, or NULL with `err` set (and the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, slice_arg, tensor_arg};

/// `a` with the shape `shape[0..n]` (1 to 4 dims, ggml order; one entry
/// may be -1: inferred from the element count; none may be 0). Errors as
/// Ollama's inferShape: "only one dimension can be inferred", "cannot infer
/// dimension", "dimension cannot be zero"; the element count must match.
/// Contiguous `a`: the result is a view of `a`. Non-contiguous `a`: a
/// contiguous copy with the new shape. Quantized types: dim 0 whole blocks.
/// Returns a new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_reshape(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    shape: *const i64,
    n: usize,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "reshape", |c| {
        let a = tensor_arg("reshape", "a", a)?;
        let shape = slice_arg("reshape", "shape", shape, n)?;
        c.reshape(a, shape)
    })
}

/// A view of `a`'s memory starting `offset` bytes after `a`'s data, with
/// `ne[0..n_dims]` elements per dimension (1 to 4 dims, each >= 0) and the
/// byte strides `nb[0..n_dims-1]` of dims 1.. (dim 0 is dense; `nb` may be
/// NULL for a 1-D view). A view with a 0 in its shape has no elements and
/// may lie anywhere, as in ggml; any other must lie entirely inside the memory of
/// the tensor that owns `a`'s memory (for a view of a view: the original
/// tensor), offset and strides must be multiples of the element size (the
/// block size for quantized types, whose dim 0 must be whole blocks).
/// Returns a new tensor (a view sharing `a`'s memory) owned by ctx's family,
/// or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_view(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    offset: usize,
    ne: *const i64,
    nb: *const usize,
    n_dims: usize,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "view", |c| {
        let a = tensor_arg("view", "a", a)?;
        let ne = slice_arg("view", "ne", ne, n_dims)?;
        let nb = slice_arg("view", "nb", nb, n_dims.saturating_sub(1))?;
        c.view(a, offset, ne, nb)
    })
}

/// Reorders `a`'s axes: source axis i moves to position o_i; (o0, o1, o2,
/// o3) must be a permutation of 0..3 (Ollama fills axes a caller omits with
/// the identity). Quantized tensors must keep axis 0 in place. Returns a new
/// tensor (a non-contiguous view of `a`) owned by ctx's family, or NULL with
/// err set.
#[no_mangle]
pub extern "C" fn ggml_rs_permute(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    o0: i32,
    o1: i32,
    o2: i32,
    o3: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "permute", |c| c.permute(tensor_arg("permute", "a", a)?, [o0, o1, o2, o3]))
}

/// A contiguous copy of `a`. `n == 0` (`shape` may be NULL): same shape.
/// Else the copy has shape `shape[0..n]` (1 to 4 dims, one may be -1,
/// same element count; elements in `a`'s logical order). Returns a new
/// tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_cont(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    shape: *const i64,
    n: usize,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "cont", |c| {
        let a = tensor_arg("cont", "a", a)?;
        let shape = slice_arg("cont", "shape", shape, n)?;
        c.cont(a, shape)
    })
}

/// `a` followed by `b` along `dim` (0..3): same type, equal sizes in the
/// other dims; the result's `ne[dim]` is the sum. Types other than
/// f32/f16/bf16/i32/i16/i8 need contiguous rows. Returns a new tensor owned
/// by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_concat(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    b: *mut ggml_rs_tensor,
    dim: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "concat", |c| {
        c.concat(tensor_arg("concat", "a", a)?, tensor_arg("concat", "b", b)?, dim as i64)
    })
}

/// The whole of `a` tiled `n` (>= 1) times along `dim` (0..3), block after
/// block (not interleaved): `ne[dim]` becomes `ne[dim] * n`. Types f32, f16,
/// bf16, i32; `a`'s rows must be dense. Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_repeat(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    dim: i32,
    n: i64,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "repeat", |c| c.repeat(tensor_arg("repeat", "a", a)?, dim as i64, n))
}

/// `a` (f32) with p0..p3 (>= 0) zeros appended at the end of dims 0..3:
/// shape `[ne0+p0, ne1+p1, ne2+p2, ne3+p3]`. (Ollama's Pad also refuses
/// p3 != 0; this function accepts it.) Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_pad(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    p0: i32,
    p1: i32,
    p2: i32,
    p3: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "pad", |c| c.pad(tensor_arg("pad", "a", a)?, [p0, p1, p2, p3]))
}

/// Ollama's Slice: along `dim`, the elements low, low+step, ... of
/// [low, high). Requires 0 <= dim < 4, low >= 0, high <= ne[dim],
/// low < high, step >= 1. The new `ne[dim]` is `high-low` for step 1 and
/// `(high-low+1)/step` otherwise (Ollama's formula; 0 is an error). The
/// result is a view of `a`, except for step > 1 along dim 0: a contiguous
/// copy. Quantized types: along dim 0 only step 1 at whole blocks. Returns a
/// new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_slice(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    dim: i32,
    low: i64,
    high: i64,
    step: i64,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "slice", |c| c.slice(tensor_arg("slice", "a", a)?, dim as i64, low, high, step))
}

/// A contiguous copy of `a` (same type and shape). Returns a new tensor
/// owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_dup(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "dup", |c| c.dup(tensor_arg("dup", "a", a)?))
}
