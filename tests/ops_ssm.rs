//! Differential tests of Ollama's SSMConv and SSMScan (`ssm_conv`,
//! `ssm_scan`) and of the fused causal convolution with its state
//! (`causal_conv`) against naive f64 references: several token counts,
//! sequences, groups and state slots, Mamba-1 and Mamba-2 decays, strided
//! views; state carry-over for `causal_conv`; bad inputs; and the C ABI.
mod common;
#[path = "common/capi.rs"]
mod capi_base;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

fn read(t: Tensor) -> Vec<f32> {
    data::read_f32(t, "test").expect("read")
}

fn t_of(p: *mut sys::ggml_tensor) -> Tensor {
    unsafe { Tensor::from_raw(p) }.expect("tensor")
}

/// |got - want| <= atol + rtol*|want| everywhere.
fn close(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(err <= atol + rtol * w.abs(), "{what}: element {i}: got {g}, want {w}, |diff| {err}");
        worst = worst.max(err / (1.0 + w.abs()));
    }
    // SSM_DEBUG=1 prints each comparison's largest error / (1 + |want|), to
    // re-derive the tolerances.
    if std::env::var("SSM_DEBUG").is_ok() {
        eprintln!("{what}: worst {worst:e}");
    }
}

fn expect_err(what: &str, r: ggml_rs::ml::Result<impl std::fmt::Debug>, kind: ErrorKind, prefix: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind, kind, "{what}: {}", e.message);
    assert!(e.message.starts_with(prefix), "{what}: {:?} does not start with {prefix:?}", e.message);
}

// ---- ssm_conv ---------------------------------------------------------------------

/// `out[ch, t, s] = Σ_i sx[t + i, ch, s] · c[i, ch]`; sx `[w-1+T, C, n]`.
fn conv_ref(sx: &[f32], c: &[f32], width: usize, channels: usize, n_tokens: usize, n_seqs: usize) -> Vec<f64> {
    let cols = width - 1 + n_tokens;
    let mut out = vec![0f64; channels * n_tokens * n_seqs];
    for s in 0..n_seqs {
        for t in 0..n_tokens {
            for ch in 0..channels {
                out[ch + channels * (t + n_tokens * s)] =
                    (0..width).map(|i| sx[t + i + cols * (ch + channels * s)] as f64 * c[i + width * ch] as f64).sum();
            }
        }
    }
    out
}

/// Random sx `[w-1+T, C, n]` and c `[w, C]`, uploaded, and their ssm_conv.
fn random_conv(rng: &mut Rng, root: &mut Context, input: &mut Context, width: usize, channels: usize, n_tokens: usize, n_seqs: usize) -> (Vec<f32>, Vec<f32>, Tensor) {
    let cols = width - 1 + n_tokens;
    let sxv = rng.vec(cols * channels * n_seqs);
    let cv = rng.vec(width * channels);
    let sx = upload(input, F32, &[cols as i64, channels as i64, n_seqs as i64], &sxv);
    let c = upload(input, F32, &[width as i64, channels as i64], &cv);
    let out = root.ssm_conv(sx, c).expect("ssm_conv");
    (sxv, cv, out)
}

/// f32 dot products of `width` (<= 4) terms of magnitude <= 1: error below
/// 4 · 4 · 2^-24 ≈ 1e-6 in the worst case; largest seen 7.7e-8. 1e-6
/// absolute allowed.
const CONV_TOL: f64 = 1e-6;

#[test]
fn ssm_conv_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(11);
    for (width, channels, n_tokens, n_seqs) in [(4, 5, 1, 1), (4, 24, 7, 2), (2, 3, 64, 3), (3, 64, 200, 1)] {
        let (mut root, mut input) = contexts(&b);
        let (sxv, cv, out) = random_conv(&mut rng, &mut root, &mut input, width, channels, n_tokens, n_seqs);
        assert_eq!(out.ne(), [channels as i64, n_tokens as i64, n_seqs as i64, 1]);
        let got = eval(&mut root, out);
        close(
            &format!("ssm_conv w={width} C={channels} T={n_tokens} n={n_seqs}"),
            &got,
            &conv_ref(&sxv, &cv, width, channels, n_tokens, n_seqs),
            CONV_TOL,
            0.0,
        );
    }
}

