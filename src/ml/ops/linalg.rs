//! Linear algebra and miscellaneous ops of Ollama's `ml.Tensor`:
//!
//! * element-wise: `softplus`, `sigmoid_out`, `silu_alpha_limit` (gpt-oss's
//!   clamped SwiGLU, ggml's `swiglu_oai`), `fill` / `fill_inplace`;
//! * along dim 0: `cumsum`, `variance`, `stddev` (population statistics,
//!   built from ggml ops as Ollama composes them);
//! * matrices: `diag`, `tri`, `solve_tri`;
//! * layout: `pad_ext`, `set_inplace`, `repeat_4d`.
//!
//! Each op checks what ggml's constructor asserts and what its CPU kernel
//! asserts or silently assumes (types, dense dim 0, contiguity, ranges), so
//! that neither can abort the process.

use super::matmul::nonempty;
use super::unary::dense_rows;
use crate::ml::{check, tensor::elem_size, Context, Error, Result, Tensor};
use crate::sys;

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

/// Contiguous with a dense dim 0 (`ggml_is_contiguous` alone also accepts a
/// one-element dim 0 at any stride).
fn dense(op: &str, what: &str, t: Tensor) -> Result<()> {
    check::contiguous(op, what, t)?;
    dense_rows(op, what, t)
}

fn f32_arg(op: &str, what: &str, t: Tensor) -> Result<()> {
    check::dtype_in(op, what, t, &[check::F32])
}

/// The element count of a result of shape `ne`, checked to be sane.
fn result_shape(op: &str, ne: [i64; 4]) -> Result<()> {
    check::shape_arg(op, &ne, false).map(|_| ())
}

/// ggml's `GGML_TRI_TYPE_*` for Ollama's/ggml's integer tri type.
fn tri_type(op: &str, ty: i32) -> Result<sys::ggml_tri_type> {
    match ty {
        0 => Ok(sys::GGML_TRI_TYPE_UPPER_DIAG),
        1 => Ok(sys::GGML_TRI_TYPE_UPPER),
        2 => Ok(sys::GGML_TRI_TYPE_LOWER_DIAG),
        3 => Ok(sys::GGML_TRI_TYPE_LOWER),
        _ => Err(Error::invalid(format!(
            "{op}: invalid type {ty} (0 upper+diagonal, 1 upper, 2 lower+diagonal, 3 lower)"
        ))),
    }
}

impl Context {
    /// An element-wise float op (f32 or f16, dense dim 0).
    fn float_unary(
        &mut self,
        op: &str,
        a: Tensor,
        f: unsafe extern "C" fn(*mut sys::ggml_context, *mut sys::ggml_tensor) -> *mut sys::ggml_tensor,
    ) -> Result<Tensor> {
        check::float(op, "a", a)?;
        dense_rows(op, "a", a)?;
        let ctx = self.room(op, 1)?;
        self.made(op, unsafe { f(ctx, a.as_ptr()) })
    }

    /// `ln(1 + e^a)` element-wise (ggml returns `a` itself above 20). `a`:
    /// f32 or f16 with a dense dim 0; the result has `a`'s type and shape.
    pub fn softplus(&mut self, a: Tensor) -> Result<Tensor> {
        self.float_unary("softplus", a, sys::ggml_softplus)
    }

    /// `1 / (1 + e^-a)`, out of place: the same as `sigmoid` (which is out
    /// of place here too), kept for Ollama's `SigmoidOut`.
    pub fn sigmoid_out(&mut self, a: Tensor) -> Result<Tensor> {
        self.float_unary("sigmoid_out", a, sys::ggml_sigmoid)
    }

