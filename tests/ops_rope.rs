//! rope, differential against a naive reference of ggml's RoPE math
//! (written from the semantics of ggml-cpu's rope: per-pair angles
//! `pos * base^(-2i/n_dims) / freq_factor[i]`, YaRN ramp between the
//! correction dims from beta_fast/beta_slow, magnitude scale, normal pairs
//! (2i, 2i+1) vs NeoX pairs (i, i+n_dims/2), multi-section angle rows).
//!
//! The reference computes angles in f32 the way the kernel does (a running
//! product of `base^(-2/n_dims)`), so only rounding differences remain;
//! positions stay below ~300 so an ulp of an angle stays below 3e-5.
//! Tolerances (|got - want| <= atol + rtol*|want|):
//! * f32: atol 1e-4, rtol 1e-4.
//! * f16 input/output: the reference rotates the f16-rounded input; atol
//!   4e-3, rtol 2e-3 (an f16 ulp at |x| <= 2 is <= 2e-3).
//! * Q8_0 input (cast to f32 first): reference on the dequantized input,
//!   f32 tolerances.
mod common;
use common::*;

use ggml_rs::ml::ops::rope::{RopeParams, ROPE_IMROPE, ROPE_MROPE, ROPE_NEOX, ROPE_NORMAL, ROPE_VISION};
use ggml_rs::ml::{data, ErrorKind, Tensor};
use ggml_rs::sys;

// ---- reference -----------------------------------------------------------

fn corr_dims(p: &RopeParams) -> [f32; 2] {
    let nd = p.n_dims as f32;
    let dim = |n_rot: f32| nd * (p.n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * p.freq_base.ln());
    [dim(p.beta_fast).floor().max(0.0), dim(p.beta_slow).ceil().min(nd - 1.0)]
}

/// cos and sin (times the magnitude scale) of pair `i` whose unscaled
/// ("extrapolated") angle is `theta_extrap`.
fn cos_sin(theta_extrap: f32, i: usize, p: &RopeParams, corr: [f32; 2]) -> (f32, f32) {
    let interp = p.freq_scale * theta_extrap;
    let (mut theta, mut mscale) = (interp, p.attn_factor);
    if p.ext_factor != 0.0 {
        let y = (i as f32 - corr[0]) / (corr[1] - corr[0]).max(0.001);
        let ramp = 1.0 - y.clamp(0.0, 1.0);
        let mix = ramp * p.ext_factor;
        theta = interp * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * (1.0 / p.freq_scale).ln();
    }
    (theta.cos() * mscale, theta.sin() * mscale)
}

/// Angles (cos, sin) for every pair of dim 0 at sequence index `s`.
fn angles(ne0: usize, seq: usize, s: usize, pos: &[i32], ff: Option<&[f32]>, p: &RopeParams) -> Vec<(f32, f32)> {
    let nd = p.n_dims as usize;
    let scale = p.freq_base.powf(-2.0 / nd as f32);
    let corr = corr_dims(p);
    let factor = |i: usize| ff.and_then(|f| f.get(i).copied()).unwrap_or(1.0);
    let mut out = Vec::with_capacity(ne0 / 2);
    if p.mode & ROPE_MROPE == 0 {
        let mut theta = pos[s] as f32;
        for i in 0..ne0 / 2 {
            out.push(cos_sin(theta / factor(i), i, p, corr));
            theta *= scale;
        }
        return out;
    }
    let sec = p.sections.map(|x| x as usize);
    let row = |r: usize| pos[s + r * seq] as f32;
    let (mut t, mut h, mut w, mut e) = (row(0), row(1), row(2), row(3));
    let total = sec.iter().sum::<usize>();
    let (sec_w, sec_e) = (sec[0] + sec[1], sec[0] + sec[1] + sec[2]);
    for i in 0..ne0 / 2 {
        let sector = i % total;
        if p.mode == ROPE_VISION {
            // Vision: each section restarts its angle at its first pair.
            if sector == 0 {
                t = row(0);
            } else if sector == sec[0] {
                h = row(1);
            } else if sector == sec_w {
                w = row(2);
            } else if sector == sec_e {
                e = row(3);
            }
        }
        let theta = if p.mode == ROPE_IMROPE {
            if sector % 3 == 1 && sector < 3 * sec[1] {
                h
            } else if sector % 3 == 2 && sector < 3 * sec[2] {
                w
            } else if sector % 3 == 0 && sector < 3 * sec[0] {
                t
            } else {
                e
            }
        } else if sector < sec[0] {
            t
        } else if sector < sec_w {
            h
        } else if sector < sec_e {
            w
        } else {
            e
        };
        out.push(cos_sin(theta / factor(i), i, p, corr));
        t *= scale;
        h *= scale;
        w *= scale;
        e *= scale;
    }
    out
}

