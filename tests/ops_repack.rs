//! Q8_0, Q4_0, Q5_0, Q4_1 and Q4_K weights in the CPU's repacking buffer
//! type (ggml's CPU_REPACK), differential against ggml's own kernels for
//! them and a naive f64 reference, for mul_mat and mul_mat_id.
//!
//! Where the build targets AVX-512 VNNI, such matrices of 16k rows are
//! repacked 16 rows at a time and multiplied by our kernels
//! (scripts/patches/13-cpu-r16.inc); elsewhere ggml keeps Q8_0, Q5_0 and
//! Q4_1 as they are and repacks Q4_0 and Q4_K 8 rows at a time (q4_0_8x8,
//! q4_K_8x8, on any x86 with AVX2), and these tests check those paths the
//! same way.
//!
//! ggml's own kernel, the one whose floats ours must give: for Q8_0, Q5_0
//! and Q4_1 the default buffer's (tinyBLAS, vec_dot); for Q4_0 and Q4_K its
//! repacked ones (what llama.cpp runs for such matrices on x86), taken on
//! the same matrix with 8 more rows, which ours does not take (not 16k
//! rows). For Q4_K that kernel sums a mul_mat's rows of b in two orders
//! (four rows at a time, or one) with two quantizers of b; the shapes below
//! take both.
//!
//! Tolerances (|got - want| <= atol + rtol*|want|):
//! * against dequant(a)·dequant(convert(b)) with ggml-cpu's own quantizer
//!   of b (Q8_0 for Q8_0, Q8_1 for Q4_1, Q8_K for Q4_K: the values both
//!   paths multiply):
//!   atol 1e-4·√K/8 + rtol 1e-5 for Q8_0, where each block's integer sum
//!   is exact and only the f32 sums over blocks round (observed at most
//!   1.6e-5 at K = 1024, outputs O(20)); for Q4_1 the reference takes the
//!   activations' block sums as ggml does, as Q8_1 stores them (`s`, an
//!   f16, times each row's min); Q4_K within the same (observed 3.3e-5
//!   at K = 1024);
//! * against ggml's own kernel's result: bit-identical. The kernels sum
//!   in the order of ggml's x86 kernels (tinyBLAS, vec_dot, q4_0_8x8,
//!   q4_K_8x8), which is what
//!   keeps the models' logits identical to llama.cpp's; an f32 sum in any
//!   other order moves the logits of the Q8_0 parity models by up to 0.2
//!   (a rounding flip in one activation's quantization grows layer after
//!   layer).
mod common;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const Q8_0: u32 = sys::GGML_TYPE_Q8_0;
const Q4_0: u32 = sys::GGML_TYPE_Q4_0;
const Q5_0: u32 = sys::GGML_TYPE_Q5_0;
const Q4_1: u32 = sys::GGML_TYPE_Q4_1;
const Q8_1: u32 = sys::GGML_TYPE_Q8_1;
const Q4_K: u32 = sys::GGML_TYPE_Q4_K;
const Q8_K: u32 = sys::GGML_TYPE_Q8_K;

/// Whether ggml itself repacks `ty` (q4_0_8x8, q4_K_8x8 on x86 with AVX2):
/// then its floats are those of that kernel, taken here on the same matrix
/// with 8 more rows (which ours does not take, not 16k rows); for the
/// other types those of the default buffer (tinyBLAS, vec_dot).
fn ggml_repacks(ty: u32) -> bool {
    ty == Q4_0 || ty == Q4_K
}

fn type_name(ty: u32) -> &'static str {
    ggml_rs::ml::tensor::type_name(ty)
}

fn quantize(ty: u32, vals: &[f32], k: usize) -> Vec<u8> {
    let rows = vals.len() / k;
    let mut out = vec![0u8; unsafe { sys::ggml_row_size(ty, k as i64) } * rows];
    let n = unsafe { sys::ggml_quantize_chunk(ty, vals.as_ptr(), out.as_mut_ptr().cast(), 0, rows as i64, k as i64, std::ptr::null()) };
    assert_eq!(n, out.len());
    out
}

