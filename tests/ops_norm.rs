//! Differential tests of the normalisations and row reductions (softmax,
//! rms_norm, layer_norm, l2_norm, sum_rows, mean) against naive f64
//! references over random inputs, 1-D to 4-D shapes, broadcast weights and
//! biases, non-contiguous views; f16 and other unsupported inputs, bad
//! shapes and bad eps are errors naming the op; and a C ABI test.
mod common;
#[path = "common/capi.rs"]
mod capi_base;
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
fn nelem(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// Applies `f` to each row (dim 0) of contiguous values `v` of shape `ne`;
/// `f` gets the row and its linear row index and returns the output row.
fn per_row(ne: [usize; 4], v: &[f32], mut f: impl FnMut(&[f64], usize) -> Vec<f64>) -> Vec<f64> {
    let mut out = Vec::with_capacity(v.len());
    for (r, row) in v.chunks(ne[0]).enumerate() {
        let row: Vec<f64> = row.iter().map(|&x| x as f64).collect();
        out.extend(f(&row, r));
    }
    out
}

/// Value of `w` (shape `nw`) broadcast at element i0 of linear row `r` of a
/// tensor of shape `na`.
fn bcast(na: [usize; 4], nw: [usize; 4], w: &[f32], i0: usize, r: usize) -> f64 {
    let (i1, i2, i3) = (r % na[1], (r / na[1]) % na[2], r / (na[1] * na[2]));
    w[idx(nw, i0 % nw[0], i1 % nw[1], i2 % nw[2], i3 % nw[3])] as f64
}

struct Want {
    what: String,
    out: Tensor,
    want: Vec<f64>,
    atol: f64,
    rtol: f64,
    /// Extra per-element allowance (empty: none), for ill-conditioned rows.
    extra: Vec<f64>,
}

fn check_all(root: &mut Context, wants: Vec<Want>) {
    let outs: Vec<Tensor> = wants.iter().map(|w| w.out).collect();
    root.compute(&outs).expect("compute");
    for w in wants {
        let got = data::read_f32(w.out, "test").expect("read");
        assert_eq!(got.len(), w.want.len(), "{}: length", w.what);
        for (i, (&g, &e)) in got.iter().zip(&w.want).enumerate() {
            let lim = w.atol + w.rtol * e.abs() + w.extra.get(i).copied().unwrap_or(0.0);
            assert!((g as f64 - e).abs() <= lim, "{}: element {i}: got {g}, want {e}, |diff| {} > {lim}", w.what, (g as f64 - e).abs());
        }
    }
}

const SHAPES: &[&[i64]] = &[&[7], &[67, 3], &[1, 4], &[3, 4, 5], &[2, 3, 2, 3]];

// ---- softmax ------------------------------------------------------------------

fn softmax_ref(row: &[f64]) -> Vec<f64> {
    let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = row.iter().map(|&x| (x - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|&x| x / s).collect()
}

#[test]
fn softmax_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(201);
    let mut wants = Vec::new();
    for &shape in SHAPES {
        // Scale 100: without subtracting the row max, e^x would overflow.
        for scale in [3.0f32, 100.0] {
            let mut xv: Vec<f32> = rng.vec(nelem(shape)).iter().map(|x| x * scale).collect();
            // Masked entries (-inf) in every row but the first one.
            let ne = ne4(shape);
            for (r, row) in xv.chunks_mut(ne[0]).enumerate() {
                if r > 0 && ne[0] > 1 {
                    row[r % ne[0]] = f32::NEG_INFINITY;
                }
            }
            let a = upload(&mut input, F32, shape, &xv);
            let out = root.softmax(a).unwrap();
            assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
            wants.push(Want {
                what: format!("softmax {shape:?} x{scale}"),
                out,
                want: per_row(ne, &xv, |row, _| softmax_ref(row)),
                // SIMD expf (~2 ulp), a double-precision sum, one scaling:
                // 1e-6 relative (8 ulp) allowed; atol for tiny probabilities.
                atol: 1e-9,
                rtol: 1e-6,
                extra: vec![],
            });
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn softmax_rejects_unsupported_inputs() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[4, 3, 2], &[0.5; 24]);
    let h = upload(&mut input, F16, &[4, 3], &[0.5; 12]);
    let i = upload_i32(&mut input, &[4], &[1; 4]);
    let e = root.softmax(h).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DType);
    assert_eq!(e.message, "softmax: a must be f32, got f16[4,3]");
    assert_eq!(root.softmax(i).unwrap_err().message, "softmax: a must be f32, got i32[4]");
    // ggml's soft_max asserts a contiguous input.
    let p = permute(&root, a, [0, 2, 1, 3]);
    let e = root.softmax(p).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert_eq!(e.message, "softmax: a must be contiguous, got f32[4,2,3] (non-contiguous)");
    let t = transpose(&root, a);
    assert!(root.softmax(t).unwrap_err().message.starts_with("softmax: a must be contiguous"));
    let out = root.softmax(a).unwrap();
    assert_eq!(eval(&mut root, out), vec![0.25; 24]);
}

#[test]
fn softmax_of_a_fully_masked_row_is_nan_not_an_abort() {
    // ggml is built in Release, so the kernel's debug assert (sum > 0) is
    // compiled out: -inf - -inf gives NaN for that row; others are intact.
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let ninf = f32::NEG_INFINITY;
    let a = upload(&mut input, F32, &[3, 2], &[ninf, ninf, ninf, 0.0, ninf, 0.0]);
    let out = root.softmax(a).unwrap();
    let got = eval(&mut root, out);
    assert!(got[..3].iter().all(|v| v.is_nan()), "{got:?}");
    // Exact: two equal logits and a masked one.
    assert_eq!(&got[3..], &[0.5, 0.0, 0.5]);
}

// ---- rms_norm -----------------------------------------------------------------

fn rms_ref(row: &[f64], eps: f64) -> Vec<f64> {
    let ms = row.iter().map(|x| x * x).sum::<f64>() / row.len() as f64;
    row.iter().map(|x| x / (ms + eps).sqrt()).collect()
}

/// Weight shapes for an input shape: none, [n0] (the usual), the full
/// shape, [n0,1,n2,1] and [1] (broadcast along dim 0 too).
fn weight_shapes(shape: &[i64]) -> Vec<Option<Vec<i64>>> {
    let ne = ne4(shape).map(|d| d as i64);
    vec![None, Some(vec![ne[0]]), Some(ne.to_vec()), Some(vec![ne[0], 1, ne[2], 1]), Some(vec![1])]
}

#[test]
fn rms_norm_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(202);
    let mut wants = Vec::new();
    for &shape in SHAPES {
        for ws in weight_shapes(shape) {
            for eps in [1e-6f32, 0.0, 4.0] {
                let ne = ne4(shape);
                let xv = rng.vec(nelem(shape));
                let a = upload(&mut input, F32, shape, &xv);
                let (w, wv, nw) = match &ws {
                    Some(s) => {
                        let wv = rng.vec(nelem(s));
                        (Some(upload(&mut input, F32, s, &wv)), wv, ne4(s))
                    }
                    None => (None, vec![1.0], [1; 4]),
                };
                let out = root.rms_norm(a, w, eps).unwrap();
                assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
                wants.push(Want {
                    what: format!("rms_norm {shape:?} weight {ws:?} eps {eps}"),
                    out,
                    want: per_row(ne, &xv, |row, r| {
                        let y = rms_ref(row, eps as f64);
                        y.iter().enumerate().map(|(i0, v)| v * bcast(ne, nw, &wv, i0, r)).collect()
                    }),
                    // Sum of squares in double; sqrtf, a divide and up to two
                    // multiplies in f32: 5 ulp (6e-7 relative) allowed.
                    atol: 1e-9,
                    rtol: 6e-7,
                    extra: vec![],
                });
            }
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn rms_norm_takes_permuted_and_padded_rows() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(203);
    let mut wants = Vec::new();
    let xv = rng.vec(6 * 4 * 3);
    let a = upload(&mut input, F32, &[6, 4, 3], &xv);
    let wv = rng.vec(6);
    let w = upload(&mut input, F32, &[6], &wv);
    let w5 = upload(&mut input, F32, &[5], &wv[..5]);
    let p = permute(&root, a, [0, 2, 1, 3]); // [6,3,4]
    let v = padded_rows(&root, a, 5); // [5,4,3]
    for (kind, view, weight, nw) in [("permuted", p, w, 6usize), ("padded", v, w5, 5)] {
        let lx = logical(view, &xv);
        let ne = ne4(&view.ne());
        let out = root.rms_norm(view, Some(weight), 1e-5).unwrap();
        wants.push(Want {
            what: format!("rms_norm {kind}"),
            out,
            want: per_row(ne, &lx, |row, _| {
                rms_ref(row, 1e-5).iter().zip(&wv[..nw]).map(|(y, &w)| y * w as f64).collect()
            }),
            // As in rms_norm_matches_reference.
            atol: 1e-9,
            rtol: 6e-7,
            extra: vec![],
        });
    }
    check_all(&mut root, wants);
}

/// ggml's CPU rms_norm in f32/f64 exactly as its scalar code runs: each
/// square an f32 product added to an f64 in order, the mean rounded to f32,
/// `1.0f/sqrtf(mean + eps)`, then `x * scale * w` in f32.
fn rms_ggml_order(row: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let mut sum = 0f64;
    for &x in row {
        sum += (x * x) as f64;
    }
    let mean = (sum / row.len() as f64) as f32;
    let scale = 1.0f32 / (mean + eps).sqrt();
    row.iter().zip(w).map(|(&x, &w)| x * scale * w).collect()
}

#[test]
fn rms_norm_sums_in_ggml_order() {
    // Rows of 8k elements go 8 at a time through our vector code with
    // AVX-512 (scripts/patches/19-cpu-rms-norm-rows.sh), other lengths
    // through ggml's loop: the same floats either way, bit for bit. Row
    // counts that leave a partial block, planes, strided (padded) rows,
    // values from 1e-3 to 1e3. (A row's sum in f64 rounded to an f32 mean
    // hardly ever shows the order of its additions, which ours keeps
    // anyway; what this catches is a row's lane or element mixed up.)
    let be = backend();
    for (k, shape, padded) in [(8usize, [8i64, 1, 1], false), (64, [64, 13, 1], false), (576, [576, 9, 2], false), (1024, [1024, 17, 1], true), (40, [40, 3, 5], false), (100, [100, 11, 1], false)] {
        let (mut root, mut input) = contexts(&be);
        let mut rng = Rng::new(204 + k as u64);
        let rows = (shape[1] * shape[2]) as usize;
        let pad = if padded { 8 } else { 0 };
        let xv: Vec<f32> = (0..(k + pad) * rows).map(|i| rng.f32() * [1e-3f32, 1.0, 1e3][i % 3] - 0.5).collect();
        let wv = rng.vec(k);
        let full = upload(&mut input, F32, &[(k + pad) as i64, shape[1], shape[2]], &xv);
        let a = if padded { padded_rows(&root, full, k as i64) } else { full };
        let w = upload(&mut input, F32, &[k as i64], &wv);
        let out = root.rms_norm(a, Some(w), 1e-6).unwrap();
        let got = eval(&mut root, out);
        for r in 0..rows {
            let want = rms_ggml_order(&xv[r * (k + pad)..][..k], &wv, 1e-6);
            for (i, (g, e)) in got[r * k..][..k].iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), e.to_bits(), "rms_norm {shape:?} padded {padded}: row {r} element {i}: got {g}, want {e}");
            }
        }
    }
}

