//! Shape, layout and view ops: reshape, view, permute, cont, concat, repeat,
//! pad, slice, dup.
//!
//! Views (view, permute, slice with step 1 or along dims > 0, reshape of a
//! contiguous tensor) share the memory of their source; every view is
//! checked to lie inside the memory of the tensor that owns it (the root of
//! the view chain), so no kernel can read or write outside it.

use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

pub(crate) fn type_size(t: sys::ggml_type) -> usize {
    unsafe { sys::ggml_type_size(t) }
}

pub(crate) fn block_size(t: sys::ggml_type) -> i64 {
    unsafe { sys::ggml_blck_size(t) }
}

/// `nb[0]` is the element (block) size: ggml's copy kernels need it for
/// quantized tensors (a permuted quantized tensor has no such rows).
pub(crate) fn dense_rows(t: Tensor) -> bool {
    t.nb()[0] == type_size(t.dtype())
}

/// The tensor that owns `t`'s memory and `t`'s byte offset inside it.
pub(crate) fn root_of(t: Tensor) -> (Tensor, usize) {
    let mut p = t;
    let mut offs = 0usize;
    loop {
        let r = p.raw();
        match unsafe { Tensor::from_raw(r.view_src) } {
            // ggml stores view offsets relative to the root already, and
            // view_src is always the root; the loop is only defensive.
            Some(src) => {
                offs += r.view_offs;
                p = src;
            }
            None => return (p, offs),
        }
    }
}

/// Checks that a view of `a` with byte `offset` (relative to `a`'s data),
/// shape `ne` (each ≥ 1) and byte strides `nb` stays inside the memory of
/// `a`'s root, that its strides fit the type's element/block size, and that
/// ggml's own size rule for views holds (so its constructor cannot assert).
pub(crate) fn check_view(op: &str, a: Tensor, offset: usize, ne: [i64; 4], nb: [usize; 4]) -> Result<()> {
    let t = a.dtype();
    let ts = type_size(t);
    let bs = block_size(t);
    let describe = || format!("offset {offset}, ne {ne:?}, nb {nb:?}");
    if ne.iter().any(|&d| d < 0) {
        return Err(Error::shape(format!("{op}: invalid view shape {ne:?} of {}", a.describe())));
    }
    // A view without elements (a 0 in its shape) spans no bytes and is
    // never read: ggml places it at any offset (Ollama's MoE layers take
    // expert i's rows of an empty batch at i times the row stride).
    let empty = ne.contains(&0);
    if bs > 1 {
        if ne[0] % bs != 0 {
            return Err(Error::shape(format!(
                "{op}: dim 0 ({}) of a view of {} must be a multiple of the {} block size {bs}",
                ne[0],
                a.describe(),
                a.type_name()
            )));
        }
        if nb[0] != ts {
            return Err(Error::shape(format!(
                "{op}: a view of quantized {} must have contiguous blocks along dim 0 ({})",
                a.describe(),
                describe()
            )));
        }
    }
    let (root, base) = root_of(a);
    let start = base as u128 + offset as u128;
    if start % ts as u128 != 0 || nb.iter().any(|&s| s % ts != 0) {
        return Err(Error::shape(format!(
            "{op}: offset and strides of a view of {} must be multiples of the {} element size {ts} ({})",
            a.describe(),
            a.type_name(),
            describe()
        )));
    }
    if empty {
        return Ok(());
    }
    // Bytes the view spans (ggml_nbytes' rule) and the bytes ggml's
    // constructor assumes (dense size); both must fit in the root.
    let mut extent: u128 = if bs == 1 {
        ts as u128 + (ne[0] as u128 - 1) * nb[0] as u128
    } else {
        (ne[0] / bs) as u128 * ts as u128
    };
    for i in 1..4 {
        extent += (ne[i] as u128 - 1) * nb[i] as u128;
    }
    let dense = (ne[0] / bs) as u128 * ts as u128 * ne[1] as u128 * ne[2] as u128 * ne[3] as u128;
    let limit = root.nbytes() as u128;
    if start + extent > limit {
        return Err(Error::shape(format!(
            "{op}: view out of bounds: {} of {} spans bytes {start}..{} of its memory, which has {limit} bytes",
            describe(),
            a.describe(),
            start + extent
        )));
    }
    if start + dense > limit {
        return Err(Error::shape(format!(
            "{op}: view too large: {} of {} holds {dense} bytes of elements from byte {start}, more than the {limit} bytes of its memory",
            describe(),
            a.describe()
        )));
    }
    Ok(())
}

