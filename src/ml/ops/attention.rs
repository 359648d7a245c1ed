//! Scaled dot-product attention (Ollama's `ScaledDotProductAttention`).
//!
//! Shapes (ggml order): `q = [dk, heads, seqQ, batch]`,
//! `k = [dk, kvHeads, seqK, kb]`, `v = [dv, kvHeads, seqK, kb]` or, with
//! `v_permuted` (a PermutedV cache), `v = [seqK, dv, kvHeads, kb]`;
//! `heads % kvHeads == 0` (grouped-query attention). Optional: `mask`
//! (`[>= seqK, >= seqQ, h, b]` with `heads % h == 0`, `batch % b == 0`;
//! added to the scaled scores, `-inf` masks), `sinks` (f32 `[heads]`, one
//! extra logit per head that joins the softmax denominator), `vmla`
//! (`[dv, dv', h, b]` with h dividing heads and b dividing batch, applied
//! to each head's output; MLA's value up-projection). Output: f32
//! `[dv', heads, seqQ, batch]` (`dv' = dv` without `vmla`).
//!
//! `softcap` (Gemma 2's attention logit soft-capping), when not 0, caps the
//! scaled scores before the mask: `softcap·tanh(scale·q·k / softcap)`.
//!
//! `flash = true` uses `ggml_flash_attn_ext` (F16 mask, F32 precision, the
//! cap its `logit_softcap`; F32 keys and values cast to F16 first, as
//! llama.cpp does); otherwise `K·Q` in F32 precision, the cap as
//! llama.cpp's graph builds it (scale by `scale/softcap`, tanh, scale by
//! `softcap`), `ggml_soft_max_ext` (scale and mask fused) and `V·softmax`. Every argument is checked against what those ggml
//! constructors and their CPU kernels assert before anything is built.

use super::matmul::{check_operand_types, dense_rows, is_float, nonempty};
use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

fn type_size(t: Tensor) -> usize {
    crate::ml::tensor::elem_size(t.dtype())
}

impl Context {
    /// Ollama's ScaledDotProductAttention; see the module docs.
    #[allow(clippy::too_many_arguments)]
    pub fn sdpa(
        &mut self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Option<Tensor>,
        sinks: Option<Tensor>,
        vmla: Option<Tensor>,
        scale: f32,
        flash: bool,
        v_permuted: bool,
    ) -> Result<Tensor> {
        self.sdpa_capped(q, k, v, mask, sinks, vmla, scale, 0.0, flash, v_permuted)
    }