/// ggml's CPU ssm_conv computes each output as the f32 chain
/// `acc = fma(sx, c, acc)` from 0 over the taps (its scalar loop as GCC
/// contracts it), and our blocked AVX-512 version
/// (scripts/patches/17-cpu-ssm-conv-blocks.sh) must give the same floats:
/// compared bit for bit, at sizes that mix 16 x 16 blocks with channels
/// and tokens left over, split over two threads. (On a CPU without FMA the
/// compiler cannot contract, and only the tolerance above applies.)
#[test]
fn ssm_conv_is_the_fma_chain_exactly() {
    if unsafe { sys::ggml_cpu_has_fma() } == 0 {
        eprintln!("note: no FMA on this CPU; ssm_conv's exact order not checked");
        return;
    }
    let b = backend();
    let mut rng = Rng::new(12);
    for (width, channels, n_tokens, n_seqs) in [(4, 37, 40, 2), (3, 64, 200, 1), (4, 2048, 17, 1)] {
        let (mut root, mut input) = contexts(&b);
        let cols = width - 1 + n_tokens;
        let (sxv, cv, out) = random_conv(&mut rng, &mut root, &mut input, width, channels, n_tokens, n_seqs);
        let got = eval(&mut root, out);
        for s in 0..n_seqs {
            for t in 0..n_tokens {
                for ch in 0..channels {
                    let want = (0..width).fold(0f32, |acc, i| sxv[t + i + cols * (ch + channels * s)].mul_add(cv[i + width * ch], acc));
                    let g = got[ch + channels * (t + n_tokens * s)];
                    assert_eq!(g.to_bits(), want.to_bits(), "w={width} C={channels} T={n_tokens}: channel {ch} token {t} seq {s}: {g} vs {want}");
                }
            }
        }
    }
}

#[test]
fn ssm_conv_takes_strided_sequences_and_kernel_rows() {
    // sx: a view whose sequences are not adjacent (dims 0 and 1 packed, as
    // the kernel needs); c: a view of the first `channels` kernel rows of a
    // bigger matrix (the kernel steps through c's rows by its width, so c
    // must be packed too).
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let mut rng = Rng::new(12);
    let (width, channels, n_tokens, n_seqs) = (4usize, 6usize, 5usize, 2usize);
    let cols = width - 1 + n_tokens;
    let big = rng.vec(cols * channels * (n_seqs + 1));
    let bigt = upload(&mut input, F32, &[cols as i64, channels as i64, (n_seqs + 1) as i64], &big);
    let nb = bigt.nb();
    // Sequences 0 and 2 of the three.
    let sx = root.view(bigt, 0, &[cols as i64, channels as i64, n_seqs as i64], &[nb[1], 2 * nb[2]]).unwrap();
    let cbig = rng.vec(width * channels * 2);
    let ct = upload(&mut input, F32, &[width as i64, 2 * channels as i64], &cbig);
    let c = root.view(ct, width * 4, &[width as i64, channels as i64], &[ct.nb()[1]]).unwrap();
    let out = root.ssm_conv(sx, c).expect("strided ssm_conv");
    let got = eval(&mut root, out);
    let mut sxv = Vec::new();
    sxv.extend_from_slice(&big[..cols * channels]);
    sxv.extend_from_slice(&big[2 * cols * channels..3 * cols * channels]);
    let cv = cbig[width..width * (channels + 1)].to_vec();
    close("strided ssm_conv", &got, &conv_ref(&sxv, &cv, width, channels, n_tokens, n_seqs), CONV_TOL, 0.0);
}

#[test]
fn ssm_conv_rejects_bad_inputs() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let sx = input.zeros(F32, &[7, 4, 2]).unwrap();
    let c = input.zeros(F32, &[4, 4]).unwrap();
    let sx16 = input.zeros(F16, &[7, 4, 2]).unwrap();
    let sx4d = input.zeros(F32, &[7, 4, 2, 2]).unwrap();
    let c3d = input.zeros(F32, &[4, 4, 2]).unwrap();
    let c5 = input.zeros(F32, &[4, 5]).unwrap();
    let short = input.zeros(F32, &[3, 4, 2]).unwrap();
    let sx_tr = t_of(unsafe { sys::ggml_permute(root.ggml_context(), sx.as_ptr(), 1, 0, 2, 3) });
    let c_tr = t_of(unsafe { sys::ggml_transpose(root.ggml_context(), c.as_ptr()) });
    let padded = root.view(input.zeros(F32, &[8, 4, 2]).unwrap(), 0, &[7, 4, 2], &[32, 128]).unwrap();
    let c_gaps = root.view(input.zeros(F32, &[4, 8]).unwrap(), 0, &[4, 4], &[32]).unwrap();
    let empty = input.empty(F32, &[0]).unwrap();
    let cases = [
        ("f16 sx", sx16, c, ErrorKind::DType, "ssm_conv: sx must be f32, got f16[7,4,2]"),
        ("4-D sx", sx4d, c, ErrorKind::Shape, "ssm_conv: sx must be 3-D"),
        ("3-D c", sx, c3d, ErrorKind::Shape, "ssm_conv: c must be a matrix"),
        ("channels", sx, c5, ErrorKind::Shape, "ssm_conv: sx f32[7,4,2] and c f32[4,5] differ in channels"),
        (
            "too short",
            short,
            c,
            ErrorKind::Shape,
            "ssm_conv: sx f32[3,4,2] has 3 columns, fewer than the kernel width 4",
        ),
        ("transposed sx", sx_tr, c, ErrorKind::Shape, "ssm_conv: sx"),
        ("padded sx rows", padded, c, ErrorKind::Shape, "ssm_conv: sx must have contiguous rows packed"),
        ("transposed c", sx, c_tr, ErrorKind::Shape, "ssm_conv: c must have contiguous rows packed"),
        ("c rows with gaps", sx, c_gaps, ErrorKind::Shape, "ssm_conv: c must have contiguous rows packed"),
        ("empty", empty, c, ErrorKind::Shape, "ssm_conv: sx has no elements"),
    ];
    for (what, sx, c, kind, msg) in cases {
        expect_err(what, root.ssm_conv(sx, c), kind, msg);
    }
    let ok = root.ssm_conv(sx, c).expect("still usable");
    assert_eq!(eval(&mut root, ok), vec![0.0; 4 * 4 * 2]);
}

