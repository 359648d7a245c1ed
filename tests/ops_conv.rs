//! conv_2d, conv_3d, conv_1d_dw, im2col, avg_pool_2d and interpolate,
//! differential against naive references written here, on random data.
//!
//! Tolerances (|got - want| <= atol + rtol*|want|):
//! * convolutions: ggml unrolls the input into f16 (im2col) and converts
//!   the kernel to f16 for the product, so the reference convolves the
//!   f16-rounded input and kernel in f64; what remains is f32 accumulation
//!   over at most ~100 terms: atol 1e-4, rtol 1e-4.
//! * im2col: an f32 copy, exact.
//! * avg_pool_2d: f32 sums of at most 16 values: atol 1e-6, rtol 1e-6.
//! * interpolate: the reference maps coordinates in f32 as the definition
//!   states (pixel centres, or corners) and blends in f64: atol 1e-5.
mod common;
use common::*;
use common::arr::{ne_of, Arr};

use ggml_rs::ml::ops::conv::ScaleMode;
use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

fn max_err(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn out_len(n: usize, k: usize, s: usize, p: usize, d: usize) -> usize {
    (n + 2 * p - d * (k - 1) - 1) / s + 1
}

/// Direct 2-D convolution: kernel [KW,KH,IC,OC], input [W,H,IC,N].
fn conv2d_ref(k: &Arr, x: &Arr, s: [usize; 2], p: [usize; 2], d: [usize; 2]) -> Arr {
    let [kw, kh, ic, oc] = k.ne;
    let [w, h, _, n] = x.ne;
    let (ow, oh) = (out_len(w, kw, s[0], p[0], d[0]), out_len(h, kh, s[1], p[1], d[1]));
    let mut out = Arr::zeros([ow, oh, oc, n]);
    for b in 0..n {
        for o in 0..oc {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0f64;
                    for c in 0..ic {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let ix = (ox * s[0] + kx * d[0]) as i64 - p[0] as i64;
                                let iy = (oy * s[1] + ky * d[1]) as i64 - p[1] as i64;
                                acc += k.at([kx, ky, c, o]) as f64 * x.at_padded(ix, iy, c, b) as f64;
                            }
                        }
                    }
                    out.set(acc as f32, [ox, oy, o, b]);
                }
            }
        }
    }
    out
}

/// Runs conv_2d on random data and compares with the reference.
#[allow(clippy::too_many_arguments)]
fn check_conv2d(seed: u64, kne: [usize; 4], xne: [usize; 4], kt: u32, xt: u32, s: [usize; 2], p: [usize; 2], d: [usize; 2]) {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(seed);
    let (k, x) = (Arr::rand(&mut rng, kne, F32), Arr::rand(&mut rng, xne, F32));
    let (kt_, xt_) = (k.upload(&mut input, kt), x.upload(&mut input, xt));
    let i32s = |a: [usize; 2]| a.map(|v| v as i32);
    let y = root.conv_2d(kt_, xt_, i32s(s), i32s(p), i32s(d)).unwrap();
    let want = conv2d_ref(&k.f16(), &x.f16(), s, p, d);
    assert_eq!(ne_of(y), want.ne, "conv_2d shape");
    assert_eq!(y.dtype(), F32);
    let got = eval(&mut root, y);
    eprintln!("conv_2d {kne:?} {xne:?}: max |err| {:.2e}, vs unrounded {:.2e}", max_err(&got, &want.v), max_err(&got, &conv2d_ref(&k, &x, s, p, d).v));
    assert_close(&format!("conv_2d k{kne:?} x{xne:?} s{s:?} p{p:?} d{d:?}"), &got, &want.v, 1e-4, 1e-4);
}

#[test]
fn conv_2d_matches_direct_convolution() {
    // kernel/input types, strides, padding, dilation, batches.
    check_conv2d(1, [3, 3, 2, 4], [8, 7, 2, 2], F32, F32, [1, 1], [1, 1], [1, 1]);
    check_conv2d(2, [2, 3, 3, 5], [9, 10, 3, 1], F16, F32, [2, 1], [0, 2], [1, 2]);
    check_conv2d(3, [1, 1, 4, 3], [5, 5, 4, 3], F32, F16, [1, 1], [0, 0], [1, 1]);
    check_conv2d(4, [3, 2, 1, 2], [11, 6, 1, 1], F16, F16, [3, 2], [2, 1], [2, 1]);
    // A patch embedding (Ollama's vision towers): stride = kernel size.
    check_conv2d(5, [4, 4, 3, 8], [16, 12, 3, 1], F32, F32, [4, 4], [0, 0], [1, 1]);
    // The kernel exactly as large as the padded input: one output.
    check_conv2d(6, [5, 4, 2, 2], [3, 2, 2, 1], F32, F32, [1, 1], [1, 1], [1, 1]);
}

