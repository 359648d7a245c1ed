//! sdpa (Ollama's ScaledDotProductAttention), differential against a naive
//! f64 attention reference: per head, scores = scale·(q·k) + mask, softmax
//! over the keys (a sink logit, when given, joins the denominator), then
//! the weighted sum of v rows; GQA maps q head h to kv head h/(heads/kvHeads).
//!
//! Tolerances (|got - want| <= atol + rtol*|want|; outputs are O(1); the
//! largest error observed on the build machine in brackets):
//! * f32 K/V, softmax path: atol 1e-5, rtol 1e-5 [2e-7].
//! * f16 K/V, and f32 K/V on the flash path (sdpa casts them to f16 there,
//!   as llama.cpp's build_attn_mha): the reference uses the f16-rounded
//!   K/V; ggml may also round q to f16 for K·Q and accumulate V in f16 (the
//!   per-row flash kernel): atol 2e-3 [4e-4]; 2e-2 with soft-capped scores
//!   (queries scaled up so that the cap bends them).
//! * Q8_0 K/V, flash: reference on dequantized K/V with q rows quantized to
//!   Q8_0 (what the kernel dots with): atol 1e-4 [1e-7].
//! * Q8_0 K/V, softmax path: as above, but V·softmax also quantizes the
//!   attention weights to Q8_0: atol 5e-3 [1.4e-3].
mod common;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const Q8_0: u32 = sys::GGML_TYPE_Q8_0;

/// Logical inputs in ggml order: q [dk,h,sq,b], k [dk,kvh,sk,kb],
/// v [dv,kvh,sk,kb], mask [m0,m1,m2,m3], sinks [h], vmla [dv,dv2,hv,bv].
#[derive(Clone)]
struct Inputs {
    qn: [usize; 4],
    kn: [usize; 4],
    dv: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    mask: Option<(Vec<f32>, [usize; 4])>,
    sinks: Option<Vec<f32>>,
    vmla: Option<(Vec<f32>, [usize; 4])>,
    scale: f32,
    softcap: f32,
}

impl Inputs {
    fn new(seed: u64, qn: [usize; 4], kn: [usize; 4], dv: usize) -> Inputs {
        let mut rng = Rng::new(seed);
        let q = rng.vec(qn.iter().product());
        let k = rng.vec(kn.iter().product());
        let v = rng.vec(dv * kn[1] * kn[2] * kn[3]);
        Inputs { qn, kn, dv, q, k, v, mask: None, sinks: None, vmla: None, scale: 1.0 / (qn[0] as f32).sqrt(), softcap: 0.0 }
    }
    fn vn(&self) -> [usize; 4] {
        [self.dv, self.kn[1], self.kn[2], self.kn[3]]
    }
    /// Causal mask [m0 >= sk, m1 >= sq]: query i sees keys j <= i + offset
    /// and j < visible (keys from `visible` on are padding); -inf elsewhere.
    fn causal(mut self, m0: usize, m1: usize, offset: usize, visible: usize) -> Inputs {
        let mut m = vec![0f32; m0 * m1];
        for i in 0..m1 {
            for j in 0..m0 {
                if j > i + offset || j >= visible {
                    m[i * m0 + j] = f32::NEG_INFINITY;
                }
            }
        }
        self.mask = Some((m, [m0, m1, 1, 1]));
        self
    }
    fn with_sinks(mut self, seed: u64) -> Inputs {
        let mut rng = Rng::new(seed);
        self.sinks = Some((0..self.qn[1]).map(|_| 2.0 * rng.f32()).collect());
        self
    }
    fn with_vmla(mut self, seed: u64, dv2: usize, hv: usize) -> Inputs {
        let mut rng = Rng::new(seed);
        let wn = [self.dv, dv2, hv, 1];
        self.vmla = Some((rng.vec(wn.iter().product()), wn));
        self
    }
    /// K and V as another type would store them (for the reference).
    fn rounded(&self, f: impl Fn(f32) -> f32) -> Inputs {
        let mut r = self.clone();
        r.k = r.k.iter().map(|&x| f(x)).collect();
        r.v = r.v.iter().map(|&x| f(x)).collect();
        r
    }
}

