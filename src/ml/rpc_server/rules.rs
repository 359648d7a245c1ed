//! What each graph node must satisfy before the server computes it.
//!
//! A node arrives as a claim: "op X of these sources gives a tensor of this
//! type and shape". ggml's constructors would have checked the sources, and
//! its CPU kernels assert their layouts, trusting that whoever built the
//! node used those constructors. A client need not have, so for every op
//! the server serves, this module re-derives what ggml's constructor would
//! have made (the result's type and shape from the sources and parameters)
//! and checks what the CPU kernel asserts (types, strides, parameter
//! ranges); a node that fails either is refused with the reason. Ops not
//! listed here are refused ("not served"): among them the custom ops, whose
//! parameters are function pointers.
//!
//! What this does not cover, the process per connection does (`mod.rs`
//! forks one for each): a kernel precondition missed here costs the client
//! that sent it its connection, nobody else's.

use crate::sys;
use crate::sys::ggml_tensor as T;

const F32: u32 = sys::GGML_TYPE_F32 as u32;
const F16: u32 = sys::GGML_TYPE_F16 as u32;
const BF16: u32 = sys::GGML_TYPE_BF16 as u32;
const I32: u32 = sys::GGML_TYPE_I32 as u32;
const I64: u32 = sys::GGML_TYPE_I64 as u32;

type R = Result<(), String>;

fn ty(t: &T) -> u32 {
    t.type_ as u32
}
fn tname(t: u32) -> &'static str {
    crate::ml::tensor::type_name(t as sys::ggml_type)
}
fn desc(t: &T) -> String {
    format!("{}{:?}", tname(ty(t)), t.ne)
}
fn esize(t: &T) -> usize {
    unsafe { sys::ggml_type_size(t.type_) }
}
fn blck(t: &T) -> i64 {
    unsafe { sys::ggml_blck_size(t.type_) }
}
fn contiguous(t: &T) -> bool {
    unsafe { sys::ggml_is_contiguous(t) }
}
fn contiguous_1(t: &T) -> bool {
    unsafe { sys::ggml_is_contiguous_1(t) }
}
fn contiguous_rows(t: &T) -> bool {
    unsafe { sys::ggml_is_contiguous_rows(t) }
}
fn nelements(t: &T) -> i64 {
    t.ne.iter().product()
}

fn fail(msg: String) -> R {
    Err(msg)
}
fn need(ok: bool, msg: impl FnOnce() -> String) -> R {
    if ok {
        Ok(())
    } else {
        Err(msg())
    }
}
fn type_in(what: &str, t: &T, allowed: &[u32]) -> R {
    need(allowed.contains(&ty(t)), || {
        let names: Vec<_> = allowed.iter().map(|&a| tname(a)).collect();
        format!("{what} is {}, expected {}", desc(t), names.join(" or "))
    })
}
fn shape(what: &str, t: &T, ne: [i64; 4]) -> R {
    need(t.ne == ne, || format!("{what} has shape {:?}, the op gives {:?}", t.ne, ne))
}
fn same_shape(what: &str, a: &T, b: &T) -> R {
    need(a.ne == b.ne, || format!("{what}: shapes differ, {} and {}", desc(a), desc(b)))
}
fn dense_dim0(what: &str, t: &T) -> R {
    need(t.nb[0] == esize(t) && blck(t) == 1, || format!("{what} {} must have dense rows (dim-0 stride {})", desc(t), t.nb[0]))
}
fn need_contiguous(what: &str, t: &T) -> R {
    need(contiguous(t), || format!("{what} {} must be contiguous (strides {:?})", desc(t), t.nb))
}
fn need_contiguous_1(what: &str, t: &T) -> R {
    need(contiguous_1(t) && t.nb[0] == esize(t), || format!("{what} {} must have contiguous rows (strides {:?})", desc(t), t.nb))
}
fn need_contiguous_rows(what: &str, t: &T) -> R {
    need(contiguous_rows(t), || format!("{what} {} must have contiguous rows (strides {:?})", desc(t), t.nb))
}
fn repeatable(b: &T, a: &T) -> bool {
    (0..4).all(|i| b.ne[i] > 0 && a.ne[i] % b.ne[i] == 0)
}
/// The result's strides are ggml's for a new tensor or the in-place view
/// of `src` (same strides): the kernels walk it by its own strides but
/// assume dense elements and ordered dims.
fn result_layout(t: &T, src: &T) -> R {
    if contiguous(t) || (t.nb == src.nb && t.ne == src.ne) {
        Ok(())
    } else {
        fail(format!("result {} has strides {:?}: neither contiguous nor its source's", desc(t), t.nb))
    }
}
fn param_i32(t: &T, i: usize) -> i32 {
    t.op_params[i]
}
fn param_f32(t: &T, i: usize) -> f32 {
    f32::from_bits(t.op_params[i] as u32)
}
/// The CPU type traits: whether ggml can dot rows of this type with
/// another, and convert f32 rows to it.
fn has_vec_dot(t: u32) -> bool {
    let tr = unsafe { sys::ggml_get_type_traits_cpu(t as sys::ggml_type) };
    !tr.is_null() && unsafe { (*tr).vec_dot.is_some() }
}
fn vec_dot_type(t: u32) -> u32 {
    unsafe { (*sys::ggml_get_type_traits_cpu(t as sys::ggml_type)).vec_dot_type as u32 }
}
fn has_from_float(t: u32) -> bool {
    let tr = unsafe { sys::ggml_get_type_traits_cpu(t as sys::ggml_type) };
    !tr.is_null() && unsafe { (*tr).from_float.is_some() }
}
fn has_to_float(t: u32) -> bool {
    let tr = unsafe { sys::ggml_get_type_traits(t as sys::ggml_type) };
    !tr.is_null() && unsafe { (*tr).to_float.is_some() }
}