// ---- layer_norm ---------------------------------------------------------------

fn layer_ref(row: &[f64], eps: f64) -> Vec<f64> {
    let n = row.len() as f64;
    let mean = row.iter().sum::<f64>() / n;
    let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    row.iter().map(|x| (x - mean) / (var + eps).sqrt()).collect()
}

/// Per-element error allowance of layer_norm for rows whose spread is small
/// next to their magnitude: ggml rounds the mean and `x - mean` in f32 (2
/// ulp of the row's largest |x|, 2^-22 relative), an error the
/// normalisation then divides by sqrt(var + eps), times |weight|.
fn layer_extra(ne: [usize; 4], xv: &[f32], eps: f64, w_abs: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut out = Vec::with_capacity(xv.len());
    for (r, row) in xv.chunks(ne[0]).enumerate() {
        let row: Vec<f64> = row.iter().map(|&x| x as f64).collect();
        let n = row.len() as f64;
        let mean = row.iter().sum::<f64>() / n;
        let var = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let big = row.iter().fold(0f64, |m, x| m.max(x.abs()));
        for i0 in 0..row.len() {
            out.push(2f64.powi(-22) * big / (var + eps).sqrt() * w_abs(i0, r));
        }
    }
    out
}

#[test]
fn layer_norm_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(204);
    let mut wants = Vec::new();
    // Rows of at least 2 elements (a 1-element row has zero variance).
    let shapes: &[&[i64]] = &[&[7], &[67, 3], &[2, 4], &[3, 4, 5], &[2, 3, 2, 3]];
    for &shape in shapes {
        let ne = ne4(shape);
        let ws = weight_shapes(shape);
        // (weight shape, bias shape): bias only with a weight, except the
        // last case, whose bias must be ignored (Ollama's LayerNorm).
        let cases = [
            (ws[0].clone(), None),
            (ws[1].clone(), None),
            (ws[1].clone(), ws[1].clone()),
            (ws[2].clone(), ws[3].clone()),
            (ws[3].clone(), ws[2].clone()),
            (ws[4].clone(), ws[4].clone()),
            (None, ws[1].clone()),
        ];
        for (wsh, bsh) in cases {
            for eps in [1e-5f32, 0.5] {
                let xv: Vec<f32> = rng.vec(nelem(shape)).iter().map(|x| 3.0 * x + 0.5).collect();
                let a = upload(&mut input, F32, shape, &xv);
                let mut mk = |s: &Option<Vec<i64>>| match s {
                    Some(s) => {
                        let v = rng.vec(nelem(s));
                        (Some(upload(&mut input, F32, s, &v)), v, ne4(s))
                    }
                    None => (None, vec![], [1; 4]),
                };
                let (w, wv, nw) = mk(&wsh);
                let (b, bv, nb) = mk(&bsh);
                let out = root.layer_norm(a, w, b, eps).unwrap();
                assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
                let want = per_row(ne, &xv, |row, r| {
                    let y = layer_ref(row, eps as f64);
                    y.iter()
                        .enumerate()
                        .map(|(i0, &v)| match (w, b) {
                            (None, _) => v,
                            (Some(_), None) => v * bcast(ne, nw, &wv, i0, r),
                            (Some(_), Some(_)) => v * bcast(ne, nw, &wv, i0, r) + bcast(ne, nb, &bv, i0, r),
                        })
                        .collect()
                });
                let extra = layer_extra(ne, &xv, eps as f64, |i0, r| match w {
                    Some(_) => bcast(ne, nw, &wv, i0, r).abs(),
                    None => 1.0,
                });
                wants.push(Want {
                    what: format!("layer_norm {shape:?} weight {wsh:?} bias {bsh:?} eps {eps}"),
                    out,
                    want,
                    // Variance accumulated in f32 over up to 67 values of
                    // size ~3, then a scale, multiply and add: 5e-6
                    // relative; atol 1e-6 for results near 0 (the bias add
                    // cancels); plus the conditioning term of layer_extra.
                    atol: 1e-6,
                    rtol: 5e-6,
                    extra,
                });
            }
        }
    }
    check_all(&mut root, wants);
}