/// Naive attention; output [dv2, heads, sq, b].
fn attention_ref(x: &Inputs) -> Vec<f32> {
    let [dk, heads, sq, b] = x.qn;
    let [_, kvh, sk, kb] = x.kn;
    let (vn, dv) = (x.vn(), x.dv);
    let dv2 = x.vmla.as_ref().map(|(_, wn)| wn[1]).unwrap_or(dv);
    let on = [dv2, heads, sq, b];
    let mut out = vec![0f32; on.iter().product()];
    for bi in 0..b {
        let kbi = bi / (b / kb);
        for h in 0..heads {
            let kh = h / (heads / kvh);
            for iq in 0..sq {
                let mut s: Vec<f64> = (0..sk)
                    .map(|j| {
                        let dot: f64 = (0..dk).map(|d| x.q[idx(x.qn, d, h, iq, bi)] as f64 * x.k[idx(x.kn, d, kh, j, kbi)] as f64).sum();
                        let m = x.mask.as_ref().map(|(m, mn)| m[idx(*mn, j, iq, h % mn[2], bi % mn[3])] as f64).unwrap_or(0.0);
                        let c = x.softcap as f64;
                        let s = x.scale as f64 * dot;
                        (if c != 0.0 { c * (s / c).tanh() } else { s }) + m
                    })
                    .collect();
                let sink = x.sinks.as_ref().map(|s| s[h] as f64);
                let mx = s.iter().copied().chain(sink).fold(f64::NEG_INFINITY, f64::max);
                let mut denom = 0.0;
                for v in s.iter_mut() {
                    *v = (*v - mx).exp();
                    denom += *v;
                }
                if let Some(sv) = sink {
                    denom += (sv - mx).exp();
                }
                let o: Vec<f64> = (0..dv).map(|d| (0..sk).map(|j| s[j] / denom * x.v[idx(vn, d, kh, j, kbi)] as f64).sum()).collect();
                for e in 0..dv2 {
                    let val = match &x.vmla {
                        None => o[e],
                        Some((w, wn)) => (0..dv).map(|d| w[idx(*wn, d, e, h / (heads / wn[2]), bi / (b / wn[3]))] as f64 * o[d]).sum(),
                    };
                    out[idx(on, e, h, iq, bi)] = val as f32;
                }
            }
        }
    }
    out
}

/// `assert_close` that also reports the largest error (see --nocapture).
fn close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    let max = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f32::max);
    eprintln!("{what}: max |err| {max:.2e} (atol {atol:.0e})");
    assert_close(what, got, want, atol, rtol);
}

fn shape(n: [usize; 4]) -> Vec<i64> {
    n.iter().map(|&d| d as i64).collect()
}

/// v [dv,kvh,sk,kb] re-laid out as [sk,dv,kvh,kb].
fn permute_v(v: &[f32], vn: [usize; 4]) -> Vec<f32> {
    let pn = [vn[2], vn[0], vn[1], vn[3]];
    let mut out = vec![0f32; v.len()];
    for b in 0..vn[3] {
        for h in 0..vn[1] {
            for j in 0..vn[2] {
                for d in 0..vn[0] {
                    out[idx(pn, j, d, h, b)] = v[idx(vn, d, h, j, b)];
                }
            }
        }
    }
    out
}

fn quantize(ty: u32, vals: &[f32], n_per_row: usize) -> Vec<u8> {
    let nrows = vals.len() / n_per_row;
    let size = unsafe { sys::ggml_row_size(ty, n_per_row as i64) } * nrows;
    let mut out = vec![0u8; size];
    let n = unsafe {
        sys::ggml_quantize_chunk(ty, vals.as_ptr(), out.as_mut_ptr().cast(), 0, nrows as i64, n_per_row as i64, std::ptr::null())
    };
    assert_eq!(n, size);
    out
}

fn dequantize(ty: u32, bytes: &[u8], n: usize) -> Vec<f32> {
    let traits = unsafe { &*sys::ggml_get_type_traits(ty) };
    let mut out = vec![0f32; n];
    unsafe { (traits.to_float.unwrap())(bytes.as_ptr().cast(), out.as_mut_ptr(), n as i64) };
    out
}