fn dequantize(ty: u32, bytes: &[u8], n: usize) -> Vec<f32> {
    if ty == Q8_K {
        // Nor for Q8_K: {f32 d; i8 qs[256]; i16 bsums[16]}, value d*qs[i].
        return bytes
            .chunks(292)
            .flat_map(|b| {
                let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                b[4..260].iter().map(move |&q| d * (q as i8) as f32)
            })
            .take(n)
            .collect();
    }
    if ty == Q8_1 {
        // ggml has no to_float for Q8_1: {f16 d; f16 s; i8 qs[32]}, value d*qs[i].
        return bytes
            .chunks(36)
            .flat_map(|b| {
                let d = unsafe { sys::ggml_fp16_to_fp32(u16::from_le_bytes([b[0], b[1]])) };
                b[4..].iter().map(move |&q| d * (q as i8) as f32)
            })
            .take(n)
            .collect();
    }
    let to_float = unsafe { &*sys::ggml_get_type_traits(ty) }.to_float.unwrap();
    let mut out = vec![0f32; n];
    unsafe { to_float(bytes.as_ptr().cast(), out.as_mut_ptr(), n as i64) };
    out
}

/// f32 rows as ggml-cpu converts a right operand of a `ty` matrix (its own
/// quantizer into the dot product's type), back in f32.
fn as_operand(ty: u32, vals: &[f32], k: usize) -> Vec<f32> {
    let vdt = unsafe { &*sys::ggml_get_type_traits_cpu(ty) }.vec_dot_type;
    let from = unsafe { &*sys::ggml_get_type_traits_cpu(vdt) }.from_float.unwrap();
    let row = unsafe { sys::ggml_row_size(vdt, k as i64) };
    let mut q = vec![0u8; row * (vals.len() / k)];
    for (r, chunk) in vals.chunks(k).enumerate() {
        unsafe { from(chunk.as_ptr(), q[r * row..].as_mut_ptr().cast(), k as i64) };
    }
    dequantize(vdt, &q, vals.len())
}

/// What ggml computes, in f64: the dequantized weights (rows of `k` in
/// `qa`) times b as converted (`as_operand`); for Q4_1 ggml takes each
/// block's min times the activations' block sum as Q8_1 stores it (`s`, an
/// f16 of d * sum(q)), so that term uses the stored `s` too.
fn strict(ty: u32, qa: &[u8], k: usize, m: usize, bv: &[f32], n: usize) -> Vec<f32> {
    let a_deq = dequantize(ty, qa, k * m);
    let mut out = naive_mm(&a_deq, k, m, &as_operand(ty, bv, k), n);
    if ty == Q4_1 {
        let from = unsafe { &*sys::ggml_get_type_traits_cpu(Q8_1) }.from_float.unwrap();
        let f16 = |b: &[u8]| unsafe { sys::ggml_fp16_to_fp32(u16::from_le_bytes([b[0], b[1]])) } as f64;
        let nb = k / 32;
        for j in 0..n {
            let mut q = vec![0u8; 36 * nb];
            unsafe { from(bv[j * k..].as_ptr(), q.as_mut_ptr().cast(), k as i64) };
            for i in 0..m {
                let mut fix = 0f64;
                for b in 0..nb {
                    let (wb, ab) = (&qa[(i * nb + b) * 20..][..20], &q[b * 36..][..36]);
                    let sum_q: f64 = ab[4..].iter().map(|&x| (x as i8) as f64).sum();
                    // min * (stored s - d * sum(q))
                    fix += f16(&wb[2..]) * (f16(&ab[2..]) - f16(ab) * sum_q);
                }
                out[j * m + i] = (out[j * m + i] as f64 + fix) as f32;
            }
        }
    }
    out
}

fn tol(ty: u32, k: usize) -> f32 {
    let _ = ty;
    1e-4 * (k as f32).sqrt() / 8.0
}

/// Whether this build and CPU repack Q8_0, Q4_0, Q5_0 and Q4_1 16 rows at a time
/// (our AVX-512 VNNI kernels).
fn repacks() -> bool {
    let vnni = unsafe { sys::ggml_cpu_has_avx512_vnni() } != 0 && unsafe { sys::ggml_cpu_has_avx512() } != 0;
    vnni && cfg!(feature = "native")
}