#[test]
fn layer_norm_and_l2_norm_take_any_layout() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(205);
    let mut wants = Vec::new();
    let xv: Vec<f32> = rng.vec(5 * 4 * 3).iter().map(|x| 2.0 * x).collect();
    let a = upload(&mut input, F32, &[5, 4, 3], &xv);
    let wv = rng.vec(4);
    let w = upload(&mut input, F32, &[4], &wv);
    // Transposed ([4,5,3], dim-0 stride 20 bytes), permuted, padded rows.
    let views = [
        ("transposed", transpose(&root, a)),
        ("permuted", permute(&root, a, [2, 0, 1, 3])),
        ("padded", padded_rows(&root, a, 4)),
    ];
    for (kind, v) in views {
        let lx = logical(v, &xv);
        let ne = ne4(&v.ne());
        assert_eq!(ne[0], 4);
        let out = root.layer_norm(v, Some(w), None, 1e-5).unwrap();
        wants.push(Want {
            what: format!("layer_norm {kind}"),
            out,
            want: per_row(ne, &lx, |row, _| layer_ref(row, 1e-5).iter().zip(&wv).map(|(y, &w)| y * w as f64).collect()),
            // As in layer_norm_matches_reference (rows of 4 values in
            // [-2,2): well conditioned, no extra term needed).
            atol: 1e-6,
            rtol: 5e-6,
            extra: vec![],
        });
        let out = root.l2_norm(v, 1e-6).unwrap();
        wants.push(Want {
            what: format!("l2_norm {kind}"),
            out,
            want: per_row(ne, &lx, |row, _| l2_ref(row, 1e-6)),
            // As in l2_norm_matches_reference.
            atol: 1e-9,
            rtol: 6e-7,
            extra: vec![],
        });
    }
    check_all(&mut root, wants);
}

