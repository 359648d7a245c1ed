//! Matrix products. Every op here returns a new tensor owned by `ctx`'s
//! family, or NULL with `err` set (and the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, tensor_arg};

/// Matrix product: `a=[K,M,b2,b3]` times `b=[K,N,B2,B3]` gives an f32
/// `[M,N,B2,B3]` (each element the dot product of a row of `a` and a row of
/// `b`); `a` is broadcast over the batch dims (`B2 % b2 == 0`,
/// `B3 % b3 == 0`). `a` may be f32, f16, bf16 or a quantized type the CPU
/// can multiply (K a whole number of its blocks); `b` is f32, or f16/bf16
/// when `a` has that type (bf16 also with an f32 `a`). A float operand that
/// is strided in dim 0 (e.g. transposed) is copied first. `a` may have no
/// rows and `b` no rows or batches (an empty result, skipped at compute);
/// K may not be 0. Returns a new tensor owned by ctx's family, or NULL with
/// err set.
#[no_mangle]
pub extern "C" fn ggml_rs_mul_mat(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, b: *mut ggml_rs_tensor, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    op(ctx, err, "mul_mat", |c| c.mul_mat(tensor_arg("mul_mat", "a", a)?, tensor_arg("mul_mat", "b", b)?))
}

/// As ggml_rs_mul_mat, with F32 accumulation requested (Ollama's
/// MulmatFullPrec; the CPU always accumulates in F32, GPU backends honour
/// the request). Returns a new tensor owned by ctx's family, or NULL with
/// err set.
#[no_mangle]
pub extern "C" fn ggml_rs_mul_mat_full_prec(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    b: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "mul_mat_full_prec", |c| {
        c.mul_mat_full_prec(tensor_arg("mul_mat_full_prec", "a", a)?, tensor_arg("mul_mat_full_prec", "b", b)?)
    })
}
