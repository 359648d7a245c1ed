//! Differential tests of the mixture-of-experts ops mul_mat_id and add_id
//! against naive f64 references: random experts, inputs and routing ids,
//! several shapes, f32/f16/bf16 and quantized (Q8_0, Q4_0) experts,
//! non-contiguous operands; out-of-range expert ids (an error from compute,
//! not an abort); bad inputs; the C ABI.
//!
//! Tolerances (|got - want| <= atol + rtol*|want|):
//! * f32 experts and b: atol 1e-4, rtol 1e-5 (f32 accumulation, K <= 128).
//! * f16 / bf16 experts: ggml converts an f32 `b` to the experts' type, so
//!   the reference multiplies the same rounded values; only accumulation
//!   error remains: atol 1e-3, rtol 1e-4.
//! * quantized experts: ggml converts f32 `b` to Q8_0 with its CPU
//!   quantizer. Strict check against dequant(as)·dequant(q8_0(b)) with that
//!   quantizer: atol 1e-3. Loose check against dequant(as)·b (the f32
//!   product of the dequantized experts): atol 0.15 for K = 64..128, about
//!   5 standard deviations of b's Q8 noise (σ ≈ 0.58·√K/(127·√12) ≈ 0.015);
//!   the outputs are O(3).
//! * add_id: one f32 addition: exact.
mod common;
#[path = "common/capi.rs"]
mod capi_base;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const BF16: u32 = sys::GGML_TYPE_BF16;
const Q8_0: u32 = sys::GGML_TYPE_Q8_0;
const Q4_0: u32 = sys::GGML_TYPE_Q4_0;

// ---- helpers ------------------------------------------------------------------

/// The first `ne0` elements of every row of the 3-D `t`.
fn narrow_rows(root: &Context, t: Tensor, ne0: i64) -> Tensor {
    let (ne, nb) = (t.ne(), t.nb());
    view_of(unsafe { sys::ggml_view_3d(root.ggml_context(), t.as_ptr(), ne0, ne[1], ne[2], nb[1], nb[2], 0) })
}


fn bf16_round(x: f32) -> f32 {
    let bits = x.to_bits();
    f32::from_bits(bits.wrapping_add(0x7FFF + ((bits >> 16) & 1)) & 0xFFFF_0000)
}
fn upload_bf16(ctx: &mut Context, shape: &[i64], vals: &[f32]) -> Tensor {
    let bytes: Vec<u8> = vals.iter().flat_map(|&v| ((bf16_round(v).to_bits() >> 16) as u16).to_le_bytes()).collect();
    ctx.from_bytes(BF16, shape, &bytes).expect("upload bf16")
}

/// Rows of `k` values quantized to `ty` with ggml's reference quantizer.
fn quantize(ty: u32, vals: &[f32], k: usize) -> Vec<u8> {
    let rows = vals.len() / k;
    let mut out = vec![0u8; unsafe { sys::ggml_row_size(ty, k as i64) } * rows];
    let n = unsafe { sys::ggml_quantize_chunk(ty, vals.as_ptr(), out.as_mut_ptr().cast(), 0, rows as i64, k as i64, std::ptr::null()) };
    assert_eq!(n, out.len(), "quantized size");
    out
}
fn dequantize(ty: u32, bytes: &[u8], n: usize) -> Vec<f32> {
    let to_float = unsafe { &*sys::ggml_get_type_traits(ty) }.to_float.expect("to_float");
    let mut out = vec![0f32; n];
    unsafe { to_float(bytes.as_ptr().cast(), out.as_mut_ptr(), n as i64) };
    out
}
/// Rows of `k` values as ggml-cpu's matrix product sees an f32 right operand
/// of a `ty` left operand: converted with the CPU's `from_float` into the
/// dot product's type, then back to f32.
fn as_dot_operand(ty: u32, vals: &[f32], k: usize) -> Vec<f32> {
    let vdt = unsafe { &*sys::ggml_get_type_traits_cpu(ty) }.vec_dot_type;
    let from = unsafe { &*sys::ggml_get_type_traits_cpu(vdt) }.from_float.expect("from_float");
    let row = unsafe { sys::ggml_row_size(vdt, k as i64) };
    let mut q = vec![0u8; row * (vals.len() / k)];
    for (r, chunk) in vals.chunks(k).enumerate() {
        unsafe { from(chunk.as_ptr(), q[r * row..].as_mut_ptr().cast(), k as i64) };
    }
    dequantize(vdt, &q, vals.len())
}

