//! Differential tests of the linear-algebra and miscellaneous ops (softplus,
//! sigmoid_out, silu_alpha_limit, fill, cumsum, variance, stddev, diag, tri,
//! solve_tri, pad_ext, set_inplace, repeat_4d) against naive f64
//! references over random inputs, several shapes, f32/f16 where the op
//! takes it and non-contiguous inputs where allowed; bad-input tests for
//! every op (the context stays usable); the C ABI. Tolerances are stated
//! per test.
mod common;
#[path = "common/capi.rs"]
mod capi_base;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

// ---- helpers ------------------------------------------------------------------



fn dims(t: Tensor) -> [usize; 4] {
    t.ne().map(|d| d as usize)
}
fn nelem(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}
fn rounded(dtype: u32, v: &[f32]) -> Vec<f32> {
    if dtype == F16 {
        v.iter().map(|&x| f16_round(x)).collect()
    } else {
        v.to_vec()
    }
}
fn values(rng: &mut Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| lo + (rng.f32() + 1.0) * 0.5 * (hi - lo)).collect()
}
fn tn(dtype: u32) -> &'static str {
    ggml_rs::ml::tensor::type_name(dtype)
}

/// Checks |got - want| <= atol + rtol*|want| (want in f64).
fn close64(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = ((g as f64) - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan()) || g as f64 == w;
        assert!(ok, "{what}: element {i}: got {g}, want {w} (atol {atol}, rtol {rtol})");
    }
}

/// Applies an op to every row (dim 0) of a contiguous `[n0, rows…]` buffer.
fn per_row(v: &[f32], n0: usize, f: impl Fn(&[f32]) -> Vec<f64>) -> Vec<f64> {
    v.chunks(n0).flat_map(|r| f(r)).collect()
}

const SHAPES: &[&[i64]] = &[&[7], &[67, 3], &[3, 4, 5], &[2, 3, 2, 3], &[1, 1, 1, 5]];

// ---- softplus, sigmoid_out -------------------------------------------------------

fn softplus_ref(x: f64) -> f64 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}
fn sigmoid_ref(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

type Unary = fn(&mut Context, Tensor) -> ggml_rs::ml::Result<Tensor>;

#[test]
fn softplus_and_sigmoid_out_match_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(601);
    // f32 softplus = logf(1 + expf(x)): rounding 1 + e^x costs up to 6e-8
    // absolute (it dominates for x << 0, where the result is e^x), logf
    // and expf about 1 ulp each: atol 2e-7, rtol 5e-7. sigmoid: three
    // roundings: rtol 5e-7. f16: inputs rounded on upload (the reference
    // uses the rounded values), the result rounded to f16 once: rtol 1e-3.
    let ops: [(&str, Unary, fn(f64) -> f64); 2] =
        [("softplus", Context::softplus, softplus_ref), ("sigmoid_out", Context::sigmoid_out, sigmoid_ref)];
    let mut wants = Vec::new();
    for (name, f, r) in ops {
        for dt in [F32, F16] {
            for &shape in SHAPES {
                let xv = rounded(dt, &values(&mut rng, nelem(shape), -8.0, 8.0));
                let a = upload(&mut input, dt, shape, &xv);
                let out = f(&mut root, a).unwrap();
                assert_eq!((out.dtype(), out.ne()), (dt, a.ne()));
                wants.push((format!("{name} {} {shape:?}", tn(dt)), dt, out, xv.iter().map(|&x| r(x as f64)).collect::<Vec<_>>()));
            }
            // A permuted view (dim 0 kept in place).
            let xv = rounded(dt, &values(&mut rng, 5 * 4 * 3, -8.0, 8.0));
            let p = permute(&root, upload(&mut input, dt, &[5, 4, 3], &xv), [0, 2, 1, 3]);
            let out = f(&mut root, p).unwrap();
            wants.push((format!("{name} {} permuted", tn(dt)), dt, out, logical(p, &xv).iter().map(|&x| r(x as f64)).collect()));
        }
    }
    // softplus's linear branch above 20, and near it.
    let big = [19.5f32, 20.0, 20.5, 25.0, 60.0, 100.0];
    let a = upload(&mut input, F32, &[6], &big);
    wants.push(("softplus large".into(), F32, root.softplus(a).unwrap(), big.iter().map(|&x| softplus_ref(x as f64)).collect()));
    let outs: Vec<Tensor> = wants.iter().map(|w| w.2).collect();
    root.compute(&outs).unwrap();
    for (what, dt, out, want) in wants {
        let (atol, rtol) = if dt == F16 { (1e-6, 1e-3) } else { (2e-7, 5e-7) };
        close64(&what, &data::read_f32(out, "t").unwrap(), &want, atol, rtol);
    }
}

#[test]
fn softplus_and_sigmoid_out_reject_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[3, 4], &[0.0; 12]);
    let t = transpose(&root, a);
    let i = upload_i32(&mut input, &[4, 3], &[1; 12]);
    for (name, f) in [("softplus", Context::softplus as Unary), ("sigmoid_out", Context::sigmoid_out)] {
        let e = f(&mut root, t).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert_eq!(e.message, format!("{name}: a must have contiguous rows (dim 0 stride = element size), got f32[4,3] (non-contiguous)"));
        let e = f(&mut root, i).unwrap_err();
        assert_eq!((e.kind, e.message), (ErrorKind::DType, format!("{name}: a must be f32 or f16, got i32[4,3]")));
    }
    let out = root.softplus(a).unwrap();
    close64("softplus(0)", &eval(&mut root, out), &[2f64.ln(); 12], 1e-7, 1e-7);
}

// ---- silu_alpha_limit ------------------------------------------------------------

fn swiglu_oai_ref(a: f64, up: f64, alpha: f64, limit: f64) -> f64 {
    let x = a.min(limit);
    let y = up.clamp(-limit, limit);
    x / (1.0 + (-alpha * x).exp()) * (y + 1.0)
}

