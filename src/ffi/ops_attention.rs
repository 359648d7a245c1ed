//! Attention. `ggml_rs_sdpa` returns a new tensor owned by `ctx`'s family,
//! or NULL with `err` set (and the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, opt_tensor, tensor_arg};

/// Scaled dot-product attention (Ollama's ScaledDotProductAttention):
/// softmax(scale * K·Q + mask) · V per head.
/// `q=[dk, heads, seqQ, batch]` f32; `k=[dk, kvHeads, seqK, kb]`;
/// `v=[dv, kvHeads, seqK, kb]`, or `[seqK, dv, kvHeads, kb]` when
/// `v_permuted`; `heads % kvHeads == 0`; dim 0 of q, k, v dense.
/// `mask` (nullable): `[>= seqK, >= seqQ, h, b]` added to the scores
/// (-inf masks), h dividing heads and b dividing batch, contiguous; f16
/// when `flash`, f16 or f32 otherwise. `sinks` (nullable): f32 `[heads]`,
/// one extra logit per head in the softmax denominator. `vmla` (nullable):
/// `[dv, dv', h]` with h dividing heads, applied to each head's output
/// (MLA).
/// `flash`: use ggml_flash_attn_ext (F32 precision; batch of q and k must
/// agree; an error, not an abort, if the CPU cannot do it for these K/V
/// types); otherwise K·Q in F32 precision, softmax, then V·softmax.
/// Output: f32 `[dv', heads, seqQ, batch]`. Returns a new tensor owned by
/// ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_sdpa(
    ctx: *mut ggml_rs_context,
    q: *mut ggml_rs_tensor,
    k: *mut ggml_rs_tensor,
    v: *mut ggml_rs_tensor,
    mask: *mut ggml_rs_tensor,
    sinks: *mut ggml_rs_tensor,
    vmla: *mut ggml_rs_tensor,
    scale: f32,
    flash: bool,
    v_permuted: bool,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    ggml_rs_sdpa_capped(ctx, q, k, v, mask, sinks, vmla, scale, 0.0, flash, v_permuted, err)
}

/// `ggml_rs_sdpa` with the scores soft-capped (Gemma 2's attention logit
/// soft-capping): `softcap·tanh(scale·K·Q / softcap) + mask` before the
/// softmax; `softcap` finite and >= 0, 0 for none (then exactly
/// `ggml_rs_sdpa`). Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_sdpa_capped(
    ctx: *mut ggml_rs_context,
    q: *mut ggml_rs_tensor,
    k: *mut ggml_rs_tensor,
    v: *mut ggml_rs_tensor,
    mask: *mut ggml_rs_tensor,
    sinks: *mut ggml_rs_tensor,
    vmla: *mut ggml_rs_tensor,
    scale: f32,
    softcap: f32,
    flash: bool,
    v_permuted: bool,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "sdpa", |c| {
        let q = tensor_arg("sdpa", "q", q)?;
        let k = tensor_arg("sdpa", "k", k)?;
        let v = tensor_arg("sdpa", "v", v)?;
        c.sdpa_capped(q, k, v, opt_tensor(mask), opt_tensor(sinks), opt_tensor(vmla), scale, softcap, flash, v_permuted)
    })
}