/// A weight of `shape` in the repacking buffer (when the buffer type takes
/// it) holding `bytes`; the buffer is freed by the caller.
fn repacked_weight(root: &mut Context, ty: u32, shape: [i64; 3], bytes: &[u8]) -> Option<(Tensor, sys::ggml_backend_buffer_t)> {
    let buft = extra_buffer_type("CPU_REPACK")?;
    let a = root.new_tensor("repacked weight", ty, [shape[0], shape[1], shape[2], 1]).unwrap();
    // The buffer type takes a weight only where it has a layout for it
    // (it answers through supports_op; probe with the real op below).
    unsafe {
        let size = sys::ggml_backend_buft_get_alloc_size(buft, a.as_ptr());
        let buf = sys::ggml_backend_buft_alloc_buffer(buft, size);
        assert!(!buf.is_null());
        assert_eq!(sys::ggml_backend_tensor_alloc(buf, a.as_ptr(), sys::ggml_backend_buffer_get_base(buf)), sys::GGML_STATUS_SUCCESS);
        if (*a.as_ptr()).extra.is_null() {
            // No repacked layout for this shape or type here: plain tensor.
            sys::ggml_backend_buffer_free(buf);
            return None;
        }
        sys::ggml_backend_tensor_set(a.as_ptr(), bytes.as_ptr().cast(), 0, bytes.len());
        Some((a, buf))
    }
}

/// `qa`, `e` matrices of `m` rows of `k`, with each matrix's first 8 rows
/// repeated after its last: `m + 8` rows, which our 16-row kernels do not
/// take and ggml's 8-row Q4_0 layout does.
fn eight_more_rows(ty: u32, qa: &[u8], k: usize, m: usize, e: usize) -> Vec<u8> {
    let row = unsafe { sys::ggml_row_size(ty, k as i64) };
    let mut out = Vec::with_capacity(qa.len() + 8 * row * e);
    for x in qa.chunks(m * row).take(e) {
        out.extend_from_slice(x);
        out.extend_from_slice(&x[..8 * row]);
    }
    out
}

/// The first `m` of every `m + 8` outputs.
fn first_rows(c: &[f32], m: usize) -> Vec<f32> {
    c.chunks(m + 8).flat_map(|r| r[..m].to_vec()).collect()
}

fn naive_mm(a: &[f32], k: usize, m: usize, b: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    for j in 0..n {
        for i in 0..m {
            let s: f64 = a[i * k..][..k].iter().zip(&b[j * k..][..k]).map(|(&x, &y)| x as f64 * y as f64).sum();
            out[j * m + i] = s as f32;
        }
    }
    out
}

/// `a = [k, m]` of type `ty` times f32 `b = [k, n, planes]`, repacked and not.
fn check_mul_mat(ty: u32, seed: u64, k: usize, m: usize, n: usize, planes: usize) {
    let mut rng = Rng::new(seed);
    let av: Vec<f32> = rng.vec(k * m).iter().map(|x| x * 2.0).collect();
    check_mul_mat_q(ty, &mut rng, quantize(ty, &av, k), k, m, n, planes, false);
}

