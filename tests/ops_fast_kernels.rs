//! The fast CPU kernels (scripts/patches/13-cpu-r16.inc), which a weight
//! takes only when the loader marks it with `GGML_RS_FLAG_FAST_KERNELS`
//! (`Layout::fast_kernels`, the runner's `-fast-kernels`): Q8_0 with each
//! block's integer sum converted once, and F16 (rounded to bf16 when it is
//! repacked) and BF16 multiplied in bf16 with VDPBF16PS. They do not keep
//! ggml's order of f32 sums, so unlike tests/ops_repack.rs nothing here is
//! compared bit for bit: each result is compared with a naive f64 product
//! of exactly the values the kernel multiplies.
//!
//! * Q8_0, Q5_0, Q4_1: dequant(a) · dequant(ggml-cpu's quantization of b
//!   into Q8_0, or Q8_1 for Q4_1, whose minimum term takes the activations'
//!   block sums as Q8_1 stores them, an f16 `s`). Each block's sum is
//!   exact in int32 and rounds once to f32, then one product by the scales
//!   and one FMA per block: atol 1e-4·√K/8 + rtol 1e-5, the bound
//!   tests/ops_repack.rs uses for ggml's own kernels (observed below 2e-5
//!   at K = 1024).
//! * F16 and BF16: bf16(a) · bf16(b), bf16(x) being round-to-nearest-even
//!   of x (for F16, of the f16 value), as ggml converts b for BF16 weights.
//!   Products of two bf16 are exact in f32; the sums round once per pair of
//!   columns: the same bound (observed below 3e-5 at K = 1024, outputs
//!   O(10)).
//!
//! Without the mark the weights keep ggml's exact kernels (Q8_0) or ggml's
//! plain layout (F16, BF16); where the build or CPU lacks AVX-512 BF16, F16
//! and BF16 are not taken even with it.
mod common;
use common::*;

use ggml_rs::ml::{Context, Tensor};
use ggml_rs::sys;

const Q8_0: u32 = sys::GGML_TYPE_Q8_0;
const Q5_0: u32 = sys::GGML_TYPE_Q5_0;
const Q4_1: u32 = sys::GGML_TYPE_Q4_1;
const Q8_1: u32 = sys::GGML_TYPE_Q8_1;
const BF16: u32 = sys::GGML_TYPE_BF16;

/// Whether this build and CPU have our 16-row kernels (AVX-512 VNNI).
fn r16() -> bool {
    cfg!(feature = "native") && unsafe { sys::ggml_cpu_has_avx512_vnni() != 0 && sys::ggml_cpu_has_avx512() != 0 }
}

/// Whether the bf16 kernels are built and run here (also AVX-512 BF16).
fn bf16_kernels() -> bool {
    r16() && unsafe { sys::ggml_cpu_has_avx512_bf16() != 0 }
}

fn bf16_round(x: f32) -> f32 {
    unsafe { sys::ggml_bf16_to_fp32(sys::ggml_fp32_to_bf16(x)) }
}

/// A weight of `shape` and type `ty` in CPU_REPACK, marked for the fast
/// kernels when `fast`, holding `bytes`: None where the buffer type offers
/// no layout for it (the weight would stay in the plain CPU buffer).
fn weight(root: &mut Context, ty: u32, shape: [i64; 3], bytes: &[u8], fast: bool) -> Option<(Tensor, sys::ggml_backend_buffer_t)> {
    let buft = extra_buffer_type("CPU_REPACK")?;
    let a = root.new_tensor("weight", ty, [shape[0], shape[1], shape[2], 1]).unwrap();
    unsafe {
        if fast {
            (*a.as_ptr()).flags |= sys::GGML_RS_FLAG_FAST_KERNELS;
        }
        let size = sys::ggml_backend_buft_get_alloc_size(buft, a.as_ptr());
        let buf = sys::ggml_backend_buft_alloc_buffer(buft, size);
        assert!(!buf.is_null());
        assert_eq!(sys::ggml_backend_tensor_alloc(buf, a.as_ptr(), sys::ggml_backend_buffer_get_base(buf)), sys::GGML_STATUS_SUCCESS);
        if (*a.as_ptr()).extra.is_null() {
            sys::ggml_backend_buffer_free(buf);
            return None;
        }
        sys::ggml_backend_tensor_set(a.as_ptr(), bytes.as_ptr().cast(), 0, bytes.len());
        Some((a, buf))
    }
}