// ---- ssm_scan ----------------------------------------------------------------------

struct Scan {
    d_state: usize,
    head_dim: usize,
    n_head: usize,
    n_group: usize,
    n_tokens: usize,
    n_seqs: usize,
    n_slots: usize,
    /// Mamba-1: A is [d_state, n_head]; Mamba-2: [1, n_head].
    mamba1: bool,
}

struct ScanData {
    s: Vec<f32>,
    x: Vec<f32>,
    dt: Vec<f32>,
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    ids: Vec<i32>,
}

fn softplus(x: f64) -> f64 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// y `[head_dim, n_head, T, n_seqs]` followed by the final states
/// `[d_state, head_dim, n_head, n_seqs]`.
fn scan_ref(p: &Scan, d: &ScanData) -> Vec<f64> {
    let (ds, hd, nh, ng, nt, ns) = (p.d_state, p.head_dim, p.n_head, p.n_group, p.n_tokens, p.n_seqs);
    let mut y = vec![0f64; hd * nh * nt * ns];
    let mut states = vec![0f64; ds * hd * nh * ns];
    let slot = ds * hd * nh;
    for s in 0..ns {
        let st = &mut states[s * slot..(s + 1) * slot];
        let src = d.ids[s] as usize * slot;
        for (o, &v) in st.iter_mut().zip(&d.s[src..src + slot]) {
            *o = v as f64;
        }
        for t in 0..nt {
            for h in 0..nh {
                let gr = h / (nh / ng);
                let delta = softplus(d.dt[h + nh * (t + nt * s)] as f64);
                let bc = ds * (gr + ng * (t + nt * s));
                for pd in 0..hd {
                    let xv = d.x[pd + hd * (h + nh * (t + nt * s))] as f64;
                    let mut acc = 0f64;
                    for n in 0..ds {
                        let a = if p.mamba1 { d.a[n + ds * h] } else { d.a[h] } as f64;
                        let i = n + ds * (pd + hd * h);
                        st[i] = st[i] * (delta * a).exp() + d.b[bc + n] as f64 * xv * delta;
                        acc += st[i] * d.c[bc + n] as f64;
                    }
                    y[pd + hd * (h + nh * (t + nt * s))] = acc;
                }
            }
        }
    }
    y.extend(states);
    y
}

fn scan_data(rng: &mut Rng, p: &Scan) -> ScanData {
    let (ds, hd, nh, ng, nt, ns) = (p.d_state, p.head_dim, p.n_head, p.n_group, p.n_tokens, p.n_seqs);
    let a_len = if p.mamba1 { ds * nh } else { nh };
    // A in [-1, -0.1] (a decay), dt in [-3, 1].
    let a = (0..a_len).map(|_| -0.55 + 0.45 * rng.f32()).collect();
    let dt = (0..nh * nt * ns).map(|_| -1.0 + 2.0 * rng.f32()).collect();
    // Slots in reverse order, so ids are not the identity.
    let ids = (0..ns).map(|i| (p.n_slots - 1 - i) as i32).collect();
    ScanData {
        s: rng.vec(ds * hd * nh * p.n_slots),
        x: rng.vec(hd * nh * nt * ns),
        dt,
        a,
        b: rng.vec(ds * ng * nt * ns),
        c: rng.vec(ds * ng * nt * ns),
        ids,
    }
}

struct ScanTensors {
    s: Tensor,
    x: Tensor,
    dt: Tensor,
    a: Tensor,
    b: Tensor,
    c: Tensor,
    ids: Tensor,
}