#[test]
fn silu_alpha_limit_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(602);
    // f32: alpha*x is rounded before expf (|alpha*x| <= 17: 1e-6 absolute
    // in the exponent, as much relative in the sigmoid), then expf, a divide
    // and two products of a few ulp each: rtol 2e-6, atol 1e-7 for results
    // near 0.
    let mut wants = Vec::new();
    for &(alpha, limit) in &[(1.702f32, 7.0f32), (1.0, f32::INFINITY), (0.5, 0.0), (2.0, 1.5)] {
        for &shape in SHAPES {
            let n = nelem(shape);
            let (av, uv) = (values(&mut rng, n, -10.0, 10.0), values(&mut rng, n, -10.0, 10.0));
            let a = upload(&mut input, F32, shape, &av);
            let up = upload(&mut input, F32, shape, &uv);
            let out = root.silu_alpha_limit(a, up, alpha, limit).unwrap();
            assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
            let want = av.iter().zip(&uv).map(|(&x, &y)| swiglu_oai_ref(x as f64, y as f64, alpha as f64, limit as f64)).collect::<Vec<_>>();
            wants.push((format!("alpha {alpha} limit {limit} {shape:?}"), out, want));
        }
        // Padded rows (a fixed row stride) for both operands.
        let (av, uv) = (values(&mut rng, 8 * 3 * 2, -10.0, 10.0), values(&mut rng, 8 * 3 * 2, -10.0, 10.0));
        let a = padded_rows(&root, upload(&mut input, F32, &[8, 3, 2], &av), 5);
        let up = padded_rows(&root, upload(&mut input, F32, &[8, 3, 2], &uv), 5);
        let out = root.silu_alpha_limit(a, up, alpha, limit).unwrap();
        let want = logical(a, &av)
            .iter()
            .zip(&logical(up, &uv))
            .map(|(&x, &y)| swiglu_oai_ref(x as f64, y as f64, alpha as f64, limit as f64))
            .collect();
        wants.push((format!("alpha {alpha} limit {limit} padded"), out, want));
    }
    root.compute(&wants.iter().map(|w| w.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in wants {
        close64(&what, &data::read_f32(out, "t").unwrap(), &want, 1e-7, 2e-6);
    }
}

#[test]
fn silu_alpha_limit_rejects_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[4, 3, 2], &[1.0; 24]);
    let up = upload(&mut input, F32, &[4, 3, 2], &[0.5; 24]);
    let h = upload(&mut input, F16, &[4, 3, 2], &[1.0; 24]);
    let short = upload(&mut input, F32, &[4, 3], &[1.0; 12]);
    let p = permute(&root, a, [0, 2, 1, 3]);
    let pu = upload(&mut input, F32, &[4, 2, 3], &[1.0; 24]);
    const OP: &str = "silu_alpha_limit";
    let cases: Vec<(Tensor, Tensor, f32, f32, ErrorKind, String)> = vec![
        (h, h, 1.0, 7.0, ErrorKind::DType, format!("{OP}: a must be f32, got f16[4,3,2]")),
        (a, h, 1.0, 7.0, ErrorKind::DType, format!("{OP}: up must be f32, got f16[4,3,2]")),
        (a, short, 1.0, 7.0, ErrorKind::Shape, format!("{OP}: shapes differ: f32[4,3,2] vs f32[4,3]")),
        (p, pu, 1.0, 7.0, ErrorKind::Shape, format!("{OP}: a must have contiguous rows laid out at a fixed stride (dims 1 to 3 not permuted), got f32[4,2,3] (non-contiguous)")),
        (pu, p, 1.0, 7.0, ErrorKind::Shape, format!("{OP}: up must have contiguous rows laid out at a fixed stride (dims 1 to 3 not permuted), got f32[4,2,3] (non-contiguous)")),
        (a, up, f32::NAN, 7.0, ErrorKind::InvalidArgument, format!("{OP}: alpha must be finite, got NaN")),
        (a, up, f32::INFINITY, 7.0, ErrorKind::InvalidArgument, format!("{OP}: alpha must be finite, got inf")),
        (a, up, 1.0, -1.0, ErrorKind::InvalidArgument, format!("{OP}: limit must be >= 0, got -1")),
        (a, up, 1.0, f32::NAN, ErrorKind::InvalidArgument, format!("{OP}: limit must be >= 0, got NaN")),
    ];
    for (x, y, alpha, limit, kind, msg) in cases {
        let e = root.silu_alpha_limit(x, y, alpha, limit).unwrap_err();
        assert_eq!((e.kind, e.message), (kind, msg));
    }
    let out = root.silu_alpha_limit(a, up, 1.0, 7.0).unwrap();
    close64("after errors", &eval(&mut root, out), &[swiglu_oai_ref(1.0, 0.5, 1.0, 7.0); 24], 1e-7, 2e-6);
}

// ---- fill ----------------------------------------------------------------------------

#[test]
fn fill_out_of_place_and_in_place() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    for dt in [F32, F16] {
        for &shape in SHAPES {
            let n = nelem(shape);
            let orig: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let a = upload(&mut input, dt, shape, &orig);
            let b = upload(&mut input, dt, shape, &orig);
            let v = 0.1f32; // not exact in f16
            let out = root.fill(a, v).unwrap();
            let ins = root.fill_inplace(b, -2.5).unwrap();
            assert_eq!((out.dtype(), out.ne(), ins.dtype(), ins.ne()), (dt, a.ne(), dt, b.ne()));
            root.compute(&[out, ins]).unwrap();
            let fv = if dt == F16 { f16_round(v) } else { v };
            // Exact: the value converted to the type once.
            assert_eq!(data::read_f32(out, "t").unwrap(), vec![fv; n], "fill {} {shape:?}", tn(dt));
            assert_eq!(data::read_f32(ins, "t").unwrap(), vec![-2.5; n], "fill_inplace {} {shape:?}", tn(dt));
            // Out of place leaves a alone; in place overwrote b itself.
            assert_eq!(data::read_f32(a, "t").unwrap(), rounded(dt, &orig), "fill left a");
            assert_eq!(data::read_f32(b, "t").unwrap(), vec![-2.5; n], "fill_inplace wrote b");
            assert_eq!(unsafe { (*ins.as_ptr()).view_src }, b.as_ptr(), "the in-place result is a view of b");
        }
    }
    // Ollama's use (qwen3next): Zeros, then Fill(1), then Tri.
    let z = input.zeros(F32, &[4, 4]).unwrap();
    let ones = root.fill_inplace(z, 1.0).unwrap();
    let low = root.tri(ones, 3).unwrap();
    let want: Vec<f32> = (0..16).map(|i| if i % 4 < i / 4 { 1.0 } else { 0.0 }).collect();
    assert_eq!(eval(&mut root, low), want);
}

#[test]
fn fill_rejects_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[3, 4], &[0.0; 12]);
    let p = permute(&root, upload(&mut input, F32, &[3, 4, 2], &[0.0; 24]), [0, 2, 1, 3]);
    let i = upload_i32(&mut input, &[4, 3], &[1; 12]);
    let t = transpose(&root, upload(&mut input, F32, &[3, 1], &[0.0; 3])); // [1,3]: contiguous per ggml, dim 0 strided
    for (name, inplace) in [("fill", false), ("fill_inplace", true)] {
        let f = |c: &mut Context, x: Tensor| if inplace { c.fill_inplace(x, 1.0) } else { c.fill(x, 1.0) };
        let e = f(&mut root, i).unwrap_err();
        assert_eq!((e.kind, e.message), (ErrorKind::DType, format!("{name}: a must be f32 or f16, got i32[4,3]")));
        let e = f(&mut root, p).unwrap_err();
        assert_eq!((e.kind, e.message), (ErrorKind::Shape, format!("{name}: a must be contiguous, got f32[3,2,4] (non-contiguous)")));
        let e = f(&mut root, t).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert!(e.message.starts_with(&format!("{name}: a must have contiguous rows")), "{}", e.message);
    }
    let out = root.fill(a, 3.0).unwrap();
    assert_eq!(eval(&mut root, out), vec![3.0; 12]);
}