/// Routing ids `[u, t]`: for each token, `u` distinct experts of `e`.
fn route(rng: &mut Rng, e: usize, u: usize, t: usize) -> Vec<i32> {
    let mut ids = Vec::with_capacity(u * t);
    for _ in 0..t {
        let mut chosen: Vec<i32> = Vec::new();
        while chosen.len() < u {
            let x = (rng.next_u64() % e as u64) as i32;
            if !chosen.contains(&x) {
                chosen.push(x);
            }
        }
        ids.extend(chosen);
    }
    ids
}

/// One MoE problem: `as = [k, m, e]`, `b = [k, nb, t]`, `ids = [u, t]`.
#[derive(Clone, Copy, Debug)]
struct Dims {
    k: usize,
    m: usize,
    e: usize,
    u: usize,
    nb: usize,
    t: usize,
}

/// `out[:, j, t] = as[:, :, ids[j, t]] · b[:, j % nb, t]` in f64.
fn naive_mmid(a: &[f32], b: &[f32], ids: &[i32], d: Dims) -> Vec<f32> {
    let mut out = vec![0f32; d.m * d.u * d.t];
    for t in 0..d.t {
        for j in 0..d.u {
            let ex = ids[t * d.u + j] as usize;
            let bcol = &b[(t * d.nb + j % d.nb) * d.k..][..d.k];
            for r in 0..d.m {
                let arow = &a[(ex * d.m + r) * d.k..][..d.k];
                let s: f64 = arow.iter().zip(bcol).map(|(&x, &y)| x as f64 * y as f64).sum();
                out[(t * d.u + j) * d.m + r] = s as f32;
            }
        }
    }
    out
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn sh(d: Dims) -> ([i64; 3], [i64; 3], [i64; 2]) {
    ([d.k as i64, d.m as i64, d.e as i64], [d.k as i64, d.nb as i64, d.t as i64], [d.u as i64, d.t as i64])
}

const CASES: &[Dims] = &[
    Dims { k: 16, m: 8, e: 4, u: 2, nb: 1, t: 5 },
    Dims { k: 32, m: 5, e: 6, u: 3, nb: 3, t: 4 },
    Dims { k: 7, m: 3, e: 3, u: 3, nb: 1, t: 1 },
    Dims { k: 64, m: 33, e: 8, u: 4, nb: 4, t: 17 },
    Dims { k: 64, m: 16, e: 8, u: 4, nb: 2, t: 9 },
];

// ---- mul_mat_id -----------------------------------------------------------------

#[test]
fn mul_mat_id_f32_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(501);
    let mut outs = Vec::new();
    for &d in CASES {
        let (ash, bsh, ish) = sh(d);
        let av = rng.vec(d.k * d.m * d.e);
        let bv = rng.vec(d.k * d.nb * d.t);
        let iv = route(&mut rng, d.e, d.u, d.t);
        let a = upload(&mut input, F32, &ash, &av);
        let b = upload(&mut input, F32, &bsh, &bv);
        let ids = upload_i32(&mut input, &ish, &iv);
        let out = root.mul_mat_id(a, b, ids).unwrap();
        assert_eq!((out.dtype(), out.ne()), (F32, [d.m as i64, d.u as i64, d.t as i64, 1]), "{d:?}");
        outs.push((d, out, naive_mmid(&av, &bv, &iv, d)));
    }
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (d, out, want) in outs {
        assert_close(&format!("mul_mat_id f32 {d:?}"), &data::read_f32(out, "t").unwrap(), &want, 1e-4, 1e-5);
    }
}