/// RoPE of a contiguous `x` of shape `ne` (ggml order).
fn rope_ref(x: &[f32], ne: [usize; 4], pos: &[i32], ff: Option<&[f32]>, p: &RopeParams) -> Vec<f32> {
    let nd = p.n_dims as usize;
    let mut out = x.to_vec();
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            let cs = angles(ne[0], ne[2], i2, pos, ff, p);
            for i1 in 0..ne[1] {
                let base = idx(ne, 0, i1, i2, i3);
                let pairs: Vec<(usize, usize, usize)> = match p.mode {
                    ROPE_NORMAL => (0..nd / 2).map(|i| (i, 2 * i, 2 * i + 1)).collect(),
                    ROPE_VISION => (0..nd).map(|i| (i, i, i + nd)).collect(),
                    _ => (0..nd / 2).map(|i| (i, i, i + nd / 2)).collect(),
                };
                for (i, a, b) in pairs {
                    let (c, s) = cs[i];
                    let (x0, x1) = (x[base + a], x[base + b]);
                    out[base + a] = x0 * c - x1 * s;
                    out[base + b] = x0 * s + x1 * c;
                }
            }
        }
    }
    out
}

// ---- harness ---------------------------------------------------------------

fn params(n_dims: i32, mode: i32) -> RopeParams {
    RopeParams { n_dims, mode, ..Default::default() }
}

struct Case {
    ne: [usize; 4],
    dtype: u32,
    pos: Vec<i32>,
    ff: Option<Vec<f32>>,
    p: RopeParams,
}

/// Runs rope on random input and returns (got, want).
fn run(seed: u64, c: &Case) -> (Vec<f32>, Vec<f32>) {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(seed);
    let n: usize = c.ne.iter().product();
    let x = rng.vec(n);
    let shape: Vec<i64> = c.ne.iter().map(|&d| d as i64).collect();
    let a = upload(&mut input, c.dtype, &shape, &x);
    let xr: Vec<f32> = if c.dtype == F16 { x.iter().map(|&v| f16_round(v)).collect() } else { x };
    let pos = upload_i32(&mut input, &[c.pos.len() as i64], &c.pos);
    let ff = c.ff.as_ref().map(|f| upload(&mut input, F32, &[f.len() as i64], f));
    let r = root.rope(a, pos, ff, &c.p).unwrap();
    assert_eq!(r.ne(), a.ne());
    assert_eq!(r.dtype(), c.dtype);
    let got = eval(&mut root, r);
    (got, rope_ref(&xr, c.ne, &c.pos, c.ff.as_deref(), &c.p))
}

fn check(what: &str, seed: u64, c: Case) {
    let (got, want) = run(seed, &c);
    let (atol, rtol) = if c.dtype == F16 { (4e-3, 2e-3) } else { (1e-4, 1e-4) };
    assert_close(what, &got, &want, atol, rtol);
    // The rotation must actually have changed the input somewhere.
    let mut rng = Rng::new(seed);
    let x = rng.vec(got.len());
    assert!(got.iter().zip(&x).any(|(g, x)| (g - x).abs() > 0.05), "{what}: output equals input");
}

fn positions(n: usize, seed: u64, max: i32) -> Vec<i32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| (rng.next_u64() % max as u64) as i32).collect()
}

// ---- tests -------------------------------------------------------------------