/// The same with `a` given as bytes; `b` a view whose rows are padded (not
/// contiguous) when `padded`.
#[allow(clippy::too_many_arguments)]
fn check_mul_mat_q(ty: u32, rng: &mut Rng, qa: Vec<u8>, k: usize, m: usize, n: usize, planes: usize, padded: bool) {
    let be = backend();
    let pad = if padded { 32 } else { 0 };
    let bfull = rng.vec((k + pad) * n * planes);
    let bv: Vec<f32> = bfull.chunks(k + pad).flat_map(|r| r[..k].to_vec()).collect();
    let upload_b = |root: &Context, input: &mut Context| {
        let t = upload(input, F32, &[(k + pad) as i64, n as i64, planes as i64], &bfull);
        if padded { padded_rows(root, t, k as i64) } else { t }
    };
    let want = strict(ty, &qa, k, m, &bv, n * planes);
    let what = format!("{} [{k},{m}] x f32 [{k},{n},{planes}]{}", type_name(ty), if padded { " (padded rows)" } else { "" });

    let plain = {
        let (mut root, mut input) = contexts(&be);
        let a = input.from_bytes(ty, &[k as i64, m as i64], &qa).unwrap();
        let b = upload_b(&root, &mut input);
        let c = root.mul_mat(a, b).unwrap();
        eval(&mut root, c)
    };
    assert_close(&format!("{what} (default buffer)"), &plain, &want, tol(ty, k), 1e-5);

    let (mut root, mut input) = contexts(&be);
    let Some((a, buf)) = repacked_weight(&mut root, ty, [k as i64, m as i64, 1], &qa) else {
        assert!(!repacks() || m % 16 != 0, "{what}: this CPU and build should repack it");
        return;
    };
    let b = upload_b(&root, &mut input);
    let c = root.mul_mat(a, b).unwrap();
    let got = eval(&mut root, c);
    drop(root);
    drop(input);
    unsafe { sys::ggml_backend_buffer_free(buf) };
    let ggml = if !ggml_repacks(ty) {
        plain
    } else {
        let (mut root, mut input) = contexts(&be);
        let (a, buf) = repacked_weight(&mut root, ty, [k as i64, m as i64 + 8, 1], &eight_more_rows(ty, &qa, k, m, 1)).expect("ggml repacks it");
        // b contiguous: ggml's q4_0_8x8 and q4_K_8x8 quantize 4 rows of b
        // at a time as if they were (ggml_quantize_mat_t from row i11,
        // stride ne10), so with padded rows they read the wrong values.
        let b = upload(&mut input, F32, &[k as i64, n as i64, planes as i64], &bv);
        let c = root.mul_mat(a, b).unwrap();
        let out = first_rows(&eval(&mut root, c), m);
        drop(root);
        drop(input);
        unsafe { sys::ggml_backend_buffer_free(buf) };
        out
    };
    check_repacked(&what, &got, &want, &ggml, tol(ty, k));
}

/// The repacked result against the reference (within `atol`) and ggml's
/// own kernel's (the same floats).
fn check_repacked(what: &str, got: &[f32], want: &[f32], ggml: &[f32], atol: f32) {
    eprintln!("{what}: repacked vs naive {:.2e}, vs ggml's kernel {:.2e}", max_diff(got, want), max_diff(got, ggml));
    assert_close(&format!("{what} (repacked) vs dequant(a)·convert(b)"), got, want, atol, 1e-5);
    assert_bits_equal(&format!("{what} (repacked) vs ggml's kernel"), got, ggml);
}