fn scan_tensors(input: &mut Context, p: &Scan, d: &ScanData) -> ScanTensors {
    let (ds, hd, nh, ng, nt, ns) =
        (p.d_state as i64, p.head_dim as i64, p.n_head as i64, p.n_group as i64, p.n_tokens as i64, p.n_seqs as i64);
    ScanTensors {
        s: upload(input, F32, &[ds, hd, nh, p.n_slots as i64], &d.s),
        x: upload(input, F32, &[hd, nh, nt, ns], &d.x),
        dt: upload(input, F32, &[nh, nt, ns], &d.dt),
        a: upload(input, F32, &[if p.mamba1 { ds } else { 1 }, nh], &d.a),
        b: upload(input, F32, &[ds, ng, nt, ns], &d.b),
        c: upload(input, F32, &[ds, ng, nt, ns], &d.c),
        ids: upload_i32(input, &[ns], &d.ids),
    }
}

/// f32 state updates with expf: ~1e-7 relative per step; the decay
/// (exp(softplus(dt)·A) < 1) keeps old errors from growing. y sums d_state
/// terms of O(1): largest error seen 1.4e-6·(1 + |want|) (d_state 128, 64
/// tokens); 1e-5 absolute + 1e-5 relative allowed (7x margin).
const SCAN_TOL: f64 = 1e-5;

#[test]
fn ssm_scan_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(21);
    let cases = [
        // Mamba-2: scalar decay per head, groups of heads sharing B and C.
        Scan { d_state: 16, head_dim: 4, n_head: 4, n_group: 2, n_tokens: 1, n_seqs: 1, n_slots: 1, mamba1: false },
        Scan { d_state: 64, head_dim: 8, n_head: 6, n_group: 3, n_tokens: 7, n_seqs: 2, n_slots: 3, mamba1: false },
        Scan { d_state: 128, head_dim: 16, n_head: 4, n_group: 1, n_tokens: 64, n_seqs: 2, n_slots: 4, mamba1: false },
        // d_state not a multiple of the SIMD step.
        Scan { d_state: 13, head_dim: 3, n_head: 2, n_group: 2, n_tokens: 5, n_seqs: 1, n_slots: 2, mamba1: false },
        // Mamba-1: a decay per state element; one "head" per channel.
        Scan { d_state: 16, head_dim: 1, n_head: 24, n_group: 1, n_tokens: 7, n_seqs: 2, n_slots: 2, mamba1: true },
    ];
    for p in &cases {
        let (mut root, mut input) = contexts(&b);
        let d = scan_data(&mut rng, p);
        let t = scan_tensors(&mut input, p, &d);
        let out = root.ssm_scan(t.s, t.x, t.dt, t.a, t.b, t.c, t.ids).expect("ssm_scan");
        let n_y = p.head_dim * p.n_head * p.n_tokens * p.n_seqs;
        assert_eq!(out.ne(), [(n_y + p.d_state * p.head_dim * p.n_head * p.n_seqs) as i64, 1, 1, 1]);
        let got = eval(&mut root, out);
        let what = format!(
            "ssm_scan d_state={} head_dim={} heads={} groups={} T={} seqs={} mamba1={}",
            p.d_state, p.head_dim, p.n_head, p.n_group, p.n_tokens, p.n_seqs, p.mamba1
        );
        close(&what, &got, &scan_ref(p, &d), SCAN_TOL, SCAN_TOL);
    }
}

#[test]
fn ssm_scan_takes_strided_tokens() {
    // x, B and C as views whose tokens are not adjacent (dims 0 and 1 packed).
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let mut rng = Rng::new(22);
    let p = Scan { d_state: 16, head_dim: 4, n_head: 2, n_group: 1, n_tokens: 3, n_seqs: 1, n_slots: 1, mamba1: false };
    let d = scan_data(&mut rng, &p);
    let t = scan_tensors(&mut input, &p, &d);
    // Upload every tensor interleaved with junk tokens, then view the real ones.
    let spread = |input: &mut Context, root: &mut Context, v: &[f32], ne0: i64, ne1: i64| {
        let row = (ne0 * ne1) as usize;
        let mut big = Vec::new();
        for tok in v.chunks(row) {
            big.extend_from_slice(tok);
            big.extend(std::iter::repeat_n(99.0, row));
        }
        let bt = upload(input, F32, &[ne0, ne1, 2 * p.n_tokens as i64], &big);
        let nb = bt.nb();
        let v = root.view(bt, 0, &[ne0, ne1, p.n_tokens as i64, 1], &[nb[1], 2 * nb[2], 2 * nb[2] * 3]).unwrap();
        assert!(!v.is_contiguous());
        v
    };
    let x = spread(&mut input, &mut root, &d.x, 4, 2);
    let bb = spread(&mut input, &mut root, &d.b, 16, 1);
    let cc = spread(&mut input, &mut root, &d.c, 16, 1);
    let out = root.ssm_scan(t.s, x, t.dt, t.a, bb, cc, t.ids).expect("views");
    close("strided ssm_scan", &eval(&mut root, out), &scan_ref(&p, &d), SCAN_TOL, SCAN_TOL);
}