    /// `sdpa` with the scores soft-capped at `softcap` (0: none); see the
    /// module docs.
    #[allow(clippy::too_many_arguments)]
    pub fn sdpa_capped(
        &mut self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Option<Tensor>,
        sinks: Option<Tensor>,
        vmla: Option<Tensor>,
        scale: f32,
        softcap: f32,
        flash: bool,
        v_permuted: bool,
    ) -> Result<Tensor> {
        const OP: &str = "sdpa";
        nonempty(OP, "q", q)?;
        nonempty(OP, "k", k)?;
        nonempty(OP, "v", v)?;
        if !scale.is_finite() {
            return Err(Error::invalid(format!("{OP}: scale {scale} is not finite")));
        }
        if !(softcap.is_finite() && softcap >= 0.0) {
            return Err(Error::invalid(format!("{OP}: softcap {softcap} must be a finite number >= 0 (0: none)")));
        }

        // ---- types and layouts of q, k, v --------------------------------
        check::dtype_in(OP, "q", q, &[check::F32])?;
        for (what, t) in [("q", q), ("k", k), ("v", v)] {
            if t.nb()[0] != type_size(t) {
                return Err(Error::shape(format!(
                    "{OP}: {what} must be dense in dim 0 (not transposed), got {}",
                    t.describe()
                )));
            }
        }

        // ---- shapes ------------------------------------------------------
        let [dk, heads, seq_q, batch] = q.ne();
        let [dk_k, kv_heads, seq_k, kb] = k.ne();
        if dk_k != dk {
            return Err(Error::shape(format!(
                "{OP}: head size (dim 0) differs: q {} vs k {}",
                q.describe(),
                k.describe()
            )));
        }
        if heads % kv_heads != 0 {
            return Err(Error::shape(format!(
                "{OP}: q's {heads} heads are not a multiple of k's {kv_heads} kv heads: q {} vs k {}",
                q.describe(),
                k.describe()
            )));
        }
        let [dv, v_heads, v_seq, vb] = if v_permuted {
            let n = v.ne();
            [n[1], n[2], n[0], n[3]]
        } else {
            v.ne()
        };
        if v_heads != kv_heads || v_seq != seq_k || vb != kb {
            let layout = if v_permuted { "[seqK, dv, kvHeads]" } else { "[dv, kvHeads, seqK]" };
            return Err(Error::shape(format!(
                "{OP}: v {} (layout {layout}) does not match k {}: kv heads, seqK and batch must agree",
                v.describe(),
                k.describe()
            )));
        }
        if flash && kb != batch {
            return Err(Error::shape(format!(
                "{OP}: flash attention needs the same batch (dim 3) in q {} and k {}",
                q.describe(),
                k.describe()
            )));
        }
        if batch % kb != 0 {
            return Err(Error::shape(format!(
                "{OP}: q's batch (dim 3) must be a multiple of k's: q {} vs k {}",
                q.describe(),
                k.describe()
            )));
        }
        // The permuted k must not look transposed to ggml_mul_mat.
        if k.nb()[2] < type_size(k) {
            return Err(Error::shape(format!("{OP}: k has an unusable stride in dim 2: {}", k.describe())));
        }

        // ---- kernels' type support -----------------------------------------
        let qd = || format!("q {}", q.describe());
        let kd = || format!("k {}", k.describe());
        let vd = || format!("v {}", v.describe());
        // Both paths need a K·Q dot product with f32 queries converted to
        // K's dot type (flash attention converts q the same way).
        check_operand_types(OP, k.dtype(), dk, check::F32, &kd, &qd).map_err(|e| {
            if flash {
                Error::unsupported(format!("{OP}: flash attention on the CPU cannot use this K type: {}", e.message))
            } else {
                e
            }
        })?;
        // v is re-laid out (permute + cont) in these cases; that needs floats.
        let v_copied = v_permuted == flash;
        if v_copied && !is_float(v.dtype()) {
            let why = if flash { "flash attention with v_permuted" } else { "attention without v_permuted" };
            return Err(Error::dtype(format!(
                "{OP}: {why} needs a float v to re-lay out, got {}",
                v.describe()
            )));
        }
        if flash {
            let to_float = unsafe { sys::ggml_get_type_traits(v.dtype()).as_ref() }.and_then(|t| t.to_float);
            if v.dtype() != check::F32 && to_float.is_none() {
                return Err(Error::unsupported(format!(
                    "{OP}: flash attention on the CPU cannot read this V type: {}",
                    v.describe()
                )));
            }
            check::block_aligned(OP, v.dtype(), dv)?;
        } else {
            // Without v_permuted, v becomes [seqK, dv, kvHeads] by a copy;
            // with it, v is the left operand of V·softmax as it is.
            if v_permuted && !dense_rows(v) && !is_float(v.dtype()) {
                return Err(Error::shape(format!("{OP}: {} must have dense rows", vd())));
            }
            check_operand_types(OP, v.dtype(), seq_k, check::F32, &vd, &|| "the attention weights".to_string())?;
        }

        // ---- mask ------------------------------------------------------------
        if let Some(m) = mask {
            if flash {
                if m.dtype() != check::F16 {
                    return Err(Error::dtype(format!(
                        "{OP}: flash attention needs an f16 mask, got {}",
                        m.describe()
                    )));
                }
            } else {
                check::float(OP, "mask", m)?;
            }
            check::contiguous(OP, "mask", m)?;
            let mn = m.ne();
            if mn[0] < seq_k || mn[1] < seq_q || heads % mn[2] != 0 || batch % mn[3] != 0 {
                return Err(Error::shape(format!(
                    "{OP}: mask {} does not fit scores of {seq_k} keys x {seq_q} queries x {heads} heads x {batch}: \
                     it needs dim 0 >= seqK, dim 1 >= seqQ, and dims 2, 3 dividing heads and batch",
                    m.describe()
                )));
            }
        }

        // ---- sinks -----------------------------------------------------------
        if let Some(s) = sinks {
            check::dtype_in(OP, "sinks", s, &[check::F32])?;
            check::contiguous(OP, "sinks", s)?;
            if s.ne() != [heads, 1, 1, 1] {
                return Err(Error::shape(format!(
                    "{OP}: sinks must be a vector of {heads} values (one per q head), got {}",
                    s.describe()
                )));
            }
        }

        // ---- vmla --------------------------------------------------------------
        if let Some(w) = vmla {
            nonempty(OP, "vmla", w)?;
            let wn = w.ne();
            if wn[0] != dv || heads % wn[2] != 0 || batch % wn[3] != 0 {
                return Err(Error::shape(format!(
                    "{OP}: vmla {} must be [dv={dv}, dv', h, b] with h dividing {heads} heads and b dividing batch {batch}",
                    w.describe()
                )));
            }
            if !dense_rows(w) && !is_float(w.dtype()) {
                return Err(Error::shape(format!("{OP}: a quantized vmla must have dense rows, got {}", w.describe())));
            }
            check_operand_types(OP, w.dtype(), dv, check::F32, &|| format!("vmla {}", w.describe()), &|| "the attention output".to_string())?;
        }

        // ---- build -------------------------------------------------------------
        // At most ~21 tensors (permutes, copies, products, the cap, softmax).
        let ctx = self.room(OP, 28)?;
        let permute = |this: &Context, t: Tensor, a: i32, b: i32, c: i32, d: i32| -> Result<Tensor> {
            this.made(OP, unsafe { sys::ggml_permute(ctx, t.as_ptr(), a, b, c, d) })
        };
        let cont = |this: &Context, t: Tensor| -> Result<Tensor> { this.made(OP, unsafe { sys::ggml_cont(ctx, t.as_ptr()) }) };

        let qp = permute(self, q, 0, 2, 1, 3)?; // [dk, seqQ, heads, batch]
        let kp = permute(self, k, 0, 2, 1, 3)?; // [dk, seqK, kvHeads, kb]
        let mask_ptr = mask.map(|m| m.as_ptr()).unwrap_or(std::ptr::null_mut());

        if flash {
            // v as [dv, seqK, kvHeads] with dense rows.
            let vp = if v_permuted {
                let t = permute(self, v, 1, 0, 2, 3)?;
                cont(self, t)?
            } else {
                permute(self, v, 0, 2, 1, 3)?
            };
            // F32 keys and values (no cache: encoders) go in as F16, as
            // llama.cpp's build_attn_mha casts them for flash attention.
            let f16 = |this: &Context, t: Tensor| -> Result<Tensor> {
                if t.dtype() != sys::GGML_TYPE_F32 {
                    return Ok(t);
                }
                this.made(OP, unsafe { sys::ggml_cast(ctx, t.as_ptr(), sys::GGML_TYPE_F16) })
            };
            let kp = f16(self, kp)?;
            let vp = f16(self, vp)?;
            let kqv = self.made(OP, unsafe {
                sys::ggml_flash_attn_ext(ctx, qp.as_ptr(), kp.as_ptr(), vp.as_ptr(), mask_ptr, scale, 0.0, softcap)
            })?;
            if let Some(s) = sinks {
                unsafe { sys::ggml_flash_attn_ext_add_sinks(kqv.as_ptr(), s.as_ptr()) };
            }
            if !unsafe { sys::ggml_prec_set_acc(kqv.as_ptr(), sys::GGML_PREC_F32) } {
                return Err(Error::unsupported(format!("{OP}: ggml refused F32 precision for flash attention")));
            }
            // kqv: [dv, heads, seqQ, batch]
            let Some(w) = vmla else { return Ok(kqv) };
            let cur = permute(self, kqv, 0, 2, 1, 3)?; // [dv, seqQ, heads, batch]
            let cur = self.build_mul_mat(OP, w, cur, false)?; // [dv', seqQ, heads, batch]
            let cur = permute(self, cur, 0, 2, 1, 3)?;
            return cont(self, cur);
        }

        let mut kq = self.build_mul_mat(OP, kp, qp, true)?; // [seqK, seqQ, heads, batch]
        let mut scale = scale;
        if softcap != 0.0 {
            kq = self.made(OP, unsafe { sys::ggml_scale(ctx, kq.as_ptr(), scale / softcap) })?;
            kq = self.made(OP, unsafe { sys::ggml_tanh(ctx, kq.as_ptr()) })?;
            kq = self.made(OP, unsafe { sys::ggml_scale(ctx, kq.as_ptr(), softcap) })?;
            scale = 1.0;
        }
        let mask_ptr = match mask {
            Some(m) if m.ne()[0] > seq_k => {
                // ggml_soft_max_ext wants the mask exactly seqK wide.
                let mn = m.ne();
                let nb = m.nb();
                let view = self.made(OP, unsafe {
                    sys::ggml_view_4d(ctx, m.as_ptr(), seq_k, mn[1], mn[2], mn[3], nb[1], nb[2], nb[3], 0)
                })?;
                cont(self, view)?.as_ptr()
            }
            _ => mask_ptr,
        };
        let kq = self.made(OP, unsafe { sys::ggml_soft_max_ext(ctx, kq.as_ptr(), mask_ptr, scale, 0.0) })?;
        if let Some(s) = sinks {
            unsafe { sys::ggml_soft_max_add_sinks(kq.as_ptr(), s.as_ptr()) };
        }
        let vv = if v_permuted {
            v
        } else {
            let t = permute(self, v, 1, 2, 0, 3)?; // [seqK, dv, kvHeads, kb]
            cont(self, t)?
        };
        let mut kqv = self.build_mul_mat(OP, vv, kq, false)?; // [dv, seqQ, heads, batch]
        if let Some(w) = vmla {
            kqv = self.build_mul_mat(OP, w, kqv, false)?;
        }
        let out = permute(self, kqv, 0, 2, 1, 3)?;
        cont(self, out)
    }
}
