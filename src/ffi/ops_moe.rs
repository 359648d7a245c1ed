//! Mixture-of-experts routing. Every op here returns a new tensor owned by
//! `ctx`'s family, or NULL with `err` set (and the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, tensor_arg};

/// Expert matrix products (ggml_mul_mat_id, Ollama's MulmatID).
/// `experts` (ggml's `as`, so named in messages) = `[K, M, n_expert]`: one
/// `[K, M]` matrix per expert, f32, f16, bf16 or a quantized type the CPU
/// can multiply (K a whole number of its blocks); `b` = `[K, n_b,
/// n_tokens]`; `ids` = i32 `[n_expert_used, n_tokens]` with
/// `n_expert_used % n_b == 0` (`n_b` is usually 1 or `n_expert_used`).
/// Result: f32 `[M, n_expert_used, n_tokens]` with
/// `out[:, e, t] = experts[:, :, ids[e, t]] · b[:, e % n_b, t]`. `b` is f32,
/// or f16 with f16 experts, bf16 with bf16 experts. A float operand strided
/// in dim 0 is copied first; quantized experts must have dense,
/// non-overlapping rows. Ids outside `0..n_expert` are found when the graph
/// is computed: ggml_rs_ctx_compute then fails with GGML_RS_ERR_COMPUTE
/// naming the op. Returns a new tensor owned by ctx's family, or NULL with
/// err set.
#[no_mangle]
pub extern "C" fn ggml_rs_mul_mat_id(
    ctx: *mut ggml_rs_context,
    experts: *mut ggml_rs_tensor,
    b: *mut ggml_rs_tensor,
    ids: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "mul_mat_id";
    op(ctx, err, OP, |c| c.mul_mat_id(tensor_arg(OP, "as", experts)?, tensor_arg(OP, "b", b)?, tensor_arg(OP, "ids", ids)?))
}

/// Per-expert bias (ggml_add_id, Ollama's AddID): `a` = f32
/// `[n, n_expert_used, n_tokens]`, `b` = f32 `[n, n_rows]`, `ids` = i32
/// `[n_expert_used, n_tokens]`; result f32 of `a`'s shape with
/// `out[:, e, t] = a[:, e, t] + b[:, ids[e, t]]`. `a` and `b` need a dense
/// dim 0 (other strides are free). Ids outside `0..n_rows` are found when
/// the graph is computed: ggml_rs_ctx_compute then fails with
/// GGML_RS_ERR_COMPUTE naming the op. Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_add_id(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    b: *mut ggml_rs_tensor,
    ids: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "add_id";
    op(ctx, err, OP, |c| c.add_id(tensor_arg(OP, "a", a)?, tensor_arg(OP, "b", b)?, tensor_arg(OP, "ids", ids)?))
}