#[test]
fn ssm_scan_rejects_bad_inputs() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let p = Scan { d_state: 8, head_dim: 4, n_head: 4, n_group: 2, n_tokens: 3, n_seqs: 2, n_slots: 2, mamba1: false };
    let d = scan_data(&mut Rng::new(23), &p);
    let t = scan_tensors(&mut input, &p, &d);
    let z = |input: &mut Context, ne: &[i64]| input.zeros(F32, ne).unwrap();
    let ids_f32 = z(&mut input, &[2]);
    let ids3 = upload_i32(&mut input, &[3], &[0, 1, 0]);
    let s_perm = t_of(unsafe { sys::ggml_permute(root.ggml_context(), t.s.as_ptr(), 1, 0, 2, 3) });
    let x_wrong = z(&mut input, &[5, 4, 3, 2]);
    let dt_wrong = z(&mut input, &[4, 3]);
    let a_wrong = z(&mut input, &[3, 4]);
    let b_groups = z(&mut input, &[8, 3, 3, 2]);
    let c_groups = z(&mut input, &[8, 3, 3, 2]);
    let b_tokens = z(&mut input, &[8, 2, 2, 2]);
    let c_other = z(&mut input, &[8, 1, 3, 2]);
    let x16 = input.zeros(F16, &[4, 4, 3, 2]).unwrap();
    let x_tr = t_of(unsafe { sys::ggml_transpose(root.ggml_context(), t.x.as_ptr()) });
    let all = |f: &dyn Fn(&mut ScanArgs)| {
        let mut a = ScanArgs { s: t.s, x: t.x, dt: t.dt, a: t.a, b: t.b, c: t.c, ids: t.ids };
        f(&mut a);
        a
    };
    let cases: Vec<(&str, ScanArgs, ErrorKind, &str)> = vec![
        ("ids f32", all(&|a| a.ids = ids_f32), ErrorKind::DType, "ssm_scan: ids must be i32, got f32[2]"),
        ("x f16", all(&|a| a.x = x16), ErrorKind::DType, "ssm_scan: x must be f32"),
        ("s permuted", all(&|a| a.s = s_perm), ErrorKind::Shape, "ssm_scan: s must be contiguous"),
        ("x transposed", all(&|a| a.x = x_tr), ErrorKind::Shape, "ssm_scan: x must have contiguous rows packed"),
        (
            "x head_dim",
            all(&|a| a.x = x_wrong),
            ErrorKind::Shape,
            "ssm_scan: x f32[5,4,3,2] must be [head_dim, n_head, tokens, sequences]",
        ),
        ("dt", all(&|a| a.dt = dt_wrong), ErrorKind::Shape, "ssm_scan: dt must have shape [4,3,2]"),
        ("A", all(&|a| a.a = a_wrong), ErrorKind::Shape, "ssm_scan: A must be [1, n_head] or [d_state, n_head]"),
        (
            "groups",
            all(&|a| {
                a.b = b_groups;
                a.c = c_groups
            }),
            ErrorKind::Shape,
            "ssm_scan: n_head (4) must be a multiple of B's n_group (3)",
        ),
        (
            "B tokens",
            all(&|a| a.b = b_tokens),
            ErrorKind::Shape,
            "ssm_scan: B must be [d_state, n_group, tokens, sequences]",
        ),
        ("C shape", all(&|a| a.c = c_other), ErrorKind::Shape, "ssm_scan: B and C must have the same shape"),
        ("ids count", all(&|a| a.ids = ids3), ErrorKind::Shape, "ssm_scan: ids must have shape [2]"),
    ];
    for (what, a, kind, msg) in cases {
        expect_err(what, root.ssm_scan(a.s, a.x, a.dt, a.a, a.b, a.c, a.ids), kind, msg);
    }
    let out = root.ssm_scan(t.s, t.x, t.dt, t.a, t.b, t.c, t.ids).expect("still usable");
    close("after errors", &eval(&mut root, out), &scan_ref(&p, &d), SCAN_TOL, SCAN_TOL);
}

#[derive(Clone, Copy)]
struct ScanArgs {
    s: Tensor,
    x: Tensor,
    dt: Tensor,
    a: Tensor,
    b: Tensor,
    c: Tensor,
    ids: Tensor,
}

// ---- causal_conv --------------------------------------------------------------------