#[test]
fn mul_mat_id_f16_and_bf16_experts() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(502);
    let mut outs = Vec::new();
    for &d in &CASES[..4] {
        let (ash, bsh, ish) = sh(d);
        let av = rng.vec(d.k * d.m * d.e);
        let bv = rng.vec(d.k * d.nb * d.t);
        let iv = route(&mut rng, d.e, d.u, d.t);
        let ids = upload_i32(&mut input, &ish, &iv);
        let bf = upload(&mut input, F32, &bsh, &bv);
        // f16 experts with an f32 b (converted to f16) and with an f16 b.
        let a16 = upload(&mut input, F16, &ash, &av);
        let b16 = upload(&mut input, F16, &bsh, &bv);
        let (ar, br): (Vec<f32>, Vec<f32>) = (av.iter().map(|&x| f16_round(x)).collect(), bv.iter().map(|&x| f16_round(x)).collect());
        let want = naive_mmid(&ar, &br, &iv, d);
        outs.push((format!("f16 x f32 {d:?}"), root.mul_mat_id(a16, bf, ids).unwrap(), want.clone()));
        outs.push((format!("f16 x f16 {d:?}"), root.mul_mat_id(a16, b16, ids).unwrap(), want));
        // bf16 experts with an f32 b (converted to bf16) and a bf16 b.
        let abf = upload_bf16(&mut input, &ash, &av);
        let bbf = upload_bf16(&mut input, &bsh, &bv);
        let (ar, br): (Vec<f32>, Vec<f32>) = (av.iter().map(|&x| bf16_round(x)).collect(), bv.iter().map(|&x| bf16_round(x)).collect());
        let want = naive_mmid(&ar, &br, &iv, d);
        outs.push((format!("bf16 x f32 {d:?}"), root.mul_mat_id(abf, bf, ids).unwrap(), want.clone()));
        outs.push((format!("bf16 x bf16 {d:?}"), root.mul_mat_id(abf, bbf, ids).unwrap(), want));
    }
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        assert_close(&what, &data::read_f32(out, "t").unwrap(), &want, 1e-3, 1e-4);
    }
}

fn check_quantized(ty: u32, seed: u64, d: Dims) {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(seed);
    let (ash, bsh, ish) = sh(d);
    let av = rng.vec(d.k * d.m * d.e);
    let bv = rng.vec(d.k * d.nb * d.t);
    let iv = route(&mut rng, d.e, d.u, d.t);
    let qa = quantize(ty, &av, d.k);
    let a = input.from_bytes(ty, &ash, &qa).unwrap();
    let a_deq = dequantize(ty, &qa, av.len());
    assert!(max_abs_diff(&a_deq, &av) > 0.0, "quantization is lossy");
    let b = upload(&mut input, F32, &bsh, &bv);
    let ids = upload_i32(&mut input, &ish, &iv);
    let out = root.mul_mat_id(a, b, ids).unwrap();
    let got = eval(&mut root, out);
    let what = format!("{} experts {d:?}", ggml_rs::ml::tensor::type_name(ty));
    let strict = naive_mmid(&a_deq, &as_dot_operand(ty, &bv, d.k), &iv, d);
    let loose = naive_mmid(&a_deq, &bv, &iv, d);
    eprintln!("{what}: max |err| strict {:.2e}, loose {:.2e}", max_abs_diff(&got, &strict), max_abs_diff(&got, &loose));
    // Tolerances: see the file comment.
    assert_close(&format!("{what} vs dequant(as)·q8_0(b)"), &got, &strict, 1e-3, 0.0);
    assert_close(&format!("{what} vs dequant(as)·b"), &got, &loose, 0.15, 0.0);
    assert!(loose.iter().map(|x| x.abs()).fold(0.0, f32::max) > 1.0, "outputs are not trivially small");
}

#[test]
fn mul_mat_id_quantized_experts() {
    check_quantized(Q8_0, 503, Dims { k: 64, m: 16, e: 4, u: 2, nb: 1, t: 6 });
    check_quantized(Q4_0, 504, Dims { k: 64, m: 16, e: 4, u: 2, nb: 1, t: 6 });
    check_quantized(Q8_0, 505, Dims { k: 128, m: 24, e: 8, u: 4, nb: 4, t: 13 });
    check_quantized(Q4_0, 506, Dims { k: 128, m: 9, e: 6, u: 3, nb: 3, t: 20 });
}