/// `op` over a weight of `ty` and `shape` holding `bytes`, marked for the
/// fast kernels, computed on the CPU (its inputs built in `input`): None
/// where the repacking buffer offers no layout for the weight.
fn on_marked(ty: u32, shape: [i64; 3], bytes: &[u8], op: impl FnOnce(&mut Context, &mut Context, Tensor) -> Tensor) -> Option<Vec<f32>> {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let (a, buf) = weight(&mut root, ty, shape, bytes, true)?;
    let c = op(&mut root, &mut input, a);
    let got = eval(&mut root, c);
    drop(root);
    drop(input);
    unsafe { sys::ggml_backend_buffer_free(buf) };
    Some(got)
}

/// `vals` (rows of `k`) as a weight of `ty`, and the values the fast
/// kernel multiplies them as.
fn encode(ty: u32, vals: &[f32], k: usize) -> (Vec<u8>, Vec<f32>) {
    match ty {
        Q8_0 | Q5_0 | Q4_1 => {
            let rows = vals.len() / k;
            let mut q = vec![0u8; unsafe { sys::ggml_row_size(ty, k as i64) } * rows];
            unsafe { sys::ggml_quantize_chunk(ty, vals.as_ptr(), q.as_mut_ptr().cast(), 0, rows as i64, k as i64, std::ptr::null()) };
            let mut deq = vec![0f32; vals.len()];
            let to_float = unsafe { &*sys::ggml_get_type_traits(ty) }.to_float.unwrap();
            unsafe { to_float(q.as_ptr().cast(), deq.as_mut_ptr(), deq.len() as i64) };
            (q, deq)
        }
        F16 => (vals.iter().flat_map(|&v| f16_bits(v).to_le_bytes()).collect(), vals.iter().map(|&v| bf16_round(f16_round(v))).collect()),
        BF16 => {
            let bits: Vec<u16> = vals.iter().map(|&v| unsafe { sys::ggml_fp32_to_bf16(v) }.bits).collect();
            (bits.iter().flat_map(|b| b.to_le_bytes()).collect(), vals.iter().map(|&v| bf16_round(v)).collect())
        }
        _ => unreachable!(),
    }
}

fn f16(b: &[u8]) -> f32 {
    unsafe { sys::ggml_fp16_to_fp32(u16::from_le_bytes([b[0], b[1]])) }
}

/// ggml-cpu's own conversion of activation rows for a `ty` weight (its
/// SIMD quantizer, which can round ties unlike the reference one): the
/// bytes (empty for bf16) and the values the kernel multiplies.
fn operand_q(ty: u32, b: &[f32], k: usize) -> (Vec<u8>, Vec<f32>) {
    if ty == F16 || ty == BF16 {
        return (Vec::new(), b.iter().map(|&v| bf16_round(v)).collect());
    }
    let at = if ty == Q4_1 { Q8_1 } else { Q8_0 };
    let from = unsafe { &*sys::ggml_get_type_traits_cpu(at) }.from_float.unwrap();
    let row = unsafe { sys::ggml_row_size(at, k as i64) };
    let mut q = vec![0u8; row * (b.len() / k)];
    for (x, y) in b.chunks(k).zip(q.chunks_mut(row)) {
        unsafe { from(x.as_ptr(), y.as_mut_ptr().cast(), k as i64) };
    }
    // Q8_0 {f16 d; i8 qs[32]}, Q8_1 {f16 d; f16 s; i8 qs[32]}: d * qs[i].
    let (size, skip) = if at == Q8_1 { (36, 4) } else { (34, 2) };
    let vals = q.chunks(size).flat_map(|blk| blk[skip..].iter().map(move |&v| f16(blk) * (v as i8) as f32)).collect();
    (q, vals)
}

/// The f64 reference of a `ty` weight (its bytes `qa`, values `a`, rows of
/// `k`) times activation rows `b`: for Q4_1 each block's minimum times
/// the activations' block sum as Q8_1 stores it (`s`), as ggml computes it.
fn reference(ty: u32, qa: &[u8], a: &[f32], k: usize, m: usize, b: &[f32], n: usize) -> Vec<f32> {
    let (q, bq) = operand_q(ty, b, k);
    let mut out = naive(a, k, m, &bq, n);
    if ty == Q4_1 {
        let nb = k / 32;
        for j in 0..n {
            for i in 0..m {
                let mut fix = 0f64;
                for blk in 0..nb {
                    let (wb, ab) = (&qa[(i * nb + blk) * 20..][..20], &q[(j * nb + blk) * 36..][..36]);
                    let sum_q: f64 = ab[4..].iter().map(|&x| (x as i8) as f64).sum();
                    fix += f16(&wb[2..]) as f64 * (f16(&ab[2..]) as f64 - f16(ab) as f64 * sum_q);
                }
                out[j * m + i] = (out[j * m + i] as f64 + fix) as f32;
            }
        }
    }
    out
}