/// The repacked kernel does ggml's kernel's arithmetic in the same order:
/// the results must be the same floats, not merely close.
fn assert_bits_equal(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: got {g}, want {w}");
    }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn mul_mat_repacked_matches_ggml_and_reference() {
    for ty in [Q8_0, Q4_0, Q5_0, Q4_1] {
        // Decode (1 row), the tiles' tails (1-17 rows of b), several tiles
        // and chunks, planes of b, K from one block to 1024, M 16 to 256.
        check_mul_mat(ty, 1, 32, 16, 1, 1);
        check_mul_mat(ty, 2, 256, 64, 1, 1);
        for (i, n) in [2usize, 3, 5, 7, 8, 9, 15, 17].into_iter().enumerate() {
            check_mul_mat(ty, 10 + i as u64, 128, 32, n, 1);
        }
        check_mul_mat(ty, 20, 1024, 48, 70, 1);
        check_mul_mat(ty, 21, 512, 256, 130, 1);
        // One and two rows of b over many row groups: chunks of up to 32
        // groups (10, and 32 with a partial last chunk).
        check_mul_mat(ty, 31, 256, 16 * 80, 1, 1);
        check_mul_mat(ty, 32, 256, 16 * 300, 2, 1);
        check_mul_mat(ty, 22, 64, 16, 5, 3);
        // b's rows not contiguous (ggml's own q4_0_8x8, which takes Q4_0
        // where our kernels are not built, misreads them: ours only).
        if ty != Q4_0 || repacks() {
            check_mul_mat_q(ty, &mut Rng::new(24), quantize(ty, &Rng::new(25).vec(256 * 32), 256), 256, 32, 11, 2, true);
        }
        // Rows not a multiple of 16: not ours (Q4_0: ggml's 8-row layout).
        check_mul_mat(ty, 23, 64, 24, 9, 1);
    }
    // Q8_0 weights at -128, which ggml's quantizer never writes but a file
    // may hold (the kernel stores them offset by 128, as 0).
    let mut qa = quantize(Q8_0, &Rng::new(26).vec(128 * 16), 128);
    for (i, blk) in qa.chunks_mut(34).enumerate() {
        for j in (2 + i % 3..34).step_by(3) {
            blk[j] = 0x80;
        }
    }
    check_mul_mat_q(Q8_0, &mut Rng::new(27), qa, 128, 16, 6, 1, false);
    // Q4_1 with every nibble value in every position, and negative mins.
    let mut qa = quantize(Q4_1, &Rng::new(28).vec(128 * 16).iter().map(|x| x - 0.5).collect::<Vec<_>>(), 128);
    for (i, blk) in qa.chunks_mut(20).enumerate() {
        for (j, q) in blk.iter_mut().enumerate().skip(4) {
            *q = ((i * 7 + j * 13) % 256) as u8;
        }
    }
    check_mul_mat_q(Q4_1, &mut Rng::new(29), qa, 128, 16, 6, 1, false);
    // Q4_0 likewise (the nibbles' offset of 8 is the kernel's correction).
    let mut qa = quantize(Q4_0, &Rng::new(30).vec(128 * 16), 128);
    for (i, blk) in qa.chunks_mut(18).enumerate() {
        for (j, q) in blk.iter_mut().enumerate().skip(2) {
            *q = ((i * 7 + j * 13) % 256) as u8;
        }
    }
    check_mul_mat_q(Q4_0, &mut Rng::new(31), qa, 128, 16, 6, 1, false);
    // Q5_0 likewise, with every high bit pattern (offset 16).
    let mut qa = quantize(Q5_0, &Rng::new(32).vec(128 * 16), 128);
    for (i, blk) in qa.chunks_mut(22).enumerate() {
        for (j, q) in blk.iter_mut().enumerate().skip(2) {
            *q = ((i * 11 + j * 29) % 256) as u8;
        }
    }
    check_mul_mat_q(Q5_0, &mut Rng::new(33), qa, 128, 16, 6, 1, false);
    // Q4_K (K a multiple of 256): ggml's repacked kernel sums a mul_mat's
    // rows of b four at a time, pair of sub-blocks by pair, but the last
    // n % 4 rows of each plane (and every row of a mul_mat_id) one
    // super-block at a time, each kind quantized by its own quantizer: 1-3
    // rows (all of the second kind), 5-17 (both), planes of 5 and 6.
    for (i, (k, m, n, planes)) in
        [(256, 16, 1, 1), (512, 64, 2, 1), (256, 32, 3, 1), (256, 32, 4, 1), (512, 32, 5, 1), (256, 48, 7, 1), (256, 32, 9, 1), (768, 32, 17, 1), (256, 16, 5, 3), (512, 32, 6, 2), (1024, 48, 70, 1), (512, 256, 130, 1), (256, 16 * 80, 1, 1), (256, 16 * 300, 2, 1)]
            .into_iter()
            .enumerate()
    {
        check_mul_mat(Q4_K, 40 + i as u64, k, m, n, planes);
    }
    if repacks() {
        // (ggml's own misreads b's padded rows: ours only.)
        check_mul_mat_q(Q4_K, &mut Rng::new(54), quantize(Q4_K, &Rng::new(55).vec(512 * 32), 512), 512, 32, 11, 2, true);
    }
    check_mul_mat(Q4_K, 56, 256, 24, 9, 1); // 24 rows: ggml's 8-row layout
    // Every nibble in every position, all 6-bit scales and mins, negative
    // super-block scales.
    let mut qa = quantize(Q4_K, &Rng::new(57).vec(512 * 32).iter().map(|x| x - 0.3).collect::<Vec<_>>(), 512);
    for (i, blk) in qa.chunks_mut(144).enumerate() {
        if i % 3 == 1 {
            blk[1] ^= 0x80; // d's sign
        }
        for (j, q) in blk.iter_mut().enumerate().skip(4) {
            *q = ((i * 7 + j * 13) % 256) as u8;
        }
    }
    check_mul_mat_q(Q4_K, &mut Rng::new(58), qa, 512, 32, 6, 1, false);
    assert!(!repacks() || extra_buffer_type("CPU_REPACK").is_some());
}