#[test]
fn mul_mat_id_non_contiguous_operands() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(507);
    let d = Dims { k: 24, m: 6, e: 5, u: 2, nb: 2, t: 7 };
    let (ash, bsh, ish) = sh(d);
    let av = rng.vec(d.k * d.m * d.e);
    let a = upload(&mut input, F32, &ash, &av);
    let iv = route(&mut rng, d.e, d.u, d.t);
    let ids = upload_i32(&mut input, &ish, &iv);
    let bv = rng.vec(d.k * d.nb * d.t);
    let b = upload(&mut input, F32, &bsh, &bv);
    let mut outs = Vec::new();

    // b permuted: stored [k, t, nb], seen as [k, nb, t] (dense rows).
    let bpv = rng.vec(d.k * d.nb * d.t);
    let bp = permute(&root, upload(&mut input, F32, &[d.k as i64, d.t as i64, d.nb as i64], &bpv), [0, 2, 1, 3]);
    assert!(!bp.is_contiguous() && bp.ne() == [d.k as i64, d.nb as i64, d.t as i64, 1]);
    let want = naive_mmid(&av, &logical(bp, &bpv), &iv, d);
    outs.push(("b permuted", root.mul_mat_id(a, bp, ids).unwrap(), want));

    // b strided in dim 0: stored [nb, k, t], axes 0 and 1 swapped (copied).
    let bsv = rng.vec(d.k * d.nb * d.t);
    let bs = permute(&root, upload(&mut input, F32, &[d.nb as i64, d.k as i64, d.t as i64], &bsv), [1, 0, 2, 3]);
    assert_ne!(bs.nb()[0], 4);
    let want = naive_mmid(&av, &logical(bs, &bsv), &iv, d);
    outs.push(("b strided dim 0", root.mul_mat_id(a, bs, ids).unwrap(), want));

    // ids transposed: stored [t, u].
    let itv: Vec<i32> = (0..d.t * d.u).map(|i| iv[(i % d.t) * d.u + i / d.t]).collect();
    let it = transpose(&root, upload_i32(&mut input, &[d.t as i64, d.u as i64], &itv));
    assert!(!it.is_contiguous());
    assert_eq!(logical(it, &itv), iv);
    outs.push(("ids transposed", root.mul_mat_id(a, b, it).unwrap(), naive_mmid(&av, &bv, &iv, d)));

    // as a view with padded rows: the first k of k+8 values per row.
    let wide = rng.vec((d.k + 8) * d.m * d.e);
    let aw = narrow_rows(&root, upload(&mut input, F32, &[d.k as i64 + 8, d.m as i64, d.e as i64], &wide), d.k as i64);
    assert!(!aw.is_contiguous());
    let want = naive_mmid(&logical(aw, &wide), &bv, &iv, d);
    outs.push(("as padded rows", root.mul_mat_id(aw, b, ids).unwrap(), want));

    // as transposed per expert: stored [m, k, e] (copied).
    let atv = rng.vec(d.k * d.m * d.e);
    let at = permute(&root, upload(&mut input, F32, &[d.m as i64, d.k as i64, d.e as i64], &atv), [1, 0, 2, 3]);
    let want = naive_mmid(&logical(at, &atv), &bv, &iv, d);
    outs.push(("as transposed", root.mul_mat_id(at, b, ids).unwrap(), want));

    // Quantized experts as a view with padded rows (whole blocks).
    let qk = 64usize;
    let qv = rng.vec((qk + 32) * d.m * d.e);
    let qa = input.from_bytes(Q8_0, &[qk as i64 + 32, d.m as i64, d.e as i64], &quantize(Q8_0, &qv, qk + 32)).unwrap();
    let qview = narrow_rows(&root, qa, qk as i64);
    let qd = Dims { k: qk, ..d };
    let qbv = rng.vec(qk * d.nb * d.t);
    let qb = upload(&mut input, F32, &[qk as i64, d.nb as i64, d.t as i64], &qbv);
    let deq_all = dequantize(Q8_0, &quantize(Q8_0, &qv, qk + 32), qv.len());
    let a_view: Vec<f32> = deq_all.chunks(qk + 32).flat_map(|r| r[..qk].to_vec()).collect();
    let want = naive_mmid(&a_view, &as_dot_operand(Q8_0, &qbv, qk), &iv, qd);
    outs.push(("q8_0 as padded rows", root.mul_mat_id(qview, qb, ids).unwrap(), want));

    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        // f32 tolerances (see the file comment); the q8_0 case is the
        // strict comparison.
        let (atol, rtol) = if what.starts_with("q8_0") { (1e-3, 0.0) } else { (1e-4, 1e-5) };
        assert_close(what, &data::read_f32(out, "t").unwrap(), &want, atol, rtol);
    }
}