#[test]
fn normal_and_neox_full_and_partial() {
    let pos = vec![0, 1, 7, 42, 100, 255];
    check("normal full", 1, Case { ne: [32, 3, 6, 2], dtype: F32, pos: pos.clone(), ff: None, p: params(32, ROPE_NORMAL) });
    check("neox full", 2, Case { ne: [32, 3, 6, 2], dtype: F32, pos: pos.clone(), ff: None, p: params(32, ROPE_NEOX) });
    check("normal partial", 3, Case { ne: [32, 2, 6, 1], dtype: F32, pos: pos.clone(), ff: None, p: params(12, ROPE_NORMAL) });
    check("neox partial", 4, Case { ne: [64, 2, 6, 1], dtype: F32, pos: pos.clone(), ff: None, p: params(16, ROPE_NEOX) });
    let p = RopeParams { freq_base: 500000.0, freq_scale: 0.5, ..params(64, ROPE_NEOX) };
    check("neox base 5e5 scale 0.5", 5, Case { ne: [64, 4, 6, 1], dtype: F32, pos, ff: None, p });
}

#[test]
fn normal_and_neox_pair_differently() {
    // Same input, same angles: the two modes must disagree (different pairs).
    let pos = vec![3, 9];
    let (n, _) = run(7, &Case { ne: [8, 1, 2, 1], dtype: F32, pos: pos.clone(), ff: None, p: params(8, ROPE_NORMAL) });
    let (x, _) = run(7, &Case { ne: [8, 1, 2, 1], dtype: F32, pos, ff: None, p: params(8, ROPE_NEOX) });
    assert!(n.iter().zip(&x).any(|(a, b)| (a - b).abs() > 0.05));
    // Position 0 is the identity.
    let (got, _) = run(8, &Case { ne: [16, 2, 1, 1], dtype: F32, pos: vec![0], ff: None, p: params(16, ROPE_NEOX) });
    let mut rng = Rng::new(8);
    assert_close("pos 0", &got, &rng.vec(32), 1e-7, 0.0);
}

#[test]
fn yarn() {
    let pos = positions(7, 11, 300);
    let p = RopeParams {
        n_ctx_orig: 4096,
        freq_scale: 0.25,
        ext_factor: 1.0,
        attn_factor: 0.9,
        beta_fast: 32.0,
        beta_slow: 1.0,
        ..params(64, ROPE_NEOX)
    };
    let c = corr_dims(&p);
    assert!(c[0] > 0.0 && c[1] < 31.0 && c[0] < c[1], "the ramp lies inside the rotated pairs: {c:?}");
    check("yarn neox", 12, Case { ne: [64, 2, 7, 1], dtype: F32, pos: pos.clone(), ff: None, p });
    let p = RopeParams { ext_factor: 0.5, beta_fast: 16.0, beta_slow: 2.0, ..p };
    check("yarn normal partial", 13, Case { ne: [96, 2, 7, 1], dtype: F32, pos, ff: None, p: RopeParams { n_dims: 64, mode: ROPE_NORMAL, ..p } });
}

#[test]
fn zero_means_default() {
    let pos = positions(5, 21, 200);
    let explicit = RopeParams { ext_factor: 1.0, freq_scale: 0.5, ..params(32, ROPE_NEOX) };
    let zeros = RopeParams { n_ctx_orig: 0, attn_factor: 0.0, beta_fast: 0.0, beta_slow: 0.0, ..explicit };
    let (a, want) = run(22, &Case { ne: [32, 2, 5, 1], dtype: F32, pos: pos.clone(), ff: None, p: explicit });
    let (b, _) = run(22, &Case { ne: [32, 2, 5, 1], dtype: F32, pos, ff: None, p: zeros });
    assert_eq!(a, b);
    assert_close("defaults", &a, &want, 1e-4, 1e-4);
    let d = RopeParams::default();
    assert_eq!((d.n_ctx_orig, d.freq_base, d.freq_scale, d.ext_factor), (131072, 10000.0, 1.0, 0.0));
    assert_eq!((d.attn_factor, d.beta_fast, d.beta_slow, d.sections), (1.0, 32.0, 1.0, [0; 4]));
}

