//! Mixture-of-experts routing: `mul_mat_id` (Ollama's `MulmatID`) and
//! `add_id` (`AddID`).
//!
//! Shapes, in ggml order (for a layer with `n_expert` experts of which
//! `n_used` are routed per token):
//! * `mul_mat_id(as, b, ids)`: `as = [K, M, n_expert]` (one `[K, M]` matrix
//!   per expert), `b = [K, n_b, n_tokens]` with `n_used % n_b == 0` (usually
//!   `n_b` is 1: the same vector for every routed expert, or `n_used`),
//!   `ids = [n_used, n_tokens]` i32 → f32 `[M, n_used, n_tokens]`, where
//!   `out[:, e, t] = as[:, :, ids[e, t]] · b[:, e % n_b, t]`.
//! * `add_id(a, b, ids)`: `a = [n, n_used, n_tokens]`, `b = [n, n_rows]`,
//!   `ids = [n_used, n_tokens]` → `out[:, e, t] = a[:, e, t] + b[:, ids[e, t]]`
//!   (the per-expert bias).
//!
//! Ids are data that the graph usually computes (top-k of the router), so
//! their range cannot be checked here. ggml's CPU kernels (patched, see
//! docs/notes/ggml-build.md) skip a row whose id is outside `0..n_expert` (`0..n_rows`
//! for `add_id`) and mark the node; `Context::compute` then fails with an
//! error naming the op.
//!
//! What ggml's constructors and CPU kernels need, checked here:
//! * `mul_mat_id`: `as` and `b` at most 3-D, `ids` 2-D i32, matching `K`
//!   and token counts; `as` not transposed with dense dim 0 (a float `as`
//!   or `b` strided in dim 0 is copied first, a quantized `as` is refused);
//!   `as`'s type has a CPU dot product whose operand type `b` is, or `b` is
//!   f32 (converted; bf16 is not widened here, unlike `mul_mat`); `K` a whole
//!   number of blocks of both types.
//! * `add_id`: f32 `a` and `b` with dense dim 0, i32 `ids`.

use super::matmul::{dense_rows, nonempty, nonempty_except, vec_dot_type};
use crate::ml::{check, tensor::type_name, Context, Error, Result, Tensor};
use crate::sys;

fn blck(t: sys::ggml_type) -> i64 {
    unsafe { sys::ggml_blck_size(t) }
}

/// `ids` is i32 and 2-D (`ne[2] == ne[3] == 1`), with at least one expert
/// per token; there may be no tokens (an empty result).
fn ids_arg(op: &str, ids: Tensor) -> Result<()> {
    check::dtype_in(op, "ids", ids, &[check::I32])?;
    nonempty_except(op, "ids", ids, &[1])?;
    let ne = ids.ne();
    if ne[2] != 1 || ne[3] != 1 {
        return Err(Error::shape(format!(
            "{op}: ids must be 2-D [n_expert_used, n_tokens], got {}",
            ids.describe()
        )));
    }
    Ok(())
}