/// Checks node `t` (sources linked, parameters as sent). Returns the
/// reason it cannot be computed safely.
pub fn check(t: &T) -> R {
    let op = t.op as u32;
    let src = |i: usize| -> Result<&T, String> {
        let p = t.src[i];
        if p.is_null() {
            Err(format!("source {i} is missing"))
        } else {
            Ok(unsafe { &*p })
        }
    };
    let opt = |i: usize| -> Option<&T> { unsafe { t.src[i].as_ref() } };
    let max_srcs = |n: usize| -> R {
        match (n..t.src.len()).find(|&i| !t.src[i].is_null()) {
            Some(i) => fail(format!("has a source {i}; the op takes {n}")),
            None => Ok(()),
        }
    };
    // One F32 source and an F32 result (norms, reductions, scans).
    let f32_to_f32 = || -> Result<&T, String> {
        max_srcs(1)?;
        let a = src(0)?;
        type_in("a", a, &[F32])?;
        type_in("result", t, &[F32])?;
        Ok(a)
    };
    match op {
        // Views: no computation; the result's bytes lie inside a buffer of
        // the connection (checked for every tensor), which is all a later
        // kernel reading it relies on.
        sys::GGML_OP_VIEW | sys::GGML_OP_RESHAPE | sys::GGML_OP_PERMUTE | sys::GGML_OP_TRANSPOSE => {
            max_srcs(1)?;
            let a = src(0)?;
            need(ty(a) == ty(t), || format!("a view of {} cannot be {}", desc(a), desc(t)))
        }
        sys::GGML_OP_DUP | sys::GGML_OP_CONT | sys::GGML_OP_CPY => {
            let a = src(0)?;
            if op == sys::GGML_OP_CPY {
                max_srcs(2)?;
                let b = src(1)?;
                need(b.ne == t.ne && b.nb == t.nb && ty(b) == ty(t), || {
                    format!("cpy: the result {} must be its destination {}", desc(t), desc(b))
                })?;
            } else {
                max_srcs(1)?;
                need(ty(a) == ty(t), || format!("{} of {} cannot give {}", op_name(op), desc(a), desc(t)))?;
                need_contiguous("result", t)?;
            }
            need(nelements(a) == nelements(t), || format!("copies {} into {}: element counts differ", desc(a), desc(t)))?;
            copy_types(a, t)
        }
        sys::GGML_OP_ADD | sys::GGML_OP_SUB | sys::GGML_OP_MUL | sys::GGML_OP_DIV => {
            max_srcs(2)?;
            let (a, b) = (src(0)?, src(1)?);
            type_in("a", a, &[F32, F16, BF16])?;
            need(ty(b) == ty(a) || ty(b) == F32, || format!("b {} does not go with a {}", desc(b), desc(a)))?;
            need(ty(t) == ty(a), || format!("result {} must have a's type", desc(t)))?;
            need(repeatable(b, a), || format!("cannot broadcast {} to {}", desc(b), desc(a)))?;
            same_shape("result and a", t, a)?;
            dense_dim0("a", a)?;
            dense_dim0("b", b)?;
            dense_dim0("result", t)?;
            result_layout(t, a)
        }
        sys::GGML_OP_ADD_ID => {
            max_srcs(3)?;
            let (a, b, ids) = (src(0)?, src(1)?, src(2)?);
            type_in("a", a, &[F32])?;
            type_in("b", b, &[F32])?;
            type_in("ids", ids, &[I32])?;
            type_in("result", t, &[F32])?;
            need(a.ne[0] == b.ne[0] && a.ne[1] == ids.ne[0] && a.ne[2] == ids.ne[1] && a.ne[3] == 1, || {
                format!("add_id: a {}, b {}, ids {} do not fit", desc(a), desc(b), desc(ids))
            })?;
            dense_dim0("a", a)?;
            dense_dim0("b", b)?;
            dense_dim0("ids", ids)?;
            same_shape("result and a", t, a)?;
            result_layout(t, a)
        }
        sys::GGML_OP_SQR | sys::GGML_OP_SQRT | sys::GGML_OP_LOG | sys::GGML_OP_SIN | sys::GGML_OP_COS => {
            max_srcs(1)?;
            unary_like(t, src(0)?, &[F32, F16])
        }
        sys::GGML_OP_UNARY => {
            max_srcs(1)?;
            let u = param_i32(t, 0);
            need((0..sys::GGML_UNARY_OP_COUNT as i32).contains(&u), || format!("unknown unary op {u}"))?;
            unary_like(t, src(0)?, &[F32, F16])
        }
        sys::GGML_OP_SCALE => {
            max_srcs(1)?;
            let a = src(0)?;
            unary_like(t, a, &[F32])?;
            need_contiguous("a", a)
        }
        sys::GGML_OP_CLAMP | sys::GGML_OP_LEAKY_RELU | sys::GGML_OP_FILL => {
            max_srcs(1)?;
            unary_like(t, src(0)?, &[F32, F16])
        }
        sys::GGML_OP_GLU => {
            let g = param_i32(t, 0);
            need((0..sys::GGML_GLU_OP_COUNT as i32).contains(&g), || format!("unknown glu op {g}"))?;
            max_srcs(2)?;
            let a = src(0)?;
            type_in("a", a, &[F32, F16])?;
            need(ty(t) == ty(a), || format!("result {} must have a's type", desc(t)))?;
            need_contiguous_1("a", a)?;
            need_contiguous("result", t)?;
            match opt(1) {
                Some(b) => {
                    need(ty(b) == ty(a), || format!("glu halves differ in type: {} and {}", desc(a), desc(b)))?;
                    need_contiguous_1("b", b)?;
                    same_shape("glu halves", a, b)?;
                    shape("result", t, a.ne)
                }
                None => {
                    need(a.ne[0] % 2 == 0, || format!("fused glu needs an even dim 0, got {}", desc(a)))?;
                    shape("result", t, [a.ne[0] / 2, a.ne[1], a.ne[2], a.ne[3]])
                }
            }
        }
        sys::GGML_OP_NORM | sys::GGML_OP_RMS_NORM | sys::GGML_OP_L2_NORM => {
            let a = f32_to_f32()?;
            same_shape("result and a", t, a)?;
            dense_dim0("a", a)?;
            dense_dim0("result", t)?;
            // the CPU kernels assert eps >= 0 (NaN fails it too)
            let eps = param_f32(t, 0);
            need(eps >= 0.0, || format!("eps must be >= 0, got {eps}"))
        }
        sys::GGML_OP_SUM_ROWS | sys::GGML_OP_MEAN => {
            let a = f32_to_f32()?;
            shape("result", t, [1, a.ne[1], a.ne[2], a.ne[3]])?;
            dense_dim0("a", a)?;
            dense_dim0("result", t)
        }
        sys::GGML_OP_CUMSUM => {
            let a = f32_to_f32()?;
            same_shape("result and a", t, a)?;
            dense_dim0("a", a)?;
            need_contiguous("result", t)
        }
        sys::GGML_OP_TRI => {
            let a = f32_to_f32()?;
            need(a.ne[0] == a.ne[1], || format!("tri needs square matrices, got {}", desc(a)))?;
            let k = param_i32(t, 0);
            need((0..4).contains(&k), || format!("unknown tri type {k}"))?;
            same_shape("result and a", t, a)?;
            need_contiguous("a", a)?;
            need_contiguous("result", t)
        }
        sys::GGML_OP_SOLVE_TRI => {
            max_srcs(2)?;
            let (a, b) = (src(0)?, src(1)?);
            type_in("a", a, &[F32])?;
            type_in("b", b, &[F32])?;
            type_in("result", t, &[F32])?;
            need(a.ne[0] == a.ne[1] && a.ne[1] == b.ne[1] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3], || {
                format!("solve_tri: a {} and b {} do not fit", desc(a), desc(b))
            })?;
            same_shape("result and b", t, b)?;
            need_contiguous("a", a)?;
            need_contiguous("b", b)?;
            need_contiguous("result", t)
        }
        sys::GGML_OP_REPEAT => {
            max_srcs(1)?;
            let a = src(0)?;
            type_in("a", a, &[F32, F16])?;
            need(ty(t) == ty(a), || format!("result {} must have a's type", desc(t)))?;
            need(repeatable(a, t), || format!("cannot repeat {} to {}", desc(a), desc(t)))?;
            dense_dim0("a", a)?;
            need_contiguous("result", t)
        }
        sys::GGML_OP_CONCAT => {
            max_srcs(2)?;
            let (a, b) = (src(0)?, src(1)?);
            let dim = param_i32(t, 0);
            need((0..4).contains(&dim), || format!("concat along dim {dim}"))?;
            let d = dim as usize;
            type_in("a", a, &[F32, F16, BF16, I32])?;
            need(ty(b) == ty(a) && ty(t) == ty(a), || format!("concat of {} and {} into {}", desc(a), desc(b), desc(t)))?;
            let mut ne = a.ne;
            for i in 0..4 {
                if i != d && a.ne[i] != b.ne[i] {
                    return fail(format!("concat along {d}: {} and {} differ in dim {i}", desc(a), desc(b)));
                }
            }
            ne[d] += b.ne[d];
            shape("result", t, ne)?;
            if ty(a) != F32 && ty(a) != I32 {
                need_contiguous_rows("a", a)?;
                need_contiguous_rows("b", b)?;
            }
            need_contiguous("result", t)
        }
        sys::GGML_OP_PAD => {
            let a = f32_to_f32()?;
            let mut ne = a.ne;
            for i in 0..4 {
                let (lp, rp) = (param_i32(t, 2 * i), param_i32(t, 2 * i + 1));
                need(lp >= 0 && rp >= 0, || format!("negative padding {lp}, {rp} in dim {i}"))?;
                ne[i] += lp as i64 + rp as i64;
            }
            shape("result", t, ne)?;
            dense_dim0("a", a)?;
            need_contiguous("result", t)
        }
        sys::GGML_OP_ARGSORT | sys::GGML_OP_TOP_K => {
            max_srcs(1)?;
            let a = src(0)?;
            type_in("a", a, &[F32])?;
            type_in("result", t, &[I32])?;
            if op == sys::GGML_OP_ARGSORT {
                let order = param_i32(t, 0);
                need((0..2).contains(&order), || format!("unknown sort order {order}"))?;
                same_shape("result and a", t, a)?;
            } else {
                need(t.ne[0] >= 1 && t.ne[0] <= a.ne[0], || format!("top_k {} of {}", t.ne[0], desc(a)))?;
                shape("result", t, [t.ne[0], a.ne[1], a.ne[2], a.ne[3]])?;
            }
            dense_dim0("a", a)?;
            need_contiguous("result", t)
        }
        sys::GGML_OP_GET_ROWS => {
            max_srcs(2)?;
            let (a, ids) = (src(0)?, src(1)?);
            type_in("ids", ids, &[I32])?;
            need(a.ne[2] == ids.ne[1] && a.ne[3] == ids.ne[2] && ids.ne[3] == 1, || {
                format!("get_rows: ids {} do not index {}", desc(ids), desc(a))
            })?;
            let want = if ty(a) == I32 { I32 } else { F32 };
            need(ty(t) == want || (ty(t) == ty(a) && ty(a) != I32), || {
                format!("get_rows of {} cannot give {}", desc(a), desc(t))
            })?;
            need(ty(a) == F32 || ty(a) == I32 || ty(a) == ty(t) || has_to_float(ty(a)), || {
                format!("get_rows: rows of {} cannot be read", desc(a))
            })?;
            shape("result", t, [a.ne[0], ids.ne[0], ids.ne[1], ids.ne[2]])?;
            need(a.nb[0] == esize(a), || format!("a {} must have dense rows", desc(a)))?;
            dense_dim0("ids", ids)?;
            dense_dim0("result", t)
        }
        sys::GGML_OP_SET_ROWS => {
            // Sources (ggml's order): rows, ids, destination.
            max_srcs(3)?;
            let (b, ids, a) = (src(0)?, src(1)?, src(2)?);
            type_in("rows", b, &[F32, F16])?;
            type_in("ids", ids, &[I32, I64])?;
            need(t.ne == a.ne && t.nb == a.nb && ty(t) == ty(a), || {
                format!("set_rows: the result {} must be its destination {}", desc(t), desc(a))
            })?;
            need(a.ne[0] == b.ne[0] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3], || {
                format!("set_rows: rows {} do not fit {}", desc(b), desc(a))
            })?;
            need(
                b.ne[1] == ids.ne[0] && ids.ne[1] > 0 && ids.ne[2] > 0 && b.ne[2] % ids.ne[1] == 0 && b.ne[3] % ids.ne[2] == 0 && ids.ne[3] == 1,
                || format!("set_rows: ids {} do not fit rows {}", desc(ids), desc(b)),
            )?;
            need(ty(a) == ty(b) || ty(a) == F32 || has_from_float(ty(a)), || format!("set_rows cannot write {}", desc(a)))?;
            need_contiguous_rows("destination", a)?;
            need_contiguous_rows("rows", b)?;
            dense_dim0("ids", ids)
        }
        sys::GGML_OP_MUL_MAT => {
            max_srcs(2)?;
            let (a, b) = (src(0)?, src(1)?);
            matmul_types(a, b)?;
            need(a.ne[0] == b.ne[0] && b.ne[2] % a.ne[2].max(1) == 0 && b.ne[3] % a.ne[3].max(1) == 0 && a.ne[2] > 0 && a.ne[3] > 0, || {
                format!("cannot multiply {} by {}", desc(a), desc(b))
            })?;
            need(!unsafe { sys::ggml_is_transposed(a) }, || format!("a {} is transposed", desc(a)))?;
            type_in("result", t, &[F32])?;
            shape("result", t, [a.ne[1], b.ne[1], b.ne[2], b.ne[3]])?;
            ordered_f32_result(t)
        }
        sys::GGML_OP_MUL_MAT_ID => {
            max_srcs(3)?;
            let (a, b, ids) = (src(0)?, src(1)?, src(2)?);
            matmul_types(a, b)?;
            type_in("ids", ids, &[I32])?;
            need(
                a.ne[3] == 1 && b.ne[3] == 1 && ids.ne[2] == 1 && ids.ne[3] == 1 && ids.ne[1] == b.ne[2] && a.ne[0] == b.ne[0]
                    && b.ne[1] > 0 && ids.ne[0] % b.ne[1] == 0 && a.ne[2] > 0,
                || format!("mul_mat_id: experts {}, b {}, ids {} do not fit", desc(a), desc(b), desc(ids)),
            )?;
            dense_dim0("ids", ids)?;
            type_in("result", t, &[F32])?;
            shape("result", t, [a.ne[1], ids.ne[0], b.ne[2], 1])?;
            ordered_f32_result(t)
        }
        sys::GGML_OP_SOFT_MAX => {
            max_srcs(3)?;
            let a = src(0)?;
            type_in("a", a, &[F32])?;
            type_in("result", t, &[F32])?;
            same_shape("result and a", t, a)?;
            need_contiguous("a", a)?;
            need_contiguous("result", t)?;
            if let Some(m) = opt(1) {
                type_in("mask", m, &[F16, F32])?;
                need_contiguous("mask", m)?;
                need(
                    m.ne[0] == a.ne[0] && m.ne[1] >= a.ne[1] && m.ne[2] > 0 && m.ne[3] > 0 && a.ne[2] % m.ne[2] == 0 && a.ne[3] % m.ne[3] == 0,
                    || format!("mask {} does not cover {}", desc(m), desc(a)),
                )?;
            } else {
                need(param_f32(t, 1) <= 0.0, || "a positive max_bias needs a mask".into())?;
            }
            if let Some(s) = opt(2) {
                type_in("sinks", s, &[F32])?;
                need(s.ne[0] == a.ne[2] && nelements(s) == s.ne[0], || format!("sinks {} for {}", desc(s), desc(a)))?;
                dense_dim0("sinks", s)?;
            }
            Ok(())
        }
        sys::GGML_OP_ROPE => {
            max_srcs(3)?;
            let (a, pos) = (src(0)?, src(1)?);
            type_in("a", a, &[F32, F16])?;
            type_in("positions", pos, &[I32])?;
            need(ty(t) == ty(a), || format!("result {} must have a's type", desc(t)))?;
            same_shape("result and a", t, a)?;
            let (n_dims, mode, n_offs) = (param_i32(t, 1), param_i32(t, 2), param_i32(t, 15));
            let modes = [sys::GGML_ROPE_TYPE_NORMAL, sys::GGML_ROPE_TYPE_NEOX, sys::GGML_ROPE_TYPE_MROPE, sys::GGML_ROPE_TYPE_VISION, sys::GGML_ROPE_TYPE_IMROPE];
            need(modes.contains(&(mode as u32)), || format!("unknown rope mode {mode}"))?;
            need(a.ne[0] % 2 == 0, || format!("rope needs an even dim 0, got {}", desc(a)))?;
            if mode as u32 == sys::GGML_ROPE_TYPE_VISION {
                need(2 * n_dims as i64 == a.ne[0] && n_offs == 0, || format!("vision rope of {n_dims} dims over {}", desc(a)))?;
            }
            let multi = mode & sys::GGML_ROPE_TYPE_MROPE as i32 != 0;
            let per_token = if multi { 4 } else { 1 };
            need(pos.ne[0] == a.ne[2] * per_token && nelements(pos) == pos.ne[0], || {
                format!("positions {} for {}", desc(pos), desc(a))
            })?;
            need(n_dims >= 0 && n_dims % 2 == 0 && n_offs >= 0 && n_offs % 2 == 0 && (n_dims as i64 + n_offs as i64) <= a.ne[0], || {
                format!("rope of {n_dims} dims at offset {n_offs} over {}", desc(a))
            })?;
            if multi {
                let s: Vec<i32> = (11..15).map(|i| param_i32(t, i)).collect();
                need(s.iter().all(|&v| v >= 0) && (s[0] > 0 || s[1] > 0 || s[2] > 0), || format!("rope sections {s:?}"))?;
            }
            if let Some(f) = opt(2) {
                type_in("frequency factors", f, &[F32])?;
                need(f.ne[0] >= (n_dims / 2) as i64, || format!("frequency factors {} for {n_dims} dims", desc(f)))?;
                dense_dim0("frequency factors", f)?;
            }
            need(t.nb[0] == a.nb[0] && a.nb[0] == esize(a), || format!("rope: {} and {} need dense rows", desc(a), desc(t)))
        }
        sys::GGML_OP_FLASH_ATTN_EXT => {
            max_srcs(5)?;
            let (q, k, v) = (src(0)?, src(1)?, src(2)?);
            type_in("q", q, &[F32])?;
            need(has_vec_dot(ty(k)) && has_from_float(vec_dot_type(ty(k))), || format!("k {} cannot be attended", desc(k)))?;
            need(ty(v) == F32 || has_to_float(ty(v)), || format!("v {} cannot be read", desc(v)))?;
            need(
                k.ne[0] == q.ne[0] && k.ne[2] > 0 && q.ne[2] % k.ne[2] == 0 && q.ne[3] == k.ne[3] && q.ne[3] == v.ne[3]
                    && v.ne[1] == k.ne[1] && v.ne[2] == k.ne[2] && q.ne[0] % blck(k) == 0 && v.ne[0] % blck(v) == 0,
                || format!("attention of q {} over k {}, v {}", desc(q), desc(k), desc(v)),
            )?;
            for (n, x) in [("q", q), ("k", k), ("v", v)] {
                need(x.nb[0] == esize(x), || format!("{n} {} needs dense rows", desc(x)))?;
            }
            if let Some(m) = opt(3) {
                type_in("mask", m, &[F16])?;
                need_contiguous("mask", m)?;
                need(
                    m.ne[0] >= k.ne[1] && m.ne[1] >= q.ne[1] && m.ne[2] > 0 && m.ne[3] > 0 && q.ne[2] % m.ne[2] == 0 && q.ne[3] % m.ne[3] == 0,
                    || format!("mask {} does not cover q {} over {} keys", desc(m), desc(q), k.ne[1]),
                )?;
            } else {
                need(param_f32(t, 1) <= 0.0, || "a positive max_bias needs a mask".into())?;
            }
            if let Some(s) = opt(4) {
                type_in("sinks", s, &[F32])?;
                need(s.ne[0] == q.ne[2] && nelements(s) == s.ne[0], || format!("sinks {} for q {}", desc(s), desc(q)))?;
            }
            let prec = param_i32(t, 3);
            need(prec == sys::GGML_PREC_DEFAULT as i32 || prec == sys::GGML_PREC_F32 as i32, || format!("unknown precision {prec}"))?;
            type_in("result", t, &[F32])?;
            shape("result", t, [v.ne[0], q.ne[2], q.ne[1], q.ne[3]])?;
            ordered_f32_result(t)
        }
        sys::GGML_OP_SSM_CONV => {
            max_srcs(2)?;
            let (sx, c) = (src(0)?, src(1)?);
            type_in("sx", sx, &[F32])?;
            type_in("c", c, &[F32])?;
            need(sx.ne[3] == 1 && c.ne[2] == 1 && c.ne[3] == 1 && sx.ne[1] == c.ne[1] && sx.ne[0] >= c.ne[0] - 1 && c.ne[0] >= 1, || {
                format!("ssm_conv of {} with {}", desc(sx), desc(c))
            })?;
            need(sx.nb[0] == 4 && c.nb[0] == 4 && sx.nb[1] == sx.ne[0] as usize * 4 && c.nb[1] == c.ne[0] as usize * 4, || {
                format!("ssm_conv: {} and {} need dense rows", desc(sx), desc(c))
            })?;
            type_in("result", t, &[F32])?;
            shape("result", t, [c.ne[1], sx.ne[0] - c.ne[0] + 1, sx.ne[2], 1])?;
            need_contiguous("result", t)
        }
        sys::GGML_OP_GATED_DELTA_NET => {
            max_srcs(6)?;
            let (q, k, v, g, beta, s) = (src(0)?, src(1)?, src(2)?, src(3)?, src(4)?, src(5)?);
            for (n, x) in [("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("state", s)] {
                type_in(n, x, &[F32])?;
            }
            for (n, x) in [("q", q), ("k", k), ("v", v)] {
                need_contiguous_rows(n, x)?;
            }
            for (n, x) in [("g", g), ("beta", beta), ("state", s)] {
                need_contiguous(n, x)?;
            }
            let [sv, h, n_tok, n_seq] = v.ne;
            for (n, x) in [("q", q), ("k", k)] {
                need(x.ne[0] == sv && x.ne[1] > 0 && h % x.ne[1] == 0 && x.ne[2] == n_tok && x.ne[3] == n_seq, || {
                    format!("{n} {} does not go with v {}", desc(x), desc(v))
                })?;
            }
            need((g.ne[0] == 1 || g.ne[0] == sv) && g.ne[1] == h && g.ne[2] == n_tok && g.ne[3] == n_seq, || {
                format!("g {} does not go with v {}", desc(g), desc(v))
            })?;
            need(beta.ne == [1, h, n_tok, n_seq], || format!("beta {} does not go with v {}", desc(beta), desc(v)))?;
            need(s.ne == [sv, sv, h, n_seq], || format!("state {} does not go with v {}", desc(s), desc(v)))?;
            let kk = param_i32(t, 0) as i64;
            need((1..=64).contains(&kk), || format!("{kk} state snapshots"))?;
            type_in("result", t, &[F32])?;
            shape("result", t, [sv * h, n_tok * n_seq + kk * sv * n_seq, 1, 1])?;
            need_contiguous("result", t)
        }
        _ => fail(format!("op {} is not served by this server", op_name(op))),
    }
}