/// Routing ids `[u, t]`: `u` experts of `e` per token, distinct unless
/// `repeat` (a token naming one expert twice is valid input).
fn route(rng: &mut Rng, e: usize, u: usize, t: usize, repeat: bool) -> Vec<i32> {
    let mut ids = Vec::with_capacity(u * t);
    for _ in 0..t {
        let mut chosen: Vec<i32> = Vec::new();
        while chosen.len() < u {
            let x = (rng.next_u64() % e as u64) as i32;
            if repeat || !chosen.contains(&x) {
                chosen.push(x);
            }
        }
        ids.extend(chosen);
    }
    ids
}

/// Experts `[k, m, e]` times `b = [k, nb, t]` routed by `ids = [u, t]`.
#[allow(clippy::too_many_arguments)]
fn check_mul_mat_id(ty: u32, seed: u64, k: usize, m: usize, e: usize, u: usize, nb: usize, t: usize, repeat: bool) {
    let be = backend();
    let mut rng = Rng::new(seed);
    let av: Vec<f32> = rng.vec(k * m * e).iter().map(|x| x * 2.0).collect();
    let bv = rng.vec(k * nb * t);
    let ids = route(&mut rng, e, u, t, repeat);
    let qa = quantize(ty, &av, k);
    let mut want = vec![0f32; m * u * t];
    for tok in 0..t {
        for s in 0..u {
            let ex = ids[tok * u + s] as usize;
            let row = unsafe { sys::ggml_row_size(ty, k as i64) };
            let col = strict(ty, &qa[ex * m * row..][..m * row], k, m, &bv[(tok * nb + s % nb) * k..][..k], 1);
            want[(tok * u + s) * m..][..m].copy_from_slice(&col);
        }
    }
    let what = format!("{} experts [{k},{m},{e}] x f32 [{k},{nb},{t}], {u} used", type_name(ty));
    let run = |root: &mut Context, input: &mut Context, a: Tensor| {
        let b = upload(input, F32, &[k as i64, nb as i64, t as i64], &bv);
        let i = upload_i32(input, &[u as i64, t as i64], &ids);
        let c = root.mul_mat_id(a, b, i).unwrap();
        eval(root, c)
    };
    let plain = {
        let (mut root, mut input) = contexts(&be);
        let a = input.from_bytes(ty, &[k as i64, m as i64, e as i64], &qa).unwrap();
        run(&mut root, &mut input, a)
    };
    assert_close(&format!("{what} (default buffer)"), &plain, &want, tol(ty, k), 1e-5);

    let (mut root, mut input) = contexts(&be);
    let Some((a, buf)) = repacked_weight(&mut root, ty, [k as i64, m as i64, e as i64], &qa) else {
        assert!(!repacks() || m % 16 != 0, "{what}: this CPU and build should repack it");
        return;
    };
    let got = run(&mut root, &mut input, a);
    drop(root);
    drop(input);
    unsafe { sys::ggml_backend_buffer_free(buf) };
    if ggml_repacks(ty) && repeat {
        // ggml's repacked mul_mat_id keeps at most one row per token for
        // each expert (its row map has ne12 places per expert), so it loses
        // a repeated expert's second product: no reference of its floats
        // here, the naive one alone (ours takes every slot).
        assert_close(&format!("{what} (repacked)"), &got, &want, tol(ty, k), 1e-5);
        return;
    }
    let ggml = if !ggml_repacks(ty) {
        plain
    } else {
        let (mut root, mut input) = contexts(&be);
        let (a, buf) = repacked_weight(&mut root, ty, [k as i64, m as i64 + 8, e as i64], &eight_more_rows(ty, &qa, k, m, e)).expect("ggml repacks it");
        let out = first_rows(&run(&mut root, &mut input, a), m);
        drop(root);
        drop(input);
        unsafe { sys::ggml_backend_buffer_free(buf) };
        out
    };
    check_repacked(&what, &got, &want, &ggml, tol(ty, k));
}