// ---- cumsum, variance, stddev -----------------------------------------------------

/// f32 sequential-sum error bound for a prefix: (i+1) roundings of partial
/// sums, each at most 2^-24 * Σ|x| so far; doubled for margin.
fn cumsum_check(what: &str, got: &[f32], x: &[f32], n0: usize) {
    for (r, (g, xr)) in got.chunks(n0).zip(x.chunks(n0)).enumerate() {
        let (mut s, mut abs) = (0f64, 0f64);
        for i in 0..n0 {
            s += xr[i] as f64;
            abs += (xr[i] as f64).abs();
            let lim = 2.0 * (i + 1) as f64 * abs * 2f64.powi(-24);
            assert!(((g[i] as f64) - s).abs() <= lim, "{what}: row {r} elem {i}: got {}, want {s} (limit {lim})", g[i]);
        }
    }
}

#[test]
fn cumsum_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(603);
    let mut outs = Vec::new();
    for &shape in SHAPES.iter().chain(&[&[300i64, 2][..]]) {
        let xv = rng.vec(nelem(shape));
        let a = upload(&mut input, F32, shape, &xv);
        let out = root.cumsum(a).unwrap();
        assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
        outs.push((format!("cumsum {shape:?}"), out, xv, shape[0] as usize));
    }
    let xv = rng.vec(6 * 4 * 3);
    let p = permute(&root, upload(&mut input, F32, &[6, 4, 3], &xv), [0, 2, 1, 3]);
    outs.push(("cumsum permuted".into(), root.cumsum(p).unwrap(), logical(p, &xv), 6));
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, x, n0) in outs {
        cumsum_check(&what, &data::read_f32(out, "t").unwrap(), &x, n0);
    }
    // Exact small case.
    let a = upload(&mut input, F32, &[4, 2], &[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 8.0]);
    let out = root.cumsum(a).unwrap();
    assert_eq!(eval(&mut root, out), vec![1.0, 3.0, 6.0, 10.0, -1.0, -0.5, -0.25, 7.75]);
}

fn variance_ref(r: &[f32]) -> f64 {
    let n = r.len() as f64;
    let mean = r.iter().map(|&x| x as f64).sum::<f64>() / n;
    r.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n
}

#[test]
fn variance_and_stddev_match_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(604);
    // f32 two-pass variance over n0 <= 130 values in [-0.5, 1.5): mean,
    // centring, squares and sums each round in f32: relative error about
    // n0 * 2^-24 ≈ 8e-6 at worst; rtol 2e-5, atol 1e-7 (rows of one value
    // give 0 exactly). Stddev halves the relative error, plus one sqrt.
    let mut outs = Vec::new();
    let shapes: Vec<&[i64]> = SHAPES.iter().copied().chain([&[130i64, 3][..], &[1, 4][..]]).collect();
    for shape in shapes {
        let xv: Vec<f32> = rng.vec(nelem(shape)).iter().map(|x| x + 0.5).collect();
        let a = upload(&mut input, F32, shape, &xv);
        let (v, s) = (root.variance(a).unwrap(), root.stddev(a).unwrap());
        let want_ne = [1, a.ne()[1], a.ne()[2], a.ne()[3]];
        assert_eq!((v.dtype(), v.ne(), s.ne()), (F32, want_ne, want_ne));
        let var = per_row(&xv, shape[0] as usize, |r| vec![variance_ref(r)]);
        outs.push((format!("variance {shape:?}"), v, var.clone()));
        outs.push((format!("stddev {shape:?}"), s, var.iter().map(|v| v.sqrt()).collect()));
    }
    let xv = rng.vec(9 * 4 * 3);
    let p = permute(&root, upload(&mut input, F32, &[9, 4, 3], &xv), [0, 2, 1, 3]);
    let var = per_row(&logical(p, &xv), 9, |r| vec![variance_ref(r)]);
    outs.push(("variance permuted".into(), root.variance(p).unwrap(), var.clone()));
    outs.push(("stddev permuted".into(), root.stddev(p).unwrap(), var.iter().map(|v| v.sqrt()).collect()));
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        close64(&what, &data::read_f32(out, "t").unwrap(), &want, 1e-7, 2e-5);
    }
}

#[test]
fn reductions_reject_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[3, 4], &[1.0, 2.0, 3.0, 0.0, 0.0, 0.0, -1.0, 1.0, 3.0, 5.0, 5.0, 5.0]);
    let h = upload(&mut input, F16, &[3, 4], &[0.0; 12]);
    let t = transpose(&root, a);
    let empty = input.empty(F32, &[0]).unwrap();
    let ops: [(&str, Unary); 3] = [("cumsum", Context::cumsum), ("variance", Context::variance), ("stddev", Context::stddev)];
    for (name, f) in ops {
        let e = f(&mut root, h).unwrap_err();
        assert_eq!((e.kind, e.message), (ErrorKind::DType, format!("{name}: a must be f32, got f16[3,4]")));
        let e = f(&mut root, t).unwrap_err();
        assert_eq!((e.kind, e.message), (ErrorKind::Shape, format!("{name}: a must have contiguous rows (dim 0 stride = element size), got f32[4,3] (non-contiguous)")));
        if name != "cumsum" {
            let e = f(&mut root, empty).unwrap_err();
            assert_eq!((e.kind, e.message), (ErrorKind::Shape, format!("{name}: a is empty: f32[0]")));
        }
    }
    let v = root.variance(a).unwrap();
    let want = [2.0 / 3.0, 0.0, 8.0 / 3.0, 0.0];
    close64("variance after errors", &eval(&mut root, v), &want, 1e-7, 1e-6);
}

// ---- diag, tri ----------------------------------------------------------------------

#[test]
fn diag_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(605);
    let mut outs = Vec::new();
    for &shape in &[&[5i64][..], &[1][..], &[4, 1, 3][..], &[3, 1, 2, 2][..]] {
        let xv = rng.vec(nelem(shape));
        let a = upload(&mut input, F32, shape, &xv);
        let out = root.diag(a).unwrap();
        let ne = a.ne();
        assert_eq!(out.ne(), [ne[0], ne[0], ne[2], ne[3]]);
        let n = ne[0] as usize;
        let want: Vec<f32> = (0..n * n * (ne[2] * ne[3]) as usize)
            .map(|i| {
                let (c, r, m) = (i % n, (i / n) % n, i / (n * n));
                if c == r { xv[m * n + c] } else { 0.0 }
            })
            .collect();
        outs.push((format!("diag {shape:?}"), out, want));
    }
    // A padded vector: rows of a [6,1,3] view keeping 4 of 6 values.
    let xv = rng.vec(6 * 3);
    let v = padded_rows(&root, upload(&mut input, F32, &[6, 1, 3], &xv), 4);
    let lx = logical(v, &xv);
    let want: Vec<f32> = (0..4 * 4 * 3).map(|i| if i % 4 == (i / 4) % 4 { lx[(i / 16) * 4 + i % 4] } else { 0.0 }).collect();
    outs.push(("diag padded".into(), root.diag(v).unwrap(), want));
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        assert_eq!(data::read_f32(out, "t").unwrap(), want, "{what}");
    }
}

