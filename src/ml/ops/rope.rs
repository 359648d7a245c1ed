//! Rotary position embedding (Ollama's `RoPE` with `rope.Options`):
//! `ggml_rope_ext` for the normal and NeoX modes, `ggml_rope_multi` for
//! the multi-section modes (M-RoPE, vision, interleaved M-RoPE).
//!
//! What ggml needs, checked here so that no assert can fire: a known mode
//! (bit 0 clear, one of 0/2/8/24/40); `a` f32 or f16 with dense dim 0
//! (a quantized `a` is cast to f32 first, as Ollama does); `n_dims` even and
//! `<= a.ne[0]` (vision: exactly `a.ne[0]/2`); `pos` an i32 vector of
//! `a.ne[2]` positions (`4*a.ne[2]` for the multi-section modes, one row
//! per section: time, height, width, extra); `freq_factors` an f32 vector
//! with a value per rotated pair (`n_dims/2`; vision: `n_dims`); for multi-section modes, sections `>= 0`, one
//! of the first three positive, and their sum `<= a.ne[0]`.

use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

pub const ROPE_NORMAL: i32 = sys::GGML_ROPE_TYPE_NORMAL as i32;
pub const ROPE_NEOX: i32 = sys::GGML_ROPE_TYPE_NEOX as i32;
pub const ROPE_MROPE: i32 = sys::GGML_ROPE_TYPE_MROPE as i32;
pub const ROPE_VISION: i32 = sys::GGML_ROPE_TYPE_VISION as i32;
pub const ROPE_IMROPE: i32 = sys::GGML_ROPE_TYPE_IMROPE as i32;

/// Ollama's default YaRN original context length (128 Ki).
pub const DEFAULT_N_CTX_ORIG: i32 = 128 << 10;

/// RoPE parameters. Zero in `n_ctx_orig`, `attn_factor`, `beta_fast` or
/// `beta_slow` means "the default" (as Ollama's `cmp.Or`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    /// Rotated dimensions (Ollama's ropeDim); > 0 and even.
    pub n_dims: i32,
    /// 0 normal, 2 NeoX, 8 M-RoPE, 24 vision, 40 interleaved M-RoPE.
    pub mode: i32,
    /// YaRN original context length; default 131072.
    pub n_ctx_orig: i32,
    /// Default 10000.
    pub freq_base: f32,
    /// Default 1.
    pub freq_scale: f32,
    /// YaRN extrapolation mix; default 0 (off).
    pub ext_factor: f32,
    /// Magnitude scale; default 1.
    pub attn_factor: f32,
    /// Default 32.
    pub beta_fast: f32,
    /// Default 1.
    pub beta_slow: f32,
    /// Sections of the multi-section modes (in rotary pairs); else zeros.
    pub sections: [i32; 4],
}

impl Default for RopeParams {
    fn default() -> Self {
        RopeParams {
            n_dims: 0,
            mode: ROPE_NORMAL,
            n_ctx_orig: DEFAULT_N_CTX_ORIG,
            freq_base: 10000.0,
            freq_scale: 1.0,
            ext_factor: 0.0,
            attn_factor: 1.0,
            beta_fast: 32.0,
            beta_slow: 1.0,
            sections: [0; 4],
        }
    }
}

fn or_default<T: PartialEq + Default>(v: T, d: T) -> T {
    if v == T::default() {
        d
    } else {
        v
    }
}

impl RopeParams {
    /// Multi-section mode (bit 8: M-RoPE, vision, interleaved M-RoPE).
    pub fn is_multi(&self) -> bool {
        self.mode & ROPE_MROPE != 0
    }

    /// The parameters with Ollama's zero-means-default rule applied.
    fn resolved(&self) -> RopeParams {
        RopeParams {
            n_ctx_orig: or_default(self.n_ctx_orig, DEFAULT_N_CTX_ORIG),
            attn_factor: or_default(self.attn_factor, 1.0),
            beta_fast: or_default(self.beta_fast, 32.0),
            beta_slow: or_default(self.beta_slow, 1.0),
            ..*self
        }
    }
}