#[test]
fn mul_mat_id_repacked_matches_ggml_and_reference() {
    for ty in [Q8_0, Q4_0, Q5_0, Q4_1] {
        // One token (decode), a batch with every expert busy, b broadcast
        // over the used experts (nb 1) or one row per slot, a token naming
        // one expert twice, experts left idle.
        check_mul_mat_id(ty, 31, 64, 16, 4, 2, 1, 1, false);
        check_mul_mat_id(ty, 32, 256, 32, 8, 4, 4, 37, false);
        check_mul_mat_id(ty, 33, 128, 48, 16, 2, 1, 100, false);
        if ty != Q4_0 || repacks() {
            // (ggml's q4_0_8x8 loses a repeated expert's second row: ours only.)
            check_mul_mat_id(ty, 34, 64, 16, 4, 3, 3, 9, true);
        }
        check_mul_mat_id(ty, 35, 512, 64, 32, 1, 1, 3, false);
        check_mul_mat_id(ty, 36, 64, 8, 4, 2, 2, 5, false); // 8 rows: not ours
    }
    check_mul_mat_id(Q4_K, 37, 256, 16, 4, 2, 1, 1, false);
    check_mul_mat_id(Q4_K, 38, 512, 32, 8, 4, 4, 37, false);
    check_mul_mat_id(Q4_K, 39, 256, 48, 16, 2, 1, 30, false);
    if repacks() {
        check_mul_mat_id(Q4_K, 40, 256, 16, 4, 3, 3, 9, true);
    }
    check_mul_mat_id(Q4_K, 41, 256, 8, 4, 2, 2, 5, false); // 8 rows: not ours
}

/// An expert id out of range, computed in the graph (host ids are checked
/// before compute), is an error from compute, as on the default path
/// (scripts/patches/03-cpu-row-id-errors.sh); with the ids fixed, the same
/// graph computes the right numbers.
#[test]
fn mul_mat_id_repacked_bad_id_is_an_error() {
    // Q8_0, and Q4_K (its own quantization of b for mul_mat_id) where our
    // kernels take it (ggml's own q4_K_8x8 elsewhere).
    for (ty, k) in [(Q8_0, 64usize), (Q4_K, 256)] {
        if ty == Q4_K && !repacks() {
            continue;
        }
        check_bad_ids(ty, k);
    }
}

fn check_bad_ids(ty: u32, k: usize) {
    let be = backend();
    let (m, e) = (16usize, 4usize);
    let mut rng = Rng::new(40);
    let av = rng.vec(k * m * e);
    let bv = rng.vec(k * 2);
    let qa = quantize(ty, &av, k);
    let (mut root, mut input) = contexts(&be);
    let Some((a, buf)) = repacked_weight(&mut root, ty, [k as i64, m as i64, e as i64], &qa) else {
        assert!(!repacks());
        return;
    };
    let b = upload(&mut input, F32, &[k as i64, 1, 2], &bv);
    for bad in [4, -1, i32::MAX, i32::MIN] {
        let ids = upload_i32(&mut input, &[1, 2], &[1, bad]);
        let used = root.dup(ids).unwrap();
        let out = root.mul_mat_id(a, b, used).unwrap();
        let err = root.compute(&[out]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Compute, "{}", err.message);
        assert!(err.message.contains("mul_mat_id") && err.message.contains("out of range"), "{}", err.message);
        data::write(ids, &[1i32, 3].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(), "t").unwrap();
        root.compute(&[out]).unwrap();
        let got = data::read_f32(out, "t").unwrap();
        let a_deq = dequantize(ty, &qa, av.len());
        let bq = as_operand(ty, &bv, k);
        let mut want = naive_mm(&a_deq[m * k..][..m * k], k, m, &bq[..k], 1);
        want.extend(naive_mm(&a_deq[3 * m * k..][..m * k], k, m, &bq[k..], 1));
        assert_close(&format!("{} after fixing the ids", type_name(ty)), &got, &want, tol(ty, k), 1e-5);
    }
    drop(root);
    drop(input);
    unsafe { sys::ggml_backend_buffer_free(buf) };
}