#[test]
fn tri_all_four_types() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(606);
    let mut outs = Vec::new();
    for &shape in &[&[4i64, 4][..], &[1, 1][..], &[5, 5, 2, 3][..]] {
        let xv = rng.vec(nelem(shape));
        let a = upload(&mut input, F32, shape, &xv);
        let n = shape[0] as usize;
        // (type, keep(col, row)): ggml's GGML_TRI_TYPE_* and Ollama's ints.
        let keep: [(i32, fn(usize, usize) -> bool); 4] = [(0, |c, r| c >= r), (1, |c, r| c > r), (2, |c, r| c <= r), (3, |c, r| c < r)];
        for (ty, k) in keep {
            let out = root.tri(a, ty).unwrap();
            assert_eq!(out.ne(), a.ne());
            let want: Vec<f32> = xv.iter().enumerate().map(|(i, &x)| if k(i % n, (i / n) % n) { x } else { 0.0 }).collect();
            outs.push((format!("tri {ty} {shape:?}"), out, want));
        }
    }
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        assert_eq!(data::read_f32(out, "t").unwrap(), want, "{what}");
    }
    // The enum values are ggml's.
    assert_eq!(
        [sys::GGML_TRI_TYPE_UPPER_DIAG, sys::GGML_TRI_TYPE_UPPER, sys::GGML_TRI_TYPE_LOWER_DIAG, sys::GGML_TRI_TYPE_LOWER],
        [0, 1, 2, 3]
    );
}

#[test]
fn diag_and_tri_reject_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let sq = upload(&mut input, F32, &[3, 3], &[1.0; 9]);
    let rect = upload(&mut input, F32, &[3, 2], &[1.0; 6]);
    let h = upload(&mut input, F16, &[3, 3], &[1.0; 9]);
    let hv = upload(&mut input, F16, &[3], &[1.0; 3]);
    let pt = permute(&root, upload(&mut input, F32, &[3, 3, 2], &[1.0; 18]), [0, 2, 1, 3]); // [3,2,3]
    let ps = permute(&root, upload(&mut input, F32, &[3, 2, 3], &[1.0; 18]), [0, 2, 1, 3]); // [3,3,2], square, non-contiguous
    // [2,3] with axis 1 moved to 0 and axis 0 to 2: [3,1,2], dim 0 strided.
    let vt = permute(&root, upload(&mut input, F32, &[2, 3], &[1.0; 6]), [2, 0, 1, 3]);
    let empty = input.empty(F32, &[0]).unwrap();
    for ty in [-1, 4, i32::MAX] {
        let e = root.tri(sq, ty).unwrap_err();
        assert_eq!(
            (e.kind, e.message),
            (ErrorKind::InvalidArgument, format!("tri: invalid type {ty} (0 upper+diagonal, 1 upper, 2 lower+diagonal, 3 lower)"))
        );
    }
    let e = root.tri(rect, 0).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "tri: a must be square in dims 0 and 1, got f32[3,2]"));
    let e = root.tri(h, 0).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::DType, "tri: a must be f32, got f16[3,3]"));
    let e = root.tri(ps, 0).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "tri: a must be contiguous, got f32[3,3,2] (non-contiguous)"));
    let e = root.diag(sq).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "diag: a must be a vector per matrix ([n, 1, n2, n3]), got f32[3,3]"));
    let e = root.diag(pt).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    let e = root.diag(hv).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::DType, "diag: a must be f32, got f16[3]"));
    let e = root.diag(vt).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "diag: a must have contiguous rows (dim 0 stride = element size), got f32[3,1,2] (non-contiguous)"));
    let e = root.diag(empty).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "diag: a is empty: f32[0]"));
    let out = root.tri(sq, 2).unwrap();
    assert_eq!(eval(&mut root, out), vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]);
}

// ---- solve_tri -------------------------------------------------------------------

/// Forward substitution in f64: `a = [n, n, batch]` (row r = a[:, r], lower
/// triangle read), `b = [k, n, batch]` → `x` of b's shape with `A X = B`.
fn solve_ref(a: &[f32], b: &[f32], n: usize, k: usize, batch: usize) -> Vec<f64> {
    let mut x = vec![0f64; k * n * batch];
    for m in 0..batch {
        let (am, bm) = (&a[m * n * n..][..n * n], &b[m * k * n..][..k * n]);
        for c in 0..k {
            for r in 0..n {
                let mut s = bm[r * k + c] as f64;
                for j in 0..r {
                    s -= am[r * n + j] as f64 * x[m * k * n + j * k + c];
                }
                x[m * k * n + r * k + c] = s / am[r * n + r] as f64;
            }
        }
    }
    x
}

#[test]
fn solve_tri_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(607);
    // Well conditioned lower triangles: |diagonal| in [1, 2], off-diagonal
    // entries in [-1, 1]/n, so |x| stays O(|b|) and f32 forward
    // substitution loses a few ulp per step: rtol 1e-5, atol 1e-6 for n <= 32.
    let mut outs = Vec::new();
    for &(n, k, b2, b3) in &[(4usize, 3usize, 1usize, 1usize), (1, 1, 1, 1), (16, 5, 2, 3), (32, 1, 1, 2), (7, 64, 3, 1)] {
        let batch = b2 * b3;
        let mut av = vec![0f32; n * n * batch];
        for (i, v) in av.iter_mut().enumerate() {
            let (c, r) = (i % n, (i / n) % n);
            *v = if c == r {
                let d = 1.0 + (rng.f32() + 1.0) * 0.5;
                if rng.next_u64() % 2 == 0 { d } else { -d }
            } else if c < r {
                rng.f32() / n as f32
            } else {
                // The upper triangle is not read: garbage.
                1e30
            };
        }
        let bv = rng.vec(k * n * batch);
        let a = upload(&mut input, F32, &[n as i64, n as i64, b2 as i64, b3 as i64], &av);
        let b = upload(&mut input, F32, &[k as i64, n as i64, b2 as i64, b3 as i64], &bv);
        let out = root.solve_tri(a, b, true, true, false).unwrap();
        assert_eq!((out.dtype(), out.ne()), (F32, b.ne()));
        outs.push((format!("solve_tri n {n} k {k} batch {b2}x{b3}"), out, solve_ref(&av, &bv, n, k, batch)));
    }
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        close64(&what, &data::read_f32(out, "t").unwrap(), &want, 1e-6, 1e-5);
    }
    // A zero on the diagonal gives non-finite values, not an abort.
    let a = upload(&mut input, F32, &[2, 2], &[0.0, 0.0, 1.0, 1.0]);
    let b = upload(&mut input, F32, &[1, 2], &[1.0, 1.0]);
    let out = root.solve_tri(a, b, true, true, false).unwrap();
    assert!(eval(&mut root, out).iter().all(|v| !v.is_finite()));
}

