//! Normalisations and row reductions: softmax, rms_norm, layer_norm,
//! l2_norm, sum_rows, mean. All work along dim 0 (each row on its own).
//!
//! ggml's CPU kernels for these take f32 only, so every input here must be
//! f32 (a weight or bias too: the kernels that multiply an f32 tensor take
//! only f32 operands). Layout needs differ per kernel and are checked per op.

use super::unary::dense_rows;
use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

/// `eps` is finite and ≥ 0 (ggml asserts `eps >= 0` at compute time).
fn eps_arg(op: &str, eps: f32) -> Result<()> {
    if eps.is_finite() && eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(format!("{op}: eps must be finite and >= 0, got {eps}")))
    }
}

fn f32_arg(op: &str, what: &str, t: Tensor) -> Result<()> {
    check::dtype_in(op, what, t, &[check::F32])
}

/// A weight or bias multiplied or added to the normalised `a`: f32, rows
/// contiguous, broadcastable to `a`'s shape.
fn affine_arg(op: &str, what: &str, w: Tensor, a: Tensor) -> Result<()> {
    f32_arg(op, what, w)?;
    check::rows_contiguous(op, what, w)?;
    if !check::can_repeat(w, a) {
        return Err(Error::shape(format!(
            "{op}: {what} {} cannot broadcast to {}",
            w.describe(),
            a.describe()
        )));
    }
    Ok(())
}

impl Context {
    /// Softmax along dim 0: `e^(a - max) / Σ e^(a - max)` per row.
    /// `a`: f32, contiguous.
    pub fn softmax(&mut self, a: Tensor) -> Result<Tensor> {
        const OP: &str = "softmax";
        f32_arg(OP, "a", a)?;
        check::contiguous(OP, "a", a)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_soft_max(ctx, a.as_ptr()) })
    }

    /// `a / sqrt(mean(a²) + eps)` per row, times `weight` (broadcast) when
    /// given. `a`: f32 with contiguous rows.
    pub fn rms_norm(&mut self, a: Tensor, weight: Option<Tensor>, eps: f32) -> Result<Tensor> {
        const OP: &str = "rms_norm";
        eps_arg(OP, eps)?;
        f32_arg(OP, "a", a)?;
        dense_rows(OP, "a", a)?;
        if let Some(w) = weight {
            affine_arg(OP, "weight", w, a)?;
        }
        let ctx = self.room(OP, 1 + weight.is_some() as usize)?;
        let mut t = self.made(OP, unsafe { sys::ggml_rms_norm(ctx, a.as_ptr(), eps) })?;
        if let Some(w) = weight {
            self.pin_norm(t);
            t = self.made(OP, unsafe { sys::ggml_mul(ctx, t.as_ptr(), w.as_ptr()) })?;
        }
        Ok(t)
    }

    /// `(a - mean) / sqrt(var + eps)` per row; when `weight` is given, times
    /// `weight` and then plus `bias` (if given). As in Ollama, `bias` is
    /// ignored when `weight` is absent. `a`: f32, any layout.
    pub fn layer_norm(&mut self, a: Tensor, weight: Option<Tensor>, bias: Option<Tensor>, eps: f32) -> Result<Tensor> {
        const OP: &str = "layer_norm";
        eps_arg(OP, eps)?;
        f32_arg(OP, "a", a)?;
        let bias = weight.and(bias);
        if let Some(w) = weight {
            affine_arg(OP, "weight", w, a)?;
        }
        if let Some(b) = bias {
            affine_arg(OP, "bias", b, a)?;
        }
        let ctx = self.room(OP, 1 + weight.is_some() as usize + bias.is_some() as usize)?;
        let mut t = self.made(OP, unsafe { sys::ggml_norm(ctx, a.as_ptr(), eps) })?;
        if let Some(w) = weight {
            self.pin_norm(t);
            t = self.made(OP, unsafe { sys::ggml_mul(ctx, t.as_ptr(), w.as_ptr()) })?;
        }
        if let Some(b) = bias {
            t = self.made(OP, unsafe { sys::ggml_add(ctx, t.as_ptr(), b.as_ptr()) })?;
        }
        Ok(t)
    }

    /// `a / max(‖a‖₂, eps)` per row. `a`: f32, any layout.
    pub fn l2_norm(&mut self, a: Tensor, eps: f32) -> Result<Tensor> {
        const OP: &str = "l2_norm";
        eps_arg(OP, eps)?;
        f32_arg(OP, "a", a)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_l2_norm(ctx, a.as_ptr(), eps) })
    }

    /// Sum of each row: `[n0, n1, n2, n3]` → `[1, n1, n2, n3]`.
    /// `a`: f32 with contiguous rows.
    pub fn sum_rows(&mut self, a: Tensor) -> Result<Tensor> {
        const OP: &str = "sum_rows";
        f32_arg(OP, "a", a)?;
        dense_rows(OP, "a", a)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_sum_rows(ctx, a.as_ptr()) })
    }

    /// Mean of each row: `[n0, n1, n2, n3]` → `[1, n1, n2, n3]`.
    /// `a`: f32 with contiguous rows.
    pub fn mean(&mut self, a: Tensor) -> Result<Tensor> {
        const OP: &str = "mean";
        f32_arg(OP, "a", a)?;
        dense_rows(OP, "a", a)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_mean(ctx, a.as_ptr()) })
    }
}
