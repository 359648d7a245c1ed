//! Differential tests of the element-wise arithmetic ops (add, sub, mul,
//! div, scale, clamp) against naive references computed here in f64, over
//! random inputs, 1-D to 4-D shapes, broadcasting, non-contiguous views and
//! f32/f16 inputs; plus bad-input tests (an error naming the op, never an
//! abort, and the context stays usable).
mod common;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};

// ---- helpers (local to this file) -----------------------------------------



fn ne4(shape: &[i64]) -> [usize; 4] {
    let mut ne = [1usize; 4];
    for (i, &d) in shape.iter().enumerate() {
        ne[i] = d as usize;
    }
    ne
}

/// Element-wise `f(a, b)` with `b` (shape `nb_`) broadcast to `a` (shape `na`).
fn broadcast_ref(na: [usize; 4], a: &[f32], nb_: [usize; 4], b: &[f32], f: impl Fn(f64, f64) -> f64) -> Vec<f32> {
    let mut out = Vec::with_capacity(a.len());
    for i3 in 0..na[3] {
        for i2 in 0..na[2] {
            for i1 in 0..na[1] {
                for i0 in 0..na[0] {
                    let x = a[idx(na, i0, i1, i2, i3)] as f64;
                    let y = b[idx(nb_, i0 % nb_[0], i1 % nb_[1], i2 % nb_[2], i3 % nb_[3])] as f64;
                    out.push(f(x, y) as f32);
                }
            }
        }
    }
    out
}

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

/// One op output and its expected values, checked after one compute.
struct Want {
    what: String,
    out: Tensor,
    want: Vec<f32>,
    atol: f32,
    rtol: f32,
}

/// Computes every output in one graph, then compares each with its reference.
fn check_all(root: &mut Context, wants: Vec<Want>) {
    let outs: Vec<Tensor> = wants.iter().map(|w| w.out).collect();
    root.compute(&outs).expect("compute");
    for w in wants {
        let got = data::read_f32(w.out, "test").expect("read");
        assert_close(&w.what, &got, &w.want, w.atol, w.rtol);
    }
}

type BinOp = fn(&mut Context, Tensor, Tensor) -> ggml_rs::ml::Result<Tensor>;

fn binops() -> Vec<(&'static str, BinOp, fn(f64, f64) -> f64)> {
    vec![
        ("add", Context::add as BinOp, |x, y| x + y),
        ("sub", Context::sub, |x, y| x - y),
        ("mul", Context::mul, |x, y| x * y),
        ("div", Context::div, |x, y| x / y),
    ]
}

/// Random `b` values: for div, kept away from 0 (|b| in [0.5, 1.5)).
fn b_values(rng: &mut Rng, name: &str, n: usize) -> Vec<f32> {
    let v = rng.vec(n);
    if name == "div" {
        v.into_iter().map(|x| x.signum() * (0.5 + x.abs())).collect()
    } else {
        v
    }
}

/// (a shape, b shape) pairs: equal shapes, and b broadcast along various dims
/// (size 1 and proper divisors), 1-D to 4-D, odd sizes.
const BROADCASTS: &[(&[i64], &[i64])] = &[
    (&[7], &[7]),
    (&[7], &[1]),
    (&[37, 3], &[37, 3]),
    (&[37, 3], &[37]),
    (&[5, 3], &[1, 3]),
    (&[3, 4, 5], &[3, 1, 5]),
    (&[3, 4, 5], &[3, 2, 1]),
    (&[6, 4, 3, 2], &[3, 2, 1, 2]),
    (&[6, 4, 3, 2], &[6, 4, 3, 2]),
    (&[2, 3, 2, 3], &[1, 1, 1, 1]),
];

// ---- add / sub / mul / div ------------------------------------------------