#[test]
fn solve_tri_rejects_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[3, 3, 2], &[1.0; 18]);
    let b = upload(&mut input, F32, &[2, 3, 2], &[1.0; 12]);
    let rect = upload(&mut input, F32, &[3, 2, 2], &[1.0; 12]);
    let b_rows = upload(&mut input, F32, &[2, 4, 2], &[1.0; 16]);
    let b_batch = upload(&mut input, F32, &[2, 3, 3], &[1.0; 18]);
    let h = upload(&mut input, F16, &[3, 3, 2], &[1.0; 18]);
    let hb = upload(&mut input, F16, &[2, 3, 2], &[1.0; 12]);
    let ap = permute(&root, upload(&mut input, F32, &[3, 2, 3], &[1.0; 18]), [0, 2, 1, 3]); // [3,3,2]
    let bt = permute(&root, upload(&mut input, F32, &[3, 2, 2], &[1.0; 12]), [1, 0, 2, 3]); // [2,3,2]
    const OP: &str = "solve_tri";
    for (left, lower, uni) in [(false, true, false), (true, false, false), (true, true, true), (false, false, true)] {
        let e = root.solve_tri(a, b, left, lower, uni).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert_eq!(
            e.message,
            format!("{OP}: ggml implements only left=true, lower=true, unit_diag=false, got left={left}, lower={lower}, unit_diag={uni}")
        );
    }
    let cases: Vec<(Tensor, Tensor, ErrorKind, String)> = vec![
        (h, b, ErrorKind::DType, format!("{OP}: a must be f32, got f16[3,3,2]")),
        (a, hb, ErrorKind::DType, format!("{OP}: b must be f32, got f16[2,3,2]")),
        (rect, b, ErrorKind::Shape, format!("{OP}: a must be square in dims 0 and 1, got f32[3,2,2]")),
        (a, b_rows, ErrorKind::Shape, format!("{OP}: b f32[2,4,2] does not fit a f32[3,3,2]: b must be [k, 3, 2, 1]")),
        (a, b_batch, ErrorKind::Shape, format!("{OP}: b f32[2,3,3] does not fit a f32[3,3,2]: b must be [k, 3, 2, 1]")),
        (ap, b, ErrorKind::Shape, format!("{OP}: a must be contiguous, got f32[3,3,2] (non-contiguous)")),
        (a, bt, ErrorKind::Shape, format!("{OP}: b must be contiguous, got f32[2,3,2] (non-contiguous)")),
    ];
    for (x, y, kind, msg) in cases {
        let e = root.solve_tri(x, y, true, true, false).unwrap_err();
        assert_eq!((e.kind, e.message), (kind, msg));
    }
    // Identity: x = b.
    let id = upload(&mut input, F32, &[2, 2], &[1.0, 0.0, 0.0, 1.0]);
    let bb = upload(&mut input, F32, &[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = root.solve_tri(id, bb, true, true, false).unwrap();
    assert_eq!(eval(&mut root, out), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

// ---- pad_ext ---------------------------------------------------------------------------

fn pad_ref(x: &[f32], ne: [usize; 4], lp: [i32; 4], rp: [i32; 4]) -> (Vec<f32>, [usize; 4]) {
    let on: [usize; 4] = std::array::from_fn(|i| ne[i] + lp[i] as usize + rp[i] as usize);
    let mut out = vec![0f32; on.iter().product()];
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    let o = idx(on, i0 + lp[0] as usize, i1 + lp[1] as usize, i2 + lp[2] as usize, i3 + lp[3] as usize);
                    out[o] = x[idx(ne, i0, i1, i2, i3)];
                }
            }
        }
    }
    (out, on)
}

#[test]
fn pad_ext_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(608);
    let mut outs = Vec::new();
    let cases: &[(&[i64], [i32; 4], [i32; 4])] = &[
        (&[5], [2, 0, 0, 0], [3, 0, 0, 0]),
        (&[4, 3], [0, 1, 0, 0], [1, 2, 0, 0]),
        (&[3, 2, 2], [1, 0, 2, 0], [0, 1, 1, 0]),
        (&[2, 3, 2, 2], [1, 1, 1, 1], [1, 1, 1, 1]),
        (&[3, 3], [0, 0, 0, 0], [0, 0, 0, 0]),
        (&[6, 4], [0, 3, 0, 0], [0, 0, 0, 0]), // Ollama's audio shift: PadExt(0,0,shift,0,…)
    ];
    for &(shape, lp, rp) in cases {
        let xv = rng.vec(nelem(shape));
        let a = upload(&mut input, F32, shape, &xv);
        let out = root.pad_ext(a, lp, rp).unwrap();
        let (want, on) = pad_ref(&xv, dims(a), lp, rp);
        assert_eq!(dims(out), on);
        outs.push((format!("pad_ext {shape:?} {lp:?} {rp:?}"), out, want));
    }
    // A transposed input (strided dim 0) is fine.
    let xv = rng.vec(12);
    let t = transpose(&root, upload(&mut input, F32, &[4, 3], &xv));
    let out = root.pad_ext(t, [1, 0, 0, 0], [0, 2, 0, 0]).unwrap();
    outs.push(("pad_ext transposed".into(), out, pad_ref(&logical(t, &xv), dims(t), [1, 0, 0, 0], [0, 2, 0, 0]).0));
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        assert_eq!(data::read_f32(out, "t").unwrap(), want, "{what}");
    }
}

#[test]
fn pad_ext_rejects_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[2, 2], &[1.0; 4]);
    let h = upload(&mut input, F16, &[2, 2], &[1.0; 4]);
    let e = root.pad_ext(a, [0, -1, 0, 0], [0; 4]).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "pad_ext: padding must be non-negative, got left [0, -1, 0, 0] right [0, 0, 0, 0] for f32[2,2]"));
    let e = root.pad_ext(a, [0; 4], [0, 0, 0, i32::MIN]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    let e = root.pad_ext(h, [1; 4], [0; 4]).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::DType, "pad_ext: a must be f32, got f16[2,2]"));
    let e = root.pad_ext(a, [i32::MAX; 4], [i32::MAX; 4]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(e.message.starts_with("pad_ext: shape") && e.message.ends_with("is too large"), "{}", e.message);
    let out = root.pad_ext(a, [1, 0, 0, 0], [0; 4]).unwrap();
    assert_eq!(eval(&mut root, out), vec![0.0, 1.0, 1.0, 0.0, 1.0, 1.0]);
}

// ---- set_inplace ----------------------------------------------------------------------