fn naive(a: &[f32], k: usize, m: usize, b: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    for j in 0..n {
        for i in 0..m {
            out[j * m + i] = a[i * k..][..k].iter().zip(&b[j * k..][..k]).map(|(&x, &y)| x as f64 * y as f64).sum::<f64>() as f32;
        }
    }
    out
}

fn tol(k: usize) -> f32 {
    1e-4 * (k as f32).sqrt() / 8.0
}

fn name(ty: u32) -> &'static str {
    ggml_rs::ml::tensor::type_name(ty)
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Whether the fast kernels should take a `ty` weight here.
fn taken(ty: u32) -> bool {
    if ty == F16 || ty == BF16 { bf16_kernels() } else { r16() }
}

/// `a = [k, m]` times f32 `b = [k, n, planes]` with the mark.
fn check_mul_mat(ty: u32, seed: u64, k: usize, m: usize, n: usize, planes: usize) {
    let mut rng = Rng::new(seed);
    let av: Vec<f32> = rng.vec(k * m).iter().map(|x| x * 2.0).collect();
    let bv = rng.vec(k * n * planes);
    let (bytes, a_vals) = encode(ty, &av, k);
    let want = reference(ty, &bytes, &a_vals, k, m, &bv, n * planes);
    let what = format!("{} [{k},{m}] x f32 [{k},{n},{planes}] (fast)", name(ty));
    let got = on_marked(ty, [k as i64, m as i64, 1], &bytes, |root, input, a| {
        let b = upload(input, F32, &[k as i64, n as i64, planes as i64], &bv);
        root.mul_mat(a, b).unwrap()
    });
    let Some(got) = got else {
        assert!(!taken(ty) || m % 16 != 0 || k % 32 != 0, "{what}: this CPU and build should take it");
        return;
    };
    eprintln!("{what}: vs naive {:.2e}", max_diff(&got, &want));
    assert_close(&what, &got, &want, tol(k), 1e-5);
}

#[test]
fn mul_mat_fast_matches_reference() {
    for ty in [Q8_0, Q5_0, Q4_1, F16, BF16] {
        // Decode (1 row), every tile tail of 6 (Q8_0, Q5_0, Q4_1) and 8 (bf16) rows,
        // several tiles and chunks, planes of b, K from one block to 1024,
        // M from 16 to 4,800 (one- and two-row chunks of up to 32 groups).
        check_mul_mat(ty, 1, 32, 16, 1, 1);
        check_mul_mat(ty, 2, 256, 64, 1, 1);
        for (i, n) in [2usize, 3, 4, 5, 6, 7, 8, 9, 13, 17].into_iter().enumerate() {
            check_mul_mat(ty, 10 + i as u64, 128, 32, n, 1);
        }
        check_mul_mat(ty, 20, 1024, 48, 70, 1);
        check_mul_mat(ty, 21, 512, 256, 130, 1);
        check_mul_mat(ty, 22, 64, 16, 5, 3);
        check_mul_mat(ty, 23, 256, 16 * 300, 2, 1);
        // Not taken: rows not a multiple of 16, K not of 32.
        check_mul_mat(ty, 24, 64, 24, 9, 1);
    }
    check_mul_mat(F16, 25, 48, 16, 3, 1);
}