impl Context {
    /// Rotates pairs of `a=[head_dim, heads, seq, batch]` by angles from
    /// `pos` (i32, one per `seq`, or four per `seq` for multi-section modes)
    /// and `p`; `freq_factors` (f32, one per rotated pair: n_dims/2, or
    /// n_dims in vision mode) divide the base angles. The result has `a`'s
    /// shape and type (f32 for a quantized `a`).
    pub fn rope(&mut self, a: Tensor, pos: Tensor, freq_factors: Option<Tensor>, p: &RopeParams) -> Result<Tensor> {
        const OP: &str = "rope";
        let p = p.resolved();
        let ne = a.ne();

        // Tensors.
        if ne.iter().any(|&d| d <= 0) {
            return Err(Error::shape(format!("{OP}: a is empty: {}", a.describe())));
        }
        let quantized = a.is_quantized();
        if quantized {
            let traits = unsafe { sys::ggml_get_type_traits(a.dtype()).as_ref() };
            if traits.and_then(|t| t.to_float).is_none() {
                return Err(Error::dtype(format!("{OP}: cannot convert a {} to f32", a.describe())));
            }
            check::block_aligned(OP, a.dtype(), ne[0])?;
        } else {
            check::float(OP, "a", a)?;
            if a.nb()[0] != crate::ml::tensor::elem_size(a.dtype()) {
                return Err(Error::shape(format!(
                    "{OP}: a must be dense in dim 0 (not transposed), got {}",
                    a.describe()
                )));
            }
        }

        // Mode and dims.
        if ![ROPE_NORMAL, ROPE_NEOX, ROPE_MROPE, ROPE_VISION, ROPE_IMROPE].contains(&p.mode) {
            return Err(Error::invalid(format!(
                "{OP}: unsupported mode {} (0 normal, 2 neox, 8 mrope, 24 vision, 40 imrope)",
                p.mode
            )));
        }
        if p.n_dims <= 0 || p.n_dims % 2 != 0 || p.n_dims as i64 > ne[0] {
            return Err(Error::invalid(format!(
                "{OP}: n_dims {} must be positive, even and at most dim 0 of a {}",
                p.n_dims,
                a.describe()
            )));
        }
        if p.mode == ROPE_VISION && 2 * p.n_dims as i64 != ne[0] {
            return Err(Error::invalid(format!(
                "{OP}: vision mode needs n_dims = dim 0 / 2, got n_dims {} for a {}",
                p.n_dims,
                a.describe()
            )));
        }

        // Positions.
        check::dtype_in(OP, "pos", pos, &[check::I32])?;
        let want = if p.is_multi() { 4 * ne[2] } else { ne[2] };
        let pn = pos.ne();
        if pn[1] != 1 || pn[2] != 1 || pn[3] != 1 || pn[0] != want {
            let why = if p.is_multi() { format!("4*{} (four rows for mode {})", ne[2], p.mode) } else { format!("{} (a.ne[2])", ne[2]) };
            return Err(Error::shape(format!(
                "{OP}: pos must be a vector of {why} positions, got {} for a {}",
                pos.describe(),
                a.describe()
            )));
        }
        check::contiguous(OP, "pos", pos)?;

        // Sections.
        if p.is_multi() {
            let s = p.sections;
            let sum: i64 = s.iter().map(|&x| x as i64).sum();
            if s.iter().any(|&x| x < 0) || !(s[0] > 0 || s[1] > 0 || s[2] > 0) || sum > ne[0] {
                return Err(Error::invalid(format!(
                    "{OP}: invalid sections {s:?} for mode {}: each >= 0, one of the first three > 0, sum <= dim 0 of a {}",
                    p.mode,
                    a.describe()
                )));
            }
        } else if p.sections != [0; 4] {
            return Err(Error::invalid(format!(
                "{OP}: sections {:?} given but mode {} is not a multi-section mode (8, 24 or 40)",
                p.sections, p.mode
            )));
        }

        // Scalars.
        if p.n_ctx_orig < 0 {
            return Err(Error::invalid(format!("{OP}: n_ctx_orig {} is negative", p.n_ctx_orig)));
        }
        let positive = |x: f32| x.is_finite() && x > 0.0;
        if !positive(p.freq_base) || !positive(p.freq_scale) {
            return Err(Error::invalid(format!(
                "{OP}: freq_base {} and freq_scale {} must be finite and positive",
                p.freq_base, p.freq_scale
            )));
        }
        let floats = [p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow];
        if floats.iter().any(|x| !x.is_finite()) {
            return Err(Error::invalid(format!(
                "{OP}: ext_factor {}, attn_factor {}, beta_fast {}, beta_slow {} must be finite",
                p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow
            )));
        }

        if let Some(f) = freq_factors {
            check::dtype_in(OP, "freq_factors", f, &[check::F32])?;
            check::contiguous(OP, "freq_factors", f)?;
            let fne = f.ne();
            if fne[1] != 1 || fne[2] != 1 || fne[3] != 1 {
                return Err(Error::shape(format!("{OP}: freq_factors must be a vector, got {}", f.describe())));
            }
            // Vision mode rotates all dim-0 pairs (n_dims of them), the
            // other modes n_dims/2.
            let need = if p.mode == ROPE_VISION { p.n_dims } else { p.n_dims / 2 } as i64;
            if fne[0] < need {
                return Err(Error::shape(format!(
                    "{OP}: freq_factors needs at least {need} values (one per rotated pair), got {}",
                    f.describe()
                )));
            }
        }

        let ctx = self.room(OP, 3)?;
        let src = if quantized {
            self.made(OP, unsafe { sys::ggml_cast(ctx, a.as_ptr(), sys::GGML_TYPE_F32) })?
        } else {
            a
        };
        // ggml's CPU kernel reads a factor for every pair of dim 0, not only
        // for the n_dims/2 rotated ones (those values are never used). With
        // partial rotation, pad the factors with zeros so that read stays
        // inside the tensor.
        let ff = match freq_factors {
            None => std::ptr::null_mut(),
            Some(f) if f.ne()[0] >= ne[0] / 2 => f.as_ptr(),
            Some(f) => {
                let extra = i32::try_from(ne[0] / 2 - f.ne()[0])
                    .map_err(|_| Error::shape(format!("{OP}: a {} is too large", a.describe())))?;
                self.made(OP, unsafe { sys::ggml_pad(ctx, f.as_ptr(), extra, 0, 0, 0) })?.as_ptr()
            }
        };
        let out = if p.is_multi() {
            let mut sections = p.sections;
            unsafe {
                sys::ggml_rope_multi(
                    ctx,
                    src.as_ptr(),
                    pos.as_ptr(),
                    ff,
                    p.n_dims,
                    sections.as_mut_ptr(),
                    p.mode,
                    p.n_ctx_orig,
                    p.freq_base,
                    p.freq_scale,
                    p.ext_factor,
                    p.attn_factor,
                    p.beta_fast,
                    p.beta_slow,
                )
            }
        } else {
            unsafe {
                sys::ggml_rope_ext(
                    ctx,
                    src.as_ptr(),
                    pos.as_ptr(),
                    ff,
                    p.n_dims,
                    p.mode,
                    p.n_ctx_orig,
                    p.freq_base,
                    p.freq_scale,
                    p.ext_factor,
                    p.attn_factor,
                    p.beta_fast,
                    p.beta_slow,
                )
            }
        };
        self.made(OP, out)
    }
}
