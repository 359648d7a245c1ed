//! Indexing and copying: get_rows, set_rows, cpy, cast, argsort, top_k.
//!
//! Row ids are data: their range can only be known when they are filled,
//! which for model inputs happens after the graph is built. ggml's CPU
//! kernels abort the process on an out-of-range id, so the ops here cannot
//! check them; [`check_row_ids`] validates host-resident ids of a built node
//! and is meant to be called between filling the inputs and computing.

use super::shape::dense_rows;
use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

const I64: sys::ggml_type = sys::GGML_TYPE_I64;

/// Types whose rows ggml's CPU get_rows kernel can read (it dequantizes
/// quantized rows to f32).
const GET_ROWS_QUANTIZED: [sys::ggml_type; 26] = [
    sys::GGML_TYPE_Q1_0,
    sys::GGML_TYPE_Q2_0,
    sys::GGML_TYPE_Q4_0,
    sys::GGML_TYPE_Q4_1,
    sys::GGML_TYPE_Q5_0,
    sys::GGML_TYPE_Q5_1,
    sys::GGML_TYPE_Q8_0,
    sys::GGML_TYPE_Q8_1,
    sys::GGML_TYPE_MXFP4,
    sys::GGML_TYPE_NVFP4,
    sys::GGML_TYPE_Q2_K,
    sys::GGML_TYPE_Q3_K,
    sys::GGML_TYPE_Q4_K,
    sys::GGML_TYPE_Q5_K,
    sys::GGML_TYPE_Q6_K,
    sys::GGML_TYPE_TQ1_0,
    sys::GGML_TYPE_TQ2_0,
    sys::GGML_TYPE_IQ2_XXS,
    sys::GGML_TYPE_IQ2_XS,
    sys::GGML_TYPE_IQ3_XXS,
    sys::GGML_TYPE_IQ1_S,
    sys::GGML_TYPE_IQ1_M,
    sys::GGML_TYPE_IQ4_NL,
    sys::GGML_TYPE_IQ4_XS,
    sys::GGML_TYPE_IQ3_S,
    sys::GGML_TYPE_IQ2_S,
];

fn is_float(t: sys::ggml_type) -> bool {
    matches!(t, check::F32 | check::F16 | check::BF16)
}

fn is_quantized(t: sys::ggml_type) -> bool {
    unsafe { sys::ggml_is_quantized(t) }
}

/// The CPU backend can quantize f32 rows into type `t`.
fn cpu_can_quantize(t: sys::ggml_type) -> bool {
    let traits = unsafe { sys::ggml_get_type_traits_cpu(t) };
    !traits.is_null() && unsafe { (*traits).from_float }.is_some()
}

/// ggml can dequantize type `t` to f32.
fn can_dequantize(t: sys::ggml_type) -> bool {
    let traits = unsafe { sys::ggml_get_type_traits(t) };
    !traits.is_null() && unsafe { (*traits).to_float }.is_some()
}

fn name(t: sys::ggml_type) -> &'static str {
    crate::ml::tensor::type_name(t)
}

/// The destination of a copy: an existing tensor (cpy) or the new
/// contiguous tensor of cast.
struct Dest {
    dtype: sys::ggml_type,
    ne: [i64; 4],
    contiguous: bool,
    dense_rows: bool,
    desc: String,
}