impl Context {
    /// Checks and makes a view of `a`; `nb[0]` other than the element size
    /// (a view of a permuted tensor) is set on the result.
    pub(crate) fn make_view(
        &mut self,
        op: &str,
        a: Tensor,
        offset: usize,
        ne: [i64; 4],
        nb: [usize; 4],
        n_dims: usize,
    ) -> Result<Tensor> {
        check_view(op, a, offset, ne, nb)?;
        let ctx = self.room(op, 1)?;
        let (p, ap) = (ctx, a.as_ptr());
        let r = unsafe {
            match n_dims {
                1 => sys::ggml_view_1d(p, ap, ne[0], offset),
                2 => sys::ggml_view_2d(p, ap, ne[0], ne[1], nb[1], offset),
                3 => sys::ggml_view_3d(p, ap, ne[0], ne[1], ne[2], nb[1], nb[2], offset),
                _ => sys::ggml_view_4d(p, ap, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset),
            }
        };
        let v = self.made(op, r)?;
        if nb[0] != type_size(a.dtype()) {
            // Only reached for element types (check_view requires dense
            // blocks for quantized ones); the extent was checked with it.
            unsafe { (*v.as_ptr()).nb[0] = nb[0] };
        }
        Ok(v)
    }

    /// `a` with a new shape (1 to 4 dims, one of them may be -1: inferred
    /// from the element count, as Ollama's `inferShape`). A contiguous `a`
    /// gives a view; a non-contiguous one is copied into the new shape (as
    /// Ollama's `Reshape` does through `Contiguous`).
    pub fn reshape(&mut self, a: Tensor, shape: &[i64]) -> Result<Tensor> {
        const OP: &str = "reshape";
        let (ne, n) = infer_shape(OP, a, shape)?;
        if !a.is_contiguous() {
            return self.cont_shape(OP, a, ne);
        }
        let ctx = self.room(OP, 1)?;
        let p = a.as_ptr();
        let r = unsafe {
            match n {
                1 => sys::ggml_reshape_1d(ctx, p, ne[0]),
                2 => sys::ggml_reshape_2d(ctx, p, ne[0], ne[1]),
                3 => sys::ggml_reshape_3d(ctx, p, ne[0], ne[1], ne[2]),
                _ => sys::ggml_reshape_4d(ctx, p, ne[0], ne[1], ne[2], ne[3]),
            }
        };
        self.made(OP, r)
    }

    /// A view of `a`'s memory: `offset` bytes from `a`'s data, `ne` elements
    /// per dimension (1 to 4 dims, each ≥ 0; a 0 gives a view without
    /// elements, such as no rows of a batch) and `nb` byte strides for dims
    /// 1.. (`ne.len() - 1` of them; dim 0 is dense). The view must lie inside
    /// the memory `a` belongs to (for a view of a view: the whole tensor that
    /// owns the memory) and its offset and strides must be multiples of the
    /// element (block) size.
    pub fn view(&mut self, a: Tensor, offset: usize, ne: &[i64], nb: &[usize]) -> Result<Tensor> {
        const OP: &str = "view";
        let n = ne.len();
        let shape = check::shape_arg(OP, ne, true)?;
        if nb.len() + 1 != n {
            return Err(Error::shape(format!(
                "{OP}: a {n}-dimensional view takes {} strides (dims 1..), got {}",
                n.saturating_sub(1),
                nb.len()
            )));
        }
        let mut strides = [0usize; 4];
        strides[0] = type_size(a.dtype());
        for i in 1..4 {
            // Dims beyond n have one element; their stride does not matter
            // (ggml sets its own).
            strides[i] = if i < n { nb[i - 1] } else { strides[i - 1] };
        }
        self.make_view(OP, a, offset, shape, strides, n)
    }