// ---- l2_norm ------------------------------------------------------------------

fn l2_ref(row: &[f64], eps: f64) -> Vec<f64> {
    let n = row.iter().map(|x| x * x).sum::<f64>().sqrt();
    row.iter().map(|x| x / n.max(eps)).collect()
}

#[test]
fn l2_norm_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(206);
    let mut wants = Vec::new();
    for &shape in SHAPES {
        // eps 1e-12: the norm wins; eps 50: eps wins (rows of at most 67
        // values in [-1,1) have norms below 8.2).
        for eps in [1e-12f32, 0.0, 50.0] {
            let xv = rng.vec(nelem(shape));
            let a = upload(&mut input, F32, shape, &xv);
            let out = root.l2_norm(a, eps).unwrap();
            assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
            wants.push(Want {
                what: format!("l2_norm {shape:?} eps {eps}"),
                out,
                want: per_row(ne4(shape), &xv, |row, _| l2_ref(row, eps as f64)),
                // Sum of squares in double, then sqrtf, a divide and a
                // multiply in f32: 5 ulp (6e-7 relative) allowed.
                atol: 1e-9,
                rtol: 6e-7,
                extra: vec![],
            });
        }
    }
    check_all(&mut root, wants);
}

// ---- sum_rows / mean -------------------------------------------------------------