fn unary_like(t: &T, a: &T, types: &[u32]) -> R {
    type_in("a", a, types)?;
    need(ty(t) == ty(a), || format!("result {} must have a's type", desc(t)))?;
    same_shape("result and a", t, a)?;
    need_contiguous_1("a", a)?;
    need_contiguous_1("result", t)?;
    result_layout(t, a)
}

fn matmul_types(a: &T, b: &T) -> R {
    let (ta, tb) = (ty(a), ty(b));
    need(has_vec_dot(ta), || format!("a {} cannot be multiplied", desc(a)))?;
    let vd = vec_dot_type(ta);
    need(tb == vd || (tb == F32 && has_from_float(vd)), || format!("b {} cannot be multiplied with a {}", desc(b), desc(a)))?;
    need(a.nb[0] == esize(a) && b.nb[0] == esize(b), || format!("{} and {} need dense rows", desc(a), desc(b)))?;
    need(a.ne[0] % blck(a) == 0 && a.ne[0] % unsafe { sys::ggml_blck_size(vd as sys::ggml_type) } == 0, || {
        format!("rows of {} are not whole blocks", desc(a))
    })
}

fn ordered_f32_result(t: &T) -> R {
    need(t.nb[0] == 4 && t.nb[0] <= t.nb[1] && t.nb[1] <= t.nb[2] && t.nb[2] <= t.nb[3], || {
        format!("result {} has strides {:?}", desc(t), t.nb)
    })
}