/// out `[C, T, n]` and the new state `[w-1, C, n]`, from x `[C, T, n]`,
/// state `[w-1, C, n]` and kernel `[w, C]`.
fn causal_ref(
    x: &[f32],
    state: &[f32],
    kernel: &[f32],
    w: usize,
    ch: usize,
    t: usize,
    n: usize,
) -> (Vec<f64>, Vec<f32>) {
    let cols = w - 1 + t;
    let mut sx = vec![0f32; cols * ch * n];
    for s in 0..n {
        for c in 0..ch {
            for i in 0..w - 1 {
                sx[i + cols * (c + ch * s)] = state[i + (w - 1) * (c + ch * s)];
            }
            for tt in 0..t {
                sx[w - 1 + tt + cols * (c + ch * s)] = x[c + ch * (tt + t * s)];
            }
        }
    }
    let out = conv_ref(&sx, kernel, w, ch, t, n);
    let mut new_state = vec![0f32; (w - 1) * ch * n];
    for s in 0..n {
        for c in 0..ch {
            for i in 0..w - 1 {
                new_state[i + (w - 1) * (c + ch * s)] = sx[t + i + cols * (c + ch * s)];
            }
        }
    }
    (out, new_state)
}

#[test]
fn causal_conv_matches_reference_and_carries_state() {
    let b = backend();
    let mut rng = Rng::new(31);
    for (w, ch, n) in [(4usize, 6usize, 1usize), (4, 40, 2), (2, 3, 3)] {
        let m = 200;
        let xv = rng.vec(ch * m * n);
        let sv = rng.vec((w - 1) * ch * n);
        let kv = rng.vec(w * ch);
        let (want_all, want_state_all) = causal_ref(&xv, &sv, &kv, w, ch, m, n);
        for len in [1usize, 7, 64, 200] {
            let (mut root, mut input) = contexts(&b);
            let what = format!("causal_conv w={w} C={ch} n={n} T={len}");
            // The first `len` tokens of every sequence.
            let part = |a: usize, bb: usize| -> Vec<f32> {
                (0..n).flat_map(|s| xv[ch * (a + m * s)..ch * (bb + m * s)].to_vec()).collect()
            };
            let x = upload(&mut input, F32, &[ch as i64, len as i64, n as i64], &part(0, len));
            let st = upload(&mut input, F32, &[(w - 1) as i64, ch as i64, n as i64], &sv);
            let kern = upload(&mut input, F32, &[w as i64, ch as i64], &kv);
            let (out, ns) = root.causal_conv(x, st, kern).expect("causal_conv");
            assert_eq!(out.ne(), [ch as i64, len as i64, n as i64, 1], "{what}");
            assert_eq!(ns.ne(), [(w - 1) as i64, ch as i64, n as i64, 1], "{what}");
            assert!(ns.is_contiguous(), "{what}: the new state is contiguous");
            let (want, want_state) = causal_ref(&part(0, len), &sv, &kv, w, ch, len, n);
            root.compute(&[out, ns]).expect("compute");
            close(&format!("{what}: out"), &read(out), &want, CONV_TOL, 0.0);
            assert_eq!(read(ns), want_state, "{what}: new state (a copy of inputs: exact)");

            // Carry-over: tokens [len, m) from the returned state, in the
            // same graph, continue the whole-sequence result exactly (each
            // output is the same 4-term sum either way).
            if len < m {
                let x2 = upload(&mut input, F32, &[ch as i64, (m - len) as i64, n as i64], &part(len, m));
                let (out2, ns2) = root.causal_conv(x2, ns, kern).expect("second call");
                root.compute(&[out, out2, ns2]).expect("compute");
                // Read before another compute on this backend overwrites them.
                let (r1, r2, split_state) = (read(out), read(out2), read(ns2));
                let mut joined = Vec::new();
                for s in 0..n {
                    joined.extend_from_slice(&r1[ch * len * s..ch * len * (s + 1)]);
                    joined.extend_from_slice(&r2[ch * (m - len) * s..ch * (m - len) * (s + 1)]);
                }
                let (mut whole_root, mut whole_in) = contexts(&b);
                let xw = upload(&mut whole_in, F32, &[ch as i64, m as i64, n as i64], &xv);
                let sw = upload(&mut whole_in, F32, &[(w - 1) as i64, ch as i64, n as i64], &sv);
                let kw = upload(&mut whole_in, F32, &[w as i64, ch as i64], &kv);
                let (ow, sw2) = whole_root.causal_conv(xw, sw, kw).unwrap();
                whole_root.compute(&[ow, sw2]).unwrap();
                assert_eq!(joined, read(ow), "{what}: split outputs equal one call");
                assert_eq!(split_state, read(sw2), "{what}: split state equals one call");
                close(&format!("{what}: whole"), &joined, &want_all, CONV_TOL, 0.0);
                assert_eq!(split_state, want_state_all, "{what}: final state");
            }
        }
    }
}