impl Context {
    /// Per-token expert matrix products: `as = [K, M, n_expert]` (f32, f16,
    /// bf16 or a quantized type), `b = [K, n_b, n_tokens]`, `ids =
    /// [n_used, n_tokens]` i32 with `n_used % n_b == 0` → f32
    /// `[M, n_used, n_tokens]`, `out[:, e, t] = as[:, :, ids[e,t]] ·
    /// b[:, e % n_b, t]`. `b` is f32, or the type of `as`'s CPU dot product
    /// (f16 for f16 `as`, bf16 for bf16 `as`). Out-of-range ids fail
    /// `compute`. There may be no tokens (`n_tokens = 0`, an empty result).
    pub fn mul_mat_id(&mut self, as_: Tensor, b: Tensor, ids: Tensor) -> Result<Tensor> {
        const OP: &str = "mul_mat_id";
        nonempty(OP, "as", as_)?;
        nonempty_except(OP, "b", b, &[2])?;
        ids_arg(OP, ids)?;
        let (na, nb, ni) = (as_.ne(), b.ne(), ids.ne());
        if na[3] != 1 {
            return Err(Error::shape(format!(
                "{OP}: as must be 3-D [K, M, n_expert] (one matrix per expert), got {}",
                as_.describe()
            )));
        }
        if nb[3] != 1 {
            return Err(Error::shape(format!(
                "{OP}: b must be 3-D [K, n_b, n_tokens], got {}",
                b.describe()
            )));
        }
        if na[0] != nb[0] {
            return Err(Error::shape(format!(
                "{OP}: dim 0 (K) differs: as {} vs b {}",
                as_.describe(),
                b.describe()
            )));
        }
        if ni[1] != nb[2] {
            return Err(Error::shape(format!(
                "{OP}: ids {} must have one column per token of b {} (ids dim 1 = b dim 2)",
                ids.describe(),
                b.describe()
            )));
        }
        if ni[0] % nb[1] != 0 {
            return Err(Error::shape(format!(
                "{OP}: b {} cannot broadcast over the {} experts used per token of ids {} (b dim 1 must divide ids dim 0)",
                b.describe(),
                ni[0],
                ids.describe()
            )));
        }
        let at = as_.dtype();
        // A quantized as is read row by row in whole blocks: dim 0 dense and
        // rows that do not overlap (which also rules out transposed views
        // whose rows hold a single block).
        let rows_apart = na[1] == 1 || as_.nb()[1] >= crate::ml::context::row_bytes(at, na[0]);
        if !(dense_rows(as_) && rows_apart) && !super::matmul::is_float(at) {
            return Err(Error::shape(format!(
                "{OP}: a quantized as must have dense, non-overlapping rows (not transposed or strided in dim 0), got {}",
                as_.describe()
            )));
        }
        let Some(vdt) = vec_dot_type(at) else {
            return Err(Error::dtype(format!("{OP}: the CPU has no matrix product for as {}", as_.describe())));
        };
        for t in [at, vdt] {
            let bs = blck(t);
            if bs <= 0 || na[0] % bs != 0 {
                return Err(Error::shape(format!(
                    "{OP}: the shared dimension K={} must be a multiple of the {} block size {bs}, got as {}",
                    na[0],
                    type_name(t),
                    as_.describe()
                )));
            }
        }
        // The kernel converts b to the dot product's type only from f32;
        // otherwise b must already be that (float) type.
        let bt = b.dtype();
        let from_f32 = vdt == check::F32
            || super::matmul::cpu_traits(vdt).map(|t| t.from_float.is_some()).unwrap_or(false);
        if !((bt == check::F32 && from_f32) || (bt == vdt && super::matmul::is_float(bt))) {
            let allowed = if vdt == check::F32 || !super::matmul::is_float(vdt) {
                "f32".to_string()
            } else {
                format!("f32 or {}", type_name(vdt))
            };
            return Err(Error::dtype(format!(
                "{OP}: with as {} the right operand must be {allowed}, got b {}",
                as_.describe(),
                b.describe()
            )));
        }
        let ctx = self.room(OP, 3)?;
        let as_ = if dense_rows(as_) { as_ } else { self.made(OP, unsafe { sys::ggml_cont(ctx, as_.as_ptr()) })? };
        let b = if dense_rows(b) { b } else { self.made(OP, unsafe { sys::ggml_cont(ctx, b.as_ptr()) })? };
        self.made(OP, unsafe { sys::ggml_mul_mat_id(ctx, as_.as_ptr(), b.as_ptr(), ids.as_ptr()) })
    }

    /// Per-expert bias: `a = [n, n_used, n_tokens]` plus the row of
    /// `b = [n, n_rows]` that `ids = [n_used, n_tokens]` (i32) selects for
    /// each `(e, t)`: `out[:, e, t] = a[:, e, t] + b[:, ids[e, t]]`. f32 `a`
    /// and `b` with dense dim 0 (other strides are free). Out-of-range ids
    /// fail `compute`. There may be no tokens (an empty result).
    pub fn add_id(&mut self, a: Tensor, b: Tensor, ids: Tensor) -> Result<Tensor> {
        const OP: &str = "add_id";
        check::dtype_in(OP, "a", a, &[check::F32])?;
        check::dtype_in(OP, "b", b, &[check::F32])?;
        ids_arg(OP, ids)?;
        nonempty_except(OP, "a", a, &[2])?;
        nonempty(OP, "b", b)?;
        check::rows_contiguous(OP, "a", a)?;
        check::rows_contiguous(OP, "b", b)?;
        let (na, nb, ni) = (a.ne(), b.ne(), ids.ne());
        if na[3] != 1 {
            return Err(Error::shape(format!(
                "{OP}: a must be 3-D [n, n_expert_used, n_tokens], got {}",
                a.describe()
            )));
        }
        if nb[2] != 1 || nb[3] != 1 {
            return Err(Error::shape(format!("{OP}: b must be 2-D [n, n_rows], got {}", b.describe())));
        }
        if na[0] != nb[0] {
            return Err(Error::shape(format!(
                "{OP}: dim 0 differs: a {} vs b {}",
                a.describe(),
                b.describe()
            )));
        }
        if ni[0] != na[1] || ni[1] != na[2] {
            return Err(Error::shape(format!(
                "{OP}: ids {} must be [{}, {}] (dims 1 and 2 of a {})",
                ids.describe(),
                na[1],
                na[2],
                a.describe()
            )));
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_add_id(ctx, a.as_ptr(), b.as_ptr(), ids.as_ptr()) })
    }
}
