//! Matrix products: `mul_mat` and `mul_mat_full_prec` (Ollama's `Mulmat`
//! and `MulmatFullPrec`).
//!
//! `a = [K, M, b2, b3]`, `b = [K, N, B2, B3]` → f32 `[M, N, B2, B3]`, each
//! output element the dot product of a row of `a` and a row of `b`; `a` is
//! broadcast over the batch dims (`B2 % b2 == 0`, `B3 % b3 == 0`).
//!
//! What ggml needs, checked here so that no assert can fire:
//! * `ggml_mul_mat`: equal `K`, broadcastable batches, `a` not transposed.
//! * the CPU kernel: dim 0 of both operands dense (`nb[0]` = element size);
//!   `a`'s type has a CPU dot product, `b` is f32 (converted to the dot
//!   product's type), or already that type, or bf16 for an f32-dot `a`
//!   (the same rule as the CPU backend's `supports_op`); `K` a whole number
//!   of blocks of `a`'s type and of the dot product's type.
//!
//! A float operand whose dim 0 is strided (e.g. a `ggml_transpose` view) is
//! copied (`ggml_cont`) first; a quantized `a` with such a layout is refused.

use crate::ml::{check, tensor::type_name, Context, Error, Result, Tensor};
use crate::sys;

/// ggml-cpu's per-type traits (dot product and its operand type).
pub(crate) fn cpu_traits(t: sys::ggml_type) -> Option<&'static sys::ggml_type_traits_cpu> {
    if !crate::ml::tensor::is_valid_type(t) {
        return None;
    }
    unsafe { sys::ggml_get_type_traits_cpu(t).as_ref() }
}

/// The type `b` is converted to for the CPU dot product with an `a` of type
/// `a_type`, or None when the CPU has no dot product for `a_type`.
pub(crate) fn vec_dot_type(a_type: sys::ggml_type) -> Option<sys::ggml_type> {
    cpu_traits(a_type).filter(|t| t.vec_dot.is_some()).map(|t| t.vec_dot_type)
}

fn blck(t: sys::ggml_type) -> i64 {
    unsafe { sys::ggml_blck_size(t) }
}