#[test]
fn causal_conv_takes_a_strided_input() {
    // x as a view of one projection's output: channels [2, 2+ch) of 10.
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let mut rng = Rng::new(32);
    let (w, ch, t, n) = (4usize, 5usize, 7usize, 2usize);
    let big = rng.vec(10 * t * n);
    let bt = upload(&mut input, F32, &[10, t as i64, n as i64], &big);
    let nb = bt.nb();
    let x = root.view(bt, 2 * 4, &[ch as i64, t as i64, n as i64], &[nb[1], nb[2]]).unwrap();
    let xv: Vec<f32> = (0..t * n).flat_map(|r| big[10 * r + 2..10 * r + 2 + ch].to_vec()).collect();
    let sv = rng.vec((w - 1) * ch * n);
    let kv = rng.vec(w * ch);
    let st = upload(&mut input, F32, &[(w - 1) as i64, ch as i64, n as i64], &sv);
    let kern = upload(&mut input, F32, &[w as i64, ch as i64], &kv);
    let (out, ns) = root.causal_conv(x, st, kern).unwrap();
    root.compute(&[out, ns]).unwrap();
    let (want, want_state) = causal_ref(&xv, &sv, &kv, w, ch, t, n);
    close("strided causal_conv", &read(out), &want, CONV_TOL, 0.0);
    assert_eq!(read(ns), want_state);
}

#[test]
fn causal_conv_rejects_bad_inputs() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let z = |input: &mut Context, ne: &[i64]| input.zeros(F32, ne).unwrap();
    let x = z(&mut input, &[6, 5, 2]);
    let st = z(&mut input, &[3, 6, 2]);
    let k = z(&mut input, &[4, 6]);
    let x16 = input.zeros(F16, &[6, 5, 2]).unwrap();
    let x4 = z(&mut input, &[6, 5, 2, 2]);
    let k1 = z(&mut input, &[1, 6]);
    let st1 = z(&mut input, &[6, 2]);
    let k_ch = z(&mut input, &[4, 7]);
    let st_w = z(&mut input, &[4, 6, 2]);
    let st_n = z(&mut input, &[3, 6, 1]);
    let k_tr = t_of(unsafe { sys::ggml_transpose(root.ggml_context(), z(&mut input, &[6, 4]).as_ptr()) });
    let cases = [
        ("f16 x", x16, st, k, ErrorKind::DType, "causal_conv: x must be f32, got f16[6,5,2]"),
        ("4-D x", x4, st, k, ErrorKind::Shape, "causal_conv: x must be [channels, tokens, sequences]"),
        ("width 1", x, st1, k1, ErrorKind::Shape, "causal_conv: kernel width must be at least 2"),
        ("channels", x, st, k_ch, ErrorKind::Shape, "causal_conv: kernel must be [width, channels] with channels 6"),
        ("state width", x, st_w, k, ErrorKind::Shape, "causal_conv: state must have shape [3,6,2]"),
        ("state seqs", x, st_n, k, ErrorKind::Shape, "causal_conv: state must have shape [3,6,2]"),
        ("transposed kernel", x, st, k_tr, ErrorKind::Shape, "causal_conv: kernel must have contiguous rows packed"),
    ];
    for (what, x, st, k, kind, msg) in cases {
        expect_err(what, root.causal_conv(x, st, k), kind, msg);
    }
    let (out, ns) = root.causal_conv(x, st, k).expect("still usable");
    root.compute(&[out, ns]).unwrap();
    assert_eq!(read(out), vec![0.0; 6 * 5 * 2]);
}

// ---- the C ABI ---------------------------------------------------------------------------

mod capi {
    pub use crate::capi_base::*;

    extern "C" {
        pub fn ggml_rs_ssm_conv(c: *mut Ctx, sx: *mut T, k: *mut T, err: *mut Error) -> *mut T;
        #[allow(clippy::too_many_arguments)]
        pub fn ggml_rs_ssm_scan(
            c: *mut Ctx,
            s: *mut T,
            x: *mut T,
            dt: *mut T,
            a: *mut T,
            b: *mut T,
            cc: *mut T,
            ids: *mut T,
            err: *mut Error,
        ) -> *mut T;
        pub fn ggml_rs_causal_conv(
            c: *mut Ctx,
            x: *mut T,
            state: *mut T,
            kernel: *mut T,
            out_state: *mut *mut T,
            err: *mut Error,
        ) -> *mut T;
    }
}