/// Writes `b` (contiguous values, shape `bn`) into `a` at byte `offset`
/// with strides `(es, nb1, nb2, nb3)`.
fn set_ref<T: Copy>(a: &[T], b: &[T], bn: [usize; 4], es: usize, nb: [usize; 3], offset: usize) -> Vec<T> {
    let mut out = a.to_vec();
    for i3 in 0..bn[3] {
        for i2 in 0..bn[2] {
            for i1 in 0..bn[1] {
                for i0 in 0..bn[0] {
                    let byte = offset + i0 * es + i1 * nb[0] + i2 * nb[1] + i3 * nb[2];
                    out[byte / es] = b[idx(bn, i0, i1, i2, i3)];
                }
            }
        }
    }
    out
}

#[test]
fn set_inplace_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(609);
    // a = [6, 5, 3] f32 (strides 4, 24, 120; 360 bytes).
    let cases: &[(&[i64], [usize; 3], usize)] = &[
        (&[3, 2, 2], [24, 120, 360], 4 * (1 + 6 + 30)),       // a block at (1,1,1)
        (&[6, 5, 3], [24, 120, 360], 0),                      // the whole tensor
        (&[2, 3], [48, 0, 0], 8),                             // every other row
        (&[1, 5], [24, 0, 0], 4 * 5),                         // a column
        (&[6, 5], [24, 120, 360], 360 - 120),                 // the last matrix, ending exactly at the end
        (&[4], [0, 0, 0], 360 - 16),                          // the last 4 elements
        (&[2, 2, 2], [8, 48, 0], 0),                          // a strided 3-D block
    ];
    for &(bshape, nb, offset) in cases {
        let av = rng.vec(90);
        let bv = rng.vec(nelem(bshape));
        let a = upload(&mut input, F32, &[6, 5, 3], &av);
        let b = upload(&mut input, F32, bshape, &bv);
        let out = root.set_inplace(a, b, nb[0], nb[1], nb[2], offset).unwrap();
        assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
        assert_eq!(unsafe { (*out.as_ptr()).view_src }, a.as_ptr(), "the result is a view of a");
        let want = set_ref(&av, &bv, dims(b), 4, nb, offset);
        root.compute(&[out]).unwrap();
        // Exact copies, into the result and into a itself.
        assert_eq!(data::read_f32(out, "t").unwrap(), want, "set_inplace {bshape:?} {nb:?} {offset}");
        assert_eq!(data::read_f32(a, "t").unwrap(), want, "a itself");
    }
    // i32, and a b that is a non-contiguous view (dense rows).
    let av: Vec<i32> = (0..24).collect();
    let bv: Vec<i32> = (100..112).collect();
    let a = upload_i32(&mut input, &[4, 6], &av);
    let bp = permute(&root, upload_i32(&mut input, &[2, 3, 2], &bv), [0, 2, 1, 3]); // [2,2,3]
    let out = root.set_inplace(a, bp, 16, 32, 0, 4).unwrap();
    let want = set_ref(&av, &logical(bp, &bv), dims(bp), 4, [16, 32, 0], 4);
    root.compute(&[out]).unwrap();
    let got: Vec<i32> = data::read(out, "t").unwrap().chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, want);
}

#[test]
fn set_inplace_rejects_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[6, 5], &[0.0; 30]); // 120 bytes
    let b = upload(&mut input, F32, &[3, 2], &[1.0; 6]);
    let bi = upload_i32(&mut input, &[3, 2], &[1; 6]);
    let h = upload(&mut input, F16, &[6, 5], &[0.0; 30]);
    let hb = upload(&mut input, F16, &[3, 2], &[1.0; 6]);
    let big = upload(&mut input, F32, &[31], &[1.0; 31]);
    let ap = permute(&root, upload(&mut input, F32, &[6, 5, 2], &[0.0; 60]), [0, 2, 1, 3]);
    let bt = transpose(&root, upload(&mut input, F32, &[2, 3], &[1.0; 6])); // [3,2], dim 0 strided
    const OP: &str = "set_inplace";
    let cases: Vec<(Tensor, Tensor, [usize; 4], ErrorKind, String)> = vec![
        (h, hb, [12, 0, 0, 0], ErrorKind::DType, format!("{OP}: a must be f32 or i32, got f16[6,5]")),
        (a, bi, [24, 0, 0, 0], ErrorKind::DType, format!("{OP}: types differ: f32[6,5] vs i32[3,2]")),
        (ap, b, [24, 0, 0, 0], ErrorKind::Shape, format!("{OP}: a must be contiguous, got f32[6,2,5] (non-contiguous)")),
        (a, bt, [24, 0, 0, 0], ErrorKind::Shape, format!("{OP}: b must have contiguous rows (dim 0 stride = element size), got f32[3,2] (non-contiguous)")),
        (a, big, [0, 0, 0, 0], ErrorKind::Shape, format!("{OP}: b f32[31] has more elements than a f32[6,5]")),
        // One element past the end (the last element starts at byte 120,
        // which ggml's own bound, on element starts, would let through).
        (a, b, [24, 0, 0, 88], ErrorKind::Shape, format!("{OP}: b f32[3,2] at offset 88 with strides (24, 0, 0) reaches byte 124, past the 120 bytes of a f32[6,5]")),
        (a, b, [112, 0, 0, 0], ErrorKind::Shape, format!("{OP}: b f32[3,2] at offset 0 with strides (112, 0, 0) reaches byte 124, past the 120 bytes of a f32[6,5]")),
        (a, b, [24, 0, 0, 2], ErrorKind::InvalidArgument, format!("{OP}: strides (24, 0, 0) and offset 2 must be multiples of the element size 4 of f32[6,5]")),
        (a, b, [26, 0, 0, 0], ErrorKind::InvalidArgument, format!("{OP}: strides (26, 0, 0) and offset 0 must be multiples of the element size 4 of f32[6,5]")),
        (a, b, [1 << 31, 0, 0, 0], ErrorKind::InvalidArgument, format!("{OP}: strides (2147483648, 0, 0) must be below 2^31 and offset 0 below 2^30")),
        (a, b, [24, 0, 0, 1 << 30], ErrorKind::InvalidArgument, format!("{OP}: strides (24, 0, 0) must be below 2^31 and offset 1073741824 below 2^30")),
        (a, b, [usize::MAX, 0, 0, 0], ErrorKind::InvalidArgument, format!("{OP}: strides ({}, 0, 0) must be below 2^31 and offset 0 below 2^30", usize::MAX)),
    ];
    for (x, y, p, kind, msg) in cases {
        let e = root.set_inplace(x, y, p[0], p[1], p[2], p[3]).unwrap_err();
        assert_eq!((e.kind, e.message), (kind, msg));
    }
    // Exactly at the end is fine: the last row of b ends at byte 120.
    let out = root.set_inplace(a, b, 24, 0, 0, 84).unwrap();
    let mut want = vec![0.0f32; 30];
    for i in [21, 22, 23, 27, 28, 29] {
        want[i] = 1.0;
    }
    assert_eq!(eval(&mut root, out), want);
}

// ---- repeat_4d -------------------------------------------------------------------------