#[test]
fn freq_factors() {
    let pos = positions(6, 31, 250);
    let mut rng = Rng::new(32);
    let ff: Vec<f32> = (0..16).map(|_| 1.0 + 1.5 * (rng.f32() + 1.0)).collect();
    check("factors neox", 33, Case { ne: [32, 2, 6, 1], dtype: F32, pos: pos.clone(), ff: Some(ff.clone()), p: params(32, ROPE_NEOX) });
    // Partial rotation: exactly n_dims/2 factors (ggml-rs pads them so the
    // kernel's read of ne0/2 factors stays in bounds).
    check("factors partial", 34, Case { ne: [64, 2, 6, 1], dtype: F32, pos: pos.clone(), ff: Some(ff[..8].to_vec()), p: params(16, ROPE_NORMAL) });
    let p = RopeParams { ext_factor: 1.0, n_ctx_orig: 2048, freq_scale: 0.5, ..params(32, ROPE_NEOX) };
    check("factors yarn", 35, Case { ne: [32, 2, 6, 1], dtype: F32, pos, ff: Some(ff), p });
}

#[test]
fn multi_section_modes() {
    let seq = 5;
    let pos = positions(4 * seq, 41, 120);
    let mrope = RopeParams { sections: [4, 6, 6, 0], ..params(32, ROPE_MROPE) };
    check("mrope", 42, Case { ne: [32, 3, seq, 1], dtype: F32, pos: pos.clone(), ff: None, p: mrope });
    let mrope4 = RopeParams { sections: [3, 2, 2, 1], ..params(16, ROPE_MROPE) };
    check("mrope 4 sections, partial", 43, Case { ne: [32, 2, seq, 1], dtype: F32, pos: pos.clone(), ff: None, p: mrope4 });
    let imrope = RopeParams { sections: [5, 6, 4, 0], ..params(32, ROPE_IMROPE) };
    check("imrope", 44, Case { ne: [32, 2, seq, 1], dtype: F32, pos: pos.clone(), ff: None, p: imrope });
    // Qwen3-VL-like sections that leave pairs to the extra row.
    let imrope_e = RopeParams { sections: [5, 4, 4, 0], ..params(32, ROPE_IMROPE) };
    check("imrope uncovered pairs", 45, Case { ne: [32, 2, seq, 1], dtype: F32, pos: pos.clone(), ff: None, p: imrope_e });
    let vision = RopeParams { sections: [8, 8, 0, 0], ..params(16, ROPE_VISION) };
    check("vision", 46, Case { ne: [32, 2, seq, 1], dtype: F32, pos: pos.clone(), ff: None, p: vision });
    let vision4 = RopeParams { sections: [4, 4, 4, 4], ..params(16, ROPE_VISION) };
    let mut rng = Rng::new(47);
    let ff: Vec<f32> = (0..16).map(|_| 1.0 + (rng.f32() + 1.0)).collect();
    check("vision 4 sections + factors", 48, Case { ne: [32, 2, seq, 1], dtype: F32, pos: pos.clone(), ff: Some(ff), p: vision4 });
    let yarn = RopeParams { ext_factor: 1.0, n_ctx_orig: 1024, freq_scale: 0.5, ..mrope };
    check("mrope yarn", 49, Case { ne: [32, 2, seq, 1], dtype: F32, pos, ff: None, p: yarn });

    // With identical rows, M-RoPE equals NeoX.
    let same: Vec<i32> = [7, 8, 9, 10, 11].repeat(4);
    let (m, _) = run(50, &Case { ne: [32, 1, seq, 1], dtype: F32, pos: same, ff: None, p: mrope });
    let (n, _) = run(50, &Case { ne: [32, 1, seq, 1], dtype: F32, pos: vec![7, 8, 9, 10, 11], ff: None, p: params(32, ROPE_NEOX) });
    assert_close("mrope with equal rows = neox", &m, &n, 1e-6, 0.0);
}

#[test]
fn f16_input() {
    let pos = positions(6, 51, 200);
    check("f16 neox", 52, Case { ne: [64, 3, 6, 1], dtype: F16, pos: pos.clone(), ff: None, p: params(64, ROPE_NEOX) });
    check("f16 normal partial", 53, Case { ne: [32, 3, 6, 1], dtype: F16, pos: pos.clone(), ff: None, p: params(16, ROPE_NORMAL) });
    let p = RopeParams { sections: [4, 6, 6, 0], ..params(32, ROPE_MROPE) };
    check("f16 mrope", 54, Case { ne: [32, 2, 6, 1], dtype: F16, pos: positions(24, 55, 100), ff: None, p });
}