#[test]
fn mul_mat_id_bad_expert_id_fails_compute_and_context_recovers() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(508);
    let d = Dims { k: 32, m: 4, e: 3, u: 2, nb: 1, t: 3 };
    let (ash, bsh, ish) = sh(d);
    let av = rng.vec(d.k * d.m * d.e);
    let bv = rng.vec(d.k * d.t);
    let a = upload(&mut input, F32, &ash, &av);
    let b = upload(&mut input, F32, &bsh, &bv);
    let qa = input.from_bytes(Q8_0, &ash, &quantize(Q8_0, &av, d.k)).unwrap();
    for bad in [3, -1, i32::MAX, i32::MIN] {
        for experts in [a, qa] {
            let iv = vec![0, 1, 2, bad, 1, 0];
          // Host ids are checked before compute (InvalidArgument); ids the
          // graph computes are caught by the patched kernel (Compute).
          for computed in [false, true] {
            let ids = upload_i32(&mut input, &ish, &iv);
            let used = if computed { root.dup(ids).unwrap() } else { ids };
            let out = root.mul_mat_id(experts, b, used).unwrap();
            let e = root.compute(&[out]).unwrap_err();
            let kind = if computed { ErrorKind::Compute } else { ErrorKind::InvalidArgument };
            assert_eq!(e.kind, kind, "{}", e.message);
            assert!(e.message.contains("mul_mat_id") && e.message.contains("out of range"), "{}", e.message);
            // Fix the ids: the same graph computes.
            let good = vec![0i32, 1, 2, 0, 1, 0];
            data::write(ids, &good.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(), "t").unwrap();
            root.compute(&[out]).unwrap();
            let deq = data::read_f32(experts, "t").unwrap();
            let want = if experts == a { naive_mmid(&deq, &bv, &good, d) } else { naive_mmid(&deq, &as_dot_operand(Q8_0, &bv, d.k), &good, d) };
            assert_close("after fixing ids", &data::read_f32(out, "t").unwrap(), &want, 1e-3, 1e-5);
          }
        }
    }
}

#[test]
fn mul_mat_id_rejects_bad_inputs_and_stays_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[32, 4, 3], &[0.5; 384]);
    let b = upload(&mut input, F32, &[32, 1, 5], &[1.0; 160]);
    let ids = upload_i32(&mut input, &[2, 5], &[0, 1, 1, 2, 2, 0, 0, 2, 1, 1]);
    let idsf = upload(&mut input, F32, &[2, 5], &[0.0; 10]);
    let ids3 = upload_i32(&mut input, &[2, 5, 2], &[0; 20]);
    let a4 = upload(&mut input, F32, &[32, 4, 3, 2], &[0.5; 768]);
    let b4 = upload(&mut input, F32, &[32, 1, 5, 2], &[1.0; 320]);
    let bk = upload(&mut input, F32, &[16, 1, 5], &[1.0; 80]);
    let b3 = upload(&mut input, F32, &[32, 1, 4], &[1.0; 128]);
    let bn3 = upload(&mut input, F32, &[32, 3, 5], &[1.0; 480]);
    let b16 = upload(&mut input, F16, &[32, 1, 5], &[1.0; 160]);
    let bbf = upload_bf16(&mut input, &[32, 1, 5], &[1.0; 160]);
    let ai = upload_i32(&mut input, &[32, 4, 3], &[1; 384]);
    let q = input.from_bytes(Q8_0, &[32, 4, 3], &quantize(Q8_0, &[0.5; 384], 32)).unwrap();
    let q64 = input.from_bytes(Q8_0, &[64, 4, 3], &quantize(Q8_0, &[0.5; 768], 64)).unwrap();
    let qt = permute(&root, q64, [1, 0, 2, 3]); // [4, 64, 3], dim 0 strided by whole rows
    let b_k4 = upload(&mut input, F32, &[4, 1, 5], &[1.0; 20]);
    // Rows one block apart although each holds two blocks.
    let qo = view_of(unsafe { sys::ggml_view_3d(root.ggml_context(), q64.as_ptr(), 64, 3, 3, 34, 3 * 68, 0) });
    let b64 = upload(&mut input, F32, &[64, 1, 5], &[1.0; 320]);
    let empty = input.empty(F32, &[0]).unwrap();
    let cases: Vec<(&str, Tensor, Tensor, Tensor, ErrorKind, &str)> = vec![
        ("ids f32", a, b, idsf, ErrorKind::DType, "mul_mat_id: ids must be i32, got f32[2,5]"),
        ("ids 3-D", a, b, ids3, ErrorKind::Shape, "mul_mat_id: ids must be 2-D [n_expert_used, n_tokens], got i32[2,5,2]"),
        ("as 4-D", a4, b, ids, ErrorKind::Shape, "mul_mat_id: as must be 3-D [K, M, n_expert] (one matrix per expert), got f32[32,4,3,2]"),
        ("b 4-D", a, b4, ids, ErrorKind::Shape, "mul_mat_id: b must be 3-D [K, n_b, n_tokens], got f32[32,1,5,2]"),
        ("K differs", a, bk, ids, ErrorKind::Shape, "mul_mat_id: dim 0 (K) differs: as f32[32,4,3] vs b f32[16,1,5]"),
        ("tokens differ", a, b3, ids, ErrorKind::Shape, "mul_mat_id: ids i32[2,5] must have one column per token of b f32[32,1,4] (ids dim 1 = b dim 2)"),
        ("b not broadcastable", a, bn3, ids, ErrorKind::Shape, "mul_mat_id: b f32[32,3,5] cannot broadcast over the 2 experts used per token of ids i32[2,5] (b dim 1 must divide ids dim 0)"),
        ("f16 b, f32 as", a, b16, ids, ErrorKind::DType, "mul_mat_id: with as f32[32,4,3] the right operand must be f32, got b f16[32,1,5]"),
        ("bf16 b, f32 as", a, bbf, ids, ErrorKind::DType, "mul_mat_id: with as f32[32,4,3] the right operand must be f32, got b bf16[32,1,5]"),
        ("f16 b, q8_0 as", q, b16, ids, ErrorKind::DType, "mul_mat_id: with as q8_0[32,4,3] the right operand must be f32, got b f16[32,1,5]"),
        ("i32 as", ai, b, ids, ErrorKind::DType, "mul_mat_id: the CPU has no matrix product for as i32[32,4,3]"),
        ("quantized transposed", qt, b_k4, ids, ErrorKind::Shape, "mul_mat_id: a quantized as must have dense, non-overlapping rows (not transposed or strided in dim 0), got q8_0[4,64,3] (non-contiguous)"),
        ("quantized overlapping rows", qo, b64, ids, ErrorKind::Shape, "mul_mat_id: a quantized as must have dense, non-overlapping rows (not transposed or strided in dim 0), got q8_0[64,3,3] (non-contiguous)"),
        ("empty as", empty, b, ids, ErrorKind::Shape, "mul_mat_id: as is empty: f32[0]"),
        ("empty b", a, empty, ids, ErrorKind::Shape, "mul_mat_id: b is empty: f32[0]"),
    ];
    for (what, x, y, z, kind, msg) in cases {
        let e = root.mul_mat_id(x, y, z).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (kind, msg), "{what}");
    }
    // The context still builds and computes: 0.5*32 = 16 everywhere.
    let out = root.mul_mat_id(a, b, ids).unwrap();
    assert_eq!(eval(&mut root, out), vec![16.0; 4 * 2 * 5]);
}