/// Checks that the CPU can multiply an `a_type` matrix with rows of `k`
/// elements by a `b_type` operand. `a_desc`/`b_desc` name the operands in
/// messages.
pub(crate) fn check_operand_types(
    op: &str,
    a_type: sys::ggml_type,
    k: i64,
    b_type: sys::ggml_type,
    a_desc: &dyn Fn() -> String,
    b_desc: &dyn Fn() -> String,
) -> Result<()> {
    let Some(vdt) = vec_dot_type(a_type) else {
        return Err(Error::dtype(format!(
            "{op}: the CPU has no matrix product for {} (type {})",
            a_desc(),
            type_name(a_type)
        )));
    };
    for t in [a_type, vdt] {
        let bs = blck(t);
        if bs <= 0 || k % bs != 0 {
            return Err(Error::shape(format!(
                "{op}: the shared dimension K={k} must be a multiple of the {} block size {bs}, got {}",
                type_name(t),
                a_desc()
            )));
        }
    }
    let ok = match b_type {
        check::F32 => vdt == check::F32 || cpu_traits(vdt).map(|t| t.from_float.is_some()).unwrap_or(false),
        check::F16 => vdt == check::F16,
        check::BF16 => vdt == check::BF16 || vdt == check::F32,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let mut allowed = vec!["f32"];
    if vdt == check::F16 {
        allowed.push("f16");
    }
    if vdt == check::BF16 || vdt == check::F32 {
        allowed.push("bf16");
    }
    Err(Error::dtype(format!(
        "{op}: {} cannot multiply {}: with a {} left operand the right one must be {}",
        b_desc(),
        a_desc(),
        type_name(a_type),
        allowed.join(" or ")
    )))
}

/// Dim 0 is dense and the tensor is not transposed (what ggml_mul_mat and
/// the CPU kernel need from both operands).
pub(crate) fn dense_rows(t: Tensor) -> bool {
    let nb = t.nb();
    nb[0] == crate::ml::tensor::elem_size(t.dtype()) && nb[0] <= nb[1] // !ggml_is_transposed
}

/// Below this many rows ggml's scheduler never hands a product whose weight
/// is in CPU memory to another device (the GPU backends' op-offload batch,
/// 32): the CPU computes it whatever the batch.
const OFFLOAD_MIN_ROWS: i64 = 32;

/// Whether row-wise mode must split a product of `a` by `rows` rows into
/// one-row products, because the batch could change a row's bits. On a CPU
/// it cannot for:
/// - `a` in one of the CPU's extra buffer types (repacked weights: ggml's
///   repack, AMX, KleidiAI): their several-row kernels (gemm) give the same
///   bits as their one-row ones (gemv);
/// - quantized `a` whose dot product takes one row at a time (CPU traits
///   `nrows` 1, as on x86; ARM's int8 matrix kernels take 2): ggml's
///   per-cell dot products and llamafile's quantized tiles sum each cell's
///   blocks in the same order whatever the batch.
/// Float weights (tinyBLAS tiles for batches, ggml's dot product for one
/// row), weights on other devices and batches another device may take are
/// split. The speculative exactness tests check these claims, on every
/// weight type they run, on the machine they run on.
fn batch_changes_rows(a: Tensor, rows: i64) -> bool {
    let buf = a.raw().buffer;
    if buf.is_null() || rows >= OFFLOAD_MIN_ROWS {
        return true;
    }
    unsafe {
        let buft = sys::ggml_backend_buffer_get_type(buf);
        let dev = sys::ggml_backend_buft_get_device(buft);
        if !dev.is_null()
            && sys::ggml_backend_dev_type(dev) == sys::GGML_BACKEND_DEVICE_TYPE_CPU
            && crate::ml::model::weights::extra_bufts(dev).contains(&buft)
        {
            return false;
        }
        // Host memory (the CPU's buffers, mapped files, which have no
        // device) is computed by the CPU; anything else by its device.
        if !sys::ggml_backend_buft_is_host(buft) {
            return true;
        }
    }
    is_float(a.dtype()) || cpu_traits(a.dtype()).map_or(true, |t| t.nrows != 1)
}

pub(crate) fn is_float(t: sys::ggml_type) -> bool {
    matches!(t, check::F32 | check::F16 | check::BF16)
}

pub(crate) fn nonempty(op: &str, what: &str, t: Tensor) -> Result<()> {
    nonempty_except(op, what, t, &[])
}

/// Like `nonempty`, but the dims in `may_be_zero` may be 0: ggml builds an
/// empty result from such an operand and skips it at compute, and models
/// meet it in practice (Ollama's take the rows that produce logits, none
/// in a batch that ends before the prompt does, and multiply them by the
/// output matrix). The dims left are those a kernel divides by or loops
/// over for a result with elements.
pub(crate) fn nonempty_except(op: &str, what: &str, t: Tensor, may_be_zero: &[usize]) -> Result<()> {
    if t.ne().iter().enumerate().all(|(i, &d)| d > 0 || (d == 0 && may_be_zero.contains(&i))) {
        Ok(())
    } else {
        Err(Error::shape(format!("{op}: {what} is empty: {}", t.describe())))
    }
}

impl Context {
    /// `a=[K,M,b2,b3]` times `b=[K,N,B2,B3]` → f32 `[M,N,B2,B3]` (`b·aᵀ`
    /// per batch, `a` broadcast over the batch dims).
    pub fn mul_mat(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.mul_mat_op("mul_mat", a, b, false)
    }

    /// `mul_mat` with F32 accumulation requested (`ggml_prec_set_acc`); the
    /// CPU always accumulates in F32, GPU backends honour the request.
    pub fn mul_mat_full_prec(&mut self, a: Tensor, b: Tensor) -> Result<Tensor> {
        self.mul_mat_op("mul_mat_full_prec", a, b, true)
    }

    /// Checks `mul_mat(a, b)` without building anything. `a` may have no
    /// rows (M = 0) and `b` no rows or batches: the result is then empty.
    /// `K` and `a`'s batch dims (`b`'s are multiples of them) may not be 0.
    pub(crate) fn check_mul_mat(op: &str, a: Tensor, b: Tensor) -> Result<()> {
        nonempty_except(op, "a", a, &[1])?;
        nonempty_except(op, "b", b, &[1, 2, 3])?;
        if !is_float(b.dtype()) {
            return Err(Error::dtype(format!(
                "{op}: b must be f32, f16 or bf16, got {}",
                b.describe()
            )));
        }
        let (na, nb) = (a.ne(), b.ne());
        if na[0] != nb[0] {
            return Err(Error::shape(format!(
                "{op}: dim 0 (K) differs: a {} vs b {}",
                a.describe(),
                b.describe()
            )));
        }
        if nb[2] % na[2] != 0 || nb[3] % na[3] != 0 {
            return Err(Error::shape(format!(
                "{op}: cannot broadcast a {} over the batch dims of b {} (dims 2 and 3 of b must be multiples of a's)",
                a.describe(),
                b.describe()
            )));
        }
        if !dense_rows(a) && !is_float(a.dtype()) {
            return Err(Error::shape(format!(
                "{op}: a quantized a must have dense rows (not transposed or strided in dim 0), got {}",
                a.describe()
            )));
        }
        // f32/f16 weights times f32 activations: always supported (block size 1,
        // vec_dot_type f32/f16 with a from_float), so skip the CPU-traits lookups.
        if matches!(a.dtype(), check::F32 | check::F16) && b.dtype() == check::F32 {
            return Ok(());
        }
        check_operand_types(op, a.dtype(), na[0], b.dtype(), &|| format!("a {}", a.describe()), &|| format!("b {}", b.describe()))
    }

    /// Builds the product after `check_mul_mat`; creates up to 3 tensors.
    pub(crate) fn build_mul_mat(&mut self, op: &str, a: Tensor, b: Tensor, full_prec: bool) -> Result<Tensor> {
        let [_, _, a2, a3] = a.ne();
        let [k, rows, b2, b3] = b.ne();
        // A stack of weights (allocated: an activation's batch dimension
        // may be the tokens themselves, each already a product of its own).
        let weights = !a.raw().buffer.is_null();
        if self.row_wise() && weights && rows > 1 && a2 > 1 && b2 == a2 && a3 == 1 && b3 == 1 && batch_changes_rows(a, rows) {
            return self.build_batched_row_wise(op, a, b, full_prec);
        }
        let row_wise = self.row_wise() && rows > 1 && a2 == 1 && a3 == 1 && b2 == 1 && b3 == 1 && batch_changes_rows(a, rows);
        let ctx = self.room(op, if row_wise { 6 } else { 3 })?;
        let a = if dense_rows(a) { a } else { self.made(op, unsafe { sys::ggml_cont(ctx, a.as_ptr()) })? };
        let dense = if row_wise { unsafe { sys::ggml_is_contiguous(b.as_ptr()) } } else { dense_rows(b) };
        let b = if dense { b } else { self.made(op, unsafe { sys::ggml_cont(ctx, b.as_ptr()) })? };
        // Row-wise: [k, rows] as [k, 1, rows], each row a product of its own.
        let b = if row_wise { self.made(op, unsafe { sys::ggml_reshape_3d(ctx, b.as_ptr(), k, 1, rows) })? } else { b };
        let t = self.made(op, unsafe { sys::ggml_mul_mat(ctx, a.as_ptr(), b.as_ptr()) })?;
        if full_prec && !unsafe { sys::ggml_prec_set_acc(t.as_ptr(), sys::GGML_PREC_F32) } {
            return Err(Error::unsupported(format!("{op}: ggml refused F32 accumulation for {}", t.describe())));
        }
        if row_wise {
            return self.made(op, unsafe { sys::ggml_reshape_2d(ctx, t.as_ptr(), t.ne()[0], rows) });
        }
        Ok(t)
    }

    /// The row-wise product of a stack of weights a [k, m, n2] with b [k,
    /// rows, n2] (Gemma 3n's AltUp projections): b's rows go to the fourth
    /// dimension, [k, 1, n2, rows], so that each row is a product of its
    /// own over the stack (a broadcast over rows), and the result
    /// [m, 1, n2, rows] is laid out back as [m, rows, n2].
    fn build_batched_row_wise(&mut self, op: &str, a: Tensor, b: Tensor, full_prec: bool) -> Result<Tensor> {
        let [k, rows, n2, _] = b.ne();
        let ctx = self.room(op, 9)?;
        let a = if dense_rows(a) { a } else { self.made(op, unsafe { sys::ggml_cont(ctx, a.as_ptr()) })? };
        let bt = self.made(op, unsafe { sys::ggml_permute(ctx, b.as_ptr(), 0, 2, 1, 3) })?;
        let bt = self.made(op, unsafe { sys::ggml_cont(ctx, bt.as_ptr()) })?;
        let bt = self.made(op, unsafe { sys::ggml_reshape_4d(ctx, bt.as_ptr(), k, 1, n2, rows) })?;
        let t = self.made(op, unsafe { sys::ggml_mul_mat(ctx, a.as_ptr(), bt.as_ptr()) })?;
        if full_prec && !unsafe { sys::ggml_prec_set_acc(t.as_ptr(), sys::GGML_PREC_F32) } {
            return Err(Error::unsupported(format!("{op}: ggml refused F32 accumulation for {}", t.describe())));
        }
        let m = t.ne()[0];
        let t = self.made(op, unsafe { sys::ggml_reshape_3d(ctx, t.as_ptr(), m, n2, rows) })?;
        let t = self.made(op, unsafe { sys::ggml_permute(ctx, t.as_ptr(), 0, 2, 1, 3) })?;
        self.made(op, unsafe { sys::ggml_cont(ctx, t.as_ptr()) })
    }

    fn mul_mat_op(&mut self, op: &str, a: Tensor, b: Tensor, full_prec: bool) -> Result<Tensor> {
        Self::check_mul_mat(op, a, b)?;
        self.build_mul_mat(op, a, b, full_prec)
    }
}