#[test]
fn sum_rows_and_mean_match_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(207);
    let mut wants = Vec::new();
    for &shape in SHAPES {
        let ne = ne4(shape);
        let xv = rng.vec(nelem(shape));
        let a = upload(&mut input, F32, shape, &xv);
        let s = root.sum_rows(a).unwrap();
        let m = root.mean(a).unwrap();
        let out_ne = [1, ne[1] as i64, ne[2] as i64, ne[3] as i64];
        assert_eq!((s.dtype(), s.ne(), m.dtype(), m.ne()), (F32, out_ne, F32, out_ne));
        let sums = per_row(ne, &xv, |row, _| vec![row.iter().sum()]);
        wants.push(Want {
            what: format!("sum_rows {shape:?}"),
            out: s,
            want: sums.clone(),
            // Accumulated in double, rounded once to f32 (1 ulp allowed);
            // atol for sums that cancel to near 0.
            atol: 1e-7,
            rtol: 1.2e-7,
            extra: vec![],
        });
        wants.push(Want {
            what: format!("mean {shape:?}"),
            out: m,
            want: sums.iter().map(|s| s / ne[0] as f64).collect(),
            // The rounded sum divided in f32: 2 ulp, atol as above.
            atol: 1e-7,
            rtol: 2.4e-7,
            extra: vec![],
        });
    }
    // Permuted dims 1..3 and padded rows are fine (rows stay contiguous).
    let xv = rng.vec(6 * 4 * 3);
    let a = upload(&mut input, F32, &[6, 4, 3], &xv);
    for (kind, v) in [("permuted", permute(&root, a, [0, 2, 1, 3])), ("padded", padded_rows(&root, a, 5))] {
        let lx = logical(v, &xv);
        let ne = ne4(&v.ne());
        let sums = per_row(ne, &lx, |row, _| vec![row.iter().sum()]);
        let (s, m) = (root.sum_rows(v).unwrap(), root.mean(v).unwrap());
        // Tolerances as above.
        wants.push(Want { what: format!("sum_rows {kind}"), out: s, want: sums.clone(), atol: 1e-7, rtol: 1.2e-7, extra: vec![] });
        let means = sums.iter().map(|s| s / ne[0] as f64).collect();
        wants.push(Want { what: format!("mean {kind}"), out: m, want: means, atol: 1e-7, rtol: 2.4e-7, extra: vec![] });
    }
    check_all(&mut root, wants);
}

