//! Element-wise arithmetic with broadcasting: add, sub, mul, div, scale,
//! clamp.

use super::unary::dense_rows;
use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

type BinaryFn = unsafe extern "C" fn(*mut sys::ggml_context, *mut sys::ggml_tensor, *mut sys::ggml_tensor) -> *mut sys::ggml_tensor;

impl Context {
    /// `a op b` with `b` broadcast to `a`'s shape; the result has `a`'s type.
    fn binary(&mut self, op: &str, a: Tensor, b: Tensor, f: BinaryFn) -> Result<Tensor> {
        check::float(op, "a", a)?;
        check::float(op, "b", b)?;
        // ggml's CPU kernels write F16 results only from F16 inputs.
        if a.dtype() == check::F32 && b.dtype() != check::F32 {
            return Err(Error::dtype(format!(
                "{op}: an f32 tensor takes only f32 operands, got {} and {}",
                a.describe(),
                b.describe()
            )));
        }
        // The CPU kernels assert `a`'s dim-0 stride is the element size
        // (a transposed `a` would abort at compute time).
        dense_rows(op, "a", a)?;
        check::rows_contiguous(op, "b", b)?;
        check::repeatable(op, b, a)?;
        let ctx = self.room(op, 1)?;
        self.made(op, unsafe { f(ctx, a.as_ptr(), b.as_ptr()) })
    }

    pub fn add(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary("add", a, b, sys::ggml_add)
    }
    pub fn sub(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary("sub", a, b, sys::ggml_sub)
    }
    pub fn mul(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary("mul", a, b, sys::ggml_mul)
    }
    pub fn div(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.binary("div", a, b, sys::ggml_div)
    }

    /// `a * s`. `a`: f32, contiguous (ggml asserts a padded-1d layout when
    /// building the op and a contiguous one when computing it; its CPU
    /// kernel has no f16 version).
    pub fn scale(&mut self, a: Tensor, s: f32) -> Result<Tensor> {
        check::dtype_in("scale", "a", a, &[check::F32])?;
        check::contiguous("scale", "a", a)?;
        // ggml_is_contiguous accepts one-element rows at any stride; the
        // padded-1d assert does not.
        dense_rows("scale", "a", a)?;
        let ctx = self.room("scale", 2)?;
        // ggml_is_contiguous also skips the strides of size-1 dims (a
        // slice of one token of [S, H, T, n] is contiguous), which the
        // padded-1d assert checks: such a view is copied first.
        let [_, ne1, ne2, _] = a.ne();
        let nb = a.nb();
        let a = if nb[2] == nb[1] * ne1 as usize && nb[3] == nb[2] * ne2 as usize {
            a
        } else {
            self.made("scale", unsafe { sys::ggml_cont(ctx, a.as_ptr()) })?
        };
        self.made("scale", unsafe { sys::ggml_scale(ctx, a.as_ptr(), s) })
    }

    /// `min(max(a, lo), hi)`. `a`: f32 or f16 whose rows are contiguous and
    /// follow one another at a fixed stride (padded rows are fine): the CPU
    /// kernel asserts the dim-0 stride and walks rows as `row * nb[1]`, so a
    /// view with permuted dims 1..3 would read the wrong memory.
    pub fn clamp(&mut self, a: Tensor, lo: f32, hi: f32) -> Result<Tensor> {
        check::float("clamp", "a", a)?;
        if lo.is_nan() || hi.is_nan() || lo > hi {
            return Err(Error::invalid(format!("clamp: invalid bounds min={lo} max={hi}")));
        }
        if !(a.nb()[0] == crate::ml::tensor::elem_size(a.dtype()) && unsafe { sys::ggml_is_contiguous_1(a.as_ptr()) }) {
            return Err(Error::shape(format!(
                "clamp: a must have contiguous rows at a fixed stride (dims 1 to 3 not permuted), got {}",
                a.describe()
            )));
        }
        let ctx = self.room("clamp", 1)?;
        self.made("clamp", unsafe { sys::ggml_clamp(ctx, a.as_ptr(), lo, hi) })
    }
}