    /// gpt-oss's clamped SwiGLU (ggml's `swiglu_oai`): with
    /// `x = min(a, limit)` and `y = clamp(up, -limit, limit)`,
    /// `x * sigmoid(alpha * x) * (y + 1)`. `a`, `up`: f32, same shape, each
    /// with contiguous rows at a fixed stride. `alpha` finite; `limit >= 0`
    /// (may be +inf: no clamping).
    pub fn silu_alpha_limit(&mut self, a: Tensor, up: Tensor, alpha: f32, limit: f32) -> Result<Tensor> {
        const OP: &str = "silu_alpha_limit";
        if !alpha.is_finite() {
            return Err(Error::invalid(format!("{OP}: alpha must be finite, got {alpha}")));
        }
        // std::clamp(y, -limit, limit) needs -limit <= limit.
        if limit.is_nan() || limit < 0.0 {
            return Err(Error::invalid(format!("{OP}: limit must be >= 0, got {limit}")));
        }
        f32_arg(OP, "a", a)?;
        f32_arg(OP, "up", up)?;
        check::same_shape(OP, a, up)?;
        uniform_rows(OP, "a", a)?;
        uniform_rows(OP, "up", up)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_swiglu_oai(ctx, a.as_ptr(), up.as_ptr(), alpha, limit) })
    }

    /// A new tensor of `a`'s type and shape with every element `value`.
    /// `a`: f32 or f16, contiguous (its values are not read).
    pub fn fill(&mut self, a: Tensor, value: f32) -> Result<Tensor> {
        self.fill_op("fill", a, value, false)
    }

    /// Fills `a` itself with `value`: the result is a view of `a`, and
    /// computing it overwrites `a`'s memory (Ollama's `Fill`). `a` as in
    /// `fill`.
    pub fn fill_inplace(&mut self, a: Tensor, value: f32) -> Result<Tensor> {
        self.fill_op("fill_inplace", a, value, true)
    }

    fn fill_op(&mut self, op: &str, a: Tensor, value: f32, inplace: bool) -> Result<Tensor> {
        check::float(op, "a", a)?;
        dense(op, "a", a)?;
        let ctx = self.room(op, 1)?;
        let f = if inplace { sys::ggml_fill_inplace } else { sys::ggml_fill };
        self.made(op, unsafe { f(ctx, a.as_ptr(), value) })
    }

    /// Running sum along dim 0: `out[i, …] = Σ_{j ≤ i} a[j, …]`. `a`: f32
    /// with a dense dim 0 (other strides are free); f32 result, `a`'s shape.
    pub fn cumsum(&mut self, a: Tensor) -> Result<Tensor> {
        const OP: &str = "cumsum";
        f32_arg(OP, "a", a)?;
        dense_rows(OP, "a", a)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_cumsum(ctx, a.as_ptr()) })
    }

    /// Population variance along dim 0: `[n0, n1, n2, n3]` →
    /// `[1, n1, n2, n3]`, `Σ (a - mean)² / n0`, computed as Ollama composes
    /// it (mean, subtract, square, sum, scale by `1/n0`). `a`: f32 with a
    /// dense dim 0 and at least one element.
    pub fn variance(&mut self, a: Tensor) -> Result<Tensor> {
        self.variance_op("variance", a, false)
    }

    /// Population standard deviation along dim 0: `sqrt(variance(a))`.
    pub fn stddev(&mut self, a: Tensor) -> Result<Tensor> {
        self.variance_op("stddev", a, true)
    }

    fn variance_op(&mut self, op: &str, a: Tensor, sqrt: bool) -> Result<Tensor> {
        f32_arg(op, "a", a)?;
        nonempty(op, "a", a)?;
        dense_rows(op, "a", a)?;
        let ctx = self.room(op, 5 + sqrt as usize)?;
        let inv_n = (1.0 / a.dim(0) as f64) as f32;
        let mean = self.made(op, unsafe { sys::ggml_mean(ctx, a.as_ptr()) })?;
        // a - mean is exactly Ollama's a + (-1 * mean) (negation is exact).
        let centered = self.made(op, unsafe { sys::ggml_sub(ctx, a.as_ptr(), mean.as_ptr()) })?;
        let squares = self.made(op, unsafe { sys::ggml_sqr(ctx, centered.as_ptr()) })?;
        let sums = self.made(op, unsafe { sys::ggml_sum_rows(ctx, squares.as_ptr()) })?;
        let var = self.made(op, unsafe { sys::ggml_scale(ctx, sums.as_ptr(), inv_n) })?;
        if !sqrt {
            return Ok(var);
        }
        self.made(op, unsafe { sys::ggml_sqrt(ctx, var.as_ptr()) })
    }

    /// A diagonal matrix per row: `a = [n, 1, n2, n3]` → `[n, n, n2, n3]`
    /// with `a[i]` at `(i, i)` and zeros elsewhere. `a`: f32 with a dense
    /// dim 0.
    pub fn diag(&mut self, a: Tensor) -> Result<Tensor> {
        const OP: &str = "diag";
        f32_arg(OP, "a", a)?;
        nonempty(OP, "a", a)?;
        let ne = a.ne();
        if ne[1] != 1 {
            return Err(Error::shape(format!(
                "{OP}: a must be a vector per matrix ([n, 1, n2, n3]), got {}",
                a.describe()
            )));
        }
        dense_rows(OP, "a", a)?;
        result_shape(OP, [ne[0], ne[0], ne[2], ne[3]])?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_diag(ctx, a.as_ptr()) })
    }

    /// Keeps one triangle of each square matrix `a = [n, n, …]` and zeroes
    /// the rest. With column `i` (dim 0) and row `r` (dim 1), `ty` keeps:
    /// 0 `i >= r` (upper with the diagonal), 1 `i > r` (strictly upper),
    /// 2 `i <= r` (lower with the diagonal), 3 `i < r` (strictly lower):
    /// ggml's `GGML_TRI_TYPE_*` values, which Ollama passes through. `a`:
    /// f32, contiguous.
    pub fn tri(&mut self, a: Tensor, ty: i32) -> Result<Tensor> {
        const OP: &str = "tri";
        let ty = tri_type(OP, ty)?;
        f32_arg(OP, "a", a)?;
        dense(OP, "a", a)?;
        if a.dim(0) != a.dim(1) {
            return Err(Error::shape(format!("{OP}: a must be square in dims 0 and 1, got {}", a.describe())));
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_tri(ctx, a.as_ptr(), ty) })
    }

    /// Solves `A X = B` per batch for `X`, `A = a = [n, n, b2, b3]` lower
    /// triangular (row `r` is `a[:, r]`; only its lower triangle and
    /// diagonal are read), `B = b = [k, n, b2, b3]` (`k` right-hand sides,
    /// row `r` is `b[:, r]`); f32 result of `b`'s shape. A zero on the
    /// diagonal gives inf/NaN. ggml's argument order: `left` (solve
    /// `A X = B`, else `X A = B`), `lower` (else upper triangular),
    /// `unit_diag` (assume ones on the diagonal). ggml implements only
    /// `left && lower && !unit_diag`; the others are refused. Both f32,
    /// contiguous.
    pub fn solve_tri(&mut self, a: Tensor, b: Tensor, left: bool, lower: bool, unit_diag: bool) -> Result<Tensor> {
        const OP: &str = "solve_tri";
        if !(left && lower && !unit_diag) {
            return Err(Error::unsupported(format!(
                "{OP}: ggml implements only left=true, lower=true, unit_diag=false, got left={left}, lower={lower}, unit_diag={unit_diag}"
            )));
        }
        f32_arg(OP, "a", a)?;
        f32_arg(OP, "b", b)?;
        nonempty(OP, "a", a)?;
        nonempty(OP, "b", b)?;
        dense(OP, "a", a)?;
        dense(OP, "b", b)?;
        let (na, nb) = (a.ne(), b.ne());
        if na[0] != na[1] {
            return Err(Error::shape(format!("{OP}: a must be square in dims 0 and 1, got {}", a.describe())));
        }
        if nb[1] != na[1] || nb[2] != na[2] || nb[3] != na[3] {
            return Err(Error::shape(format!(
                "{OP}: b {} does not fit a {}: b must be [k, {}, {}, {}]",
                b.describe(),
                a.describe(),
                na[1],
                na[2],
                na[3]
            )));
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_solve_tri(ctx, a.as_ptr(), b.as_ptr(), left, lower, unit_diag) })
    }

    /// Zero padding: `lp[i]` zeros before and `rp[i]` after dim `i`'s
    /// elements (all ≥ 0). `a`: f32, any layout, with elements; a new
    /// contiguous f32 tensor.
    pub fn pad_ext(&mut self, a: Tensor, lp: [i32; 4], rp: [i32; 4]) -> Result<Tensor> {
        const OP: &str = "pad_ext";
        if lp.iter().chain(rp.iter()).any(|&p| p < 0) {
            return Err(Error::shape(format!(
                "{OP}: padding must be non-negative, got left {lp:?} right {rp:?} for {}",
                a.describe()
            )));
        }
        f32_arg(OP, "a", a)?;
        nonempty(OP, "a", a)?;
        let ne = a.ne();
        let mut out = [0i64; 4];
        for i in 0..4 {
            out[i] = ne[i] + lp[i] as i64 + rp[i] as i64;
        }
        result_shape(OP, out)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe {
            sys::ggml_pad_ext(ctx, a.as_ptr(), lp[0], rp[0], lp[1], rp[1], lp[2], rp[2], lp[3], rp[3])
        })
    }

    /// Writes `b` into `a`'s memory, seen as a view of `b`'s shape with byte
    /// strides `(element size, nb1, nb2, nb3)` starting `offset` bytes into
    /// `a`. The result is a view of `a` (its shape; forward it for the write
    /// to happen). `a`: f32 or i32, contiguous; `b`: the same type with a
    /// dense dim 0. The region must lie inside `a`; strides and offset are
    /// multiples of the element size, strides below 2^31, offset below 2^30
    /// (ggml keeps them as 32-bit op parameters).
    pub fn set_inplace(&mut self, a: Tensor, b: Tensor, nb1: usize, nb2: usize, nb3: usize, offset: usize) -> Result<Tensor> {
        const OP: &str = "set_inplace";
        check::dtype_in(OP, "a", a, &[check::F32, check::I32])?;
        check::same_dtype(OP, a, b)?;
        nonempty(OP, "a", a)?;
        nonempty(OP, "b", b)?;
        dense(OP, "a", a)?;
        check::rows_contiguous(OP, "b", b)?;
        let es = elem_size(a.dtype());
        if nb1 > i32::MAX as usize || nb2 > i32::MAX as usize || nb3 > i32::MAX as usize || offset >= 1 << 30 {
            return Err(Error::invalid(format!(
                "{OP}: strides ({nb1}, {nb2}, {nb3}) must be below 2^31 and offset {offset} below 2^30"
            )));
        }
        if [nb1, nb2, nb3, offset].iter().any(|&v| v % es != 0) {
            return Err(Error::invalid(format!(
                "{OP}: strides ({nb1}, {nb2}, {nb3}) and offset {offset} must be multiples of the element size {es} of {}",
                a.describe()
            )));
        }
        if b.nelements() > a.nelements() {
            return Err(Error::shape(format!(
                "{OP}: b {} has more elements than a {}",
                b.describe(),
                a.describe()
            )));
        }
        // The byte just past b's last element in a's memory (all strides are
        // non-negative, so the last element is the farthest). ggml's own
        // bound checks where that element starts, which lets its last bytes
        // fall past the end of a.
        let ne = b.ne();
        let strides = [es, nb1, nb2, nb3];
        let last: u128 = (0..4).map(|i| (ne[i] - 1) as u128 * strides[i] as u128).sum();
        let end = offset as u128 + last + es as u128;
        if end > a.nbytes() as u128 {
            return Err(Error::shape(format!(
                "{OP}: b {} at offset {offset} with strides ({nb1}, {nb2}, {nb3}) reaches byte {end}, past the {} bytes of a {}",
                b.describe(),
                a.nbytes(),
                a.describe()
            )));
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_set_inplace(ctx, a.as_ptr(), b.as_ptr(), nb1, nb2, nb3, offset) })
    }

    /// `a` tiled to the shape `ne` (each `ne[i]` ≥ 1 and a multiple of
    /// `a`'s dim `i`), whole blocks repeated. `a`: f32, f16, bf16 or i32
    /// with a dense dim 0 and at least one element.
    pub fn repeat_4d(&mut self, a: Tensor, ne: [i64; 4]) -> Result<Tensor> {
        const OP: &str = "repeat_4d";
        check::dtype_in(OP, "a", a, &[check::F32, check::F16, check::BF16, check::I32])?;
        nonempty(OP, "a", a)?;
        dense_rows(OP, "a", a)?;
        let na = a.ne();
        // The kernel counts repetitions and offsets in 32-bit ints.
        if ne.iter().any(|&d| d < 1 || d > i32::MAX as i64) || (0..4).any(|i| ne[i] % na[i] != 0) {
            return Err(Error::shape(format!(
                "{OP}: cannot repeat {} to {ne:?}: each target dim must be a positive multiple of a's",
                a.describe()
            )));
        }
        result_shape(OP, ne)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_repeat_4d(ctx, a.as_ptr(), ne[0], ne[1], ne[2], ne[3]) })
    }
}