/// Rows of a repacked matrix (get_rows; tied embeddings are read so by the
/// input and with a matmul by the output head, from one tensor): the same
/// floats as ggml's get_rows of the plain matrix, for every type our
/// kernels repack, with ids in any order and repeated; an id out of range
/// is an error from compute, as on the default path. A matrix ggml's own
/// layout holds (Q4_0, rows 8 modulo 16) is not offered for get_rows.
#[test]
fn get_rows_of_a_repacked_matrix_is_ggmls() {
    let be = backend();
    let ids_list: Vec<i32> = vec![0, 47, 16, 15, 16, 3, 31, 32, 0];
    for ty in [Q8_0, Q5_0, Q4_0, Q4_1, Q4_K] {
        let (k, m) = (if ty == Q4_K { 512 } else { 96usize }, 48usize);
        let qa = quantize(ty, &Rng::new(50 + ty as u64).vec(k * m), k);
        let plain = {
            let (mut root, mut input) = contexts(&be);
            let a = input.from_bytes(ty, &[k as i64, m as i64], &qa).unwrap();
            let ids = upload_i32(&mut input, &[ids_list.len() as i64], &ids_list);
            let r = root.get_rows(a, ids).unwrap();
            eval(&mut root, r)
        };
        let (mut root, mut input) = contexts(&be);
        let Some((a, buf)) = repacked_weight(&mut root, ty, [k as i64, m as i64, 1], &qa) else {
            assert!(!repacks(), "{}: this CPU and build should repack it", type_name(ty));
            continue;
        };
        let ids = upload_i32(&mut input, &[ids_list.len() as i64], &ids_list);
        let r = root.get_rows(a, ids).unwrap();
        let cpu = unsafe { sys::ggml_backend_dev_by_type(sys::GGML_BACKEND_DEVICE_TYPE_CPU) };
        if !unsafe { sys::ggml_backend_dev_supports_op(cpu, r.as_ptr()) } {
            // Without our kernels (no AVX-512 VNNI) ggml holds Q4_0 in its
            // own 8-row layout, which cannot give rows back: not offered.
            assert!(!repacks(), "{}: get_rows of our repacked layout not offered", type_name(ty));
            drop(root);
            drop(input);
            unsafe { sys::ggml_backend_buffer_free(buf) };
            continue;
        }
        let got = eval(&mut root, r);
        assert_bits_equal(&format!("{} get_rows (repacked)", type_name(ty)), &got, &plain);
        // An id out of range, written after the graph is built.
        let bad: Vec<u8> = [1i32, 48, 2, 0, 0, 0, 0, 0, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        data::write(ids, &bad, "test").unwrap();
        let e = root.compute(&[r]).unwrap_err();
        assert!(e.message.contains("get_rows") && e.message.contains("out of range"), "{}", e.message);
        drop(root);
        drop(input);
        unsafe { sys::ggml_backend_buffer_free(buf) };
    }
    // ggml's q4_0_8x8 layout cannot give rows back: the CPU does not offer it.
    if repacks() {
        let (k, m) = (64usize, 24usize);
        let qa = quantize(Q4_0, &Rng::new(60).vec(k * m), k);
        let (mut root, mut input) = contexts(&be);
        let (a, buf) = repacked_weight(&mut root, Q4_0, [k as i64, m as i64, 1], &qa).expect("ggml repacks Q4_0");
        let ids = upload_i32(&mut input, &[2], &[0, 1]);
        let r = root.get_rows(a, ids).unwrap();
        let cpu = unsafe { sys::ggml_backend_dev_by_type(sys::GGML_BACKEND_DEVICE_TYPE_CPU) };
        assert!(!unsafe { sys::ggml_backend_dev_supports_op(cpu, r.as_ptr()) }, "get_rows of ggml's q4_0_8x8 layout offered");
        drop(root);
        drop(input);
        unsafe { sys::ggml_backend_buffer_free(buf) };
    }
}
