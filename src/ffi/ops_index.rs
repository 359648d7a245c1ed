//! Indexing, copying and sorting ops. Every op here returns a new tensor
//! owned by `ctx`'s family, or NULL with `err` set (and the error recorded
//! on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, tensor_arg};
use crate::ml::Error;

/// Rows of `a` gathered by `ids` (i32): `a` is `[n0, rows, b2, b3]`, `ids`
/// `[n, b2, b3]`, the result `[n0, n, b2, b3]`, f32 (i32 when `a` is i32;
/// f16, bf16 and quantized rows are converted to f32). `a` must have
/// contiguous rows. The ids must lie in [0, rows) when the graph is
/// computed; they are data, so the caller is responsible for them (ggml
/// aborts the process on a bad id). Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_get_rows(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    ids: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "get_rows", |c| {
        c.get_rows(tensor_arg("get_rows", "a", a)?, tensor_arg("get_rows", "ids", ids)?)
    })
}

/// Scatters row i of `src` into row ids[i] of `dst`: `dst` `[n0, rows, b2,
/// b3]` (f32, f16, bf16 or a quantized type the CPU can write), `src`
/// `[n0, n, b2, b3]` (f32 or f16), `ids` `[n, c2, c3]` (i32 or i64), where
/// c2 divides b2 and c3 divides b3 (ids are broadcast over the batch dims).
/// Both tensors need contiguous rows. The result is a view of `dst`; the
/// write happens only if it is forwarded/computed. The ids must lie in
/// [0, rows) when computed (the caller's responsibility, as for
/// ggml_rs_get_rows). Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_set_rows(
    ctx: *mut ggml_rs_context,
    dst: *mut ggml_rs_tensor,
    src: *mut ggml_rs_tensor,
    ids: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "set_rows", |c| {
        c.set_rows(
            tensor_arg("set_rows", "dst", dst)?,
            tensor_arg("set_rows", "src", src)?,
            tensor_arg("set_rows", "ids", ids)?,
        )
    })
}

/// Writes `src` into `dst` (same element count, logical order), converting
/// the type. Supported: same type (quantized: dense blocks, and both
/// contiguous unless the shapes are equal); between f32/f16/bf16; f32 to
/// i32 and back; f32/f16/bf16 into a quantized type (contiguous `dst`, equal
/// dim 0); a quantized type to f32. The result is a view of `dst`; the write
/// happens only if it is forwarded/computed. Returns a new tensor owned by
/// ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_cpy(
    ctx: *mut ggml_rs_context,
    src: *mut ggml_rs_tensor,
    dst: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "cpy", |c| c.cpy(tensor_arg("cpy", "src", src)?, tensor_arg("cpy", "dst", dst)?))
}

/// `a` converted to ggml type `type` (0 f32, 1 f16, 2 q4_0, 8 q8_0, 26 i32,
/// 30 bf16, ...): a new contiguous tensor of `a`'s shape. Conversions as
/// ggml_rs_cpy; quantized targets need dim 0 in whole blocks. Returns a new
/// tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_cast(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, type_: i32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "cast", |c| {
        let a = tensor_arg("cast", "a", a)?;
        let t = u32::try_from(type_).map_err(|_| Error::dtype(format!("cast: unknown tensor type {type_}")))?;
        c.cast(a, t)
    })
}

/// i32 indices that sort each row (dim 0) of `a` ascending (`descending`
/// 0) or descending (non-zero); same shape as `a`. f16, bf16 and i32 are
/// sorted as f32 (exact for i32 values within +-2^24); a non-contiguous `a`
/// is copied first. NaN sorts as the largest value (on the CPU); equal
/// keys come in an unspecified order. Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_argsort(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, descending: i32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "argsort", |c| c.argsort(tensor_arg("argsort", "a", a)?, descending != 0))
}

/// i32 indices of the `k` largest values of each row (dim 0) of `a`,
/// largest first: `[k, ne1, ne2, ne3]`, a non-contiguous view of a
/// descending argsort. 1 <= k <= ne0; input types as ggml_rs_argsort.
/// Returns a new tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_top_k(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, k: i64, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "top_k", |c| c.top_k(tensor_arg("top_k", "a", a)?, k))
}