// ---- add_id -----------------------------------------------------------------------

fn naive_add_id(a: &[f32], an: [usize; 3], b: &[f32], ids: &[i32]) -> Vec<f32> {
    let n = an[0];
    let mut out = a.to_vec();
    for r in 0..an[1] * an[2] {
        let row = ids[r] as usize;
        for i in 0..n {
            out[r * n + i] += b[row * n + i];
        }
    }
    out
}

#[test]
fn add_id_matches_reference() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(511);
    let mut outs = Vec::new();
    for &(n, u, t, rows) in &[(5usize, 2usize, 3usize, 4usize), (64, 4, 17, 8), (1, 1, 1, 1), (33, 3, 2, 7)] {
        let av = rng.vec(n * u * t);
        let bv = rng.vec(n * rows);
        let iv = route(&mut rng, rows, u, t);
        let a = upload(&mut input, F32, &[n as i64, u as i64, t as i64], &av);
        let b = upload(&mut input, F32, &[n as i64, rows as i64], &bv);
        let ids = upload_i32(&mut input, &[u as i64, t as i64], &iv);
        let out = root.add_id(a, b, ids).unwrap();
        assert_eq!((out.dtype(), out.ne()), (F32, a.ne()));
        outs.push((format!("add_id [{n},{u},{t}] rows {rows}"), out, naive_add_id(&av, [n, u, t], &bv, &iv)));
    }
    // Non-contiguous a (dims 1 and 2 swapped), b (padded rows) and ids
    // (transposed).
    let (n, u, t, rows) = (6usize, 3usize, 4usize, 5usize);
    let apv = rng.vec(n * u * t);
    let ap = permute(&root, upload(&mut input, F32, &[n as i64, t as i64, u as i64], &apv), [0, 2, 1, 3]);
    let bwv = rng.vec((n + 3) * rows);
    let bw = view_of(unsafe {
        let w = upload(&mut input, F32, &[n as i64 + 3, rows as i64], &bwv);
        sys::ggml_view_2d(root.ggml_context(), w.as_ptr(), n as i64, rows as i64, w.nb()[1], 0)
    });
    let iv = route(&mut rng, rows, u, t);
    let itv: Vec<i32> = (0..t * u).map(|i| iv[(i % t) * u + i / t]).collect();
    let it = transpose(&root, upload_i32(&mut input, &[t as i64, u as i64], &itv));
    assert!(!ap.is_contiguous() && !bw.is_contiguous() && !it.is_contiguous());
    let out = root.add_id(ap, bw, it).unwrap();
    outs.push(("add_id non-contiguous".into(), out, naive_add_id(&logical(ap, &apv), [n, u, t], &logical(bw, &bwv), &iv)));
    root.compute(&outs.iter().map(|o| o.1).collect::<Vec<_>>()).unwrap();
    for (what, out, want) in outs {
        // One f32 addition, as in the reference: exact.
        assert_close(&what, &data::read_f32(out, "t").unwrap(), &want, 0.0, 0.0);
    }
}