#[test]
fn conv_2d_views_are_copied_first() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(7);
    // input as a transposed view: stored [H, W, C], viewed [W, H, C].
    let xs = Arr::rand(&mut rng, [6, 9, 2, 1], F32);
    let xst = xs.upload(&mut input, F32);
    let xv = root.permute(xst, [1, 0, 2, 3]).unwrap();
    assert!(!xv.is_contiguous());
    let mut x = Arr::zeros([9, 6, 2, 1]);
    for c in 0..2 {
        for i in 0..9 {
            for j in 0..6 {
                x.set(xs.at([j, i, c, 0]), [i, j, c, 0]);
            }
        }
    }
    // kernel as a permuted view: stored [KW, KH, OC, IC], viewed [KW, KH, IC, OC].
    let ks = Arr::rand(&mut rng, [3, 3, 4, 2], F32);
    let kst = ks.upload(&mut input, F16);
    let kv = root.permute(kst, [0, 1, 3, 2]).unwrap();
    let mut k = Arr::zeros([3, 3, 2, 4]);
    for o in 0..4 {
        for c in 0..2 {
            for ky in 0..3 {
                for kx in 0..3 {
                    k.set(ks.at([kx, ky, o, c]), [kx, ky, c, o]);
                }
            }
        }
    }
    let y = root.conv_2d(kv, xv, [1, 2], [1, 0], [1, 1]).unwrap();
    let want = conv2d_ref(&k.f16(), &x.f16(), [1, 2], [1, 0], [1, 1]);
    assert_eq!(ne_of(y), want.ne);
    assert_close("conv_2d of views", &eval(&mut root, y), &want.v, 1e-4, 1e-4);
}