#[test]
fn binary_ops_match_reference_f32_with_broadcasting() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(11);
    let mut wants = Vec::new();
    for (name, f, r) in binops() {
        for &(sa, sb) in BROADCASTS {
            let (na, nb_) = (ne4(sa), ne4(sb));
            let av = rng.vec(na.iter().product());
            let bv = b_values(&mut rng, name, nb_.iter().product());
            let a = upload(&mut input, F32, sa, &av);
            let b = upload(&mut input, F32, sb, &bv);
            let out = f(&mut root, a, b).unwrap();
            assert_eq!((out.dtype(), out.ne()), (F32, a.ne()), "{name}: result type/shape");
            wants.push(Want {
                what: format!("{name} f32 {sa:?} {sb:?}"),
                out,
                want: broadcast_ref(na, &av, nb_, &bv, r),
                // One f32 rounding of an exactly computed f64 value: 2 ulp.
                atol: 1e-7,
                rtol: 2.4e-7,
            });
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn binary_ops_match_reference_f16() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(12);
    let mut wants = Vec::new();
    for (name, f, r) in binops() {
        for &(sa, sb) in BROADCASTS {
            // f16 a with f16 b, and f16 a with f32 b: both give f16.
            for bt in [F16, F32] {
                let (na, nb_) = (ne4(sa), ne4(sb));
                let av = rng.vec(na.iter().product());
                let bv = b_values(&mut rng, name, nb_.iter().product());
                let a = upload(&mut input, F16, sa, &av);
                let b = upload(&mut input, bt, sb, &bv);
                let out = f(&mut root, a, b).unwrap();
                assert_eq!((out.dtype(), out.ne()), (F16, a.ne()), "{name}: result type/shape");
                wants.push(Want {
                    what: format!("{name} f16 {sa:?} b {} {sb:?}", tn(bt)),
                    out,
                    want: broadcast_ref(na, &rounded(F16, &av), nb_, &rounded(bt, &bv), r),
                    // Inputs rounded as uploaded; the op runs in f32 and its
                    // result is rounded once to f16 (half ulp = 2^-11 ≈ 4.9e-4
                    // relative); atol covers f32 rounding on cancellation.
                    atol: 1e-5,
                    rtol: 1e-3,
                });
            }
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn binary_ops_take_permuted_and_padded_views() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(13);
    let mut wants = Vec::new();
    for (name, f, r) in binops() {
        for dt in [F32, F16] {
            // a: [5,4,3] permuted to [5,3,4] (dims 1 and 2 swapped; rows stay
            // contiguous). b: [5,1,4] broadcast over the permuted dim 1.
            let av = rng.vec(60);
            let a0 = upload(&mut input, dt, &[5, 4, 3], &av);
            let a = permute(&root, a0, [0, 2, 1, 3]);
            assert!(!a.is_contiguous());
            let la = logical(a, &rounded(dt, &av));
            let bv = b_values(&mut rng, name, 20);
            let b = upload(&mut input, dt, &[5, 1, 4], &bv);
            let out = f(&mut root, a, b).unwrap();
            assert_eq!(out.ne(), [5, 3, 4, 1]);
            let tol = if dt == F16 { (1e-5, 1e-3) } else { (1e-7, 2.4e-7) };
            wants.push(Want {
                what: format!("{name} {} permuted a", tn(dt)),
                out,
                want: broadcast_ref([5, 3, 4, 1], &la, [5, 1, 4, 1], &rounded(dt, &bv), r),
                // f32: 2 ulp; f16: one f16 rounding (see binary_ops_match_reference_f16).
                atol: tol.0,
                rtol: tol.1,
            });

            // b: a permuted view and a padded-rows view (rows contiguous).
            let bv2 = b_values(&mut rng, name, 60);
            let b0 = upload(&mut input, dt, &[5, 4, 3], &bv2);
            let bp = permute(&root, b0, [0, 2, 1, 3]);
            let lb = logical(bp, &rounded(dt, &bv2));
            let av2 = rng.vec(60);
            let a2 = upload(&mut input, dt, &[5, 3, 4], &av2);
            let out = f(&mut root, a2, bp).unwrap();
            wants.push(Want {
                what: format!("{name} {} permuted b", tn(dt)),
                out,
                want: broadcast_ref([5, 3, 4, 1], &rounded(dt, &av2), [5, 3, 4, 1], &lb, r),
                // As above.
                atol: tol.0,
                rtol: tol.1,
            });

            let bv3 = b_values(&mut rng, name, 24);
            let b3 = upload(&mut input, dt, &[8, 3], &bv3);
            let bpad = padded_rows(&root, b3, 5);
            let lb3 = logical(bpad, &rounded(dt, &bv3));
            let av3 = rng.vec(30);
            let a3 = upload(&mut input, dt, &[5, 3, 2], &av3);
            let out = f(&mut root, a3, bpad).unwrap();
            wants.push(Want {
                what: format!("{name} {} padded b", tn(dt)),
                out,
                want: broadcast_ref([5, 3, 2, 1], &rounded(dt, &av3), [5, 3, 1, 1], &lb3, r),
                // As above.
                atol: tol.0,
                rtol: tol.1,
            });
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn binary_ops_reject_transposed_operands() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let x = upload(&mut input, F32, &[3, 4], &[0.5; 12]);
    let xt = transpose(&root, x); // [4,3], dim-0 stride 12 bytes
    let y = upload(&mut input, F32, &[4, 3], &[2.0; 12]);
    // A [3,1] tensor transposed: one-element rows at a 12-byte stride (ggml's
    // contiguous_rows test passes it; the kernels' nb[0] assert would not).
    let z = upload(&mut input, F32, &[3, 1], &[1.0; 3]);
    let zt = transpose(&root, z);
    let w = upload(&mut input, F32, &[1, 3], &[1.0; 3]);
    for (name, f, _) in binops() {
        let e = f(&mut root, xt, y).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape, "{name}: {}", e.message);
        assert!(e.message.starts_with(&format!("{name}: a must have contiguous rows")), "{}", e.message);
        let e = f(&mut root, zt, w).unwrap_err();
        assert!(e.message.starts_with(&format!("{name}: a must have contiguous rows")), "{}", e.message);
        // b transposed: its rows are not contiguous either.
        let e = f(&mut root, y, xt).unwrap_err();
        assert!(e.message.starts_with(&format!("{name}: b must have contiguous rows")), "{}", e.message);
    }
    // Still usable.
    let out = root.mul(y, y).unwrap();
    assert_eq!(eval(&mut root, out), vec![4.0; 12]);
}

#[test]
fn binary_ops_reject_bad_types_and_shapes() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[4, 3], &[1.0; 12]);
    let h = upload(&mut input, F16, &[4, 3], &[1.0; 12]);
    let i = upload_i32(&mut input, &[4, 3], &[1; 12]);
    let b5 = upload(&mut input, F32, &[5], &[1.0; 5]);
    let big = upload(&mut input, F32, &[4, 6], &[1.0; 24]);
    for (name, f, _) in binops() {
        let e = f(&mut root, i, a).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DType);
        assert_eq!(e.message, format!("{name}: a must be f32 or f16, got i32[4,3]"));
        let e = f(&mut root, a, i).unwrap_err();
        assert_eq!(e.message, format!("{name}: b must be f32 or f16, got i32[4,3]"));
        // An f32 a takes only an f32 b (no CPU kernel for f32 = f32 op f16).
        let e = f(&mut root, a, h).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DType);
        assert!(e.message.starts_with(&format!("{name}: an f32 tensor takes only f32 operands")), "{}", e.message);
        let e = f(&mut root, a, b5).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape);
        assert_eq!(e.message, format!("{name}: cannot broadcast f32[5] to f32[4,3]"));
        // b larger than a does not broadcast either.
        let e = f(&mut root, a, big).unwrap_err();
        assert_eq!(e.message, format!("{name}: cannot broadcast f32[4,6] to f32[4,3]"));
    }
    let out = root.sub(a, a).unwrap();
    assert_eq!(eval(&mut root, out), vec![0.0; 12]);
}