#[test]
fn c_abi_ssm_ops_compute_and_report_errors() {
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
        let up = |ty: i32, ne: &[i64], bytes: Vec<u8>, err: &mut Error| {
            let t = ggml_rs_ctx_from_data(input, ty, ne.as_ptr(), ne.len(), bytes.as_ptr(), bytes.len(), err);
            assert!(!t.is_null(), "{}", err.text());
            t
        };
        let f =
            |ne: &[i64], v: &[f32], err: &mut Error| up(0, ne, v.iter().flat_map(|x| x.to_le_bytes()).collect(), err);
        let get = |t: *mut T, n: usize, err: &mut Error| {
            let mut v = vec![0f32; n];
            assert_eq!(ggml_rs_tensor_get_f32(t, v.as_mut_ptr(), n, err), OK, "{}", err.text());
            v
        };
        let mut rng = Rng::new(41);

        // ssm_conv
        let (sxv, cv) = (rng.vec(6 * 3 * 2), rng.vec(4 * 3));
        let sx = f(&[6, 3, 2], &sxv, &mut err);
        let c = f(&[4, 3], &cv, &mut err);
        let conv = ggml_rs_ssm_conv(root, sx, c, &mut err);
        assert!(!conv.is_null(), "{}", err.text());

        // ssm_scan
        let p =
            Scan { d_state: 16, head_dim: 2, n_head: 2, n_group: 1, n_tokens: 3, n_seqs: 1, n_slots: 2, mamba1: false };
        let d = scan_data(&mut rng, &p);
        let s = f(&[16, 2, 2, 2], &d.s, &mut err);
        let x = f(&[2, 2, 3], &d.x, &mut err);
        let dt = f(&[2, 3], &d.dt, &mut err);
        let a = f(&[1, 2], &d.a, &mut err);
        let bb = f(&[16, 1, 3], &d.b, &mut err);
        let cc = f(&[16, 1, 3], &d.c, &mut err);
        let ids = up(26, &[1], d.ids.iter().flat_map(|v| v.to_le_bytes()).collect(), &mut err);
        let scan = ggml_rs_ssm_scan(root, s, x, dt, a, bb, cc, ids, &mut err);
        assert!(!scan.is_null(), "{}", err.text());

        // causal_conv
        let (xv, stv, kv) = (rng.vec(3 * 4), rng.vec(3 * 3), rng.vec(4 * 3));
        let cx = f(&[3, 4], &xv, &mut err);
        let cst = f(&[3, 3], &stv, &mut err);
        let ck = f(&[4, 3], &kv, &mut err);
        let mut new_state: *mut T = null_mut();
        let causal = ggml_rs_causal_conv(root, cx, cst, ck, &mut new_state, &mut err);
        assert!(!causal.is_null() && !new_state.is_null(), "{}", err.text());

        let outs = [conv, scan, causal, new_state];
        assert_eq!(ggml_rs_ctx_compute(root, outs.as_ptr(), outs.len(), &mut err), OK, "{}", err.text());
        close("C ssm_conv", &get(conv, 3 * 3 * 2, &mut err), &conv_ref(&sxv, &cv, 4, 3, 3, 2), CONV_TOL, 0.0);
        close("C ssm_scan", &get(scan, 2 * 2 * 3 + 16 * 2 * 2, &mut err), &scan_ref(&p, &d), SCAN_TOL, SCAN_TOL);
        let (want, want_state) = causal_ref(&xv, &stv, &kv, 4, 3, 4, 1);
        close("C causal_conv", &get(causal, 3 * 4, &mut err), &want, CONV_TOL, 0.0);
        assert_eq!(get(new_state, 9, &mut err), want_state);

        // Errors name the op; out_state is written only on success.
        let mut e = Error::new();
        assert!(ggml_rs_ssm_conv(root, null_mut(), c, &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "ssm_conv: sx is NULL"));
        let mut e = Error::new();
        assert!(ggml_rs_ssm_scan(root, s, x, dt, a, bb, cc, a, &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (DTYPE, "ssm_scan: ids must be i32, got f32[1,2]"));
        let mut e = Error::new();
        assert!(ggml_rs_causal_conv(root, cx, cst, ck, null_mut(), &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "causal_conv: out_state is NULL"));
        let mut untouched = 8usize as *mut T;
        let mut e = Error::new();
        assert!(ggml_rs_causal_conv(root, cx, ck, ck, &mut untouched, &mut e).is_null());
        assert_eq!(e.status, SHAPE, "{}", e.text());
        assert!(e.text().starts_with("causal_conv: state must have shape [3,3]"), "{}", e.text());
        assert_eq!(untouched as usize, 8);
        ggml_rs_ctx_clear_error(root);
        assert_eq!(ggml_rs_ctx_compute(root, outs.as_ptr(), outs.len(), &mut err), OK, "{}", err.text());

        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