#[test]
fn add_id_bad_id_fails_compute_and_context_recovers() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[4, 2, 2], &[1.0; 16]);
    let b = upload(&mut input, F32, &[4, 3], &[0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]);
    for bad in [3, -1, 1000] {
      for computed in [false, true] {
        let ids = upload_i32(&mut input, &[2, 2], &[0, bad, 2, 1]);
        let used = if computed { root.dup(ids).unwrap() } else { ids };
        let out = root.add_id(a, b, used).unwrap();
        let e = root.compute(&[out]).unwrap_err();
        let kind = if computed { ErrorKind::Compute } else { ErrorKind::InvalidArgument };
        assert_eq!(e.kind, kind, "{}", e.message);
        assert!(e.message.contains("add_id") && e.message.contains("out of range"), "{}", e.message);
        data::write(ids, &[0i32, 1, 2, 1].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(), "t").unwrap();
        root.compute(&[out]).unwrap();
        let want: Vec<f32> = [1.0f32, 2.0, 3.0, 2.0].iter().flat_map(|&v| [v; 4]).collect();
        assert_eq!(data::read_f32(out, "t").unwrap(), want);
      }
    }
}

#[test]
fn add_id_rejects_bad_inputs_and_stays_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[4, 2, 3], &[1.0; 24]);
    let b = upload(&mut input, F32, &[4, 5], &[2.0; 20]);
    let ids = upload_i32(&mut input, &[2, 3], &[0, 1, 2, 3, 4, 0]);
    let a16 = upload(&mut input, F16, &[4, 2, 3], &[1.0; 24]);
    let b16 = upload(&mut input, F16, &[4, 5], &[2.0; 20]);
    let idsf = upload(&mut input, F32, &[2, 3], &[0.0; 6]);
    let a4 = upload(&mut input, F32, &[4, 2, 3, 2], &[1.0; 48]);
    let b3 = upload(&mut input, F32, &[4, 5, 2], &[2.0; 40]);
    let bn = upload(&mut input, F32, &[3, 5], &[2.0; 15]);
    let ids_t = upload_i32(&mut input, &[3, 2], &[0; 6]);
    let at = permute(&root, upload(&mut input, F32, &[2, 4, 3], &[1.0; 24]), [1, 0, 2, 3]); // [4,2,3], strided dim 0
    let cases: Vec<(&str, Tensor, Tensor, Tensor, ErrorKind, &str)> = vec![
        ("a f16", a16, b, ids, ErrorKind::DType, "add_id: a must be f32, got f16[4,2,3]"),
        ("b f16", a, b16, ids, ErrorKind::DType, "add_id: b must be f32, got f16[4,5]"),
        ("ids f32", a, b, idsf, ErrorKind::DType, "add_id: ids must be i32, got f32[2,3]"),
        ("a 4-D", a4, b, ids, ErrorKind::Shape, "add_id: a must be 3-D [n, n_expert_used, n_tokens], got f32[4,2,3,2]"),
        ("b 3-D", a, b3, ids, ErrorKind::Shape, "add_id: b must be 2-D [n, n_rows], got f32[4,5,2]"),
        ("dim 0", a, bn, ids, ErrorKind::Shape, "add_id: dim 0 differs: a f32[4,2,3] vs b f32[3,5]"),
        ("ids shape", a, b, ids_t, ErrorKind::Shape, "add_id: ids i32[3,2] must be [2, 3] (dims 1 and 2 of a f32[4,2,3])"),
        ("a strided", at, b, ids, ErrorKind::Shape, "add_id: a must have contiguous rows (dim 0 stride = element size), got f32[4,2,3] (non-contiguous)"),
    ];
    for (what, x, y, z, kind, msg) in cases {
        let e = root.add_id(x, y, z).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (kind, msg), "{what}");
    }
    let out = root.add_id(a, b, ids).unwrap();
    assert_eq!(eval(&mut root, out), vec![3.0; 24]);
}