/// The conversions (and layouts) ggml's CPU copy kernels implement:
/// same type; between f32/f16/bf16; f32 <-> i32; f32/f16/bf16 into a
/// quantized type; a quantized type to f32.
fn check_copy(op: &str, src: Tensor, dst: &Dest) -> Result<()> {
    let (s, d) = (src.dtype(), dst.dtype);
    if src.nelements() != dst.ne.iter().product::<i64>() {
        return Err(Error::shape(format!(
            "{op}: element counts differ: {} vs {}",
            src.describe(),
            dst.desc
        )));
    }
    if s == d {
        if is_quantized(s) {
            if !dense_rows(src) || !dst.dense_rows {
                return Err(Error::shape(format!(
                    "{op}: quantized blocks must be dense along dim 0: {} to {}",
                    src.describe(),
                    dst.desc
                )));
            }
            if !(src.is_contiguous() && dst.contiguous) && src.ne() != dst.ne {
                return Err(Error::shape(format!(
                    "{op}: a quantized copy between different shapes needs both sides contiguous: {} to {}",
                    src.describe(),
                    dst.desc
                )));
            }
        }
        return Ok(());
    }
    if (is_float(s) && is_float(d)) || (s == check::F32 && d == check::I32) || (s == check::I32 && d == check::F32) {
        return Ok(());
    }
    if is_float(s) && is_quantized(d) {
        if !cpu_can_quantize(d) {
            return Err(Error::unsupported(format!("{op}: the CPU cannot quantize to {}", name(d))));
        }
        if !dst.contiguous {
            return Err(Error::shape(format!(
                "{op}: quantizing needs a contiguous destination, got {}",
                dst.desc
            )));
        }
        if !dense_rows(src) {
            return Err(Error::shape(format!(
                "{op}: quantizing needs a source with dense rows, got {}",
                src.describe()
            )));
        }
        if src.ne()[0] != dst.ne[0] {
            return Err(Error::shape(format!(
                "{op}: quantizing needs equal row lengths (dim 0): {} to {}",
                src.describe(),
                dst.desc
            )));
        }
        return check::block_aligned(op, d, src.ne()[0]);
    }
    if is_quantized(s) && d == check::F32 {
        if !can_dequantize(s) {
            return Err(Error::unsupported(format!("{op}: cannot dequantize {}", src.describe())));
        }
        if !dense_rows(src) || !dst.dense_rows {
            return Err(Error::shape(format!(
                "{op}: dequantizing needs dense rows on both sides: {} to {}",
                src.describe(),
                dst.desc
            )));
        }
        let bs = super::shape::block_size(s);
        if dst.ne[0] % bs != 0 && !dst.contiguous {
            return Err(Error::shape(format!(
                "{op}: dequantizing {} into {} needs a contiguous destination or rows of whole blocks",
                src.describe(),
                dst.desc
            )));
        }
        if src.nelements() > u32::MAX as i64 {
            return Err(Error::shape(format!("{op}: {} is too large to dequantize in one copy", src.describe())));
        }
        return Ok(());
    }
    if is_quantized(s) && is_float(d) {
        return Err(Error::dtype(format!(
            "{op}: cannot convert {} to {}: ggml's CPU copy dequantizes to f32 only (cast to f32 first)",
            src.describe(),
            name(d)
        )));
    }
    Err(Error::dtype(format!(
        "{op}: cannot convert {} to {} (supported: same type, between f32/f16/bf16, f32<->i32, f32/f16/bf16 to a quantized type, quantized to f32)",
        src.describe(),
        name(d)
    )))
}