#[test]
fn quantized_input_is_cast_to_f32() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let ne = [64usize, 2, 3, 1];
    let mut rng = Rng::new(61);
    let x = rng.vec(128 * 3);
    let q = quantize_q8_0(&x, 64);
    let a = input.from_bytes(sys::GGML_TYPE_Q8_0, &[64, 2, 3], &q).unwrap();
    let xq = data::read_f32(a, "deq").unwrap();
    let pos = vec![5, 17, 60];
    let pt = upload_i32(&mut input, &[3], &pos);
    let p = params(64, ROPE_NEOX);
    let r = root.rope(a, pt, None, &p).unwrap();
    assert_eq!(r.dtype(), F32);
    let got = eval(&mut root, r);
    assert_close("q8_0 input", &got, &rope_ref(&xq, ne, &pos, None, &p), 1e-4, 1e-4);
}

fn quantize_q8_0(vals: &[f32], n_per_row: usize) -> Vec<u8> {
    let nrows = vals.len() / n_per_row;
    let size = unsafe { sys::ggml_row_size(sys::GGML_TYPE_Q8_0, n_per_row as i64) } * nrows;
    let mut out = vec![0u8; size];
    let n = unsafe {
        sys::ggml_quantize_chunk(sys::GGML_TYPE_Q8_0, vals.as_ptr(), out.as_mut_ptr().cast(), 0, nrows as i64, n_per_row as i64, std::ptr::null())
    };
    assert_eq!(n, size);
    out
}

#[test]
fn non_contiguous_input() {
    // a as [hd, seq, heads] data permuted to [hd, heads, seq].
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let (hd, heads, seq) = (32usize, 3usize, 4usize);
    let mut rng = Rng::new(71);
    let raw = rng.vec(hd * seq * heads);
    let t = upload(&mut input, F32, &[hd as i64, seq as i64, heads as i64], &raw);
    let a = unsafe { Tensor::from_raw(sys::ggml_permute(root.ggml_context(), t.as_ptr(), 0, 2, 1, 3)) }.unwrap();
    assert!(!a.is_contiguous());
    let ne = [hd, heads, seq, 1];
    let mut x = vec![0f32; hd * heads * seq];
    for s in 0..seq {
        for h in 0..heads {
            for d in 0..hd {
                x[idx(ne, d, h, s, 0)] = raw[idx([hd, seq, heads, 1], d, s, h, 0)];
            }
        }
    }
    let pos = vec![1, 2, 30, 99];
    let pt = upload_i32(&mut input, &[4], &pos);
    let p = params(32, ROPE_NORMAL);
    let r = root.rope(a, pt, None, &p).unwrap();
    let got = eval(&mut root, r);
    assert_close("permuted input", &got, &rope_ref(&x, ne, &pos, None, &p), 1e-4, 1e-4);
}