// ---- scale ------------------------------------------------------------------

#[test]
fn scale_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(21);
    let mut wants = Vec::new();
    let shapes: &[&[i64]] = &[&[7], &[37, 3], &[3, 4, 5], &[2, 3, 2, 3]];
    for &shape in shapes {
        for s in [0.5f32, -3.25, 0.0, 1e-3] {
            let n = ne4(shape).iter().product();
            let av = rng.vec(n);
            let a = upload(&mut input, F32, shape, &av);
            let out = root.scale(a, s).unwrap();
            assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
            wants.push(Want {
                what: format!("scale {shape:?} by {s}"),
                out,
                want: av.iter().map(|&x| (x as f64 * s as f64) as f32).collect(),
                // One f32 multiply: correctly rounded, 1 ulp allowed.
                atol: 0.0,
                rtol: 1.2e-7,
            });
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn scale_takes_a_one_token_slice() {
    // Token 1 of [4, 2, 3, 1] (a [4, 2, 1, 1] view whose dim-3 stride is
    // three tokens): contiguous to ggml (it skips the strides of size-1
    // dims), not padded-1d, which ggml_scale asserts. It is copied first.
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let av: Vec<f32> = (0..24).map(|i| i as f32).collect();
    let a = upload(&mut input, F32, &[4, 2, 3, 1], &av);
    let v = root.view(a, 8 * 4, &[4, 2, 1, 1], &[16, 32, 96]).unwrap();
    let out = root.scale(v, 2.0).unwrap();
    let want = av[8..16].iter().map(|x| x * 2.0).collect();
    check_all(&mut root, vec![Want { what: "scale of a slice".into(), out, want, atol: 0.0, rtol: 0.0 }]);
}

#[test]
fn scale_rejects_what_the_cpu_kernel_cannot_run() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[5, 4, 3], &[1.0; 60]);
    // The CPU scale kernel has no f16 version (it would abort).
    let h = upload(&mut input, F16, &[5, 4], &[1.0; 20]);
    let e = root.scale(h, 2.0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DType);
    assert_eq!(e.message, "scale: a must be f32, got f16[5,4]");
    // It also asserts a contiguous input: a permuted view must be refused.
    let p = permute(&root, a, [0, 2, 1, 3]);
    let e = root.scale(p, 2.0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert_eq!(e.message, "scale: a must be contiguous, got f32[5,3,4] (non-contiguous)");
    let t = transpose(&root, a);
    assert!(root.scale(t, 2.0).unwrap_err().message.starts_with("scale: a must be contiguous"));
    // A [3,1] tensor transposed: "contiguous" to ggml (one-element rows),
    // but the constructor asserts a dim-0 stride of one element.
    let z = upload(&mut input, F32, &[3, 1], &[1.0; 3]);
    let zt = transpose(&root, z);
    let e = root.scale(zt, 2.0).unwrap_err();
    assert!(e.message.starts_with("scale: a must have contiguous rows"), "{}", e.message);
    let i = upload_i32(&mut input, &[3], &[1, 2, 3]);
    assert!(root.scale(i, 2.0).unwrap_err().message.starts_with("scale: a must be f32"));
    // Still usable.
    let out = root.scale(a, -2.0).unwrap();
    assert_eq!(eval(&mut root, out), vec![-2.0; 60]);
}

// ---- clamp ------------------------------------------------------------------

#[test]
fn clamp_matches_reference_f32_and_f16() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(31);
    let mut wants = Vec::new();
    let shapes: &[&[i64]] = &[&[7], &[37, 3], &[3, 4, 5], &[2, 3, 2, 3]];
    let bounds = [(-0.5f32, 0.5f32), (0.0, 0.0), (-2.0, 0.25), (f32::NEG_INFINITY, 0.1), (-0.3, f32::INFINITY)];
    for dt in [F32, F16] {
        for &shape in shapes {
            for (lo, hi) in bounds {
                let av = rng.vec(ne4(shape).iter().product());
                let a = upload(&mut input, dt, shape, &av);
                let out = root.clamp(a, lo, hi).unwrap();
                assert_eq!((out.dtype(), out.ne()), (dt, a.ne()));
                wants.push(Want {
                    what: format!("clamp {} {shape:?} [{lo},{hi}]", tn(dt)),
                    out,
                    // f16: the clamped value is an f16 input or a bound
                    // rounded to f16.
                    want: rounded(dt, &rounded(dt, &av).iter().map(|&x| x.max(lo).min(hi)).collect::<Vec<_>>()),
                    // Exact: clamping only selects values.
                    atol: 0.0,
                    rtol: 0.0,
                });
            }
        }
        // A padded-rows view (rows at a fixed stride) is supported.
        let av = rng.vec(8 * 3 * 2);
        let a = upload(&mut input, dt, &[8, 3, 2], &av);
        let v = padded_rows(&root, a, 5);
        let lv = logical(v, &rounded(dt, &av));
        let out = root.clamp(v, -0.25, 0.5).unwrap();
        wants.push(Want {
            what: format!("clamp {} padded rows", tn(dt)),
            out,
            want: rounded(dt, &lv.iter().map(|&x| x.clamp(-0.25, 0.5)).collect::<Vec<_>>()),
            // Exact, as above.
            atol: 0.0,
            rtol: 0.0,
        });
    }
    check_all(&mut root, wants);
}