    /// Reorders the axes of `a` (a view): source axis `i` moves to position
    /// `order[i]`. `order` must be a permutation of 0..3; a quantized tensor
    /// must keep axis 0 in place.
    pub fn permute(&mut self, a: Tensor, order: [i32; 4]) -> Result<Tensor> {
        const OP: &str = "permute";
        let mut seen = [false; 4];
        for &o in &order {
            if !(0..4).contains(&o) || std::mem::replace(&mut seen[o as usize], true) {
                return Err(Error::shape(format!(
                    "{OP}: order {order:?} is not a permutation of 0..3 (for {})",
                    a.describe()
                )));
            }
        }
        if a.is_quantized() && order[0] != 0 {
            return Err(Error::shape(format!(
                "{OP}: axis 0 of quantized {} cannot move (order {order:?})",
                a.describe()
            )));
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_permute(ctx, a.as_ptr(), order[0], order[1], order[2], order[3]) })
    }

    /// A contiguous copy of `a`. An empty `shape` keeps `a`'s shape; else
    /// the copy gets `shape` (1 to 4 dims, one may be -1), same element
    /// count, elements in `a`'s logical order.
    pub fn cont(&mut self, a: Tensor, shape: &[i64]) -> Result<Tensor> {
        const OP: &str = "cont";
        if shape.is_empty() {
            copyable(OP, a)?;
            let ctx = self.room(OP, 1)?;
            return self.made(OP, unsafe { sys::ggml_cont(ctx, a.as_ptr()) });
        }
        let (ne, _) = infer_shape(OP, a, shape)?;
        self.cont_shape(OP, a, ne)
    }

    /// Copy of `a` into a new contiguous tensor of shape `ne`.
    fn cont_shape(&mut self, op: &str, a: Tensor, ne: [i64; 4]) -> Result<Tensor> {
        copyable(op, a)?;
        if a.is_quantized() && !a.is_contiguous() && a.ne() != ne {
            // ggml copies quantized blocks between different shapes only
            // when both sides are contiguous: copy first, then reshape.
            let ctx = self.room(op, 2)?;
            let c = self.made(op, unsafe { sys::ggml_cont(ctx, a.as_ptr()) })?;
            return self.made(op, unsafe { sys::ggml_reshape_4d(ctx, c.as_ptr(), ne[0], ne[1], ne[2], ne[3]) });
        }
        let ctx = self.room(op, 1)?;
        self.made(op, unsafe { sys::ggml_cont_4d(ctx, a.as_ptr(), ne[0], ne[1], ne[2], ne[3]) })
    }

    /// `a` and `b` joined along `dim` (0..3): same type, equal sizes in the
    /// other dims. A new tensor.
    pub fn concat(&mut self, a: Tensor, b: Tensor, dim: i64) -> Result<Tensor> {
        const OP: &str = "concat";
        let d = check::axis(OP, dim)?;
        check::same_dtype(OP, a, b)?;
        let (na, nb) = (a.ne(), b.ne());
        if (0..4).any(|i| i != d && na[i] != nb[i]) {
            return Err(Error::shape(format!(
                "{OP}: {} and {} differ outside dim {d}",
                a.describe(),
                b.describe()
            )));
        }
        let mut ne = na;
        ne[d] = na[d] + nb[d];
        check::shape_arg(OP, &ne, true)?;
        // The CPU kernel copies element by element for these types and row
        // by row (whole blocks) for every other type.
        let elementwise = [
            sys::GGML_TYPE_F32,
            sys::GGML_TYPE_I32,
            sys::GGML_TYPE_F16,
            sys::GGML_TYPE_BF16,
            sys::GGML_TYPE_I16,
            sys::GGML_TYPE_I8,
        ];
        if !elementwise.contains(&a.dtype()) {
            for (what, t) in [("a", a), ("b", b)] {
                if !unsafe { sys::ggml_is_contiguous_rows(t.as_ptr()) } {
                    return Err(Error::shape(format!(
                        "{OP}: {what} must have contiguous rows, got {}",
                        t.describe()
                    )));
                }
            }
        }
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_concat(ctx, a.as_ptr(), b.as_ptr(), d as i32) })
    }

    /// The whole of `a` tiled `n` (≥ 1) times along `dim` (blocks, not
    /// interleaved): `ne[dim]` becomes `ne[dim] * n`. F32, F16, BF16, I32;
    /// `a`'s rows must be dense (`nb[0]` the element size). A new tensor.
    pub fn repeat(&mut self, a: Tensor, dim: i64, n: i64) -> Result<Tensor> {
        const OP: &str = "repeat";
        let d = check::axis(OP, dim)?;
        if n < 1 {
            return Err(Error::shape(format!("{OP}: count must be at least 1, got {n} (for {})", a.describe())));
        }
        check::dtype_in(OP, "a", a, &[check::F32, check::F16, check::BF16, check::I32])?;
        if !dense_rows(a) {
            return Err(Error::shape(format!(
                "{OP}: a must have dense rows (make it contiguous first), got {}",
                a.describe()
            )));
        }
        let mut ne = a.ne();
        ne[d] = ne[d]
            .checked_mul(n)
            .ok_or_else(|| Error::shape(format!("{OP}: {} repeated {n} times is too large", a.describe())))?;
        check::shape_arg(OP, &ne, true)?;
        self.room(OP, 2)?;
        let template = self.new_tensor(OP, a.dtype(), ne)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_repeat(ctx, a.as_ptr(), template.as_ptr()) })
    }

    /// `a` (F32) with `p[i]` zeros appended at the end of dim `i`
    /// (`p[i] ≥ 0`). A new tensor. (Ollama's Pad also refuses `p[3] != 0`
    /// for CUDA's sake; the CPU kernel takes it.)
    pub fn pad(&mut self, a: Tensor, p: [i32; 4]) -> Result<Tensor> {
        const OP: &str = "pad";
        if p.iter().any(|&x| x < 0) {
            return Err(Error::shape(format!("{OP}: padding must be non-negative, got {p:?} for {}", a.describe())));
        }
        check::dtype_in(OP, "a", a, &[check::F32])?;
        let ne = a.ne();
        let mut out = [0i64; 4];
        for i in 0..4 {
            out[i] = ne[i] + p[i] as i64;
        }
        check::shape_arg(OP, &out, true)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_pad(ctx, a.as_ptr(), p[0], p[1], p[2], p[3]) })
    }

    /// Ollama's `Slice`: along `dim`, elements `low, low+step, …` below
    /// `high`, with Ollama's validation (`0 ≤ dim < 4`, `low ≥ 0`,
    /// `high ≤ ne[dim]`, `low < high`, `step ≥ 1`) and count (`high - low`
    /// for step 1, else `(high - low + 1) / step`, which must not be 0).
    /// A view, except for step > 1 along dim 0, which is a contiguous copy.
    /// Quantized tensors: along dim 0 only step 1 with `low` and `high - low`
    /// multiples of the block size.
    pub fn slice(&mut self, a: Tensor, dim: i64, low: i64, high: i64, step: i64) -> Result<Tensor> {
        const OP: &str = "slice";
        if !(0..4).contains(&dim) {
            return Err(Error::shape(format!("{OP}: invalid dimension {dim} (0 to 3) for {}", a.describe())));
        }
        let d = dim as usize;
        let (ne, nb) = (a.ne(), a.nb());
        if low < 0 || high > ne[d] || low >= high || step < 1 {
            return Err(Error::shape(format!(
                "{OP}: invalid slice parameters low={low} high={high} step={step} for dim {d} of {}",
                a.describe()
            )));
        }
        let count = if step == 1 { high - low } else { (high - low + 1) / step };
        if count == 0 {
            return Err(Error::shape(format!(
                "{OP}: step {step} selects no elements from {low}..{high} of dim {d} of {} (count (high-low+1)/step is 0)",
                a.describe()
            )));
        }
        let ts = type_size(a.dtype());
        let bs = block_size(a.dtype());
        if d == 0 && bs > 1 {
            if step != 1 || low % bs != 0 || count % bs != 0 {
                return Err(Error::shape(format!(
                    "{OP}: dim 0 of quantized {} can only be sliced with step 1 at multiples of the block size {bs} (low={low} high={high} step={step})",
                    a.describe()
                )));
            }
            let mut out = ne;
            out[0] = count;
            let mut strides = nb;
            strides[0] = ts;
            return self.make_view(OP, a, (low / bs) as usize * ts, out, strides, 4);
        }
        if d == 0 && step > 1 {
            // Ollama's trick: a 4-D view [1, count, ne1, ne2*ne3] stepping
            // over dim 0 (dims 2 and 3 merged), then a copy into
            // [count, ne1, ne2, ne3]. The merge needs dims 2 and 3 to be
            // laid out together; copy `a` first when they are not.
            let mergeable = ne[3] == 1 || nb[3] == nb[2] * ne[2] as usize;
            let src = if mergeable { a } else { self.cont(a, &[])? };
            let (sne, snb) = (src.ne(), src.nb());
            let vne = [1, count, sne[1], sne[2] * sne[3]];
            let vnb = [ts, snb[0] * step as usize, snb[1], snb[2]];
            let v = self.make_view(OP, src, low as usize * snb[0], vne, vnb, 4)?;
            let ctx = self.room(OP, 1)?;
            return self.made(OP, unsafe { sys::ggml_cont_4d(ctx, v.as_ptr(), count, sne[1], sne[2], sne[3]) });
        }
        let mut out = ne;
        out[d] = count;
        let mut strides = nb;
        strides[d] = nb[d]
            .checked_mul(step as usize)
            .ok_or_else(|| Error::shape(format!("{OP}: step {step} is too large for {}", a.describe())))?;
        let offset = (low as usize)
            .checked_mul(nb[d])
            .ok_or_else(|| Error::shape(format!("{OP}: offset too large for {}", a.describe())))?;
        self.make_view(OP, a, offset, out, strides, 4)
    }

    /// A contiguous copy of `a` (same type and shape).
    pub fn dup(&mut self, a: Tensor) -> Result<Tensor> {
        const OP: &str = "dup";
        copyable(OP, a)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_dup(ctx, a.as_ptr()) })
    }
}