#[test]
fn bad_input_is_an_error_and_context_stays_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[32, 2, 4], &[0.5; 256]);
    let pos4 = upload_i32(&mut input, &[4], &[0, 1, 2, 3]);
    let pos3 = upload_i32(&mut input, &[3], &[0, 1, 2]);
    let pos16 = upload_i32(&mut input, &[16], &[0; 16]);
    let posf = upload(&mut input, F32, &[4], &[0.; 4]);
    let pos2d = upload_i32(&mut input, &[2, 2], &[0; 4]);
    let ff_short = upload(&mut input, F32, &[7], &[1.; 7]);
    let ff16 = upload(&mut input, F16, &[16], &[1.; 16]);
    let ai = upload_i32(&mut input, &[32, 2, 4], &[0; 256]);

    let at = unsafe { Tensor::from_raw(sys::ggml_transpose(root.ggml_context(), a.as_ptr())) }.unwrap();
    let mut expect = |what: &str, a: Tensor, pos: Tensor, ff: Option<Tensor>, p: RopeParams, kind: ErrorKind, msg: &str| {
        let e = root.rope(a, pos, ff, &p).unwrap_err();
        assert_eq!(e.kind, kind, "{what}: {}", e.message);
        assert!(e.message.starts_with("rope: "), "{what}: {}", e.message);
        assert!(e.message.contains(msg), "{what}: {}", e.message);
    };
    let p = params(32, ROPE_NEOX);
    use ErrorKind::*;
    expect("odd n_dims", a, pos4, None, params(15, ROPE_NEOX), InvalidArgument, "n_dims 15 must be positive, even and at most dim 0 of a f32[32,2,4]");
    expect("n_dims > ne0", a, pos4, None, params(34, ROPE_NEOX), InvalidArgument, "n_dims 34");
    expect("n_dims 0", a, pos4, None, params(0, ROPE_NEOX), InvalidArgument, "n_dims 0");
    expect("short pos", a, pos3, None, p, Shape, "pos must be a vector of 4 (a.ne[2]) positions, got i32[3]");
    expect("2-D pos", a, pos2d, None, p, Shape, "pos must be a vector");
    expect("f32 pos", a, posf, None, p, DType, "pos must be i32, got f32[4]");
    expect("mrope pos", a, pos4, None, RopeParams { sections: [4, 6, 6, 0], ..params(32, ROPE_MROPE) }, Shape, "4*4 (four rows for mode 8)");
    expect("mode 1", a, pos4, None, params(32, 1), InvalidArgument, "unsupported mode 1");
    expect("mode 10", a, pos4, None, params(32, 10), InvalidArgument, "unsupported mode 10");
    expect("sections without multi mode", a, pos4, None, RopeParams { sections: [1, 0, 0, 0], ..p }, InvalidArgument, "not a multi-section mode");
    expect("zero sections", a, pos16, None, params(32, ROPE_MROPE), InvalidArgument, "invalid sections [0, 0, 0, 0]");
    expect("negative section", a, pos16, None, RopeParams { sections: [8, -1, 4, 0], ..params(32, ROPE_MROPE) }, InvalidArgument, "invalid sections");
    expect("sections too long", a, pos16, None, RopeParams { sections: [16, 16, 1, 0], ..params(32, ROPE_MROPE) }, InvalidArgument, "sum <= dim 0");
    expect("only extra section", a, pos16, None, RopeParams { sections: [0, 0, 0, 8], ..params(32, ROPE_IMROPE) }, InvalidArgument, "one of the first three > 0");
    expect("vision n_dims", a, pos16, None, RopeParams { sections: [8, 8, 0, 0], ..params(32, ROPE_VISION) }, InvalidArgument, "vision mode needs n_dims = dim 0 / 2");
    expect("short factors", a, pos4, Some(ff_short), p, Shape, "freq_factors needs at least 16 values");
    expect("f16 factors", a, pos4, Some(ff16), p, DType, "freq_factors must be f32");
    expect("vision factors", a, pos16, Some(ff_short), RopeParams { sections: [8, 8, 0, 0], ..params(16, ROPE_VISION) }, Shape, "at least 16 values");
    expect("i32 a", ai, pos4, None, p, DType, "a must be f32 or f16, got i32[32,2,4]");
    expect("freq_base 0", a, pos4, None, RopeParams { freq_base: 0.0, ..p }, InvalidArgument, "freq_base 0");
    expect("nan ext", a, pos4, None, RopeParams { ext_factor: f32::NAN, ..p }, InvalidArgument, "must be finite");
    expect("negative n_ctx_orig", a, pos4, None, RopeParams { n_ctx_orig: -5, ..p }, InvalidArgument, "n_ctx_orig -5");
    expect("transposed a", at, pos4, None, params(2, ROPE_NEOX), Shape, "a must be dense in dim 0");

    // Still usable: position 0 leaves the input unchanged.
    let zero = upload_i32(&mut input, &[4], &[0; 4]);
    let r = root.rope(a, zero, None, &p).unwrap();
    assert_eq!(eval(&mut root, r), vec![0.5; 256]);
}

