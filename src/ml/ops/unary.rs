//! Element-wise functions and activations.
//!
//! * `sqr`, `sqrt`, `exp`, `neg`, `sin`, `cos`, `tanh`, `sigmoid`: out of
//!   place (ggml's `*_inplace` variants are not used: the graph allocator
//!   already reuses a dead input's memory when that is safe).
//! * `silu`, `gelu`, `gelu_erf`, `gelu_quick`, `relu`: the activation, or,
//!   given `up`, the fused gated form `act(a) * up` (ggml's `*glu_split`).
//!
//! What ggml's CPU kernels accept, and so what is checked here:
//! * types: f32 or f16; the result has the input's type;
//! * plain ops: `nb[0]` equal to the element size (rows contiguous; a
//!   permuted view that keeps dim 0 in place is fine, a transposed one is
//!   not). The kernels assert it even for one-element rows.
//! * gated ops: `a` and `up` of the same type and shape, each with rows
//!   that follow one another at a fixed stride (`ggml_is_contiguous_1`:
//!   padded rows are fine, permuted dims 1..3 are not).

use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

type UnaryFn = unsafe extern "C" fn(*mut sys::ggml_context, *mut sys::ggml_tensor) -> *mut sys::ggml_tensor;
type GluFn =
    unsafe extern "C" fn(*mut sys::ggml_context, *mut sys::ggml_tensor, *mut sys::ggml_tensor) -> *mut sys::ggml_tensor;

/// `nb[0]` is exactly the element size. Stricter than
/// `check::rows_contiguous`, which also accepts a one-element row at any
/// stride: ggml's element-wise CPU kernels assert `nb[0]` itself.
pub(crate) fn dense_rows(op: &str, what: &str, t: Tensor) -> Result<()> {
    check::rows_contiguous(op, what, t)
}

/// Rows at a fixed stride one after another (`ggml_is_contiguous_1`), as
/// ggml's GLU constructor and kernels assert.
fn uniform_rows(op: &str, what: &str, t: Tensor) -> Result<()> {
    if unsafe { sys::ggml_is_contiguous_1(t.as_ptr()) } {
        Ok(())
    } else {
        Err(Error::shape(format!(
            "{op}: {what} must have contiguous rows laid out at a fixed stride (dims 1 to 3 not permuted), got {}",
            t.describe()
        )))
    }
}

impl Context {
    fn unary(&mut self, op: &str, a: Tensor, f: UnaryFn) -> Result<Tensor> {
        check::float(op, "a", a)?;
        dense_rows(op, "a", a)?;
        let ctx = self.room(op, 1)?;
        self.made(op, unsafe { f(ctx, a.as_ptr()) })
    }

    /// `act(a)`, or `act(a) * up` through ggml's split GLU when `up` is given.
    fn activation(&mut self, op: &str, a: Tensor, up: Option<Tensor>, plain: UnaryFn, gated: GluFn) -> Result<Tensor> {
        let Some(up) = up else {
            return self.unary(op, a, plain);
        };
        check::float(op, "a", a)?;
        check::float(op, "up", up)?;
        check::same_dtype(op, a, up)?;
        check::same_shape(op, a, up)?;
        uniform_rows(op, "a", a)?;
        uniform_rows(op, "up", up)?;
        let ctx = self.room(op, 1)?;
        self.made(op, unsafe { gated(ctx, a.as_ptr(), up.as_ptr()) })
    }

    /// `a * a`.
    pub fn sqr(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("sqr", a, sys::ggml_sqr)
    }
    /// `sqrt(a)` (NaN for negative elements).
    pub fn sqrt(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("sqrt", a, sys::ggml_sqrt)
    }
    /// `e^a`.
    pub fn exp(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("exp", a, sys::ggml_exp)
    }
    /// `-a`.
    pub fn neg(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("neg", a, sys::ggml_neg)
    }
    /// `sin(a)`.
    pub fn sin(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("sin", a, sys::ggml_sin)
    }
    /// `cos(a)`.
    pub fn cos(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("cos", a, sys::ggml_cos)
    }
    /// `tanh(a)`.
    pub fn tanh(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("tanh", a, sys::ggml_tanh)
    }
    /// `1 / (1 + e^-a)`.
    pub fn sigmoid(&mut self, a: Tensor) -> Result<Tensor> {
        self.unary("sigmoid", a, sys::ggml_sigmoid)
    }

    /// `a * sigmoid(a)`; with `up`: `silu(a) * up` (SwiGLU).
    pub fn silu(&mut self, a: Tensor, up: Option<Tensor>) -> Result<Tensor> {
        self.activation("silu", a, up, sys::ggml_silu, sys::ggml_swiglu_split)
    }
    /// GELU, tanh approximation; with `up`: `gelu(a) * up` (GeGLU).
    pub fn gelu(&mut self, a: Tensor, up: Option<Tensor>) -> Result<Tensor> {
        self.activation("gelu", a, up, sys::ggml_gelu, sys::ggml_geglu_split)
    }
    /// Exact GELU `a/2 * (1 + erf(a/√2))`; with `up`: times `up`.
    pub fn gelu_erf(&mut self, a: Tensor, up: Option<Tensor>) -> Result<Tensor> {
        self.activation("gelu_erf", a, up, sys::ggml_gelu_erf, sys::ggml_geglu_erf_split)
    }
    /// `a * sigmoid(1.702 a)`; with `up`: times `up`.
    pub fn gelu_quick(&mut self, a: Tensor, up: Option<Tensor>) -> Result<Tensor> {
        self.activation("gelu_quick", a, up, sys::ggml_gelu_quick, sys::ggml_geglu_quick_split)
    }
    /// `a > 0 ? a : 0` (NaN gives 0); with `up`: `relu(a) * up` (ReGLU, 0
    /// wherever `a <= 0` whatever `up` holds).
    pub fn relu(&mut self, a: Tensor, up: Option<Tensor>) -> Result<Tensor> {
        self.activation("relu", a, up, sys::ggml_relu, sys::ggml_reglu_split)
    }
}