impl Context {
    /// Rows of `a` picked by `ids` (i32): `a [n0, rows, b2, b3]`,
    /// `ids [n, b2, b3]` → `[n0, n, b2, b3]`, f32 (i32 when `a` is i32;
    /// f16/bf16/quantized rows are converted to f32). `a`'s rows must be
    /// dense. Ids must be in `0..rows` when the graph is computed: ggml
    /// checks them only then, by aborting; see [`check_row_ids`].
    pub fn get_rows(&mut self, a: Tensor, ids: Tensor) -> Result<Tensor> {
        const OP: &str = "get_rows";
        check::dtype_in(OP, "ids", ids, &[check::I32])?;
        if !matches!(a.dtype(), check::F32 | check::I32 | check::F16 | check::BF16)
            && !GET_ROWS_QUANTIZED.contains(&a.dtype())
        {
            return Err(Error::dtype(format!("{OP}: cannot read rows of {}", a.describe())));
        }
        let (na, ni) = (a.ne(), ids.ne());
        if na[2] != ni[1] || na[3] != ni[2] || ni[3] != 1 {
            return Err(Error::shape(format!(
                "{OP}: ids {} do not fit {}: ids must be [n, {}, {}]",
                ids.describe(),
                a.describe(),
                na[2],
                na[3]
            )));
        }
        if !unsafe { sys::ggml_is_contiguous_rows(a.as_ptr()) } {
            return Err(Error::shape(format!("{OP}: a must have contiguous rows, got {}", a.describe())));
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_get_rows(ctx, a.as_ptr(), ids.as_ptr()) })
    }

    /// Writes row `i` of `src` into row `ids[i]` of `dst` (a view of `dst`
    /// is returned; forward it for the write to happen).
    /// `dst [n0, rows, b2, b3]`, `src [n0, n, b2, b3]` (f32 or f16),
    /// `ids [n, c2, c3]` (i32 or i64) with `b2 % c2 == 0`, `b3 % c3 == 0`
    /// (ids broadcast over the batch dims). `dst` is f32, f16, bf16 or a
    /// quantized type the CPU can write; both have contiguous rows. Ids must
    /// be in `0..rows` when computed (see [`check_row_ids`]).
    pub fn set_rows(&mut self, dst: Tensor, src: Tensor, ids: Tensor) -> Result<Tensor> {
        const OP: &str = "set_rows";
        check::dtype_in(OP, "src", src, &[check::F32, check::F16])?;
        check::dtype_in(OP, "ids", ids, &[check::I32, I64])?;
        let dt = dst.dtype();
        if !(is_float(dt) || (is_quantized(dt) && cpu_can_quantize(dt))) {
            return Err(Error::dtype(format!(
                "{OP}: dst must be f32, f16, bf16 or a quantized type, got {}",
                dst.describe()
            )));
        }
        let (nd, ns, ni) = (dst.ne(), src.ne(), ids.ne());
        if nd[0] != ns[0] || nd[2] != ns[2] || nd[3] != ns[3] {
            return Err(Error::shape(format!(
                "{OP}: src {} does not fit dst {}: dims 0, 2 and 3 must match",
                src.describe(),
                dst.describe()
            )));
        }
        if ns[1] != ni[0] || ns[2] % ni[1] != 0 || ns[3] % ni[2] != 0 || ni[3] != 1 {
            return Err(Error::shape(format!(
                "{OP}: ids {} do not fit src {}: ids must be [{}, c2, c3] with c2 dividing {} and c3 dividing {}",
                ids.describe(),
                src.describe(),
                ns[1],
                ns[2],
                ns[3]
            )));
        }
        for (what, t) in [("dst", dst), ("src", src)] {
            if !unsafe { sys::ggml_is_contiguous_rows(t.as_ptr()) } {
                return Err(Error::shape(format!("{OP}: {what} must have contiguous rows, got {}", t.describe())));
            }
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_set_rows(ctx, dst.as_ptr(), src.as_ptr(), ids.as_ptr()) })
    }

    /// Writes `src` into `dst` element by element in logical order,
    /// converting the type; returns a view of `dst` (forward it for the
    /// write to happen). Same element count; conversions: same type,
    /// between f32/f16/bf16, f32<->i32, f32/f16/bf16 into a quantized type
    /// (contiguous `dst`, equal dim 0, dense source rows), quantized to f32.
    pub fn cpy(&mut self, src: Tensor, dst: Tensor) -> Result<Tensor> {
        const OP: &str = "cpy";
        let dest = Dest {
            dtype: dst.dtype(),
            ne: dst.ne(),
            contiguous: dst.is_contiguous(),
            dense_rows: dense_rows(dst),
            desc: dst.describe(),
        };
        if is_quantized(dst.dtype()) {
            check::block_aligned(OP, dst.dtype(), dst.ne()[0])?;
        }
        check_copy(OP, src, &dest)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_cpy(ctx, src.as_ptr(), dst.as_ptr()) })
    }

    /// `a` converted to `dtype` (a new contiguous tensor of `a`'s shape);
    /// the conversions of [`Context::cpy`]. Every quantized type ggml can
    /// decode (all but Q8_1 and Q8_K) dequantizes to f32; ggml's CPU copy
    /// has no quantized-to-f16/bf16 path, so those are refused (cast to f32
    /// first).
    pub fn cast(&mut self, a: Tensor, dtype: sys::ggml_type) -> Result<Tensor> {
        const OP: &str = "cast";
        check::type_arg(OP, dtype)?;
        check::block_aligned(OP, dtype, a.ne()[0])?;
        let dest = Dest {
            dtype,
            ne: a.ne(),
            contiguous: true,
            dense_rows: true,
            desc: format!("{} (the shape of {})", name(dtype), a.describe()),
        };
        check_copy(OP, a, &dest)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_cast(ctx, a.as_ptr(), dtype) })
    }

    /// The sort keys ggml's CPU argsort needs: contiguous f32, converted
    /// or copied when `a` is not. NaN keys are safe: ggml patch 11 makes
    /// the CPU comparator order them after every number (before, a NaN
    /// broke the C++ sort's ordering contract). No node is added to an f32
    /// contiguous input, so the graph is llama.cpp's and a GPU backend can
    /// fuse a router's softmax, top-k and weights as it does there.
    /// `extra`: tensors the caller creates afterwards.
    fn sort_keys(&mut self, op: &str, a: Tensor, extra: usize) -> Result<Tensor> {
        check::dtype_in(op, "a", a, &[check::F32, check::F16, check::BF16, check::I32])?;
        if a.ne()[0] > i32::MAX as i64 {
            return Err(Error::shape(format!("{op}: dim 0 of {} is too long to sort", a.describe())));
        }
        let needs_copy = a.dtype() != check::F32 || !a.is_contiguous();
        let ctx = self.room(op, extra + needs_copy as usize)?;
        if !needs_copy {
            Ok(a)
        } else if a.dtype() == check::F32 {
            self.made(op, unsafe { sys::ggml_cont(ctx, a.as_ptr()) })
        } else {
            self.made(op, unsafe { sys::ggml_cast(ctx, a.as_ptr(), check::F32) })
        }
    }

    /// Indices (i32) that sort each row (dim 0) of `a`, ascending or
    /// descending; same shape as `a`. F16, BF16 and I32 are sorted as f32
    /// (exact for i32 values within ±2^24); a non-contiguous input is copied
    /// first. NaN sorts as the largest value (on the CPU; ggml patch 11).
    /// Equal keys come in an unspecified order.
    pub fn argsort(&mut self, a: Tensor, descending: bool) -> Result<Tensor> {
        const OP: &str = "argsort";
        let x = self.sort_keys(OP, a, 1)?;
        let order = if descending { sys::GGML_SORT_ORDER_DESC } else { sys::GGML_SORT_ORDER_ASC };
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_argsort(ctx, x.as_ptr(), order) })
    }

    /// Indices (i32) of the `k` largest values of each row (dim 0) of `a`,
    /// largest first: `[k, ne1, ne2, ne3]`, a non-contiguous view of a full
    /// descending argsort (ggml_argsort_top_k). `1 ≤ k ≤ ne0`; input types
    /// as [`Context::argsort`].
    pub fn top_k(&mut self, a: Tensor, k: i64) -> Result<Tensor> {
        const OP: &str = "top_k";
        if k < 1 || k > a.ne()[0] {
            return Err(Error::shape(format!(
                "{OP}: k must be in 1..={} (dim 0 of {}), got {k}",
                a.ne()[0],
                a.describe()
            )));
        }
        let x = self.sort_keys(OP, a, 2)?;
        let ctx = self.room(OP, 2)?;
        self.made(OP, unsafe { sys::ggml_argsort_top_k(ctx, x.as_ptr(), k as i32) })
    }
}