// ---- the C functions ----------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
struct CRopeParams {
    n_dims: i32,
    mode: i32,
    n_ctx_orig: i32,
    freq_base: f32,
    freq_scale: f32,
    ext_factor: f32,
    attn_factor: f32,
    beta_fast: f32,
    beta_slow: f32,
    sections: [i32; 4],
}
#[repr(C)]
struct CError {
    status: i32,
    message: [std::ffi::c_char; 1024],
}
impl CError {
    fn text(&self) -> String {
        unsafe { std::ffi::CStr::from_ptr(self.message.as_ptr()) }.to_string_lossy().into_owned()
    }
}
#[repr(C)]
struct Opaque {
    _p: [u8; 0],
}
extern "C" {
    fn ggml_rs_rope_params_default() -> CRopeParams;
    fn ggml_rs_rope(c: *mut Opaque, a: *mut Opaque, pos: *mut Opaque, ff: *mut Opaque, p: *const CRopeParams, err: *mut CError) -> *mut Opaque;
    fn ggml_rs_backend_new(params: *const std::ffi::c_void, out: *mut *mut Opaque, err: *mut CError) -> i32;
    fn ggml_rs_backend_free(b: *mut Opaque);
    fn ggml_rs_ctx_new(b: *const Opaque, size: usize, err: *mut CError) -> *mut Opaque;
    fn ggml_rs_ctx_input(c: *mut Opaque) -> *mut Opaque;
    fn ggml_rs_ctx_free(c: *mut Opaque);
    fn ggml_rs_ctx_from_data(c: *mut Opaque, ty: i32, ne: *const i64, n: usize, data: *const u8, len: usize, err: *mut CError) -> *mut Opaque;
    fn ggml_rs_ctx_compute(c: *mut Opaque, outs: *const *mut Opaque, n: usize, err: *mut CError) -> i32;
    fn ggml_rs_tensor_get_f32(t: *mut Opaque, dst: *mut f32, n: usize, err: *mut CError) -> i32;
}

#[test]
fn c_abi_rope() {
    unsafe {
        let d = ggml_rs_rope_params_default();
        assert_eq!(std::mem::size_of::<CRopeParams>(), 52);
        assert_eq!(
            d,
            CRopeParams {
                n_dims: 0,
                mode: 0,
                n_ctx_orig: 131072,
                freq_base: 10000.0,
                freq_scale: 1.0,
                ext_factor: 0.0,
                attn_factor: 1.0,
                beta_fast: 32.0,
                beta_slow: 1.0,
                sections: [0; 4]
            }
        );
        let mut err = CError { status: 0, message: [0; 1024] };
        let mut be = std::ptr::null_mut();
        assert_eq!(ggml_rs_backend_new(std::ptr::null(), &mut be, &mut err), 0);
        let root = ggml_rs_ctx_new(be, 256, &mut err);
        let input = ggml_rs_ctx_input(root);
        let mut rng = Rng::new(81);
        let x = rng.vec(16 * 2 * 3);
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let a = ggml_rs_ctx_from_data(input, 0, [16i64, 2, 3].as_ptr(), 3, bytes.as_ptr(), bytes.len(), &mut err);
        let pos = [4i32, 5, 6];
        let pb: Vec<u8> = pos.iter().flat_map(|v| v.to_le_bytes()).collect();
        let pt = ggml_rs_ctx_from_data(input, 26, [3i64].as_ptr(), 1, pb.as_ptr(), pb.len(), &mut err);
        assert!(!a.is_null() && !pt.is_null(), "{}", err.text());
        let cp = CRopeParams { n_dims: 16, mode: 2, freq_base: 1000.0, ..d };
        let r = ggml_rs_rope(root, a, pt, std::ptr::null_mut(), &cp, &mut err);
        assert!(!r.is_null(), "{}", err.text());
        assert_eq!(ggml_rs_ctx_compute(root, &r, 1, &mut err), 0, "{}", err.text());
        let mut out = vec![0f32; x.len()];
        assert_eq!(ggml_rs_tensor_get_f32(r, out.as_mut_ptr(), out.len(), &mut err), 0);
        let p = RopeParams { n_dims: 16, mode: ROPE_NEOX, freq_base: 1000.0, ..Default::default() };
        assert_close("c rope", &out, &rope_ref(&x, [16, 2, 3, 1], &pos, None, &p), 1e-4, 1e-4);

        assert!(ggml_rs_rope(root, a, pt, std::ptr::null_mut(), std::ptr::null(), &mut err).is_null());
        assert_eq!((err.status, err.text().as_str()), (1, "rope: params is NULL"));
        let bad = CRopeParams { n_dims: 3, ..cp };
        assert!(ggml_rs_rope(root, a, pt, std::ptr::null_mut(), &bad, &mut err).is_null());
        assert!(err.text().starts_with("rope: n_dims 3 must be positive, even"), "{}", err.text());
        assert!(ggml_rs_rope(root, a, std::ptr::null_mut(), std::ptr::null_mut(), &cp, &mut err).is_null());
        assert_eq!(err.text(), "rope: pos is NULL");
        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