fn upload_any(ctx: &mut Context, ty: u32, shape: &[i64], vals: &[f32]) -> Tensor {
    if ty == Q8_0 {
        ctx.from_bytes(ty, shape, &quantize(ty, vals, shape[0] as usize)).unwrap()
    } else {
        upload(ctx, ty, shape, vals)
    }
}

#[derive(Clone, Copy)]
struct Mode {
    flash: bool,
    v_permuted: bool,
    kv: u32,
    mask: u32,
}

/// Builds and computes sdpa for `x` in `mode`; returns the output.
fn run(x: &Inputs, m: Mode) -> Vec<f32> {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let q = upload(&mut input, F32, &shape(x.qn), &x.q);
    let k = upload_any(&mut input, m.kv, &shape(x.kn), &x.k);
    let v = if m.v_permuted {
        let vn = x.vn();
        upload_any(&mut input, m.kv, &shape([vn[2], vn[0], vn[1], vn[3]]), &permute_v(&x.v, vn))
    } else {
        upload_any(&mut input, m.kv, &shape(x.vn()), &x.v)
    };
    let mask = x.mask.as_ref().map(|(mv, mn)| upload(&mut input, m.mask, &shape(*mn), mv));
    let sinks = x.sinks.as_ref().map(|s| upload(&mut input, F32, &[s.len() as i64], s));
    let vmla = x.vmla.as_ref().map(|(w, wn)| upload(&mut input, F32, &shape(*wn), w));
    let out = root.sdpa_capped(q, k, v, mask, sinks, vmla, x.scale, x.softcap, m.flash, m.v_permuted).unwrap();
    let dv2 = x.vmla.as_ref().map(|(_, wn)| wn[1]).unwrap_or(x.dv);
    assert_eq!(out.ne(), [dv2 as i64, x.qn[1] as i64, x.qn[2] as i64, x.qn[3] as i64], "output shape");
    assert_eq!(out.dtype(), F32);
    eval(&mut root, out)
}

const SOFTMAX: Mode = Mode { flash: false, v_permuted: false, kv: F32, mask: F32 };
const FLASH: Mode = Mode { flash: true, v_permuted: false, kv: F32, mask: F16 };

/// The reference for f32 K/V on the flash path (which takes them as f16)
/// and its tolerance.
fn flash_ref(x: &Inputs) -> (Vec<f32>, f32) {
    (attention_ref(&x.rounded(f16_round)), if x.softcap != 0.0 { 2e-2 } else { 2e-3 })
}

/// Runs `x` through both paths and both v layouts (f32 K/V) and compares.
fn check_all(what: &str, x: &Inputs) {
    let want = attention_ref(x);
    for (name, m) in [
        ("softmax", SOFTMAX),
        ("softmax v_permuted", Mode { v_permuted: true, ..SOFTMAX }),
        ("softmax f16 mask", Mode { mask: F16, ..SOFTMAX }),
    ] {
        close(&format!("{what} [{name}]"), &run(x, m), &want, 1e-5, 1e-5);
    }
    let (want16, atol) = flash_ref(x);
    for (name, m) in [("flash", FLASH), ("flash v_permuted", Mode { v_permuted: true, ..FLASH })] {
        close(&format!("{what} [{name}]"), &run(x, m), &want16, atol, 0.0);
    }
}

#[test]
fn plain_attention() {
    check_all("mha", &Inputs::new(1, [16, 4, 5, 1], [16, 4, 7, 1], 16));
    check_all("dv != dk", &Inputs::new(2, [32, 2, 3, 1], [32, 2, 9, 1], 8));
    check_all("one query", &Inputs::new(3, [8, 2, 1, 1], [8, 2, 6, 1], 8));
    let mut x = Inputs::new(4, [16, 2, 4, 1], [16, 2, 5, 1], 16);
    x.scale = 0.7;
    check_all("scale 0.7", &x);
}

#[test]
fn gqa_causal_mask_and_padded_keys() {
    // 8 query heads over 2 kv heads; 9 real keys padded to 12 (padding
    // masked with -inf, and filled with large values that would show up).
    let mut x = Inputs::new(11, [16, 8, 5, 1], [16, 2, 12, 1], 16).causal(12, 5, 4, 9);
    for h in 0..2 {
        for j in 9..12 {
            for d in 0..16 {
                x.k[idx(x.kn, d, h, j, 0)] = 5.0;
                x.v[idx([16, 2, 12, 1], d, h, j, 0)] = 100.0;
            }
        }
    }
    check_all("gqa causal padded", &x);
    // Mask wider than seqK and taller than seqQ (padded): only its top-left
    // part is used.
    let x = Inputs::new(12, [16, 4, 3, 1], [16, 2, 10, 1], 16).causal(16, 8, 6, 10);
    check_all("wide mask", &x);
}