// ---- the C ABI --------------------------------------------------------------------

mod capi {
    pub use crate::capi_base::*;

    extern "C" {
        pub fn ggml_rs_mul_mat_id(c: *mut Ctx, as_: *mut T, b: *mut T, ids: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_add_id(c: *mut Ctx, a: *mut T, b: *mut T, ids: *mut T, err: *mut Error) -> *mut T;
    }
}

#[test]
fn c_abi_moe_ops() {
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
        let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();

        let mut rng = Rng::new(521);
        let d = Dims { k: 8, m: 3, e: 4, u: 2, nb: 1, t: 3 };
        let av = rng.vec(d.k * d.m * d.e);
        let bv = rng.vec(d.k * d.t);
        let iv = vec![3, 0, 1, 2, 2, 3];
        let (ab, bb, ib) = (f32s(&av), f32s(&bv), i32s(&iv));
        let a = ggml_rs_ctx_from_data(input, 0, [8i64, 3, 4].as_ptr(), 3, ab.as_ptr(), ab.len(), &mut err);
        let b = ggml_rs_ctx_from_data(input, 0, [8i64, 1, 3].as_ptr(), 3, bb.as_ptr(), bb.len(), &mut err);
        let ids = ggml_rs_ctx_from_data(input, 26, [2i64, 3].as_ptr(), 2, ib.as_ptr(), ib.len(), &mut err);
        assert!(!a.is_null() && !b.is_null() && !ids.is_null(), "{}", err.text());
        let y = ggml_rs_mul_mat_id(root, a, b, ids, &mut err);
        assert!(!y.is_null(), "{}", err.text());
        // add_id on the product: bias rows 0..4 of [3, 4].
        let biasv = rng.vec(3 * 4);
        let biasb = f32s(&biasv);
        let bias = ggml_rs_ctx_from_data(input, 0, [3i64, 4].as_ptr(), 2, biasb.as_ptr(), biasb.len(), &mut err);
        let z = ggml_rs_add_id(root, y, bias, ids, &mut err);
        assert!(!z.is_null(), "{}", err.text());
        assert_eq!(ggml_rs_ctx_compute(root, [y, z].as_ptr(), 2, &mut err), OK, "{}", err.text());
        let mm = naive_mmid(&av, &bv, &iv, d);
        let mut got = [0f32; 18];
        assert_eq!(ggml_rs_tensor_get_f32(y, got.as_mut_ptr(), 18, &mut err), OK);
        assert_close("c mul_mat_id", &got, &mm, 1e-4, 1e-5);
        assert_eq!(ggml_rs_tensor_get_f32(z, got.as_mut_ptr(), 18, &mut err), OK);
        assert_close("c add_id", &got, &naive_add_id(&mm, [3, 2, 3], &biasv, &iv), 1e-4, 1e-5);

        // NULL arguments, a shape error, a NULL err.
        let mut e = Error::new();
        assert!(ggml_rs_mul_mat_id(root, a, b, null_mut(), &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "mul_mat_id: ids is NULL"));
        let mut e = Error::new();
        assert!(ggml_rs_add_id(null_mut(), a, b, ids, &mut e).is_null());
        assert_eq!((e.status, e.text().as_str()), (INVALID_ARGUMENT, "add_id: context is NULL"));
        let mut e = Error::new();
        assert!(ggml_rs_add_id(root, a, bias, ids, &mut e).is_null());
        assert_eq!(e.status, SHAPE, "{}", e.text());
        assert!(e.text().starts_with("add_id: "), "{}", e.text());
        assert!(ggml_rs_mul_mat_id(root, null_mut(), b, ids, null_mut()).is_null());
        ggml_rs_ctx_clear_error(root);

        // A bad expert id in host memory: compute fails before running
        // (GGML_RS_ERR_INVALID_ARGUMENT).
        let bad = i32s(&[4, 0, 1, 2, 2, 3]);
        let ids_bad = ggml_rs_ctx_from_data(input, 26, [2i64, 3].as_ptr(), 2, bad.as_ptr(), bad.len(), &mut err);
        let yb = ggml_rs_mul_mat_id(root, a, b, ids_bad, &mut err);
        assert!(!yb.is_null(), "{}", err.text());
        let mut e = Error::new();
        assert_eq!(ggml_rs_ctx_compute(root, &yb, 1, &mut e), 1);
        assert!(e.text().contains("mul_mat_id"), "{}", e.text());

        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
