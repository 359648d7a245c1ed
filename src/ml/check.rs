//! Argument checks shared by the ops. Each returns an error whose message
//! names the op and describes the tensors, e.g.
//! `add: cannot broadcast f32[3,4] to f32[4,4]`.

use super::{Error, Result, Tensor};
use crate::sys;

pub const F32: sys::ggml_type = sys::GGML_TYPE_F32;
pub const F16: sys::ggml_type = sys::GGML_TYPE_F16;
pub const BF16: sys::ggml_type = sys::GGML_TYPE_BF16;
pub const I32: sys::ggml_type = sys::GGML_TYPE_I32;

/// `b` can be repeated (broadcast) to `a`'s shape: each `a.ne[i]` is a
/// multiple of `b.ne[i]`.
pub fn can_repeat(b: Tensor, a: Tensor) -> bool {
    let (nb, na) = (b.ne(), a.ne());
    (0..4).all(|i| nb[i] > 0 && na[i] % nb[i] == 0) || (b.nelements() == 0 && a.nelements() == 0)
}

#[inline]
pub fn repeatable(op: &str, b: Tensor, a: Tensor) -> Result<()> {
    if can_repeat(b, a) {
        Ok(())
    } else {
        repeat_error(op, b, a)
    }
}

#[cold]
#[inline(never)]
fn repeat_error(op: &str, b: Tensor, a: Tensor) -> Result<()> {
    {
        Err(Error::shape(format!(
            "{op}: cannot broadcast {} to {}",
            b.describe(),
            a.describe()
        )))
    }
}

pub fn same_shape(op: &str, a: Tensor, b: Tensor) -> Result<()> {
    if a.ne() == b.ne() {
        Ok(())
    } else {
        Err(Error::shape(format!(
            "{op}: shapes differ: {} vs {}",
            a.describe(),
            b.describe()
        )))
    }
}

pub fn same_rows(op: &str, a: Tensor, b: Tensor) -> Result<()> {
    if a.ne()[0] == b.ne()[0] {
        Ok(())
    } else {
        Err(Error::shape(format!(
            "{op}: dim 0 differs: {} vs {}",
            a.describe(),
            b.describe()
        )))
    }
}

/// The tensor's type is one of `types`.
#[inline]
pub fn dtype_in(op: &str, what: &str, t: Tensor, types: &[sys::ggml_type]) -> Result<()> {
    if types.contains(&t.dtype()) {
        return Ok(());
    }
    dtype_error(op, what, t, types)
}

#[cold]
#[inline(never)]
fn dtype_error(op: &str, what: &str, t: Tensor, types: &[sys::ggml_type]) -> Result<()> {
    let names: Vec<&str> = types.iter().map(|&ty| super::tensor::type_name(ty)).collect();
    Err(Error::dtype(format!(
        "{op}: {what} must be {}, got {}",
        names.join(" or "),
        t.describe()
    )))
}

/// F32 or F16 (the float types ggml's CPU element-wise kernels take).
#[inline]
pub fn float(op: &str, what: &str, t: Tensor) -> Result<()> {
    dtype_in(op, what, t, &[F32, F16])
}

pub fn same_dtype(op: &str, a: Tensor, b: Tensor) -> Result<()> {
    if a.dtype() == b.dtype() {
        Ok(())
    } else {
        Err(Error::dtype(format!(
            "{op}: types differ: {} vs {}",
            a.describe(),
            b.describe()
        )))
    }
}

pub fn contiguous(op: &str, what: &str, t: Tensor) -> Result<()> {
    if t.is_contiguous() {
        Ok(())
    } else {
        Err(Error::shape(format!("{op}: {what} must be contiguous, got {}", t.describe())))
    }
}

/// Rows are contiguous: `nb[0]` is exactly the element (block) size, as the
/// CPU kernels assert (ggml's own `ggml_is_contiguous_rows` also accepts a
/// one-element row at any stride, which the element-wise kernels reject).
#[inline]
pub fn rows_contiguous(op: &str, what: &str, t: Tensor) -> Result<()> {
    if t.nb()[0] == crate::ml::tensor::elem_size(t.dtype()) {
        Ok(())
    } else {
        Err(Error::shape(format!(
            "{op}: {what} must have contiguous rows (dim 0 stride = element size), got {}",
            t.describe()
        )))
    }
}

/// Dimension count 1..=4 and every dimension ≥ 1 (0 only where `allow_zero`).
pub fn shape_arg(op: &str, shape: &[i64], allow_zero: bool) -> Result<[i64; 4]> {
    if shape.is_empty() || shape.len() > 4 {
        return Err(Error::shape(format!(
            "{op}: unsupported number of dimensions {} (1 to 4), shape {shape:?}",
            shape.len()
        )));
    }
    let mut ne = [1i64; 4];
    let mut total: i64 = 1;
    for (i, &d) in shape.iter().enumerate() {
        if d < 0 || (d == 0 && !allow_zero) {
            return Err(Error::shape(format!("{op}: invalid shape {shape:?}")));
        }
        total = total
            .checked_mul(d)
            .filter(|&t| t < (1i64 << 48))
            .ok_or_else(|| Error::shape(format!("{op}: shape {shape:?} is too large")))?;
        ne[i] = d;
    }
    Ok(ne)
}

/// A dimension index in 0..4.
pub fn axis(op: &str, dim: i64) -> Result<usize> {
    if (0..4).contains(&dim) {
        Ok(dim as usize)
    } else {
        Err(Error::shape(format!("{op}: invalid dimension {dim} (0 to 3)")))
    }
}

/// A valid ggml type id.
pub fn type_arg(op: &str, t: sys::ggml_type) -> Result<()> {
    if super::tensor::is_valid_type(t) {
        Ok(())
    } else {
        Err(Error::dtype(format!("{op}: unknown tensor type {t}")))
    }
}

/// `ne[0]` is a whole number of blocks for (quantized) type `t`.
pub fn block_aligned(op: &str, t: sys::ggml_type, ne0: i64) -> Result<()> {
    let bs = unsafe { sys::ggml_blck_size(t) };
    if bs > 0 && ne0 % bs == 0 {
        Ok(())
    } else {
        Err(Error::shape(format!(
            "{op}: dim 0 ({ne0}) must be a multiple of the {} block size {bs}",
            super::tensor::type_name(t)
        )))
    }
}