#[test]
fn per_head_mask_and_batches() {
    // A mask with one slice per head (broadcast by modulo) and batch 2.
    let mut x = Inputs::new(21, [8, 4, 3, 2], [8, 2, 6, 2], 8);
    let mut rng = Rng::new(22);
    let mn = [6, 3, 2, 2];
    // Values exact in f16, so the f16-mask runs see the same mask.
    let mut m: Vec<f32> = rng.vec(mn.iter().product()).iter().map(|v| f16_round(2.0 * v)).collect();
    m[idx(mn, 1, 0, 1, 1)] = f32::NEG_INFINITY;
    x.mask = Some((m, mn));
    check_all("per-head mask, batch 2", &x);
    // Softmax path broadcasts k over q's batch.
    let x = Inputs::new(23, [8, 2, 3, 2], [8, 2, 4, 1], 8);
    close("k broadcast over batch", &run(&x, SOFTMAX), &attention_ref(&x), 1e-5, 1e-5);
}

#[test]
fn sinks() {
    let x = Inputs::new(31, [16, 4, 4, 1], [16, 2, 6, 1], 16).with_sinks(32);
    check_all("sinks", &x);
    let x = Inputs::new(33, [16, 4, 4, 1], [16, 4, 8, 1], 16).causal(8, 4, 3, 8).with_sinks(34);
    check_all("sinks + causal", &x);
    // A large sink soaks up most of the probability mass.
    let mut x = Inputs::new(35, [8, 2, 2, 1], [8, 2, 3, 1], 8);
    x.sinks = Some(vec![20.0, -20.0]);
    let want = attention_ref(&x);
    assert!(want[..8].iter().all(|v| v.abs() < 1e-6), "head 0 output vanishes");
    check_all("dominant sink", &x);
}

#[test]
fn soft_capped_scores() {
    // Gemma 2: scores capped at 50·tanh(s/50). Queries scaled up so that
    // the cap bends most scores (|s| up to ~60) and changes the result.
    let mut x = Inputs::new(81, [16, 4, 5, 1], [16, 2, 7, 1], 16).causal(7, 5, 2, 7);
    x.q.iter_mut().for_each(|v| *v *= 40.0);
    x.scale = 1.0;
    x.softcap = 50.0;
    let uncapped = attention_ref(&Inputs { softcap: 0.0, ..x.clone() });
    let want = attention_ref(&x);
    let diff = want.iter().zip(&uncapped).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    assert!(diff > 1e-2, "the cap must matter on these inputs (max change {diff})");
    check_all("softcap 50, scale 1", &x);
    // A scale other than 1 is applied inside the cap, as flash attention does.
    x.scale = 0.5;
    x.softcap = 20.0;
    check_all("softcap 20, scale 0.5", &x.clone().with_sinks(82));
    // The tiled flash kernel (>= 64 queries), f32 and f16 K/V.
    let mut x = Inputs::new(83, [32, 2, 70, 1], [32, 1, 80, 1], 32).causal(80, 70, 10, 80);
    x.q.iter_mut().for_each(|v| *v *= 30.0);
    x.softcap = 30.0;
    let (want16, atol) = flash_ref(&x);
    close("softcap tiled f32", &run(&x, FLASH), &want16, atol, 0.0);
    close("softcap softmax", &run(&x, SOFTMAX), &attention_ref(&x), 1e-5, 1e-5);
    close("softcap tiled f16", &run(&x, Mode { kv: F16, ..FLASH }), &attention_ref(&x.rounded(f16_round)), 2e-2, 0.0);
}