/// Checks the ids a get_rows or set_rows node will read: each must index a
/// row of the source (get_rows) or destination (set_rows). Only ids that
/// are host data already (a data tensor filled by the caller, or a
/// view/reshape/permute of one) can be checked; for any other node, or for
/// ids that the graph computes, it returns Ok. Call it after filling the
/// ids and before computing: ggml's CPU kernels abort the process on a bad
/// id.
pub fn check_row_ids(node: Tensor) -> Result<()> {
    let r = node.raw();
    let (op, ids, rows) = match r.op {
        sys::GGML_OP_GET_ROWS => ("get_rows", r.src[1], unsafe { r.src[0].as_ref() }.map(|a| a.ne[1])),
        sys::GGML_OP_SET_ROWS => ("set_rows", r.src[1], Some(r.ne[1])),
        // Expert ids select matrices of src0 (mul_mat_id) or rows of src1
        // (add_id); ssm_scan's ids select state slots (its kernel does not
        // check them at all).
        sys::GGML_OP_MUL_MAT_ID => ("mul_mat_id", r.src[2], unsafe { r.src[0].as_ref() }.map(|a| a.ne[2])),
        sys::GGML_OP_ADD_ID => ("add_id", r.src[2], unsafe { r.src[1].as_ref() }.map(|b| b.ne[1])),
        sys::GGML_OP_SSM_SCAN => ("ssm_scan", r.src[6], unsafe { r.src[0].as_ref() }.map(|s| s.ne[3])),
        _ => return Ok(()),
    };
    let (Some(ids), Some(rows)) = (unsafe { Tensor::from_raw(ids) }, rows) else { return Ok(()) };
    let elem = match ids.dtype() {
        check::I32 => 4usize,
        I64 => 8,
        _ => return Ok(()),
    };
    // The ids' memory: a data tensor (no op) in a host buffer, and the ids
    // the tensor itself or a view of it.
    let (root, offs) = super::shape::root_of(ids);
    let rr = root.raw();
    let view_like = matches!(
        ids.raw().op,
        sys::GGML_OP_NONE | sys::GGML_OP_VIEW | sys::GGML_OP_RESHAPE | sys::GGML_OP_PERMUTE | sys::GGML_OP_TRANSPOSE
    );
    if !view_like
        || rr.op != sys::GGML_OP_NONE
        || !root.has_data()
        || !unsafe { sys::ggml_backend_buffer_is_host(rr.buffer) }
        || ids.nelements() == 0
    {
        return Ok(());
    }
    let n = ids.nbytes();
    if offs + n > root.nbytes() || unsafe { sys::internal::iface(rr.buffer) }.get_tensor.is_none() {
        return Ok(());
    }
    let mut raw = vec![0u8; n];
    unsafe { sys::ggml_backend_tensor_get(root.as_ptr(), raw.as_mut_ptr().cast(), offs, n) };
    let (ne, nb) = (ids.ne(), ids.nb());
    let mut pos = 0usize;
    for i3 in 0..ne[3] as usize {
        for i2 in 0..ne[2] as usize {
            for i1 in 0..ne[1] as usize {
                for i0 in 0..ne[0] as usize {
                    let o = i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
                    let b = &raw[o..o + elem];
                    let id = if elem == 4 {
                        i32::from_le_bytes(b.try_into().unwrap()) as i64
                    } else {
                        i64::from_le_bytes(b.try_into().unwrap())
                    };
                    if !(0..rows).contains(&id) {
                        return Err(Error::invalid(format!(
                            "{op}: id {id} at position {pos} of {} is out of range for {rows} rows",
                            ids.describe()
                        )));
                    }
                    pos += 1;
                }
            }
        }
    }
    Ok(())
}