fn repeat_ref<T: Copy>(x: &[T], ne: [usize; 4], to: [usize; 4]) -> Vec<T> {
    let mut out = Vec::with_capacity(to.iter().product());
    for i3 in 0..to[3] {
        for i2 in 0..to[2] {
            for i1 in 0..to[1] {
                for i0 in 0..to[0] {
                    out.push(x[idx(ne, i0 % ne[0], i1 % ne[1], i2 % ne[2], i3 % ne[3])]);
                }
            }
        }
    }
    out
}

#[test]
fn repeat_4d_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(610);
    let mut outs = Vec::new();
    let cases: &[(&[i64], [i64; 4])] = &[
        (&[3], [6, 2, 1, 1]),
        (&[2, 3], [4, 6, 2, 1]),
        (&[1, 4, 1, 2], [5, 4, 3, 2]),
        (&[2, 2, 2, 2], [2, 2, 2, 2]),
        (&[4, 1, 3], [4, 4, 3, 2]), // qwen3next: [1, n, …] broadcast to [n, n, …]
    ];
    for dt in [F32, F16] {
        for &(shape, to) in cases {
            let xv = rounded(dt, &rng.vec(nelem(shape)));
            let a = upload(&mut input, dt, shape, &xv);
            let out = root.repeat_4d(a, to).unwrap();
            assert_eq!((out.dtype(), out.ne()), (dt, to));
            outs.push((format!("repeat_4d {} {shape:?} -> {to:?}", tn(dt)), out, repeat_ref(&xv, dims(a), to.map(|d| d as usize))));
        }
        // A permuted source (dense rows).
        let xv = rounded(dt, &rng.vec(3 * 2 * 2));
        let p = permute(&root, upload(&mut input, dt, &[3, 2, 2], &xv), [0, 2, 1, 3]);
        let out = root.repeat_4d(p, [6, 2, 4, 1]).unwrap();
        outs.push((format!("repeat_4d {} permuted", tn(dt)), out, repeat_ref(&logical(p, &xv), dims(p), [6, 2, 4, 1])));
    }
    // i32.
    let iv: Vec<i32> = (0..6).collect();
    let ai = upload_i32(&mut input, &[3, 2], &iv);
    let oi = root.repeat_4d(ai, [3, 4, 2, 1]).unwrap();
    root.compute(&outs.iter().map(|o| o.1).chain([oi]).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        assert_eq!(data::read_f32(out, "t").unwrap(), want, "{what}");
    }
    let got: Vec<i32> = data::read(oi, "t").unwrap().chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, repeat_ref(&iv, [3, 2, 1, 1], [3, 4, 2, 1]));
}

#[test]
fn repeat_4d_rejects_bad_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[2, 3], &[1.0; 6]);
    let t = transpose(&root, a);
    let q = input.zeros(sys::GGML_TYPE_Q8_0, &[32]).unwrap();
    let empty = input.empty(F32, &[0]).unwrap();
    const OP: &str = "repeat_4d";
    let cases: Vec<(Tensor, [i64; 4], ErrorKind, String)> = vec![
        (a, [3, 3, 1, 1], ErrorKind::Shape, format!("{OP}: cannot repeat f32[2,3] to [3, 3, 1, 1]: each target dim must be a positive multiple of a's")),
        (a, [2, 3, 0, 1], ErrorKind::Shape, format!("{OP}: cannot repeat f32[2,3] to [2, 3, 0, 1]: each target dim must be a positive multiple of a's")),
        (a, [-2, 3, 1, 1], ErrorKind::Shape, format!("{OP}: cannot repeat f32[2,3] to [-2, 3, 1, 1]: each target dim must be a positive multiple of a's")),
        (a, [1 << 32, 3, 1, 1], ErrorKind::Shape, format!("{OP}: cannot repeat f32[2,3] to [4294967296, 3, 1, 1]: each target dim must be a positive multiple of a's")),
        (t, [3, 2, 1, 1], ErrorKind::Shape, format!("{OP}: a must have contiguous rows (dim 0 stride = element size), got f32[3,2] (non-contiguous)")),
        (q, [32, 2, 1, 1], ErrorKind::DType, format!("{OP}: a must be f32 or f16 or bf16 or i32, got q8_0[32]")),
        (empty, [1, 1, 1, 1], ErrorKind::Shape, format!("{OP}: a is empty: f32[0]")),
    ];
    for (x, to, kind, msg) in cases {
        let e = root.repeat_4d(x, to).unwrap_err();
        assert_eq!((e.kind, e.message), (kind, msg));
    }
    let e = root.repeat_4d(a, [1 << 24, 3 << 23, 3, 1]).unwrap_err();
    assert!(e.message.starts_with("repeat_4d: shape") && e.message.ends_with("is too large"), "{}", e.message);
    let out = root.repeat_4d(a, [2, 3, 2, 1]).unwrap();
    assert_eq!(eval(&mut root, out), vec![1.0; 12]);
}

// ---- the C ABI ---------------------------------------------------------------------------

mod capi {
    pub use crate::capi_base::*;