/// The type pairs ggml's CPU copy kernel handles.
fn copy_types(a: &T, t: &T) -> R {
    let (ta, tt) = (ty(a), ty(t));
    let float = |x: u32| x == F32 || x == F16 || x == BF16;
    if ta == tt {
        if blck(a) > 1 {
            need(contiguous(a) && contiguous(t), || format!("copying quantized {} needs contiguous tensors", desc(a)))?;
        }
        return Ok(());
    }
    if float(ta) && float(tt) || (ta == F32 && tt == I32) || (ta == I32 && tt == F32) {
        return Ok(());
    }
    if ta == F32 && has_from_float(tt) {
        need(contiguous(t) && a.nb[0] == 4, || format!("quantizing {} into {} needs a contiguous result", desc(a), desc(t)))?;
        return need(t.ne[0] % blck(t) == 0, || format!("{} rows are not whole blocks", desc(t)));
    }
    if tt == F32 && has_to_float(ta) {
        return need(contiguous(a) && contiguous(t), || format!("dequantizing {} needs contiguous tensors", desc(a)));
    }
    fail(format!("cannot copy {} to {}", desc(a), desc(t)))
}

pub fn op_name(op: u32) -> String {
    if op < sys::GGML_OP_COUNT as u32 {
        unsafe { std::ffi::CStr::from_ptr(sys::ggml_op_name(op as sys::ggml_op)) }.to_string_lossy().into_owned()
    } else {
        format!("#{op}")
    }
}