#[test]
fn bad_softcap() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let q = upload(&mut input, F32, &[8, 2, 1, 1], &[0.5; 16]);
    let k = upload(&mut input, F32, &[8, 2, 3, 1], &[0.5; 48]);
    for cap in [-1.0, f32::NAN, f32::INFINITY] {
        for flash in [false, true] {
            let e = root.sdpa_capped(q, k, k, None, None, None, 1.0, cap, flash, false).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgument, "softcap {cap}: {e}");
            assert!(e.message.contains("softcap"), "{e}");
        }
    }
}

#[test]
fn vmla() {
    // Per-head up-projection (MLA) and a shared one.
    let x = Inputs::new(41, [16, 4, 3, 1], [16, 1, 6, 1], 8).with_vmla(42, 12, 4).causal(6, 3, 3, 6);
    check_all("vmla per head", &x);
    let x = Inputs::new(43, [16, 2, 3, 1], [16, 2, 5, 1], 16).with_vmla(44, 4, 1).with_sinks(45);
    check_all("vmla shared", &x);
}

#[test]
fn f16_kv() {
    let x = Inputs::new(51, [32, 4, 6, 1], [32, 2, 10, 1], 32).causal(10, 6, 4, 10).with_sinks(52);
    let want = attention_ref(&x.rounded(f16_round));
    for (name, m) in [
        ("flash f16", Mode { kv: F16, ..FLASH }),
        ("flash f16 v_permuted", Mode { kv: F16, v_permuted: true, ..FLASH }),
        ("softmax f16", Mode { kv: F16, ..SOFTMAX }),
        ("softmax f16 v_permuted", Mode { kv: F16, v_permuted: true, ..SOFTMAX }),
    ] {
        close(name, &run(&x, m), &want, 2e-3, 0.0);
    }
}

#[test]
fn flash_kernel_variants() {
    // Prefill with >= 64 queries: ggml's tiled flash kernel (f32 and f16).
    let x = Inputs::new(61, [32, 2, 70, 1], [32, 1, 80, 1], 32).causal(80, 70, 10, 80);
    let want16 = attention_ref(&x.rounded(f16_round));
    close("tiled f32", &run(&x, FLASH), &want16, 2e-3, 0.0);
    close("tiled f16", &run(&x, Mode { kv: F16, ..FLASH }), &want16, 2e-3, 0.0);
    close("softmax same input", &run(&x, SOFTMAX), &attention_ref(&x), 1e-5, 1e-5);
    // Its packing of K and the mask in blocks of 16 cells (ours with
    // AVX-512) and what is left after them: 90 cells (64, then 16 + 10),
    // head size 48, 8 query heads over 2 KV heads, the first queries seeing
    // only the first tile (the second skipped for them), a masked-out tail.
    let x = Inputs::new(64, [48, 8, 66, 1], [48, 2, 90, 1], 48).causal(90, 66, 0, 85);
    let want16 = attention_ref(&x.rounded(f16_round));
    close("tiled f16, tails", &run(&x, Mode { kv: F16, ..FLASH }), &want16, 2e-3, 0.0);
    close("tiled f32, tails", &run(&x, FLASH), &want16, 2e-3, 0.0);
    // Decode over >= 512 keys: the split-KV kernel.
    let x = Inputs::new(62, [32, 4, 1, 1], [32, 2, 600, 1], 32).causal(600, 1, 580, 581).with_sinks(63);
    close("split-kv f16", &run(&x, Mode { kv: F16, ..FLASH }), &attention_ref(&x.rounded(f16_round)), 2e-3, 0.0);
    close("split-kv f32", &run(&x, FLASH), &attention_ref(&x.rounded(f16_round)), 2e-3, 0.0);
}

#[test]
fn q8_0_kv_flash() {
    // K, V stored as Q8_0; the kernel dots Q8_0(q) with K.
    let x = Inputs::new(71, [32, 4, 3, 1], [32, 2, 8, 1], 32).causal(8, 3, 5, 8);
    let deq = |vals: &[f32]| dequantize(Q8_0, &quantize(Q8_0, vals, 32), vals.len());
    let mut r = x.clone();
    r.k = deq(&x.k);
    r.v = deq(&x.v);
    r.q = deq(&x.q);
    let got = run(&x, Mode { kv: Q8_0, ..FLASH });
    close("flash q8_0 k/v", &got, &attention_ref(&r), 1e-4, 0.0);
    // Softmax path with a Q8_0 K and a permuted Q8_0 V (seqK a multiple of 32).
    let x = Inputs::new(72, [32, 2, 3, 1], [32, 2, 32, 1], 32);
    let mut r = x.clone();
    r.k = deq(&x.k);
    r.q = deq(&x.q);
    r.v = permute_back(&deq(&permute_v(&x.v, x.vn())), x.vn());
    let got = run(&x, Mode { kv: Q8_0, v_permuted: true, ..SOFTMAX });
    // The attention weights (f32) are quantized to Q8_0 for V·softmax too.
    close("softmax q8_0 k/v", &got, &attention_ref(&r), 5e-3, 0.0);
}