#[test]
fn clamp_rejects_bad_bounds_types_and_layouts() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[5, 4, 3], &[3.0; 60]);
    for (lo, hi) in [(f32::NAN, 1.0), (0.0, f32::NAN), (1.0, 0.0)] {
        let e = root.clamp(a, lo, hi).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert!(e.message.starts_with("clamp: invalid bounds"), "{}", e.message);
    }
    let i = upload_i32(&mut input, &[3], &[1, 2, 3]);
    assert_eq!(root.clamp(i, 0.0, 1.0).unwrap_err().message, "clamp: a must be f32 or f16, got i32[3]");
    // The CPU kernel walks rows at a fixed stride and asserts dim-0
    // contiguity: permuted dims 1..3 would read the wrong rows (or out of
    // bounds), a transposed view would abort.
    let p = permute(&root, a, [0, 2, 1, 3]);
    let e = root.clamp(p, 0.0, 1.0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(e.message.starts_with("clamp: a must have contiguous rows"), "{}", e.message);
    let t = transpose(&root, a);
    assert!(root.clamp(t, 0.0, 1.0).unwrap_err().message.starts_with("clamp: a must have contiguous rows"));
    let z = upload(&mut input, F32, &[3, 1], &[1.0; 3]);
    let zt = transpose(&root, z);
    assert!(root.clamp(zt, 0.0, 1.0).unwrap_err().message.starts_with("clamp: a must have contiguous rows"));
    // Still usable.
    let out = root.clamp(a, -1.0, 1.0).unwrap();
    assert_eq!(eval(&mut root, out), vec![1.0; 60]);
}