// ---- bad inputs ------------------------------------------------------------------

#[test]
fn norms_reject_bad_eps_types_shapes_and_layouts() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[4, 3], &[1.0, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 2.0]);
    let h = upload(&mut input, F16, &[4, 3], &[1.0; 12]);
    let h4 = upload(&mut input, F16, &[4], &[1.0; 4]);
    let i = upload_i32(&mut input, &[4, 3], &[1; 12]);
    let w4 = upload(&mut input, F32, &[4], &[1.0; 4]);
    let w5 = upload(&mut input, F32, &[5], &[1.0; 5]);
    let w43x2 = upload(&mut input, F32, &[4, 3, 2], &[1.0; 24]);

    for eps in [f32::NAN, -1e-6, f32::INFINITY, f32::NEG_INFINITY] {
        let shown = format!("{eps}");
        let e = root.rms_norm(a, None, eps).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArgument);
        assert_eq!(e.message, format!("rms_norm: eps must be finite and >= 0, got {shown}"));
        let e = root.layer_norm(a, Some(w4), None, eps).unwrap_err();
        assert_eq!(e.message, format!("layer_norm: eps must be finite and >= 0, got {shown}"));
        let e = root.l2_norm(a, eps).unwrap_err();
        assert_eq!(e.message, format!("l2_norm: eps must be finite and >= 0, got {shown}"));
    }

    // f16 (and i32) inputs: ggml's CPU norm and reduction kernels are f32-only.
    for (t, d) in [(h, "f16[4,3]"), (i, "i32[4,3]")] {
        assert_eq!(root.rms_norm(t, None, 1e-5).unwrap_err().message, format!("rms_norm: a must be f32, got {d}"));
        assert_eq!(root.layer_norm(t, None, None, 1e-5).unwrap_err().message, format!("layer_norm: a must be f32, got {d}"));
        assert_eq!(root.l2_norm(t, 1e-5).unwrap_err().message, format!("l2_norm: a must be f32, got {d}"));
        let e = root.sum_rows(t).unwrap_err();
        assert_eq!((e.kind, e.message), (ErrorKind::DType, format!("sum_rows: a must be f32, got {d}")));
        assert_eq!(root.mean(t).unwrap_err().message, format!("mean: a must be f32, got {d}"));
    }

    // Weights and biases: f32, broadcastable to a.
    let e = root.rms_norm(a, Some(w5), 1e-5).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert_eq!(e.message, "rms_norm: weight f32[5] cannot broadcast to f32[4,3]");
    let e = root.rms_norm(a, Some(w43x2), 1e-5).unwrap_err();
    assert_eq!(e.message, "rms_norm: weight f32[4,3,2] cannot broadcast to f32[4,3]");
    let e = root.rms_norm(a, Some(h4), 1e-5).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::DType, "rms_norm: weight must be f32, got f16[4]"));
    let e = root.layer_norm(a, Some(w5), None, 1e-5).unwrap_err();
    assert_eq!(e.message, "layer_norm: weight f32[5] cannot broadcast to f32[4,3]");
    let e = root.layer_norm(a, Some(w4), Some(w5), 1e-5).unwrap_err();
    assert_eq!(e.message, "layer_norm: bias f32[5] cannot broadcast to f32[4,3]");
    let e = root.layer_norm(a, Some(w4), Some(h4), 1e-5).unwrap_err();
    assert_eq!(e.message, "layer_norm: bias must be f32, got f16[4]");

    // Layouts: rms_norm, sum_rows and mean need contiguous rows.
    let t = transpose(&root, a);
    let e = root.rms_norm(t, None, 1e-5).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(e.message.starts_with("rms_norm: a must have contiguous rows"), "{}", e.message);
    assert!(root.sum_rows(t).unwrap_err().message.starts_with("sum_rows: a must have contiguous rows"));
    assert!(root.mean(t).unwrap_err().message.starts_with("mean: a must have contiguous rows"));
    let wt = transpose(&root, w43x2); // [3,4,2], rows not contiguous
    let b3 = upload(&mut input, F32, &[3, 4, 2], &[0.0; 24]);
    let e = root.rms_norm(b3, Some(wt), 1e-5).unwrap_err();
    assert!(e.message.starts_with("rms_norm: weight must have contiguous rows"), "{}", e.message);

    // The context still computes: rows [1,2,3,4], [1,1,1,1], [0,0,0,2].
    let s = root.sum_rows(a).unwrap();
    let m = root.mean(a).unwrap();
    root.compute(&[s, m]).unwrap();
    assert_eq!(data::read_f32(s, "test").unwrap(), vec![10.0, 4.0, 2.0]);
    assert_eq!(data::read_f32(m, "test").unwrap(), vec![2.5, 1.0, 0.5]);
}