/// Experts `[k, m, e]` times `b = [k, 1, t]`, `u` experts a token.
fn check_mul_mat_id(ty: u32, seed: u64, k: usize, m: usize, e: usize, u: usize, t: usize) {
    let mut rng = Rng::new(seed);
    let av: Vec<f32> = rng.vec(k * m * e).iter().map(|x| x * 2.0).collect();
    let bv = rng.vec(k * t);
    let ids: Vec<i32> = (0..t * u).map(|i| ((i / u * 7 + (i % u) * 3) % e) as i32).collect();
    let (bytes, a_vals) = encode(ty, &av, k);
    let row = unsafe { sys::ggml_row_size(ty, k as i64) };
    let mut want = vec![0f32; m * u * t];
    for tok in 0..t {
        for s in 0..u {
            let ex = ids[tok * u + s] as usize;
            let col = reference(ty, &bytes[ex * m * row..][..m * row], &a_vals[ex * m * k..][..m * k], k, m, &bv[tok * k..][..k], 1);
            want[(tok * u + s) * m..][..m].copy_from_slice(&col);
        }
    }
    let what = format!("{} experts [{k},{m},{e}] x f32 [{k},1,{t}], {u} used (fast)", name(ty));
    let got = on_marked(ty, [k as i64, m as i64, e as i64], &bytes, |root, input, a| {
        let b = upload(input, F32, &[k as i64, 1, t as i64], &bv);
        let i = upload_i32(input, &[u as i64, t as i64], &ids);
        root.mul_mat_id(a, b, i).unwrap()
    });
    let Some(got) = got else {
        assert!(!taken(ty), "{what}: this CPU and build should take it");
        return;
    };
    eprintln!("{what}: vs naive {:.2e}", max_diff(&got, &want));
    assert_close(&what, &got, &want, tol(k), 1e-5);
}

#[test]
fn mul_mat_id_fast_matches_reference() {
    for ty in [Q8_0, Q5_0, Q4_1, F16, BF16] {
        check_mul_mat_id(ty, 31, 64, 16, 4, 2, 1);
        check_mul_mat_id(ty, 32, 256, 32, 8, 4, 37);
        check_mul_mat_id(ty, 33, 128, 48, 16, 2, 100);
    }
}

/// Rows of a marked matrix (tied embeddings): F16 comes back as the bf16
/// values its products use, Q8_0 and BF16 unchanged.
#[test]
fn get_rows_of_a_fast_matrix() {
    let (k, m) = (96usize, 48usize);
    let ids: Vec<i32> = vec![0, 47, 16, 15, 3, 0];
    for ty in [Q8_0, Q5_0, Q4_1, F16, BF16] {
        let av = Rng::new(70 + ty as u64).vec(k * m);
        let (bytes, vals) = encode(ty, &av, k);
        let got = on_marked(ty, [k as i64, m as i64, 1], &bytes, |root, input, a| {
            let i = upload_i32(input, &[ids.len() as i64], &ids);
            root.get_rows(a, i).unwrap()
        });
        let Some(got) = got else {
            assert!(!taken(ty));
            continue;
        };
        let want: Vec<f32> = ids.iter().flat_map(|&id| vals[id as usize * k..][..k].to_vec()).collect();
        assert_eq!(got, want, "{} get_rows (fast)", name(ty));
    }
}

/// Without the mark, F16 and BF16 stay in ggml's layout (CPU_REPACK has
/// none for them) and Q8_0 takes the exact kernel: the results are ggml's
/// default buffer's, bit for bit.
#[test]
fn unmarked_weights_keep_ggmls_kernels() {
    let be = backend();
    let (k, m, n) = (256usize, 32usize, 5usize);
    let mut rng = Rng::new(80);
    let av = rng.vec(k * m);
    let bv = rng.vec(k * n);
    for ty in [F16, BF16] {
        let (bytes, _) = encode(ty, &av, k);
        let (mut root, _input) = contexts(&be);
        assert!(weight(&mut root, ty, [k as i64, m as i64, 1], &bytes, false).is_none(), "{} taken without the mark", name(ty));
    }
    let (bytes, _) = encode(Q8_0, &av, k);
    let plain = {
        let (mut root, mut input) = contexts(&be);
        let a = input.from_bytes(Q8_0, &[k as i64, m as i64], &bytes).unwrap();
        let b = upload(&mut input, F32, &[k as i64, n as i64], &bv);
        let c = root.mul_mat(a, b).unwrap();
        eval(&mut root, c)
    };
    let (mut root, mut input) = contexts(&be);
    let Some((a, buf)) = weight(&mut root, Q8_0, [k as i64, m as i64, 1], &bytes, false) else {
        assert!(!r16());
        return;
    };
    let b = upload(&mut input, F32, &[k as i64, n as i64], &bv);
    let c = root.mul_mat(a, b).unwrap();
    let got = eval(&mut root, c);
    assert!(got.iter().zip(&plain).all(|(g, p)| g.to_bits() == p.to_bits()), "Q8_0 without the mark: not ggml's floats");
    drop(root);
    drop(input);
    unsafe { sys::ggml_backend_buffer_free(buf) };
}
