//! Differential tests of the element-wise functions and activations (sqr,
//! sqrt, exp, neg, sin, cos, tanh, sigmoid, silu, gelu, gelu_erf,
//! gelu_quick, relu, and the gated forms act(a)*up) against naive f64
//! references over random inputs, 1-D to 4-D shapes, non-contiguous views
//! and f32/f16 inputs; bad-input tests; and a test of the C ABI.
mod common;
#[path = "common/capi.rs"]
mod capi_base;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Result, Tensor};

// ---- helpers (local to this file) -----------------------------------------



/// "f32" / "f16", for messages.
fn tn(dtype: u32) -> &'static str {
    ggml_rs::ml::tensor::type_name(dtype)
}

fn rounded(dtype: u32, v: &[f32]) -> Vec<f32> {
    if dtype == F16 {
        v.iter().map(|&x| f16_round(x)).collect()
    } else {
        v.to_vec()
    }
}

fn nelem(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// erf in f64 (series 7.1.6 of Abramowitz & Stegun: positive terms, no
/// cancellation; relative error ~1e-15 for |x| <= 6; ±1 beyond).
fn erf(x: f64) -> f64 {
    if x.abs() > 6.0 {
        return x.signum();
    }
    let (mut term, mut sum, mut n) = (x, x, 0.0);
    while term.abs() > 1e-17 * sum.abs() {
        n += 1.0;
        term *= 2.0 * x * x / (2.0 * n + 1.0);
        sum += term;
    }
    2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// Per-element tolerance: |got - want| <= atol + rtol*|want| + xrel*|x|*|g|
/// (`x` the op's input, `g` the gate, 1 for plain ops). The xrel term
/// bounds errors from rounding the input (ggml's f16 GELU tables round x
/// to f16 first: error up to max|act'| * |x| * 2^-11, times the gate).
#[derive(Clone, Copy)]
struct Tol {
    atol: f64,
    rtol: f64,
    xrel: f64,
}

/// One op output and its expected values, checked after one compute.
struct Want {
    what: String,
    out: Tensor,
    x: Vec<f32>,
    g: Vec<f32>,
    want: Vec<f64>,
    tol: Tol,
}

fn check_all(root: &mut Context, wants: Vec<Want>) {
    let outs: Vec<Tensor> = wants.iter().map(|w| w.out).collect();
    root.compute(&outs).expect("compute");
    for w in wants {
        let got = data::read_f32(w.out, "test").expect("read");
        assert_eq!(got.len(), w.want.len(), "{}: length", w.what);
        for i in 0..got.len() {
            let (g, e) = (got[i] as f64, w.want[i]);
            let gate = w.g.get(i).map(|&v| v.abs() as f64).unwrap_or(1.0);
            let lim = w.tol.atol + w.tol.rtol * e.abs() + w.tol.xrel * (w.x[i].abs() as f64) * gate;
            assert!(
                (g - e).abs() <= lim || (g.is_nan() && e.is_nan()),
                "{}: element {i} (x = {}): got {g}, want {e}, |diff| {} > {lim}",
                w.what,
                w.x[i],
                (g - e).abs()
            );
        }
    }
}

type Plain = fn(&mut Context, Tensor) -> Result<Tensor>;
type Act = fn(&mut Context, Tensor, Option<Tensor>) -> Result<Tensor>;

/// An element-wise op: how to build it, its f64 reference, the input range
/// and the f32 tolerance (f16 tolerances are derived in `f16_tol`).
struct Op {
    name: &'static str,
    build: Box<dyn Fn(&mut Context, Tensor) -> Result<Tensor>>,
    reference: fn(f64) -> f64,
    /// Inputs are uniform in [lo, hi).
    lo: f32,
    hi: f32,
    tol32: Tol,
}

fn plain(name: &'static str, f: Plain, reference: fn(f64) -> f64, lo: f32, hi: f32, tol32: Tol) -> Op {
    Op { name, build: Box::new(move |c: &mut Context, a| f(c, a)), reference, lo, hi, tol32 }
}
fn act(name: &'static str, f: Act, reference: fn(f64) -> f64, lo: f32, hi: f32, tol32: Tol) -> Op {
    Op { name, build: Box::new(move |c: &mut Context, a| f(c, a, None)), reference, lo, hi, tol32 }
}

const fn tol(atol: f64, rtol: f64, xrel: f64) -> Tol {
    Tol { atol, rtol, xrel }
}

/// f32 ulp is 2^-23 ≈ 1.19e-7 relative.
fn ops() -> Vec<Op> {
    vec![
        // x*x: one f32 rounding (half ulp), 1 ulp allowed.
        plain("sqr", Context::sqr, |x| x * x, -3.0, 3.0, tol(0.0, 1.2e-7, 0.0)),
        // sqrtf is correctly rounded; 1 ulp allowed.
        plain("sqrt", Context::sqrt, f64::sqrt, 0.0, 4.0, tol(0.0, 1.2e-7, 0.0)),
        // expf: within 1 ulp; 2 ulp allowed.
        plain("exp", Context::exp, f64::exp, -4.0, 4.0, tol(0.0, 2.4e-7, 0.0)),
        // Exact.
        plain("neg", Context::neg, |x| -x, -3.0, 3.0, tol(0.0, 0.0, 0.0)),
        // sinf/cosf: within 1 ulp; atol for results near 0.
        plain("sin", Context::sin, f64::sin, -6.0, 6.0, tol(1e-7, 2.4e-7, 0.0)),
        plain("cos", Context::cos, f64::cos, -6.0, 6.0, tol(1e-7, 2.4e-7, 0.0)),
        // tanhf: within 2 ulp; 3 allowed.
        plain("tanh", Context::tanh, f64::tanh, -5.0, 5.0, tol(1e-8, 3.6e-7, 0.0)),
        // 1/(1+expf(-x)): three roundings; 4 ulp allowed.
        plain("sigmoid", Context::sigmoid, sigmoid, -8.0, 8.0, tol(1e-9, 4.8e-7, 0.0)),
        // SIMD expf approximation (~2 ulp) and a divide: 8 ulp allowed.
        act("silu", Context::silu, |x| x * sigmoid(x), -8.0, 8.0, tol(1e-9, 1e-6, 0.0)),
        // ggml evaluates GELU through a table indexed by f16(x) holding
        // f16 values: output rounding 2^-11 relative (6e-4 allowed) plus
        // input rounding |x|*2^-11 times max|gelu'| ≈ 1.13 (6e-4*|x|).
        act("gelu", Context::gelu, gelu_tanh, -5.0, 5.0, tol(1e-6, 6e-4, 6e-4)),
        // erff within 1 ulp; 1 + erf(x/√2) cancels for x << 0, absolute
        // error ~ |x|/2 * 2^-24: atol 4e-7 for |x| <= 5.
        act("gelu_erf", Context::gelu_erf, |x| 0.5 * x * (1.0 + erf(x / 2f64.sqrt())), -5.0, 5.0, tol(4e-7, 1e-6, 0.0)),
        // f16 table as gelu (max|gelu_quick'| ≈ 1.1).
        act("gelu_quick", Context::gelu_quick, |x| x * sigmoid(1.702 * x), -5.0, 5.0, tol(1e-6, 6e-4, 6e-4)),
        // Exact.
        act("relu", Context::relu, |x| x.max(0.0), -3.0, 3.0, tol(0.0, 0.0, 0.0)),
    ]
}

/// f16 in and out: inputs are rounded on upload (the reference uses the
/// rounded values), the f32 result is rounded to f16 once (2^-11 ≈ 4.9e-4
/// relative; 1e-3 allowed; atol for subnormal results), plus the op's f32
/// input-rounding term (the f16 tables see exact f16 inputs: none left).
fn f16_tol(op: &Op) -> Tol {
    tol(1e-6, 1e-3 + op.tol32.rtol, 0.0)
}

fn values(rng: &mut Rng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| lo + (rng.f32() + 1.0) * 0.5 * (hi - lo)).collect()
}

const SHAPES: &[&[i64]] = &[&[7], &[67, 3], &[3, 4, 5], &[2, 3, 2, 3], &[1, 1, 1, 5]];

// ---- plain element-wise ops ------------------------------------------------

#[test]
fn elementwise_ops_match_reference_f32_and_f16() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(101);
    let mut wants = Vec::new();
    for op in ops() {
        for dt in [F32, F16] {
            for &shape in SHAPES {
                let xv = rounded(dt, &values(&mut rng, nelem(shape), op.lo, op.hi));
                let a = upload(&mut input, dt, shape, &xv);
                let out = (op.build)(&mut root, a).unwrap();
                assert_eq!((out.dtype(), out.ne()), (dt, a.ne()), "{}: result type/shape", op.name);
                wants.push(Want {
                    what: format!("{} {} {shape:?}", op.name, tn(dt)),
                    out,
                    want: xv.iter().map(|&x| (op.reference)(x as f64)).collect(),
                    x: xv,
                    g: vec![],
                    // Tolerances: see ops() and f16_tol().
                    tol: if dt == F16 { f16_tol(&op) } else { op.tol32 },
                });
            }
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn elementwise_ops_take_permuted_and_padded_views() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(102);
    let mut wants = Vec::new();
    for op in ops() {
        for dt in [F32, F16] {
            let xv = rounded(dt, &values(&mut rng, 5 * 4 * 3 * 2, op.lo, op.hi));
            let a = upload(&mut input, dt, &[5, 4, 3, 2], &xv);
            // Dim 0 kept, dims 1..3 rotated: rows stay contiguous.
            let p = permute(&root, a, [0, 2, 3, 1]);
            // The first 3 of every 5 elements: padded rows.
            let v = padded_rows(&root, a, 3);
            for (kind, view) in [("permuted", p), ("padded", v)] {
                assert!(!view.is_contiguous());
                let lx = logical(view, &xv);
                let out = (op.build)(&mut root, view).unwrap();
                assert_eq!(out.ne(), view.ne());
                wants.push(Want {
                    what: format!("{} {} {kind}", op.name, tn(dt)),
                    out,
                    want: lx.iter().map(|&x| (op.reference)(x as f64)).collect(),
                    x: lx,
                    g: vec![],
                    // As in elementwise_ops_match_reference_f32_and_f16.
                    tol: if dt == F16 { f16_tol(&op) } else { op.tol32 },
                });
            }
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn elementwise_ops_reject_bad_inputs_and_stay_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[3, 4], &[0.25; 12]);
    let t = transpose(&root, a);
    // [3,1] transposed: one-element rows at a 12-byte stride; ggml's own
    // contiguous-rows test accepts it, its kernels' stride assert does not.
    let z = upload(&mut input, F32, &[3, 1], &[1.0; 3]);
    let zt = transpose(&root, z);
    let i = upload_i32(&mut input, &[4, 3], &[1; 12]);
    for op in ops() {
        let e = (op.build)(&mut root, t).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape, "{}", e.message);
        assert_eq!(
            e.message,
            format!("{}: a must have contiguous rows (dim 0 stride = element size), got f32[4,3] (non-contiguous)", op.name)
        );
        let e = (op.build)(&mut root, zt).unwrap_err();
        assert!(e.message.starts_with(&format!("{}: a must have contiguous rows", op.name)), "{}", e.message);
        let e = (op.build)(&mut root, i).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DType);
        assert_eq!(e.message, format!("{}: a must be f32 or f16, got i32[4,3]", op.name));
    }
    // The context still computes.
    let out = root.sqr(a).unwrap();
    assert_eq!(eval(&mut root, out), vec![0.0625; 12]);
}

// ---- gated activations ---------------------------------------------------------

fn acts() -> Vec<(&'static str, Act, fn(f64) -> f64, Tol)> {
    let all = ops();
    let find = |n: &str| all.iter().find(|o| o.name == n).map(|o| (o.reference, o.tol32)).unwrap();
    let (silu, gelu, gelu_erf, gelu_quick, relu) =
        (find("silu"), find("gelu"), find("gelu_erf"), find("gelu_quick"), find("relu"));
    vec![
        // The products add one f32 rounding to the tolerances of ops():
        // 1.2e-7 relative more (the xrel term is scaled by |up| in check_all).
        ("silu", Context::silu as Act, silu.0, tol(silu.1.atol, silu.1.rtol + 1.2e-7, silu.1.xrel)),
        ("gelu", Context::gelu, gelu.0, tol(gelu.1.atol, gelu.1.rtol + 1.2e-7, gelu.1.xrel)),
        ("gelu_erf", Context::gelu_erf, gelu_erf.0, tol(gelu_erf.1.atol, gelu_erf.1.rtol + 1.2e-7, gelu_erf.1.xrel)),
        ("gelu_quick", Context::gelu_quick, gelu_quick.0, tol(gelu_quick.1.atol, gelu_quick.1.rtol + 1.2e-7, gelu_quick.1.xrel)),
        // relu(x)*g: one rounding.
        ("relu", Context::relu, relu.0, tol(0.0, 1.2e-7, 0.0)),
    ]
}

#[test]
fn gated_activations_match_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(103);
    let mut wants = Vec::new();
    for (name, f, reference, tol32) in acts() {
        for dt in [F32, F16] {
            for &shape in SHAPES {
                let n = nelem(shape);
                let xv = rounded(dt, &values(&mut rng, n, -5.0, 5.0));
                let gv = rounded(dt, &values(&mut rng, n, -2.0, 2.0));
                let a = upload(&mut input, dt, shape, &xv);
                let up = upload(&mut input, dt, shape, &gv);
                let out = f(&mut root, a, Some(up)).unwrap();
                assert_eq!((out.dtype(), out.ne()), (dt, a.ne()), "{name}: gated result type/shape");
                wants.push(Want {
                    what: format!("{name}(a)*up {} {shape:?}", tn(dt)),
                    out,
                    want: xv.iter().zip(&gv).map(|(&x, &g)| reference(x as f64) * g as f64).collect(),
                    x: xv,
                    g: gv,
                    // f32: see acts(). f16: the f16 GELU tables round
                    // act(x) to f16 before the product, which is rounded
                    // again: two roundings, 1.5e-3 relative allowed.
                    tol: if dt == F16 { tol(1e-6, 1.5e-3, 0.0) } else { tol32 },
                });
            }
            // Padded rows (a fixed row stride) are fine for both operands.
            let xv = rounded(dt, &values(&mut rng, 8 * 3 * 2, -5.0, 5.0));
            let gv = rounded(dt, &values(&mut rng, 8 * 3 * 2, -2.0, 2.0));
            let a0 = upload(&mut input, dt, &[8, 3, 2], &xv);
            let g0 = upload(&mut input, dt, &[8, 3, 2], &gv);
            let (a, up) = (padded_rows(&root, a0, 5), padded_rows(&root, g0, 5));
            let (lx, lg) = (logical(a, &xv), logical(up, &gv));
            let out = f(&mut root, a, Some(up)).unwrap();
            wants.push(Want {
                what: format!("{name}(a)*up {} padded", tn(dt)),
                out,
                want: lx.iter().zip(&lg).map(|(&x, &g)| reference(x as f64) * g as f64).collect(),
                x: lx,
                g: lg,
                // As above.
                tol: if dt == F16 { tol(1e-6, 1.5e-3, 0.0) } else { tol32 },
            });
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn gated_activations_reject_mismatches_and_stay_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[4, 3, 2], &[1.0; 24]);
    let up = upload(&mut input, F32, &[4, 3, 2], &[2.0; 24]);
    let h = upload(&mut input, F16, &[4, 3, 2], &[1.0; 24]);
    let short = upload(&mut input, F32, &[4, 3], &[1.0; 12]);
    let i = upload_i32(&mut input, &[4, 3, 2], &[1; 24]);
    let p = permute(&root, a, [0, 2, 1, 3]); // [4,2,3]
    let pu = upload(&mut input, F32, &[4, 2, 3], &[1.0; 24]);
    for (name, f, _, _) in acts() {
        let e = f(&mut root, a, Some(short)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert_eq!(e.message, format!("{name}: shapes differ: f32[4,3,2] vs f32[4,3]"));
        let e = f(&mut root, a, Some(h)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DType);
        assert_eq!(e.message, format!("{name}: types differ: f32[4,3,2] vs f16[4,3,2]"));
        let e = f(&mut root, a, Some(i)).unwrap_err();
        assert_eq!(e.message, format!("{name}: up must be f32 or f16, got i32[4,3,2]"));
        let e = f(&mut root, i, Some(a)).unwrap_err();
        assert_eq!(e.message, format!("{name}: a must be f32 or f16, got i32[4,3,2]"));
        // The GLU kernels walk rows at one fixed stride: permuted dims 1..3
        // are refused for either operand (a plain activation takes them).
        let e = f(&mut root, p, Some(pu)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert!(e.message.starts_with(&format!("{name}: a must have contiguous rows laid out at a fixed stride")), "{}", e.message);
        let e = f(&mut root, pu, Some(p)).unwrap_err();
        assert!(e.message.starts_with(&format!("{name}: up must have contiguous rows laid out at a fixed stride")), "{}", e.message);
        assert!(f(&mut root, p, None).is_ok());
    }
    let out = root.relu(a, Some(up)).unwrap();
    assert_eq!(eval(&mut root, out), vec![2.0; 24]);
}

#[test]
fn gated_activations_take_one_element_rows_at_any_stride() {
    // [3,1] transposed: one-element rows 4 bytes apart but a dim-0 stride of
    // 12 bytes. The GLU kernels read row i at i*nb[1], so this is fine for
    // them (unlike the plain kernels, which assert the dim-0 stride).
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let x = upload(&mut input, F32, &[3, 1], &[-1.0, 0.5, 2.0]);
    let g = upload(&mut input, F32, &[3, 1], &[4.0, 3.0, -0.5]);
    let (xt, gt) = (transpose(&root, x), transpose(&root, g));
    assert_eq!(xt.ne(), [1, 3, 1, 1]);
    let out = root.relu(xt, Some(gt)).unwrap();
    // Exact: relu(x)*g = [0, 1.5, -1].
    assert_eq!(eval(&mut root, out), vec![0.0, 1.5, -1.0]);
}

#[test]
fn non_finite_values_propagate_without_aborting() {
    // ggml is built in Release: the kernels' debug-only NaN/inf asserts are
    // compiled out, and IEEE results come back.
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let x = upload(&mut input, F32, &[4], &[-1.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
    let big = upload(&mut input, F32, &[2], &[100.0, -200.0]);
    let outs = [
        root.sqrt(x).unwrap(),
        root.neg(x).unwrap(),
        root.tanh(x).unwrap(),
        root.sigmoid(x).unwrap(),
        root.relu(x, None).unwrap(),
        root.exp(big).unwrap(),
        root.silu(x, Some(x)).unwrap(),
    ];
    root.compute(&outs).unwrap();
    let got: Vec<Vec<f32>> = outs.iter().map(|&t| data::read_f32(t, "test").unwrap()).collect();
    let same = |a: &[f32], b: &[f32]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()));
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    assert!(same(&got[0], &[nan, inf, nan, nan]), "sqrt {:?}", got[0]);
    assert!(same(&got[1], &[1.0, -inf, inf, nan]), "neg {:?}", got[1]);
    assert!(same(&got[2], &[(-1f32).tanh(), 1.0, -1.0, nan]), "tanh {:?}", got[2]);
    assert!(same(&got[3][1..], &[1.0, 0.0, nan]), "sigmoid {:?}", got[3]);
    // ggml's relu is `x > 0 ? x : 0`: NaN becomes 0.
    assert!(same(&got[4], &[0.0, inf, 0.0, 0.0]), "relu {:?}", got[4]);
    assert!(same(&got[5], &[inf, 0.0]), "exp {:?}", got[5]);
    assert!(got[6][3].is_nan(), "silu(nan)*nan {:?}", got[6]);
}

// ---- the C ABI ----------------------------------------------------------------

/// Declarations matching include/ggml_rs.h, to call the exported symbols
/// the way a C (or Go) caller does.
mod capi {
    pub use crate::capi_base::*;

    extern "C" {
        pub fn ggml_rs_sqr(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_exp(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_neg(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_sigmoid(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_silu(c: *mut Ctx, a: *mut T, up: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_relu(c: *mut Ctx, a: *mut T, up: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_gelu_erf(c: *mut Ctx, a: *mut T, up: *mut T, err: *mut Error) -> *mut T;
    }
}

#[test]
fn c_abi_unary_ops_compute_and_report_errors() {
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

        let mut rng = Rng::new(104);
        let xv = values(&mut rng, 15, -3.0, 3.0);
        let gv = values(&mut rng, 15, -2.0, 2.0);
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let ne = [5i64, 3];
        let (xb, gb) = (bytes(&xv), bytes(&gv));
        let x = ggml_rs_ctx_from_data(input, 0, ne.as_ptr(), 2, xb.as_ptr(), xb.len(), &mut err);
        let g = ggml_rs_ctx_from_data(input, 0, ne.as_ptr(), 2, gb.as_ptr(), gb.len(), &mut err);
        assert!(!x.is_null() && !g.is_null(), "{}", err.text());

        let outs = [
            ggml_rs_sqr(root, x, &mut err),
            ggml_rs_exp(root, x, &mut err),
            ggml_rs_neg(root, x, &mut err),
            ggml_rs_sigmoid(root, x, &mut err),
            ggml_rs_silu(root, x, null_mut(), &mut err),
            ggml_rs_silu(root, x, g, &mut err),
            ggml_rs_relu(root, x, g, &mut err),
            ggml_rs_gelu_erf(root, x, null_mut(), &mut err),
        ];
        assert!(outs.iter().all(|p| !p.is_null()), "{}", err.text());
        assert_eq!(ggml_rs_ctx_compute(root, outs.as_ptr(), outs.len(), &mut err), OK, "{}", err.text());
        let refs: [&dyn Fn(f64, f64) -> f64; 8] = [
            &|x, _| x * x,
            &|x, _| x.exp(),
            &|x, _| -x,
            &|x, _| sigmoid(x),
            &|x, _| x * sigmoid(x),
            &|x, g| x * sigmoid(x) * g,
            &|x, g| x.max(0.0) * g,
            &|x, _| 0.5 * x * (1.0 + erf(x / 2f64.sqrt())),
        ];
        for (k, (&t, r)) in outs.iter().zip(refs).enumerate() {
            let mut got = [0f32; 15];
            assert_eq!(ggml_rs_tensor_get_f32(t, got.as_mut_ptr(), 15, &mut err), OK, "{}", err.text());
            for i in 0..15 {
                let want = r(xv[i] as f64, gv[i] as f64);
                // f32 ops: 1e-6 relative + 1e-6 absolute covers all of them
                // (see ops() for the per-op analyses; silu's is the widest).
                assert!(((got[i] as f64) - want).abs() <= 1e-6 + 1e-6 * want.abs(), "output {k} elem {i}: {} vs {want}", got[i]);
            }
        }

        // Errors: NULL tensor, NULL context, wrong type, mismatched gate.
        let mut e = Error::new();
        assert!(ggml_rs_sqr(root, null_mut(), &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "sqr: a is NULL"));
        let mut e = Error::new();
        assert!(ggml_rs_silu(null_mut(), x, null_mut(), &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "silu: context is NULL"));
        let iv = [1i32, 2, 3];
        let ib: Vec<u8> = iv.iter().flat_map(|v| v.to_le_bytes()).collect();
        let i = ggml_rs_ctx_from_data(input, 26, [3i64].as_ptr(), 1, ib.as_ptr(), ib.len(), &mut err);
        assert!(!i.is_null(), "{}", err.text());
        let mut e = Error::new();
        assert!(ggml_rs_exp(root, i, &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (DTYPE, "exp: a must be f32 or f16, got i32[3]"));
        let short = ggml_rs_ctx_from_data(input, 0, [5i64].as_ptr(), 1, xb.as_ptr(), 20, &mut err);
        let mut e = Error::new();
        assert!(ggml_rs_relu(root, x, short, &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (SHAPE, "relu: shapes differ: f32[5,3] vs f32[5]"));
        // err may be NULL.
        assert!(ggml_rs_neg(root, null_mut(), null_mut()).is_null());

        // The first failure is recorded on the context: compute refuses to
        // run until it is cleared, then works.
        let mut e = Error::new();
        assert_eq!(ggml_rs_ctx_recorded_error(root, &mut e), INVALID_ARGUMENT);
        assert_eq!(e.text(), "sqr: a is NULL");
        let y = ggml_rs_neg(root, x, &mut err);
        let mut e = Error::new();
        assert_eq!(ggml_rs_ctx_compute(root, &y, 1, &mut e), INVALID_ARGUMENT);
        assert!(e.text().contains("sqr: a is NULL"), "{}", e.text());
        ggml_rs_ctx_clear_error(root);
        assert_eq!(ggml_rs_ctx_compute(root, &y, 1, &mut err), OK, "{}", err.text());
        let mut got = [0f32; 15];
        assert_eq!(ggml_rs_tensor_get_f32(y, got.as_mut_ptr(), 15, &mut err), OK);
        assert_eq!(got.to_vec(), xv.iter().map(|v| -v).collect::<Vec<_>>());

        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}

/// gelu and its gated form (geglu) look each value up in ggml's f16 table;
/// with AVX-512 our patch does 16 values at a time
/// (scripts/patches/20-cpu-gelu-table.sh). Each value must come out as the
/// scalar loop gives it: rows of 15 (all scalar) against the same values in
/// rows of 64 (vector blocks), bit for bit, over -12..12 (both cut-offs at
/// ±10 and the table between), with a NaN in one block (left to the scalar
/// loop) and exact ±10.
#[test]
fn gelu_table_blocks_match_the_scalar_loop() {
    let be = backend();
    let mut rng = Rng::new(77);
    let n = 15 * 64;
    let mut x: Vec<f32> = (0..n).map(|_| rng.f32() * 24.0 - 12.0).collect();
    let g: Vec<f32> = (0..n).map(|_| rng.f32() * 4.0 - 2.0).collect();
    x[100] = f32::NAN;
    x[7] = 10.0;
    x[8] = -10.0;
    x[200] = 9.999;
    x[201] = -9.999;
    for gated in [false, true] {
        let mut outs = Vec::new();
        for row in [15i64, 64] {
            let (mut root, mut input) = contexts(&be);
            let shape = [row, n as i64 / row];
            let a = upload(&mut input, F32, &shape, &x);
            let up = if gated { Some(upload(&mut input, F32, &shape, &g)) } else { None };
            let y = root.gelu(a, up).unwrap();
            outs.push(eval(&mut root, y));
        }
        for (i, (s, v)) in outs[0].iter().zip(&outs[1]).enumerate() {
            assert!(s.to_bits() == v.to_bits() || (s.is_nan() && v.is_nan()), "gelu gated {gated}: element {i} (x = {}): scalar {s}, blocks {v}", x[i]);
        }
    }
}