// ---- the C ABI ----------------------------------------------------------------

/// Declarations matching include/ggml_rs.h.
mod capi {
    pub use crate::capi_base::*;

    extern "C" {
        pub fn ggml_rs_softmax(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_rms_norm(c: *mut Ctx, a: *mut T, w: *mut T, eps: f32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_layer_norm(c: *mut Ctx, a: *mut T, w: *mut T, b: *mut T, eps: f32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_l2_norm(c: *mut Ctx, a: *mut T, eps: f32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_sum_rows(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_mean(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
    }
}

#[test]
fn c_abi_norm_ops_compute_and_report_errors() {
    use capi::*;
    use std::ptr::null_mut;
    unsafe {
        let mut err = Error::new();
        let mut be: *mut Backend = null_mut();
        // NULL params: the defaults.
        assert_eq!(ggml_rs_backend_new(std::ptr::null(), &mut be, &mut err), OK, "{}", err.text());
        let root = ggml_rs_ctx_new(be, 256, &mut err);
        assert!(!root.is_null(), "{}", err.text());
        let input = ggml_rs_ctx_input(root);
        let up = |v: &[f32], ne: &[i64]| {
            let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let mut e = Error::new();
            let t = ggml_rs_ctx_from_data(input, 0, ne.as_ptr(), ne.len(), b.as_ptr(), b.len(), &mut e);
            assert!(!t.is_null(), "{}", e.text());
            t
        };
        // Two rows of 4.
        let xv = [1.0f32, 2.0, 3.0, 4.0, -2.0, 0.0, 2.0, 4.0];
        let x = up(&xv, &[4, 2]);
        let w = up(&[1.0, 0.5, 2.0, -1.0], &[4]);
        let b = up(&[0.25; 4], &[4]);
        let outs = [
            ggml_rs_softmax(root, x, &mut err),
            ggml_rs_rms_norm(root, x, w, 0.0, &mut err),
            ggml_rs_rms_norm(root, x, null_mut(), 0.0, &mut err),
            ggml_rs_layer_norm(root, x, w, b, 0.0, &mut err),
            ggml_rs_layer_norm(root, x, null_mut(), b, 0.0, &mut err),
            ggml_rs_l2_norm(root, x, 0.0, &mut err),
            ggml_rs_sum_rows(root, x, &mut err),
            ggml_rs_mean(root, x, &mut err),
        ];
        assert!(outs.iter().all(|p| !p.is_null()), "{}", err.text());
        assert_eq!(ggml_rs_ctx_compute(root, outs.as_ptr(), outs.len(), &mut err), OK, "{}", err.text());
        let wv = [1.0f64, 0.5, 2.0, -1.0];
        let rows: Vec<Vec<f64>> = xv.chunks(4).map(|r| r.iter().map(|&v| v as f64).collect()).collect();
        let flat = |f: &dyn Fn(&[f64]) -> Vec<f64>| rows.iter().flat_map(|r| f(r)).collect::<Vec<f64>>();
        let wants = [
            flat(&|r| softmax_ref(r)),
            flat(&|r| rms_ref(r, 0.0).iter().zip(&wv).map(|(y, w)| y * w).collect()),
            flat(&|r| rms_ref(r, 0.0)),
            flat(&|r| layer_ref(r, 0.0).iter().zip(&wv).map(|(y, w)| y * w + 0.25).collect()),
            // Bias without weight: ignored.
            flat(&|r| layer_ref(r, 0.0)),
            flat(&|r| l2_ref(r, 0.0)),
            vec![10.0, 4.0],
            vec![2.5, 1.0],
        ];
        for (k, (&t, want)) in outs.iter().zip(&wants).enumerate() {
            let mut got = vec![0f32; want.len()];
            assert_eq!(ggml_rs_tensor_get_f32(t, got.as_mut_ptr(), got.len(), &mut err), OK, "{}", err.text());
            for (i, (&g, &e)) in got.iter().zip(want).enumerate() {
                // All f32 computations on 4 small values: 1e-5 relative
                // (layer_norm's, the widest, see layer_norm_matches_reference)
                // plus 2e-6 absolute.
                assert!((g as f64 - e).abs() <= 2e-6 + 1e-5 * e.abs(), "output {k} elem {i}: {g} vs {e}");
            }
        }

        // Errors come back through err with the status of their kind.
        let mut e = Error::new();
        assert!(ggml_rs_rms_norm(root, x, null_mut(), f32::NAN, &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "rms_norm: eps must be finite and >= 0, got NaN"));
        let w5 = up(&[1.0; 5], &[5]);
        let mut e = Error::new();
        assert!(ggml_rs_layer_norm(root, x, w5, null_mut(), 1e-5, &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (SHAPE, "layer_norm: weight f32[5] cannot broadcast to f32[4,2]"));
        let mut e = Error::new();
        assert!(ggml_rs_softmax(root, null_mut(), &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "softmax: a is NULL"));
        ggml_rs_ctx_clear_error(root);
        let y = ggml_rs_mean(root, w, &mut err);
        assert_eq!(ggml_rs_ctx_compute(root, &y, 1, &mut err), OK, "{}", err.text());
        let mut got = [0f32; 1];
        assert_eq!(ggml_rs_tensor_get_f32(y, got.as_mut_ptr(), 1, &mut err), OK);
        assert_eq!(got[0], 0.625);

        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}