/// Inverse of `permute_v`.
fn permute_back(p: &[f32], vn: [usize; 4]) -> Vec<f32> {
    let pn = [vn[2], vn[0], vn[1], vn[3]];
    let mut out = vec![0f32; p.len()];
    for b in 0..vn[3] {
        for h in 0..vn[1] {
            for j in 0..vn[2] {
                for d in 0..vn[0] {
                    out[idx(vn, d, h, j, b)] = p[idx(pn, j, d, h, b)];
                }
            }
        }
    }
    out
}

#[test]
fn bad_input_is_an_error_and_context_stays_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let z = |input: &mut Context, ty: u32, sh: &[i64]| {
        let n: i64 = sh.iter().product();
        upload(input, ty, sh, &vec![0.0; n as usize])
    };
    let q = z(&mut input, F32, &[16, 4, 3]);
    let k = z(&mut input, F32, &[16, 2, 5]);
    let v = z(&mut input, F32, &[16, 2, 5]);
    let vp = z(&mut input, F32, &[5, 16, 2]);
    let k16 = z(&mut input, F16, &[16, 2, 5]);
    let q16 = z(&mut input, F16, &[16, 4, 3]);
    let k_dk = z(&mut input, F32, &[8, 2, 5]);
    let k_heads = z(&mut input, F32, &[16, 3, 5]);
    let v_seq = z(&mut input, F32, &[16, 2, 6]);
    let k_b2 = z(&mut input, F32, &[16, 2, 5, 2]);
    let m32 = z(&mut input, F32, &[5, 3]);
    let m16 = z(&mut input, F16, &[5, 3]);
    let m16_short = z(&mut input, F16, &[4, 3]);
    let m16_rows = z(&mut input, F16, &[5, 2]);
    let m16_heads = z(&mut input, F16, &[5, 3, 3]);
    let s4 = z(&mut input, F32, &[4]);
    let s3 = z(&mut input, F32, &[3]);
    let s16 = z(&mut input, F16, &[4]);
    let w_bad = z(&mut input, F32, &[8, 4]);
    let ki = upload_i32(&mut input, &[16, 2, 5], &[0; 160]);
    let kq = input.from_bytes(Q8_0, &[32, 2, 32], &quantize(Q8_0, &[0.1; 2048], 32)).unwrap();
    let vq = input.from_bytes(Q8_0, &[32, 32, 2], &quantize(Q8_0, &[0.1; 2048], 32)).unwrap();
    let q32 = z(&mut input, F32, &[32, 4, 3]);
    let big = z(&mut input, F32, &[16, 4]);
    let m_view = unsafe { Tensor::from_raw(sys::ggml_view_2d(root.ggml_context(), big.as_ptr(), 5, 3, 64, 0)) }.unwrap();

    #[derive(Clone, Copy)]
    struct Arg {
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Option<Tensor>,
        sinks: Option<Tensor>,
        vmla: Option<Tensor>,
        scale: f32,
        flash: bool,
        vperm: bool,
    }
    let base = Arg { q, k, v, mask: None, sinks: None, vmla: None, scale: 0.25, flash: false, vperm: false };
    let mut expect = |what: &str, a: Arg, kind: ErrorKind, msg: &str| {
        let e = root.sdpa(a.q, a.k, a.v, a.mask, a.sinks, a.vmla, a.scale, a.flash, a.vperm).unwrap_err();
        assert_eq!(e.kind, kind, "{what}: {}", e.message);
        assert!(e.message.starts_with("sdpa: "), "{what}: {}", e.message);
        assert!(e.message.contains(msg), "{what}: {}", e.message);
    };
    use ErrorKind::*;
    macro_rules! with {
        ($($f:ident: $v:expr),*) => { Arg { $($f: $v,)* ..base } };
    }
    expect("f16 q", with!(q: q16), DType, "q must be f32, got f16[16,4,3]");
    expect("dk mismatch", with!(k: k_dk), Shape, "head size (dim 0) differs: q f32[16,4,3] vs k f32[8,2,5]");
    expect("head mismatch", with!(k: k_heads, v: k_heads), Shape, "q's 4 heads are not a multiple of k's 3 kv heads");
    expect("v seq mismatch", with!(v: v_seq), Shape, "does not match k");
    expect("v layout", with!(v: v, vperm: true), Shape, "(layout [seqK, dv, kvHeads]) does not match k");
    expect("flash batch", with!(k: k_b2, v: z(&mut input, F32, &[16, 2, 5, 2]), flash: true), Shape, "flash attention needs the same batch");
    expect("softmax batch", with!(k: k_b2, v: z(&mut input, F32, &[16, 2, 5, 2])), Shape, "q's batch (dim 3) must be a multiple of k's");
    expect("flash f32 mask", with!(mask: Some(m32), flash: true), DType, "flash attention needs an f16 mask, got f32[5,3]");
    expect("i32 mask", with!(mask: Some(upload_i32(&mut input, &[5, 3], &[0; 15]))), DType, "mask must be f32 or f16");
    expect("short mask", with!(mask: Some(m16_short)), Shape, "mask f16[4,3] does not fit scores of 5 keys x 3 queries");
    expect("short mask flash", with!(mask: Some(m16_short), flash: true), Shape, "mask f16[4,3] does not fit");
    expect("mask rows", with!(mask: Some(m16_rows), flash: true), Shape, "dim 1 >= seqQ");
    expect("mask heads", with!(mask: Some(m16_heads)), Shape, "dims 2, 3 dividing heads and batch");
    expect("strided mask", with!(mask: Some(m_view)), Shape, "mask must be contiguous");
    expect("sinks length", with!(sinks: Some(s3)), Shape, "sinks must be a vector of 4 values");
    expect("sinks type", with!(sinks: Some(s16), flash: true), DType, "sinks must be f32");
    expect("vmla dim", with!(vmla: Some(w_bad)), Shape, "vmla f32[8,4] must be [dv=16, dv', h, b]");
    expect("i32 k flash", with!(k: ki, flash: true), Unsupported, "flash attention on the CPU cannot use this K type");
    expect("i32 k", with!(k: ki), DType, "the CPU has no matrix product for k i32[16,2,5]");
    expect("q8_0 v, flash, v_permuted", Arg { q: q32, k: kq, v: vq, mask: None, sinks: None, vmla: None, scale: 1.0, flash: true, vperm: true }, DType, "flash attention with v_permuted needs a float v");
    expect("q8_0 v, softmax, not permuted", Arg { q: q32, k: kq, v: kq, mask: None, sinks: None, vmla: None, scale: 1.0, flash: false, vperm: false }, DType, "attention without v_permuted needs a float v");
    expect("nan scale", with!(scale: f32::NAN), InvalidArgument, "scale NaN is not finite");
    let kt = unsafe { Tensor::from_raw(sys::ggml_transpose(root.ggml_context(), k.as_ptr())) }.unwrap();
    let e = root.sdpa(q, kt, v, None, None, None, 1.0, false, false).unwrap_err();
    assert!(e.message.starts_with("sdpa: k must be dense in dim 0"), "{}", e.message);
    let _ = (k16, s4, m16, vp);

    // Still usable.
    let out = root.sdpa(q, k, v, Some(m16), Some(s4), None, 0.25, true, false).unwrap();
    assert_eq!(eval(&mut root, out), vec![0.0; 16 * 4 * 3]);
    let out = root.sdpa(q, k16, vp, Some(m32), None, None, 0.25, false, true).unwrap();
    root.compute(&[out]).unwrap();
    assert_eq!(data::read_f32(out, "t").unwrap(), vec![0.0; 16 * 4 * 3]);
}

