//! Rotary position embedding. `ggml_rs_rope` returns a new tensor owned by
//! `ctx`'s family, or NULL with `err` set (and the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, opt_tensor, tensor_arg};
use crate::ml::ops::rope::RopeParams;
use crate::ml::Error;

/// RoPE parameters (the field order is part of the ABI). Start from
/// ggml_rs_rope_params_default() and set n_dims (and what else differs).
/// Zero in n_ctx_orig, attn_factor, beta_fast or beta_slow means "the
/// default", as in Ollama.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ggml_rs_rope_params {
    /// Rotated dimensions (Ollama's ropeDim); required, > 0, even, at most
    /// the head size (vision mode: exactly half of it).
    pub n_dims: i32,
    /// 0 normal, 2 neox, 8 mrope, 24 vision, 40 imrope (ggml GGML_ROPE_TYPE_*).
    pub mode: i32,
    /// YaRN original context length; default 131072.
    pub n_ctx_orig: i32,
    /// Base of the rotation frequencies; default 10000; > 0.
    pub freq_base: f32,
    /// Position scale (linear interpolation); default 1; > 0.
    pub freq_scale: f32,
    /// YaRN extrapolation mix; default 0 (YaRN off).
    pub ext_factor: f32,
    /// Magnitude scale of the rotated values; default 1.
    pub attn_factor: f32,
    /// YaRN ramp start (rotations); default 32.
    pub beta_fast: f32,
    /// YaRN ramp end (rotations); default 1.
    pub beta_slow: f32,
    /// M-RoPE sections in rotary pairs (modes with bit 8: time, height,
    /// width, extra); must be all 0 for modes 0 and 2.
    pub sections: [i32; 4],
}

impl From<ggml_rs_rope_params> for RopeParams {
    fn from(p: ggml_rs_rope_params) -> Self {
        RopeParams {
            n_dims: p.n_dims,
            mode: p.mode,
            n_ctx_orig: p.n_ctx_orig,
            freq_base: p.freq_base,
            freq_scale: p.freq_scale,
            ext_factor: p.ext_factor,
            attn_factor: p.attn_factor,
            beta_fast: p.beta_fast,
            beta_slow: p.beta_slow,
            sections: p.sections,
        }
    }
}

/// Ollama's RoPE defaults: n_dims 0 (must be set), mode 0, n_ctx_orig
/// 131072, freq_base 10000, freq_scale 1, ext_factor 0, attn_factor 1,
/// beta_fast 32, beta_slow 1, sections all 0.
#[no_mangle]
pub extern "C" fn ggml_rs_rope_params_default() -> ggml_rs_rope_params {
    let d = RopeParams::default();
    ggml_rs_rope_params {
        n_dims: d.n_dims,
        mode: d.mode,
        n_ctx_orig: d.n_ctx_orig,
        freq_base: d.freq_base,
        freq_scale: d.freq_scale,
        ext_factor: d.ext_factor,
        attn_factor: d.attn_factor,
        beta_fast: d.beta_fast,
        beta_slow: d.beta_slow,
        sections: d.sections,
    }
}

/// Rotary position embedding of `a=[head_dim, heads, seq, batch]` (f32 or
/// f16; a quantized `a` is cast to f32 first) at positions `pos` (i32
/// vector of `seq` values, or `4*seq` for modes with bit 8: one row each
/// for time, height, width, extra). Modes 0/2 use ggml_rope_ext, modes
/// 8/24/40 ggml_rope_multi with `p->sections`. `freq_factors` (nullable):
/// f32 vector of at least n_dims/2 values (vision: n_dims) dividing the
/// base angles. `p` must not be NULL. The result has `a`'s shape and type
/// (f32 for a quantized `a`). Returns a new tensor owned by ctx's family,
/// or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_rope(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    pos: *mut ggml_rs_tensor,
    freq_factors: *mut ggml_rs_tensor,
    p: *const ggml_rs_rope_params,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "rope", |c| {
        let a = tensor_arg("rope", "a", a)?;
        let pos = tensor_arg("rope", "pos", pos)?;
        let p = unsafe { p.as_ref() }.ok_or_else(|| Error::invalid("rope: params is NULL"))?;
        c.rope(a, pos, opt_tensor(freq_factors), &RopeParams::from(*p))
    })
}