/// Direct 3-D convolution with `ic` channels folded into dim 3.
fn conv3d_ref(k: &Arr, x: &Arr, ic: usize, s: [usize; 3], p: [usize; 3], d: [usize; 3]) -> Arr {
    let [kw, kh, kd, koc] = k.ne;
    let [w, h, dd, xn] = x.ne;
    let (oc, n) = (koc / ic, xn / ic);
    let o = [out_len(w, kw, s[0], p[0], d[0]), out_len(h, kh, s[1], p[1], d[1]), out_len(dd, kd, s[2], p[2], d[2])];
    let mut out = Arr::zeros([o[0], o[1], o[2], oc * n]);
    for b in 0..n {
        for f in 0..oc {
            for oz in 0..o[2] {
                for oy in 0..o[1] {
                    for ox in 0..o[0] {
                        let mut acc = 0f64;
                        for c in 0..ic {
                            for kz in 0..kd {
                                let iz = (oz * s[2] + kz * d[2]) as i64 - p[2] as i64;
                                if iz < 0 || iz >= dd as i64 {
                                    continue;
                                }
                                for ky in 0..kh {
                                    for kx in 0..kw {
                                        let ix = (ox * s[0] + kx * d[0]) as i64 - p[0] as i64;
                                        let iy = (oy * s[1] + ky * d[1]) as i64 - p[1] as i64;
                                        let v = x.at_padded(ix, iy, iz as usize, b * ic + c);
                                        acc += k.at([kx, ky, kz, f * ic + c]) as f64 * v as f64;
                                    }
                                }
                            }
                        }
                        out.set(acc as f32, [ox, oy, oz, b * oc + f]);
                    }
                }
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn check_conv3d(seed: u64, kne: [usize; 4], xne: [usize; 4], ic: usize, kt: u32, s: [usize; 3], p: [usize; 3], d: [usize; 3]) {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(seed);
    let (k, x) = (Arr::rand(&mut rng, kne, F32), Arr::rand(&mut rng, xne, F32));
    let (kt_, xt_) = (k.upload(&mut input, kt), x.upload(&mut input, F32));
    let i32s = |a: [usize; 3]| a.map(|v| v as i32);
    let y = root.conv_3d(kt_, xt_, ic as i64, i32s(s), i32s(p), i32s(d)).unwrap();
    let want = conv3d_ref(&k.f16(), &x.f16(), ic, s, p, d);
    assert_eq!(ne_of(y), want.ne, "conv_3d shape");
    let got = eval(&mut root, y);
    assert_close(&format!("conv_3d k{kne:?} x{xne:?} ic {ic} s{s:?} p{p:?} d{d:?}"), &got, &want.v, 1e-4, 1e-4);
}

#[test]
fn conv_3d_matches_direct_convolution() {
    check_conv3d(11, [2, 2, 2, 3 * 2], [5, 4, 3, 2 * 2], 2, F32, [1, 1, 1], [0, 0, 0], [1, 1, 1]);
    check_conv3d(12, [3, 1, 2, 2 * 3], [6, 5, 4, 3], 3, F16, [2, 1, 1], [1, 0, 1], [1, 2, 1]);
    check_conv3d(13, [1, 2, 3, 4], [4, 4, 7, 2], 1, F32, [1, 2, 2], [0, 1, 1], [1, 1, 2]);
    // Ollama's use (Qwen-VL patch embedding): stride = kernel, one output
    // per patch; the [1,1,1,OC*N] result is what Conv3D reshapes to [OC,N].
    check_conv3d(14, [2, 2, 2, 4 * 3], [2, 2, 2, 5 * 3], 3, F16, [2, 2, 2], [0, 0, 0], [1, 1, 1]);
}

/// Depthwise 1-D convolution: kernel [K,1,C*m], input [L,C].
fn conv1d_dw_ref(k: &Arr, x: &Arr, s: usize, p: usize, d: usize) -> Arr {
    let (kk, cm) = (k.ne[0], k.ne[2]);
    let (l, c) = (x.ne[0], x.ne[1]);
    let m = cm / c;
    let ol = out_len(l, kk, s, p, d);
    let mut out = Arr::zeros([ol, cm, 1, 1]);
    for j in 0..cm {
        for o in 0..ol {
            let mut acc = 0f64;
            for t in 0..kk {
                let i = (o * s + t * d) as i64 - p as i64;
                acc += k.at([t, 0, j, 0]) as f64 * x.at_padded(i, (j / m) as i64, 0, 0) as f64;
            }
            out.set(acc as f32, [o, j, 0, 0]);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn check_conv1d_dw(seed: u64, kne: [usize; 4], xne: [usize; 4], kt: u32, xt: u32, s: usize, p: usize, d: usize) {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(seed);
    let (k, x) = (Arr::rand(&mut rng, kne, F32), Arr::rand(&mut rng, xne, F32));
    let (kt_, xt_) = (k.upload(&mut input, kt), x.upload(&mut input, xt));
    let y = root.conv_1d_dw(kt_, xt_, s as i32, p as i32, d as i32).unwrap();
    let want = conv1d_dw_ref(&k.f16(), &x.f16(), s, p, d);
    assert_eq!(ne_of(y), want.ne, "conv_1d_dw shape");
    let got = eval(&mut root, y);
    assert_close(&format!("conv_1d_dw k{kne:?} x{xne:?} s{s} p{p} d{d}"), &got, &want.v, 1e-4, 1e-4);
}

#[test]
fn conv_1d_dw_matches_direct_convolution() {
    check_conv1d_dw(21, [3, 1, 4, 1], [10, 4, 1, 1], F32, F32, 1, 1, 1);
    check_conv1d_dw(22, [5, 1, 3, 1], [17, 3, 1, 1], F16, F32, 2, 2, 2);
    check_conv1d_dw(23, [4, 1, 6, 1], [9, 6, 1, 1], F32, F16, 3, 0, 1);
    // Depth multiplier 2: kernel channels 2j and 2j+1 filter input channel j.
    check_conv1d_dw(24, [3, 1, 4, 1], [8, 2, 1, 1], F16, F16, 1, 1, 1);
}

/// 2-D im2col: [IC*KH*KW, OW, OH, N].
fn im2col_ref(kw: usize, kh: usize, x: &Arr, s: [usize; 2], p: [usize; 2], d: [usize; 2]) -> Arr {
    let [w, h, ic, n] = x.ne;
    let (ow, oh) = (out_len(w, kw, s[0], p[0], d[0]), out_len(h, kh, s[1], p[1], d[1]));
    let mut out = Arr::zeros([ic * kh * kw, ow, oh, n]);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                for c in 0..ic {
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let ix = (ox * s[0] + kx * d[0]) as i64 - p[0] as i64;
                            let iy = (oy * s[1] + ky * d[1]) as i64 - p[1] as i64;
                            out.set(x.at_padded(ix, iy, c, b), [c * kh * kw + ky * kw + kx, ox, oy, b]);
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn im2col_matches_reference_exactly() {
    let be = backend();
    // (kernel, input, stride, padding, dilation)
    type Case = ([usize; 4], [usize; 4], [usize; 2], [usize; 2], [usize; 2]);
    let cases: [Case; 4] = [
        ([3, 3, 2, 1], [7, 6, 2, 2], [1, 1], [1, 1], [1, 1]),
        ([2, 3, 3, 4], [9, 8, 3, 1], [2, 1], [0, 2], [2, 1]),
        // Ollama's patch merger (mistral3): windows = stride, no padding.
        ([2, 2, 5, 1], [6, 4, 5, 1], [2, 2], [0, 0], [1, 1]),
        ([1, 4, 1, 1], [3, 9, 1, 3], [1, 3], [0, 1], [1, 2]),
    ];
    for (i, (kne, xne, s, p, d)) in cases.into_iter().enumerate() {
        let (mut root, mut input) = contexts(&be);
        let mut rng = Rng::new(30 + i as u64);
        let x = Arr::rand(&mut rng, xne, F32);
        let xt = x.upload(&mut input, F32);
        // Only the kernel's shape matters: an f16 tensor of zeros.
        let k = input.zeros(F16, &kne.map(|v| v as i64)).unwrap();
        let i32s = |a: [usize; 2]| a.map(|v| v as i32);
        let y = root.im2col(k, xt, i32s(s), i32s(p), i32s(d)).unwrap();
        let want = im2col_ref(kne[0], kne[1], &x, s, p, d);
        assert_eq!(ne_of(y), want.ne, "im2col shape, case {i}");
        assert_eq!(y.dtype(), F32);
        assert_eq!(eval(&mut root, y), want.v, "im2col case {i}");
    }
    // A permuted input (copied first).
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(39);
    let xs = Arr::rand(&mut rng, [5, 2, 7, 1], F32); // [W, C, H]
    let xv = root.permute(xs.upload(&mut input, F32), [0, 2, 1, 3]).unwrap(); // [W, H, C]
    let mut x = Arr::zeros([5, 7, 2, 1]);
    for c in 0..2 {
        for y in 0..7 {
            for xx in 0..5 {
                x.set(xs.at([xx, c, y, 0]), [xx, y, c, 0]);
            }
        }
    }
    let k = root.new_tensor("kernel", F32, [2, 2, 2, 1]).unwrap();
    let y = root.im2col(k, xv, [1, 2], [1, 0], [1, 1]).unwrap();
    assert_eq!(eval(&mut root, y), im2col_ref(2, 2, &x, [1, 2], [1, 0], [1, 1]).v);
}

/// Average pooling with zero padding counted in the k*k divisor.
fn avg_pool_ref(x: &Arr, k: usize, s: usize, p: usize) -> Arr {
    let [w, h, c, n] = x.ne;
    let (ow, oh) = ((w + 2 * p - k) / s + 1, (h + 2 * p - k) / s + 1);
    let mut out = Arr::zeros([ow, oh, c, n]);
    for b in 0..n {
        for ch in 0..c {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0f64;
                    for ky in 0..k {
                        for kx in 0..k {
                            let ix = (ox * s + kx) as i64 - p as i64;
                            let iy = (oy * s + ky) as i64 - p as i64;
                            acc += x.at_padded(ix, iy, ch, b) as f64;
                        }
                    }
                    out.set((acc / (k * k) as f64) as f32, [ox, oy, ch, b]);
                }
            }
        }
    }
    out
}

#[test]
fn avg_pool_2d_matches_reference() {
    let be = backend();
    let cases: [([usize; 4], u32, usize, usize, usize); 6] = [
        ([8, 6, 3, 2], F32, 2, 2, 0),
        ([7, 7, 2, 1], F32, 3, 2, 1),
        ([5, 4, 2, 1], F16, 2, 1, 1),
        // Gemma 3's vision pooling: k = s, no padding.
        ([16, 16, 4, 1], F32, 4, 4, 0),
        ([9, 5, 1, 3], F16, 3, 3, 1),
        ([3, 3, 1, 1], F32, 5, 1, 1), // window as large as the padded input
    ];
    for (i, (ne, ty, k, s, p)) in cases.into_iter().enumerate() {
        let (mut root, mut input) = contexts(&be);
        let mut rng = Rng::new(40 + i as u64);
        let x = Arr::rand(&mut rng, ne, F32);
        let xt = x.upload(&mut input, ty);
        let y = root.avg_pool_2d(xt, k as i32, s as i32, p as f32).unwrap();
        let xr = if ty == F16 { x.f16() } else { x.clone() };
        let want = avg_pool_ref(&xr, k, s, p);
        assert_eq!(ne_of(y), want.ne, "avg_pool_2d shape, case {i}");
        assert_eq!(y.dtype(), F32);
        assert_close(&format!("avg_pool_2d case {i}"), &eval(&mut root, y), &want.v, 1e-6, 1e-6);
    }
    // Padding counts in the divisor: a 2x2 window over a corner with one
    // row and column of padding sees one value and divides by 4.
    let (mut root, mut input) = contexts(&be);
    let x = upload(&mut input, F32, &[2, 2], &[4.0, 8.0, 12.0, 16.0]);
    let y = root.avg_pool_2d(x, 2, 2, 1.0).unwrap();
    assert_eq!(eval(&mut root, y), vec![1.0, 2.0, 3.0, 4.0]);
    // A permuted input is copied first.
    let mut rng = Rng::new(49);
    let xs = Arr::rand(&mut rng, [6, 4, 2, 1], F32); // [W, H, C] stored as [H, W, C]
    let xv = root.permute(xs.upload(&mut input, F32), [1, 0, 2, 3]).unwrap();
    let mut x = Arr::zeros([4, 6, 2, 1]);
    for c in 0..2 {
        for a in 0..6 {
            for b in 0..4 {
                x.set(xs.at([a, b, c, 0]), [b, a, c, 0]);
            }
        }
    }
    let y = root.avg_pool_2d(xv, 2, 1, 0.0).unwrap();
    assert_close("avg_pool_2d of a view", &eval(&mut root, y), &avg_pool_ref(&x, 2, 1, 0).v, 1e-6, 1e-6);
}

/// Interpolation reference. Coordinates are mapped in f32 as the
/// definition states: without align-corners the centre of output pixel i
/// samples source coordinate (i + 0.5)/sf - 0.5 (sf = out/in), with it
/// i/sf' (sf' = (out-1)/(in-1)); nearest takes floor(i/sf) (on dims 2 and
/// 3 always); bilinear clamps to the edge.
fn interpolate_ref(x: &Arr, ne: [usize; 4], bilinear: bool, align: bool) -> Arr {
    let mut sf: Vec<f32> = (0..4).map(|i| ne[i] as f32 / x.ne[i] as f32).collect();
    let mut off = 0.5f32;
    if align {
        off = 0.0;
        for i in 0..2 {
            if ne[i] > 1 && x.ne[i] > 1 {
                sf[i] = (ne[i] - 1) as f32 / (x.ne[i] - 1) as f32;
            }
        }
    }
    let mut out = Arr::zeros(ne);
    for i3 in 0..ne[3] {
        let j3 = (i3 as f32 / sf[3]) as usize;
        for i2 in 0..ne[2] {
            let j2 = (i2 as f32 / sf[2]) as usize;
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    let v = if !bilinear {
                        x.at([(i0 as f32 / sf[0]) as usize, (i1 as f32 / sf[1]) as usize, j2, j3])
                    } else {
                        let pos = |i: usize, d: usize| -> (usize, usize, f64) {
                            let c = (i as f32 + off) / sf[d] - off;
                            let lo = (c.floor() as i64).clamp(0, x.ne[d] as i64 - 1);
                            let hi = (c.floor() as i64 + 1).clamp(0, x.ne[d] as i64 - 1);
                            let t = (c - lo as f32).clamp(0.0, 1.0);
                            (lo as usize, hi as usize, t as f64)
                        };
                        let (x0, x1, dx) = pos(i0, 0);
                        let (y0, y1, dy) = pos(i1, 1);
                        let g = |a: usize, b: usize| x.at([a, b, j2, j3]) as f64;
                        (g(x0, y0) * (1.0 - dx) * (1.0 - dy) + g(x1, y0) * dx * (1.0 - dy) + g(x0, y1) * (1.0 - dx) * dy + g(x1, y1) * dx * dy)
                            as f32
                    };
                    out.set(v, [i0, i1, i2, i3]);
                }
            }
        }
    }
    out
}

#[test]
fn interpolate_matches_reference() {
    let be = backend();
    let cases: [([usize; 4], [usize; 4]); 5] = [
        ([4, 3, 2, 1], [8, 6, 2, 1]), // 2x up
        ([6, 9, 3, 1], [4, 5, 3, 1]), // down, non-integer
        ([5, 5, 1, 2], [7, 3, 1, 2]), // up and down
        ([3, 4, 2, 1], [3, 4, 4, 1]), // dim 2 up (nearest)
        ([1, 6, 2, 1], [4, 1, 2, 1]), // a size-1 axis either side
    ];
    for (i, (xne, ne)) in cases.into_iter().enumerate() {
        for (mode, bilinear) in [(ScaleMode::Nearest, false), (ScaleMode::Bilinear, true)] {
            for align in [false, true] {
                let (mut root, mut input) = contexts(&be);
                let mut rng = Rng::new(50 + i as u64);
                let x = Arr::rand(&mut rng, xne, F32);
                let xt = x.upload(&mut input, F32);
                let y = root.interpolate(xt, ne.map(|v| v as i64), mode, align).unwrap();
                assert_eq!(ne_of(y), ne);
                let want = interpolate_ref(&x, ne, bilinear, align);
                let what = format!("interpolate {xne:?} -> {ne:?} {mode:?} align_corners={align}");
                assert_close(&what, &eval(&mut root, y), &want.v, 1e-5, 0.0);
            }
        }
    }
    // Known values (as PyTorch's F.interpolate gives them): [1, 2] to 4
    // samples, bilinear, without and with align_corners.
    let (mut root, mut input) = contexts(&be);
    let x = upload(&mut input, F32, &[2], &[1.0, 2.0]);
    let a = root.interpolate(x, [4, 1, 1, 1], ScaleMode::Bilinear, false).unwrap();
    let b = root.interpolate(x, [4, 1, 1, 1], ScaleMode::Bilinear, true).unwrap();
    let c = root.interpolate(x, [4, 1, 1, 1], ScaleMode::Nearest, false).unwrap();
    root.compute(&[a, b, c]).unwrap();
    assert_close("bilinear", &data::read_f32(a, "t").unwrap(), &[1.0, 1.25, 1.75, 2.0], 1e-6, 0.0);
    assert_close("bilinear align", &data::read_f32(b, "t").unwrap(), &[1.0, 4.0 / 3.0, 5.0 / 3.0, 2.0], 1e-6, 0.0);
    assert_eq!(data::read_f32(c, "t").unwrap(), vec![1.0, 1.0, 2.0, 2.0]);
    // A transposed view is read through its strides.
    let mut rng = Rng::new(59);
    let xs = Arr::rand(&mut rng, [3, 5, 1, 1], F32);
    let xv = unsafe { Tensor::from_raw(sys::ggml_transpose(root.ggml_context(), xs.upload(&mut input, F32).as_ptr())) }.unwrap();
    let mut x = Arr::zeros([5, 3, 1, 1]);
    for a in 0..3 {
        for b in 0..5 {
            x.set(xs.at([a, b, 0, 0]), [b, a, 0, 0]);
        }
    }
    let y = root.interpolate(xv, [7, 4, 1, 1], ScaleMode::Bilinear, false).unwrap();
    assert_close("interpolate of a view", &eval(&mut root, y), &interpolate_ref(&x, [7, 4, 1, 1], true, false).v, 1e-5, 0.0);
}

// ---- bad input --------------------------------------------------------------

fn err_of(r: ggml_rs::ml::Result<Tensor>, op: &str, part: &str) -> ErrorKind {
    let e = r.expect_err(op);
    assert!(
        e.message.starts_with(&format!("{op}: ")) && e.message.contains(part),
        "want '{op}: …{part}…', got '{}'",
        e.message
    );
    e.kind
}

#[test]
fn bad_inputs_are_errors_and_the_context_stays_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let z = |input: &mut Context, ty: u32, ne: &[i64]| input.zeros(ty, ne).unwrap();
    let k = z(&mut input, F32, &[3, 3, 2, 4]);
    let x = z(&mut input, F32, &[8, 8, 2, 1]);
    let x3 = z(&mut input, F32, &[8, 8, 3, 1]);
    let q = z(&mut input, sys::GGML_TYPE_Q8_0, &[32, 3, 2, 1]);
    let xi = z(&mut input, I32, &[8, 8, 2, 1]);
    let xb = z(&mut input, sys::GGML_TYPE_BF16, &[8, 8, 2, 1]);
    let x16 = z(&mut input, F16, &[8, 8, 2, 1]);

    // conv_2d
    assert_eq!(err_of(root.conv_2d(q, x, [1, 1], [0, 0], [1, 1]), "conv_2d", "kernel must be f32 or f16, got q8_0[32,3,2]"), ErrorKind::DType);
    err_of(root.conv_2d(k, xi, [1, 1], [0, 0], [1, 1]), "conv_2d", "input must be f32 or f16, got i32[8,8,2]");
    err_of(root.conv_2d(k, xb, [1, 1], [0, 0], [1, 1]), "conv_2d", "input must be f32 or f16");
    assert_eq!(err_of(root.conv_2d(k, x3, [1, 1], [0, 0], [1, 1]), "conv_2d", "differ in input channels (dim 2: 2 vs 3)"), ErrorKind::Shape);
    assert_eq!(err_of(root.conv_2d(k, x, [0, 1], [0, 0], [1, 1]), "conv_2d", "stride 0 along dim 0"), ErrorKind::InvalidArgument);
    err_of(root.conv_2d(k, x, [1, -2], [0, 0], [1, 1]), "conv_2d", "stride -2 along dim 1");
    err_of(root.conv_2d(k, x, [1, 1], [-1, 0], [1, 1]), "conv_2d", "padding -1 along dim 0");
    err_of(root.conv_2d(k, x, [1, 1], [0, i32::MAX], [1, 1]), "conv_2d", "padding 2147483647 along dim 1");
    err_of(root.conv_2d(k, x, [1, 1], [0, 0], [1, 0]), "conv_2d", "dilation 0 along dim 1");
    err_of(root.conv_2d(k, x, [1, 1], [0, 0], [4, 1]), "conv_2d", "kernel f32[3,3,2,4] does not fit input f32[8,8,2] along dim 0: kernel extent 9");
    let big_k = z(&mut input, F32, &[3, 11, 2, 1]);
    err_of(root.conv_2d(big_k, x, [1, 1], [1, 1], [1, 1]), "conv_2d", "along dim 1: kernel extent 11 (size 11, dilation 1) > input 8 + 2*padding 1");
    let empty = input.empty(F32, &[0]).unwrap();
    err_of(root.conv_2d(k, empty, [1, 1], [0, 0], [1, 1]), "conv_2d", "input is empty");
    // conv_3d
    let k3 = z(&mut input, F32, &[2, 2, 2, 6]);
    let x3d = z(&mut input, F32, &[4, 4, 4, 4]);
    err_of(root.conv_3d(k3, x3d, 3, [1; 3], [0; 3], [1; 3]), "conv_3d", "must be multiples of the 3 input channels");
    err_of(root.conv_3d(k3, x3d, 0, [1; 3], [0; 3], [1; 3]), "conv_3d", "input channel count must be 1 or more, got 0");
    err_of(root.conv_3d(k3, x3d, -2, [1; 3], [0; 3], [1; 3]), "conv_3d", "got -2");
    err_of(root.conv_3d(k3, x3d, 1 << 40, [1; 3], [0; 3], [1; 3]), "conv_3d", "1 or more");
    let x3h = z(&mut input, F16, &[4, 4, 4, 4]);
    err_of(root.conv_3d(k3, x3h, 2, [1; 3], [0; 3], [1; 3]), "conv_3d", "input must be f32, got f16[4,4,4,4]");
    err_of(root.conv_3d(k3, x3d, 2, [1, 1, 0], [0; 3], [1; 3]), "conv_3d", "stride 0 along dim 2");
    err_of(root.conv_3d(k3, x3d, 2, [1; 3], [0; 3], [1, 1, 5]), "conv_3d", "along dim 2");
    // conv_1d_dw
    let kd = z(&mut input, F32, &[3, 1, 4]);
    let xd = z(&mut input, F32, &[10, 4]);
    let xd3 = z(&mut input, F32, &[10, 3]);
    err_of(root.conv_1d_dw(kd, xd3, 1, 0, 1), "conv_1d_dw", "kernel must be [K, 1, C·m] for input f32[10,3] with C = 3, got f32[3,1,4]");
    let kd2 = z(&mut input, F32, &[3, 2, 4]);
    err_of(root.conv_1d_dw(kd2, xd, 1, 0, 1), "conv_1d_dw", "kernel must be [K, 1, C·m]");
    err_of(root.conv_1d_dw(kd, x, 1, 0, 1), "conv_1d_dw", "input must be [L, C], got f32[8,8,2]");
    err_of(root.conv_1d_dw(kd, xd, 1, 0, 6), "conv_1d_dw", "kernel extent 13");
    err_of(root.conv_1d_dw(kd, xd, -1, 0, 1), "conv_1d_dw", "stride -1");
    err_of(root.conv_1d_dw(xi, xd, 1, 0, 1), "conv_1d_dw", "kernel must be f32 or f16, got i32");
    // im2col
    err_of(root.im2col(k, x16, [1, 1], [0, 0], [1, 1]), "im2col", "input must be f32, got f16[8,8,2]");
    err_of(root.im2col(k, x3, [1, 1], [0, 0], [1, 1]), "im2col", "differ in input channels");
    err_of(root.im2col(k, x, [1, 1], [0, 0], [1, 9]), "im2col", "along dim 1");
    err_of(root.im2col(k, x, [1, 1], [0, 0], [i32::MIN, 1]), "im2col", "dilation -2147483648 along dim 0");
    // avg_pool_2d
    err_of(root.avg_pool_2d(xi, 2, 2, 0.0), "avg_pool_2d", "a must be f32 or f16, got i32[8,8,2]");
    err_of(root.avg_pool_2d(x, 0, 2, 0.0), "avg_pool_2d", "kernel size and stride must be 1 or more, got k=0 s=2");
    err_of(root.avg_pool_2d(x, 2, -1, 0.0), "avg_pool_2d", "got k=2 s=-1");
    for p in [0.5f32, -1.0, f32::NAN, f32::INFINITY, 1e9] {
        assert_eq!(err_of(root.avg_pool_2d(x, 2, 2, p), "avg_pool_2d", "padding must be a whole number"), ErrorKind::InvalidArgument);
    }
    err_of(root.avg_pool_2d(x, 11, 1, 1.0), "avg_pool_2d", "window 11 does not fit f32[8,8,2] along dim 0");
    let tall = root.new_tensor("tall", F32, [2, 1 << 24, 1, 1]).unwrap();
    err_of(root.avg_pool_2d(tall, 1, 1, 0.0), "avg_pool_2d", "must stay below 2^24");
    // interpolate
    err_of(root.interpolate(x16, [4, 4, 2, 1], ScaleMode::Nearest, false), "interpolate", "a must be f32, got f16[8,8,2]");
    assert_eq!(err_of(root.interpolate(x, [4, 0, 2, 1], ScaleMode::Bilinear, false), "interpolate", "target sizes must be 1 or more"), ErrorKind::Shape);
    err_of(root.interpolate(x, [4, 4, -2, 1], ScaleMode::Bilinear, true), "interpolate", "[4, 4, -2, 1]");
    err_of(root.interpolate(x, [1 << 20, 1 << 20, 1 << 10, 1], ScaleMode::Nearest, false), "interpolate", "too large");
    err_of(root.interpolate(empty, [4, 4, 1, 1], ScaleMode::Nearest, false), "interpolate", "a is empty");
    assert!(ScaleMode::from_id("interpolate", 2).is_err());

    // Nothing aborted; the context still builds and computes.
    let ones = upload(&mut input, F32, &[4, 4, 2], &[1.0; 32]);
    let kk = upload(&mut input, F32, &[2, 2, 2, 1], &[0.5; 8]);
    let y = root.conv_2d(kk, ones, [2, 2], [0, 0], [1, 1]).unwrap();
    assert_eq!(eval(&mut root, y), vec![4.0; 4]);
}

#[test]
fn context_capacity_is_checked() {
    // Room for the inputs but not for conv_2d's 7 tensors.
    let be = backend();
    let root = Context::new(&be, 5).unwrap();
    let mut input = root.input();
    let mut root = root;
    let k = upload(&mut input, F32, &[2, 2, 1, 1], &[1.0; 4]);
    let x = upload(&mut input, F32, &[4, 4, 1, 1], &[1.0; 16]);
    let e = root.conv_2d(k, x, [1, 1], [0, 0], [1, 1]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfMemory);
    assert!(e.message.starts_with("conv_2d: context is full"), "{}", e.message);
    let p = root.avg_pool_2d(x, 2, 2, 0.0).unwrap();
    assert_eq!(eval(&mut root, p), vec![1.0; 4]);
}

// ---- the C functions ----------------------------------------------------

#[repr(C)]
struct CError {
    status: i32,
    message: [std::ffi::c_char; 1024],
}
impl CError {
    fn new() -> CError {
        CError { status: 0, message: [0; 1024] }
    }
    fn text(&self) -> String {
        unsafe { std::ffi::CStr::from_ptr(self.message.as_ptr()) }.to_string_lossy().into_owned()
    }
}
#[repr(C)]
struct Opaque {
    _p: [u8; 0],
}
type T = *mut Opaque;
extern "C" {
    fn ggml_rs_backend_new(params: *const std::ffi::c_void, out: *mut T, err: *mut CError) -> i32;
    fn ggml_rs_backend_free(b: T);
    fn ggml_rs_ctx_new(b: T, size: usize, err: *mut CError) -> T;
    fn ggml_rs_ctx_input(c: T) -> T;
    fn ggml_rs_ctx_free(c: T);
    fn ggml_rs_ctx_from_data(c: T, ty: i32, ne: *const i64, n: usize, data: *const u8, len: usize, err: *mut CError) -> T;
    fn ggml_rs_ctx_compute(c: T, outs: *const T, n: usize, err: *mut CError) -> i32;
    fn ggml_rs_ctx_recorded_error(c: T, err: *mut CError) -> i32;
    fn ggml_rs_ctx_clear_error(c: T);
    fn ggml_rs_tensor_get_f32(t: T, dst: *mut f32, n: usize, err: *mut CError) -> i32;
    fn ggml_rs_conv_2d(c: T, k: T, x: T, s0: i32, s1: i32, p0: i32, p1: i32, d0: i32, d1: i32, err: *mut CError) -> T;
    #[allow(clippy::too_many_arguments)]
    fn ggml_rs_conv_3d(c: T, k: T, x: T, ic: i64, s0: i32, s1: i32, s2: i32, p0: i32, p1: i32, p2: i32, d0: i32, d1: i32, d2: i32, err: *mut CError) -> T;
    fn ggml_rs_conv_1d_dw(c: T, k: T, x: T, s: i32, p: i32, d: i32, err: *mut CError) -> T;
    fn ggml_rs_im2col(c: T, k: T, x: T, s0: i32, s1: i32, p0: i32, p1: i32, d0: i32, d1: i32, err: *mut CError) -> T;
    fn ggml_rs_avg_pool_2d(c: T, a: T, k: i32, s: i32, p: f32, err: *mut CError) -> T;
    fn ggml_rs_interpolate(c: T, a: T, ne0: i64, ne1: i64, ne2: i64, ne3: i64, mode: i32, align: bool, err: *mut CError) -> T;
}

#[test]
fn c_abi_conv_ops() {
    unsafe {
        let mut err = CError::new();
        let mut be = std::ptr::null_mut();
        assert_eq!(ggml_rs_backend_new(std::ptr::null(), &mut be, &mut err), 0);
        let root = ggml_rs_ctx_new(be, 256, &mut err);
        let input = ggml_rs_ctx_input(root);
        let up = |ne: &[i64], v: f32| {
            let n: i64 = ne.iter().product();
            let bytes: Vec<u8> = (0..n).flat_map(|_| v.to_le_bytes()).collect();
            let t = ggml_rs_ctx_from_data(input, 0, ne.as_ptr(), ne.len(), bytes.as_ptr(), bytes.len(), &mut CError::new());
            assert!(!t.is_null());
            t
        };
        let run = |t: T, n: usize| -> Vec<f32> {
            let mut err = CError::new();
            assert!(!t.is_null());
            assert_eq!(ggml_rs_ctx_compute(root, &t, 1, &mut err), 0, "{}", err.text());
            let mut out = vec![0f32; n];
            assert_eq!(ggml_rs_tensor_get_f32(t, out.as_mut_ptr(), n, &mut err), 0, "{}", err.text());
            out
        };
        let (x, k) = (up(&[4, 4, 2, 1], 1.0), up(&[2, 2, 2, 3], 0.5));
        assert_eq!(run(ggml_rs_conv_2d(root, k, x, 2, 2, 0, 0, 1, 1, &mut err), 12), vec![4.0; 12]);
        let (x3, k3) = (up(&[2, 2, 2, 2], 1.0), up(&[2, 2, 2, 4], 0.25));
        assert_eq!(run(ggml_rs_conv_3d(root, k3, x3, 2, 2, 2, 2, 0, 0, 0, 1, 1, 1, &mut err), 2), vec![4.0; 2]);
        let (xd, kd) = (up(&[5, 2], 1.0), up(&[3, 1, 2], 1.0));
        assert_eq!(run(ggml_rs_conv_1d_dw(root, kd, xd, 1, 0, 1, &mut err), 6), vec![3.0; 6]);
        assert_eq!(run(ggml_rs_im2col(root, k, x, 2, 2, 0, 0, 1, 1, &mut err), 32), vec![1.0; 32]);
        assert_eq!(run(ggml_rs_avg_pool_2d(root, x, 2, 2, 0.0, &mut err), 8), vec![1.0; 8]);
        assert_eq!(run(ggml_rs_interpolate(root, x, 2, 3, 2, 1, 1, true, &mut err), 12), vec![1.0; 12]);

        // Errors: NULL arguments, bad values; each is recorded on the context.
        let null = std::ptr::null_mut();
        assert!(ggml_rs_conv_2d(root, null, x, 1, 1, 0, 0, 1, 1, &mut err).is_null());
        assert_eq!((err.status, err.text()), (1, "conv_2d: kernel is NULL".to_string()));
        assert!(ggml_rs_conv_3d(root, k3, null, 2, 1, 1, 1, 0, 0, 0, 1, 1, 1, &mut err).is_null());
        assert_eq!(err.text(), "conv_3d: input is NULL");
        assert!(ggml_rs_conv_1d_dw(null, kd, xd, 1, 0, 1, &mut err).is_null());
        assert_eq!(err.text(), "conv_1d_dw: context is NULL");
        assert!(ggml_rs_im2col(root, k, x, 1, 1, 0, 0, 0, 1, &mut err).is_null());
        assert!(err.text().starts_with("im2col: dilation 0 along dim 0"), "{}", err.text());
        assert!(ggml_rs_avg_pool_2d(root, x, 2, 2, 0.25, &mut err).is_null());
        assert!(err.text().starts_with("avg_pool_2d: padding must be a whole number"), "{}", err.text());
        assert!(ggml_rs_interpolate(root, x, 4, 4, 2, 1, 2, false, &mut err).is_null());
        assert_eq!(err.text(), "interpolate: unknown mode 2 (0 nearest, 1 bilinear)");
        assert_eq!(err.status, 1);
        let mut rec = CError::new();
        assert_ne!(ggml_rs_ctx_recorded_error(root, &mut rec), 0);
        assert!(rec.text().starts_with("conv_2d: kernel is NULL"), "{}", rec.text());
        ggml_rs_ctx_clear_error(root);
        assert_eq!(run(ggml_rs_avg_pool_2d(root, x, 4, 1, 0.0, &mut err), 2), vec![1.0; 2]);

        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