    extern "C" {
        pub fn ggml_rs_softplus(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_sigmoid_out(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_silu_alpha_limit(c: *mut Ctx, a: *mut T, up: *mut T, alpha: f32, limit: f32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_fill(c: *mut Ctx, a: *mut T, value: f32, inplace: bool, err: *mut Error) -> *mut T;
        pub fn ggml_rs_cumsum(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_variance(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_stddev(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_diag(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_tri(c: *mut Ctx, a: *mut T, type_: i32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_solve_tri(c: *mut Ctx, a: *mut T, b: *mut T, left: bool, lower: bool, uni: bool, err: *mut Error) -> *mut T;
        pub fn ggml_rs_pad_ext(c: *mut Ctx, a: *mut T, lp0: i32, rp0: i32, lp1: i32, rp1: i32, lp2: i32, rp2: i32, lp3: i32, rp3: i32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_set_inplace(c: *mut Ctx, a: *mut T, b: *mut T, nb1: usize, nb2: usize, nb3: usize, offset: usize, err: *mut Error) -> *mut T;
        pub fn ggml_rs_repeat_4d(c: *mut Ctx, a: *mut T, ne0: i64, ne1: i64, ne2: i64, ne3: i64, err: *mut Error) -> *mut T;
    }
}

#[test]
fn c_abi_linalg_ops() {
    use capi::*;
    use std::ptr::null_mut;
    unsafe {
        let mut err = Error::new();
        let params = BackendParams { n_threads: 2, max_graph_nodes: 0, flash_attention: -1, alloc_memory: true };
        let mut be: *mut Backend = null_mut();
        assert_eq!(ggml_rs_backend_new(&params, &mut be, &mut err), OK, "{}", err.text());
        let root = ggml_rs_ctx_new(be, 256, &mut err);
        assert!(!root.is_null(), "{}", err.text());
        let input = ggml_rs_ctx_input(root);
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let new = |shape: &[i64], v: &[f32]| {
            let bytes = f32s(v);
            let mut e = Error::new();
            let t = ggml_rs_ctx_from_data(input, 0, shape.as_ptr(), shape.len(), bytes.as_ptr(), bytes.len(), &mut e);
            assert!(!t.is_null(), "{}", e.text());
            t
        };
        // x = [[1,2],[3,4]] (rows [1,2] and [3,4]).
        let x = new(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
        let up = new(&[2, 2], &[0.5, -2.0, 9.0, 0.0]);
        let v = new(&[2], &[5.0, 6.0]);
        let dst = new(&[2, 2], &[0.0; 4]);
        let outs = [
            ggml_rs_softplus(root, x, &mut err),
            ggml_rs_sigmoid_out(root, x, &mut err),
            ggml_rs_silu_alpha_limit(root, x, up, 1.702, 7.0, &mut err),
            ggml_rs_fill(root, x, 7.0, false, &mut err),
            ggml_rs_cumsum(root, x, &mut err),
            ggml_rs_variance(root, x, &mut err),
            ggml_rs_stddev(root, x, &mut err),
            ggml_rs_diag(root, v, &mut err),
            ggml_rs_tri(root, x, 2, &mut err),
            ggml_rs_solve_tri(root, x, up, true, true, false, &mut err),
            ggml_rs_pad_ext(root, x, 1, 0, 0, 1, 0, 0, 0, 0, &mut err),
            ggml_rs_set_inplace(root, dst, v, 8, 8, 8, 8, &mut err),
            ggml_rs_repeat_4d(root, v, 4, 1, 1, 1, &mut err),
            ggml_rs_fill(root, dst, -1.0, true, &mut err),
        ];
        assert!(outs.iter().all(|p| !p.is_null()), "{}", err.text());
        // The in-place fill runs after set_inplace (forwarded in this order).
        assert_eq!(ggml_rs_ctx_compute(root, outs.as_ptr(), outs.len() - 1, &mut err), OK, "{}", err.text());
        let sp = |x: f64| x.exp().ln_1p();
        let sg = |x: f64| 1.0 / (1.0 + (-x).exp());
        let oai = |a: f64, u: f64| swiglu_oai_ref(a, u, 1.702, 7.0);
        let wants: Vec<Vec<f64>> = vec![
            vec![sp(1.0), sp(2.0), sp(3.0), sp(4.0)],
            vec![sg(1.0), sg(2.0), sg(3.0), sg(4.0)],
            vec![oai(1.0, 0.5), oai(2.0, -2.0), oai(3.0, 9.0), oai(4.0, 0.0)],
            vec![7.0; 4],
            vec![1.0, 3.0, 3.0, 7.0],
            vec![0.25, 0.25],
            vec![0.5, 0.5],
            vec![5.0, 0.0, 0.0, 6.0],
            vec![1.0, 0.0, 3.0, 4.0],
            // [[1,0],[3,4]] X = [[0.5,-2],[9,0]].
            vec![0.5, -2.0, (9.0 - 1.5) / 4.0, 6.0 / 4.0],
            vec![0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0],
            vec![0.0, 0.0, 5.0, 6.0],
            vec![5.0, 6.0, 5.0, 6.0],
        ];
        for (k, want) in wants.iter().enumerate() {
            let mut got = vec![0f32; want.len()];
            assert_eq!(ggml_rs_tensor_get_f32(outs[k], got.as_mut_ptr(), got.len(), &mut err), OK, "output {k}: {}", err.text());
            // f32 ops on small values: 1e-6 relative covers all (see the
            // per-op tests for the analyses).
            close64(&format!("c output {k}"), &got, want, 1e-7, 1e-6);
        }
        // The in-place fill overwrites dst.
        assert_eq!(ggml_rs_ctx_compute(root, &outs[13], 1, &mut err), OK, "{}", err.text());
        let mut got = [0f32; 4];
        assert_eq!(ggml_rs_tensor_get_f32(dst, got.as_mut_ptr(), 4, &mut err), OK);
        assert_eq!(got, [-1.0; 4]);

        // Errors: NULL arguments, unsupported variants, bad shapes.
        let mut e = Error::new();
        assert!(ggml_rs_solve_tri(root, x, up, false, true, false, &mut e).is_null());
        assert_eq!(e.status, UNSUPPORTED, "{}", e.text());
        assert!(e.text().starts_with("solve_tri: ggml implements only"), "{}", e.text());
        let n = null_mut();
        let calls: Vec<(&str, Box<dyn Fn(*mut Error) -> *mut T>)> = vec![
            ("softplus: a is NULL", Box::new(|e| ggml_rs_softplus(root, n, e))),
            ("sigmoid_out: a is NULL", Box::new(|e| ggml_rs_sigmoid_out(root, n, e))),
            ("silu_alpha_limit: up is NULL", Box::new(|e| ggml_rs_silu_alpha_limit(root, x, n, 1.0, 1.0, e))),
            ("fill_inplace: a is NULL", Box::new(|e| ggml_rs_fill(root, n, 1.0, true, e))),
            ("cumsum: a is NULL", Box::new(|e| ggml_rs_cumsum(root, n, e))),
            ("variance: a is NULL", Box::new(|e| ggml_rs_variance(root, n, e))),
            ("stddev: a is NULL", Box::new(|e| ggml_rs_stddev(root, n, e))),
            ("diag: a is NULL", Box::new(|e| ggml_rs_diag(root, n, e))),
            ("tri: a is NULL", Box::new(|e| ggml_rs_tri(root, n, 0, e))),
            ("solve_tri: b is NULL", Box::new(|e| ggml_rs_solve_tri(root, x, n, true, true, false, e))),
            ("pad_ext: a is NULL", Box::new(|e| ggml_rs_pad_ext(root, n, 0, 0, 0, 0, 0, 0, 0, 0, e))),
            ("set_inplace: b is NULL", Box::new(|e| ggml_rs_set_inplace(root, x, n, 0, 0, 0, 0, e))),
            ("repeat_4d: a is NULL", Box::new(|e| ggml_rs_repeat_4d(root, n, 1, 1, 1, 1, e))),
            ("tri: context is NULL", Box::new(|e| ggml_rs_tri(null_mut(), x, 0, e))),
        ];
        for (name, call) in calls {
            let mut e = Error::new();
            assert!(call(&mut e).is_null(), "{name}");
            assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, name));
        }
        let mut e = Error::new();
        assert!(ggml_rs_set_inplace(root, x, v, 8, 8, 8, 12, &mut e).is_null());
        assert_eq!(e.status, SHAPE, "{}", e.text());
        assert!(ggml_rs_pad_ext(root, x, -1, 0, 0, 0, 0, 0, 0, 0, null_mut()).is_null());
        ggml_rs_ctx_clear_error(root);
        let y = ggml_rs_tri(root, x, 3, &mut err);
        assert_eq!(ggml_rs_ctx_compute(root, &y, 1, &mut err), OK, "{}", err.text());
        let mut got = [0f32; 4];
        assert_eq!(ggml_rs_tensor_get_f32(y, got.as_mut_ptr(), 4, &mut err), OK);
        assert_eq!(got, [0.0, 0.0, 3.0, 0.0]);

        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