// ---- the C function ------------------------------------------------------

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
    #[allow(clippy::too_many_arguments)]
    fn ggml_rs_sdpa(
        c: *mut Opaque,
        q: *mut Opaque,
        k: *mut Opaque,
        v: *mut Opaque,
        mask: *mut Opaque,
        sinks: *mut Opaque,
        vmla: *mut Opaque,
        scale: f32,
        flash: bool,
        v_permuted: bool,
        err: *mut CError,
    ) -> *mut Opaque;
    fn ggml_rs_sdpa_capped(
        ctx: *mut Opaque,
        q: *mut Opaque,
        k: *mut Opaque,
        v: *mut Opaque,
        mask: *mut Opaque,
        sinks: *mut Opaque,
        vmla: *mut Opaque,
        scale: f32,
        softcap: f32,
        flash: bool,
        v_permuted: bool,
        err: *mut CError,
    ) -> *mut Opaque;
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
fn c_abi_sdpa() {
    let x = Inputs::new(91, [8, 2, 3, 1], [8, 1, 4, 1], 8).with_sinks(92);
    let want = attention_ref(&x);
    unsafe {
        let mut err = CError { status: 0, message: [0; 1024] };
        let mut be = std::ptr::null_mut();
        assert_eq!(ggml_rs_backend_new(std::ptr::null(), &mut be, &mut err), 0);
        let root = ggml_rs_ctx_new(be, 256, &mut err);
        let input = ggml_rs_ctx_input(root);
        let up = |ne: &[usize], vals: &[f32], err: &mut CError| {
            let ne: Vec<i64> = ne.iter().map(|&d| d as i64).collect();
            let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            ggml_rs_ctx_from_data(input, 0, ne.as_ptr(), ne.len(), bytes.as_ptr(), bytes.len(), err)
        };
        let q = up(&x.qn, &x.q, &mut err);
        let k = up(&x.kn, &x.k, &mut err);
        let v = up(&x.vn(), &x.v, &mut err);
        let s = up(&[2], x.sinks.as_ref().unwrap(), &mut err);
        let null = std::ptr::null_mut();
        for flash in [false, true] {
            let out = ggml_rs_sdpa(root, q, k, v, null, s, null, x.scale, flash, false, &mut err);
            assert!(!out.is_null(), "{}", err.text());
            assert_eq!(ggml_rs_ctx_compute(root, &out, 1, &mut err), 0, "{}", err.text());
            let mut got = vec![0f32; want.len()];
            assert_eq!(ggml_rs_tensor_get_f32(out, got.as_mut_ptr(), got.len(), &mut err), 0);
            if flash {
                close("c sdpa flash=true", &got, &flash_ref(&x).0, 2e-3, 0.0);
            } else {
                close("c sdpa flash=false", &got, &want, 1e-5, 1e-5);
            }
        }
        // Soft-capped, through its own export.
        let capped = Inputs { softcap: 0.5, ..x.clone() };
        let want_capped = attention_ref(&capped);
        for flash in [false, true] {
            let out = ggml_rs_sdpa_capped(root, q, k, v, null, s, null, x.scale, 0.5, flash, false, &mut err);
            assert!(!out.is_null(), "{}", err.text());
            assert_eq!(ggml_rs_ctx_compute(root, &out, 1, &mut err), 0, "{}", err.text());
            let mut got = vec![0f32; want_capped.len()];
            assert_eq!(ggml_rs_tensor_get_f32(out, got.as_mut_ptr(), got.len(), &mut err), 0);
            if flash {
                close("c sdpa_capped flash=true", &got, &flash_ref(&capped).0, 2e-3, 0.0);
            } else {
                close("c sdpa_capped flash=false", &got, &want_capped, 1e-5, 1e-5);
            }
        }
        assert!(ggml_rs_sdpa_capped(root, q, k, v, null, null, null, 1.0, -2.0, false, false, &mut err).is_null());
        assert_eq!(err.text(), "sdpa: softcap -2 must be a finite number >= 0 (0: none)");
        assert!(ggml_rs_sdpa(root, q, null, v, null, null, null, 1.0, false, false, &mut err).is_null());
        assert_eq!((err.status, err.text().as_str()), (1, "sdpa: k is NULL"));
        assert!(ggml_rs_sdpa(root, q, v, k, null, null, null, f32::INFINITY, true, false, &mut err).is_null());
        assert_eq!(err.text(), "sdpa: scale inf is not finite");
        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