/// ggml copies a non-contiguous quantized tensor only block row by block
/// row: dim 0 must hold dense blocks.
fn copyable(op: &str, a: Tensor) -> Result<()> {
    if a.is_quantized() && !a.is_contiguous() && !dense_rows(a) {
        return Err(Error::shape(format!(
            "{op}: cannot copy quantized {} whose blocks are not dense along dim 0",
            a.describe()
        )));
    }
    Ok(())
}

/// Ollama's `inferShape` (one -1 resolved from the element count) plus the
/// checks ggml's reshape/cont asserts: 1 to 4 dims, same element count,
/// dim 0 whole blocks for quantized types. Returns the 4-D shape and the
/// dimension count.
fn infer_shape(op: &str, a: Tensor, shape: &[i64]) -> Result<([i64; 4], usize)> {
    let n = shape.len();
    if n == 0 || n > 4 {
        return Err(Error::shape(format!(
            "{op}: unsupported number of dimensions {n} (1 to 4), shape {shape:?} for {}",
            a.describe()
        )));
    }
    let total = a.nelements();
    let inferring = shape.contains(&-1);
    let mut rest = total;
    let mut inferred: Option<usize> = None;
    for (i, &d) in shape.iter().enumerate() {
        match d {
            -1 => {
                if inferred.is_some() {
                    return Err(Error::shape(format!(
                        "{op}: only one dimension can be inferred, shape {shape:?} for {}",
                        a.describe()
                    )));
                }
                inferred = Some(i);
            }
            // A zero-element `a` may take a shape with a 0 in it, but not
            // one that also infers a dim (Ollama's `inferShape`).
            0 if inferring || total != 0 => {
                return Err(Error::shape(format!(
                    "{op}: dimension cannot be zero, shape {shape:?} for {}",
                    a.describe()
                )))
            }
            0 => {}
            d if d < 0 => {
                return Err(Error::shape(format!(
                    "{op}: invalid dimension {d} in shape {shape:?} for {}",
                    a.describe()
                )))
            }
            d => {
                if inferring {
                    if rest % d != 0 {
                        return Err(Error::shape(format!(
                            "{op}: cannot infer dimension, shape {shape:?} for {}",
                            a.describe()
                        )));
                    }
                    rest /= d;
                }
            }
        }
    }
    let mut buf = [0i64; 4];
    buf[..n].copy_from_slice(shape);
    let resolved = &mut buf[..n];
    if let Some(i) = inferred {
        resolved[i] = rest;
    }
    let ne = check::shape_arg(op, resolved, total == 0)?;
    if ne.iter().product::<i64>() != total {
        return Err(Error::shape(format!(
            "{op}: cannot reshape {} ({total} elements) to {resolved:?}",
            a.describe()
        )));
    }
    let bs = block_size(a.dtype());
    if bs > 1 && ne[0] % bs != 0 {
        return Err(Error::shape(format!(
            "{op}: dim 0 of {resolved:?} must be a multiple of the {} block size {bs} (for {})",
            a.type_name(),
            a.describe()
        )));
    }
    Ok((ne, n))
}
