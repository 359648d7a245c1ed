//! mul_mat / mul_mat_full_prec, differential against a naive f64 reference.
//!
//! Tolerances (|got - want| <= atol + rtol*|want|):
//! * f32 operands: atol 1e-4, rtol 1e-5 (f32 accumulation, K <= 256).
//! * f16 / bf16 `a`: the reference uses the same rounded operands that ggml
//!   multiplies (`b` is converted to `a`'s type), so only accumulation
//!   error remains: atol 1e-3, rtol 1e-4.
//! * quantized `a` (Q8_0, Q4_0, Q4_K, Q6_K): ggml converts f32 `b` to the
//!   dot product's type (Q8_0, or Q8_K for K-quants) with its CPU
//!   quantizer. Strict check against dequant(a)·dequant(convert(b)) using
//!   that same quantizer: atol 1e-3 (observed < 2e-6). Loose check against
//!   dequant(a)·b (the "F32 product of the dequantized values"): atol 0.15
//!   for K = 64..512 (observed <= 0.08), about 4-5 standard deviations of
//!   the Q8 noise of b (σ ≈ 0.58·√K/(127·√12) ≈ 0.01–0.03); the outputs
//!   themselves are O(5).
mod common;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const BF16: u32 = sys::GGML_TYPE_BF16;
const Q8_0: u32 = sys::GGML_TYPE_Q8_0;
const Q4_0: u32 = sys::GGML_TYPE_Q4_0;

/// Naive `[M,N,B2,B3]` product of `a=[K,M,b2,b3]` and `b=[K,N,B2,B3]`
/// (contiguous, ggml order), accumulated in f64.
fn naive_mm(a: &[f32], an: [usize; 4], b: &[f32], bn: [usize; 4]) -> Vec<f32> {
    let (k, m, n) = (an[0], an[1], bn[1]);
    assert_eq!(k, bn[0]);
    let (r2, r3) = (bn[2] / an[2], bn[3] / an[3]);
    let on = [m, n, bn[2], bn[3]];
    let mut out = vec![0f32; m * n * bn[2] * bn[3]];
    for i3 in 0..bn[3] {
        for i2 in 0..bn[2] {
            for j in 0..n {
                for i in 0..m {
                    let mut s = 0f64;
                    for kk in 0..k {
                        s += a[idx(an, kk, i, i2 / r2, i3 / r3)] as f64 * b[idx(bn, kk, j, i2, i3)] as f64;
                    }
                    out[idx(on, i, j, i2, i3)] = s as f32;
                }
            }
        }
    }
    out
}

fn dims(shape: &[i64]) -> [usize; 4] {
    let mut d = [1usize; 4];
    for (i, &s) in shape.iter().enumerate() {
        d[i] = s as usize;
    }
    d
}

fn bf16_round(x: f32) -> f32 {
    let bits = x.to_bits();
    let r = bits.wrapping_add(0x7FFF + ((bits >> 16) & 1));
    f32::from_bits(r & 0xFFFF_0000)
}

fn upload_bf16(ctx: &mut Context, shape: &[i64], vals: &[f32]) -> Tensor {
    let bytes: Vec<u8> = vals.iter().flat_map(|&v| ((bf16_round(v).to_bits() >> 16) as u16).to_le_bytes()).collect();
    ctx.from_bytes(BF16, shape, &bytes).expect("upload bf16")
}

fn quantize(ty: u32, vals: &[f32], n_per_row: usize) -> Vec<u8> {
    let nrows = vals.len() / n_per_row;
    let size = unsafe { sys::ggml_row_size(ty, n_per_row as i64) } * nrows;
    let mut out = vec![0u8; size];
    let n = unsafe {
        sys::ggml_quantize_chunk(ty, vals.as_ptr(), out.as_mut_ptr().cast(), 0, nrows as i64, n_per_row as i64, std::ptr::null())
    };
    assert_eq!(n, size, "quantize size");
    out
}

fn dequantize(ty: u32, bytes: &[u8], n: usize) -> Vec<f32> {
    let traits = unsafe { &*sys::ggml_get_type_traits(ty) };
    let mut out = vec![0f32; n];
    unsafe { (traits.to_float.unwrap())(bytes.as_ptr().cast(), out.as_mut_ptr(), n as i64) };
    out
}

/// `vals` (rows of `k`) converted the way ggml-cpu converts an f32 right
/// operand for a `ty` left operand (its CPU `from_float` into the dot
/// product's type), then back to f32.
fn as_vec_dot_operand(ty: u32, vals: &[f32], k: usize) -> Vec<f32> {
    let cpu = unsafe { &*sys::ggml_get_type_traits_cpu(ty) };
    let vdt = cpu.vec_dot_type;
    let from = unsafe { &*sys::ggml_get_type_traits_cpu(vdt) }.from_float.unwrap();
    let row = unsafe { sys::ggml_row_size(vdt, k as i64) };
    let mut q = vec![0u8; row * (vals.len() / k)];
    for (r, chunk) in vals.chunks(k).enumerate() {
        unsafe { from(chunk.as_ptr(), q[r * row..].as_mut_ptr().cast(), k as i64) };
    }
    if vdt == sys::GGML_TYPE_Q8_K {
        // ggml has no to_float for Q8_K; its block is {f32 d; i8 qs[256];
        // i16 bsums[16]} with value d*qs[i].
        let bs = unsafe { sys::ggml_type_size(vdt) };
        assert_eq!(bs, 4 + 256 + 32, "Q8_K block layout");
        return q
            .chunks(bs)
            .flat_map(|b| {
                let d = f32::from_le_bytes(b[..4].try_into().unwrap());
                b[4..260].iter().map(move |&x| d * (x as i8) as f32)
            })
            .collect();
    }
    dequantize(vdt, &q, vals.len())
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Uploads random f32 a and b of the given shapes, multiplies, compares.
fn check_f32(seed: u64, ash: &[i64], bsh: &[i64]) {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let (an, bn) = (dims(ash), dims(bsh));
    let mut rng = Rng::new(seed);
    let av = rng.vec(an.iter().product());
    let bv = rng.vec(bn.iter().product());
    let a = upload(&mut input, F32, ash, &av);
    let b = upload(&mut input, F32, bsh, &bv);
    let c = root.mul_mat(a, b).unwrap();
    assert_eq!(c.ne(), [an[1] as i64, bn[1] as i64, bn[2] as i64, bn[3] as i64], "result shape");
    assert_eq!(c.dtype(), F32);
    let got = eval(&mut root, c);
    assert_close(&format!("mul_mat {ash:?} x {bsh:?}"), &got, &naive_mm(&av, an, &bv, bn), 1e-4, 1e-5);
}

#[test]
fn ollama_testmulmat_cases() {
    // The four cases of Ollama's TestMulmat (arange inputs, exact results).
    let cases: [(&[i64], &[i64], &[f32]); 4] = [
        (&[3], &[3], &[5.0]),
        (&[4], &[4, 3], &[14., 38., 62.]),
        (&[4], &[4, 3, 10], &[14., 38., 62., 86., 110., 134., 158., 182., 206.]),
        (&[4, 5, 10], &[4, 3, 10], &[14., 38., 62., 86., 110., 38., 126., 214., 302., 390., 62., 214., 366., 518., 670., 1166.]),
    ];
    let be = backend();
    for (ash, bsh, prefix) in cases {
        let (mut root, mut input) = contexts(&be);
        let (an, bn) = (dims(ash), dims(bsh));
        let av: Vec<f32> = (0..an.iter().product::<usize>()).map(|i| i as f32).collect();
        let bv: Vec<f32> = (0..bn.iter().product::<usize>()).map(|i| i as f32).collect();
        let a = upload(&mut input, F32, ash, &av);
        let b = upload(&mut input, F32, bsh, &bv);
        let c = root.mul_mat(a, b).unwrap();
        assert_eq!(c.ne(), [an[1] as i64, bn[1] as i64, bn[2] as i64, bn[3] as i64]);
        let got = eval(&mut root, c);
        assert_eq!(&got[..prefix.len()], prefix, "{ash:?} x {bsh:?}: Ollama's expected values");
        assert_eq!(got, naive_mm(&av, an, &bv, bn), "{ash:?} x {bsh:?}");
    }
}

#[test]
fn f32_random_shapes_and_broadcast() {
    check_f32(1, &[1], &[1]);
    check_f32(2, &[7, 5], &[7, 3]);
    check_f32(3, &[64, 33], &[64, 17]);
    check_f32(4, &[256, 40], &[256, 1]); // matrix x vector (decode)
    check_f32(5, &[16, 8, 2, 1], &[16, 5, 6, 3]); // broadcast dims 2 and 3
    check_f32(6, &[32, 4, 3, 2], &[32, 9, 3, 4]); // dim 3 broadcast only
    check_f32(7, &[128, 1], &[128, 64]); // M = 1
}

#[test]
fn full_prec_matches_and_sets_precision() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(11);
    let (av, bv) = (rng.vec(96 * 12), rng.vec(96 * 10 * 2));
    let a = upload(&mut input, F16, &[96, 12], &av);
    let b = upload(&mut input, F32, &[96, 10, 2], &bv);
    let c = root.mul_mat_full_prec(a, b).unwrap();
    let raw = unsafe { &*c.as_ptr() };
    assert_eq!(raw.op_params[0], sys::GGML_PREC_F32 as i32, "F32 accumulation requested on the node");
    let plain = root.mul_mat(a, b).unwrap();
    assert_eq!(unsafe { &*plain.as_ptr() }.op_params[0], 0, "mul_mat keeps the default precision");
    root.compute(&[c, plain]).unwrap();
    let (got, got_plain) = (data::read_f32(c, "t").unwrap(), data::read_f32(plain, "t").unwrap());
    let ar: Vec<f32> = av.iter().map(|&x| f16_round(x)).collect();
    let br: Vec<f32> = bv.iter().map(|&x| f16_round(x)).collect();
    let want = naive_mm(&ar, [96, 12, 1, 1], &br, [96, 10, 2, 1]);
    assert_close("full_prec", &got, &want, 1e-3, 1e-4);
    assert_close("plain", &got_plain, &want, 1e-3, 1e-4);
}

#[test]
fn f16_and_bf16_left_operand() {
    let be = backend();
    let mut rng = Rng::new(21);
    let (an, bn) = ([64usize, 24, 2, 1], [64usize, 9, 4, 1]);
    let av = rng.vec(an.iter().product());
    let bv = rng.vec(bn.iter().product());
    let (ash, bsh) = ([64i64, 24, 2], [64i64, 9, 4]);

    // f16 a, f32 b (b is converted to f16 for the dot product).
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F16, &ash, &av);
    let b = upload(&mut input, F32, &bsh, &bv);
    let got = mm_eval(&mut root, a, b);
    let r16 = |v: &[f32]| v.iter().map(|&x| f16_round(x)).collect::<Vec<_>>();
    let want = naive_mm(&r16(&av), an, &r16(&bv), bn);
    assert_close("f16 x f32", &got, &want, 1e-3, 1e-4);

    // f16 a, f16 b.
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F16, &ash, &av);
    let b = upload(&mut input, F16, &bsh, &bv);
    let got = mm_eval(&mut root, a, b);
    assert_close("f16 x f16", &got, &want, 1e-3, 1e-4);

    // bf16 a, f32 b (b converted to bf16).
    let (mut root, mut input) = contexts(&be);
    let a = upload_bf16(&mut input, &ash, &av);
    let b = upload(&mut input, F32, &bsh, &bv);
    let got = mm_eval(&mut root, a, b);
    let rb = |v: &[f32]| v.iter().map(|&x| bf16_round(x)).collect::<Vec<_>>();
    let want_bf = naive_mm(&rb(&av), an, &rb(&bv), bn);
    assert_close("bf16 x f32", &got, &want_bf, 1e-3, 1e-4);

    // bf16 b with an f32 a (widened to f32).
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &ash, &av);
    let b = upload_bf16(&mut input, &bsh, &bv);
    let got = mm_eval(&mut root, a, b);
    let want = naive_mm(&av, an, &rb(&bv), bn);
    assert_close("f32 x bf16", &got, &want, 1e-4, 1e-5);
}

fn mm_eval(root: &mut Context, a: Tensor, b: Tensor) -> Vec<f32> {
    let c = root.mul_mat(a, b).unwrap();
    eval(root, c)
}

#[test]
fn non_contiguous_operands() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(31);
    let (k, m, n) = (48usize, 10usize, 7usize);
    let av = rng.vec(k * m);
    let a = upload(&mut input, F32, &[k as i64, m as i64], &av);

    // b as a transposed view: x is [N, K]; transpose(x) is [K, N] with
    // strided dim 0.
    let xv = rng.vec(n * k);
    let x = upload(&mut input, F32, &[n as i64, k as i64], &xv);
    let bt = unsafe { Tensor::from_raw(sys::ggml_transpose(root.ggml_context(), x.as_ptr())) }.unwrap();
    assert!(!bt.is_contiguous());
    assert_eq!(bt.ne(), [k as i64, n as i64, 1, 1]);
    let mut bvals = vec![0f32; k * n];
    for j in 0..n {
        for kk in 0..k {
            bvals[j * k + kk] = xv[kk * n + j];
        }
    }
    let c = root.mul_mat(a, bt).unwrap();
    let got = eval(&mut root, c);
    assert_close("transposed b", &got, &naive_mm(&av, [k, m, 1, 1], &bvals, [k, n, 1, 1]), 1e-4, 1e-5);

    // b as a permuted view with dense rows: y is [K, 3, N]; permute(0,2,1,3)
    // gives [K, N, 3].
    let (mut root, mut input) = contexts(&be);
    let a = upload(&mut input, F32, &[k as i64, m as i64], &av);
    let yv = rng.vec(k * 3 * n);
    let y = upload(&mut input, F32, &[k as i64, 3, n as i64], &yv);
    let bp = unsafe { Tensor::from_raw(sys::ggml_permute(root.ggml_context(), y.as_ptr(), 0, 2, 1, 3)) }.unwrap();
    assert!(!bp.is_contiguous());
    let mut pvals = vec![0f32; k * n * 3];
    for h in 0..3 {
        for j in 0..n {
            for kk in 0..k {
                pvals[idx([k, n, 3, 1], kk, j, h, 0)] = yv[idx([k, 3, n, 1], kk, h, j, 0)];
            }
        }
    }
    let c = root.mul_mat(a, bp).unwrap();
    assert_eq!(c.ne(), [m as i64, n as i64, 3, 1]);
    let got = eval(&mut root, c);
    assert_close("permuted b", &got, &naive_mm(&av, [k, m, 1, 1], &pvals, [k, n, 3, 1]), 1e-4, 1e-5);

    // a as a transposed view (f32 a is copied first).
    let (mut root, mut input) = contexts(&be);
    let zv = rng.vec(m * k);
    let z = upload(&mut input, F32, &[m as i64, k as i64], &zv);
    let at = unsafe { Tensor::from_raw(sys::ggml_transpose(root.ggml_context(), z.as_ptr())) }.unwrap();
    let mut avals = vec![0f32; k * m];
    for i in 0..m {
        for kk in 0..k {
            avals[i * k + kk] = zv[kk * m + i];
        }
    }
    let bv = rng.vec(k * n);
    let b = upload(&mut input, F32, &[k as i64, n as i64], &bv);
    let c = root.mul_mat(at, b).unwrap();
    let got = eval(&mut root, c);
    assert_close("transposed a", &got, &naive_mm(&avals, [k, m, 1, 1], &bv, [k, n, 1, 1]), 1e-4, 1e-5);
}

/// Quantized `a` (`ty`) of `[k, m]` times f32 `b` of `[k, n, batch]`.
fn check_quantized(ty: u32, seed: u64, k: usize, m: usize, n: usize, batch: usize) {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let mut rng = Rng::new(seed);
    let av = rng.vec(k * m);
    let bv = rng.vec(k * n * batch);
    let qa = quantize(ty, &av, k);
    let a = input.from_bytes(ty, &[k as i64, m as i64], &qa).unwrap();
    let b = upload(&mut input, F32, &[k as i64, n as i64, batch as i64], &bv);
    let a_deq = data::read_f32(a, "deq").unwrap();
    assert_eq!(a_deq, dequantize(ty, &qa, k * m));
    assert!(max_abs_diff(&a_deq, &av) > 0.0, "quantization should be lossy");
    let c = root.mul_mat(a, b).unwrap();
    assert_eq!(c.ne(), [m as i64, n as i64, batch as i64, 1]);
    let got = eval(&mut root, c);
    let what = format!("{} [{k},{m}] x f32 [{k},{n},{batch}]", ggml_rs::ml::tensor::type_name(ty));
    // Strict: what ggml multiplies (b converted to a's dot-product type).
    let b_q = as_vec_dot_operand(ty, &bv, k);
    let strict = naive_mm(&a_deq, [k, m, 1, 1], &b_q, [k, n, batch, 1]);
    let loose = naive_mm(&a_deq, [k, m, 1, 1], &bv, [k, n, batch, 1]);
    eprintln!("{what}: max |err| strict {:.2e}, loose {:.2e}", max_abs_diff(&got, &strict), max_abs_diff(&got, &loose));
    assert_close(&format!("{what} vs dequant(a)·convert(b)"), &got, &strict, 1e-3, 0.0);
    // Loose: the f32 product of the dequantized a with b itself.
    assert_close(&format!("{what} vs dequant(a)·b"), &got, &loose, 0.15, 0.0);
    // And the result is not trivially close to zero.
    assert!(loose.iter().map(|x| x.abs()).fold(0.0, f32::max) > 1.0);
}

#[test]
fn quantized_q8_0_and_q4_0() {
    check_quantized(Q8_0, 41, 128, 16, 5, 3);
    check_quantized(Q4_0, 42, 128, 16, 5, 3);
    check_quantized(Q8_0, 43, 256, 33, 1, 1); // matrix x vector
    check_quantized(Q4_0, 44, 64, 8, 40, 1);
}

#[test]
fn quantized_k_quants() {
    // K-quants (b converted to Q8_K); with 8+ rows of b ggml-cpu takes its
    // tiled K-quant kernel.
    check_quantized(sys::GGML_TYPE_Q4_K, 45, 256, 24, 12, 2);
    check_quantized(sys::GGML_TYPE_Q6_K, 46, 512, 16, 9, 1);
    check_quantized(sys::GGML_TYPE_Q4_K, 47, 256, 8, 3, 1);
}

/// Q8_0 a=[256,64] times f32 b=[256,32]: the shape that reaches ggml's AMX
/// int8 tile kernel (N=32 rows, K a multiple of 32, M a multiple of 32).
/// GCC 12 miscompiled its tile configuration (SIGILL at the first tile load);
/// the build patches it (scripts/patches/01-amx-static-tile-config.sh).
/// Runs through the default buffer, and through the AMX buffer type when
/// this CPU and build have it; both must give correct numbers.
#[test]
fn q8_0_amx_shape_batch_32() {
    let (k, m, n) = (256usize, 64usize, 32usize);
    let mut rng = Rng::new(51);
    let av = rng.vec(k * m);
    let bv = rng.vec(k * n);
    let qa = quantize(Q8_0, &av, k);
    let a_deq = dequantize(Q8_0, &qa, k * m);
    let b_q = as_vec_dot_operand(Q8_0, &bv, k);
    assert_eq!(b_q, dequantize(Q8_0, &quantize(Q8_0, &bv, k), bv.len()), "ggml-cpu's and the reference Q8_0 quantizers agree");
    let strict = naive_mm(&a_deq, [k, m, 1, 1], &b_q, [k, n, 1, 1]);
    let loose = naive_mm(&a_deq, [k, m, 1, 1], &bv, [k, n, 1, 1]);

    let be = backend();
    // Default buffer.
    {
        let (mut root, mut input) = contexts(&be);
        let a = input.from_bytes(Q8_0, &[k as i64, m as i64], &qa).unwrap();
        let b = upload(&mut input, F32, &[k as i64, n as i64], &bv);
        let got = mm_eval(&mut root, a, b);
        assert_close("q8_0 [256,64] x [256,32] (default buffer)", &got, &strict, 1e-3, 0.0);
        assert_close("q8_0 [256,64] x [256,32] vs f32 b", &got, &loose, 0.15, 0.0);
    }

    let has_amx = unsafe { sys::ggml_cpu_has_amx_int8() } != 0;
    let Some(amx) = extra_buffer_type("AMX") else {
        eprintln!("note: no AMX buffer type (ggml_cpu_has_amx_int8 = {has_amx}); the AMX kernel was not exercised");
        assert!(!has_amx, "ggml reports AMX int8 but exposes no AMX buffer type");
        return;
    };
    // Weights in the AMX buffer type: ggml's CPU backend runs this product
    // with the AMX tile kernel.
    let (mut root, mut input) = contexts(&be);
    let a = root.new_tensor("amx weight", Q8_0, [k as i64, m as i64, 1, 1]).unwrap();
    let buf = unsafe {
        let size = sys::ggml_backend_buft_get_alloc_size(amx, a.as_ptr());
        let buf = sys::ggml_backend_buft_alloc_buffer(amx, size);
        assert!(!buf.is_null());
        assert_eq!(sys::ggml_backend_tensor_alloc(buf, a.as_ptr(), sys::ggml_backend_buffer_get_base(buf)), sys::GGML_STATUS_SUCCESS);
        sys::ggml_backend_tensor_set(a.as_ptr(), qa.as_ptr().cast(), 0, qa.len());
        buf
    };
    let b = upload(&mut input, F32, &[k as i64, n as i64], &bv);
    let c = root.mul_mat(a, b).unwrap();
    let got = eval(&mut root, c);
    // The AMX kernel quantizes b with its own routine: allow a ±1 rounding
    // difference in a few of b's values (each moves a term by <= 0.008).
    assert_close("q8_0 [256,64] x [256,32] (AMX buffer)", &got, &strict, 3e-2, 0.0);
    assert_close("q8_0 AMX vs f32 b", &got, &loose, 0.15, 0.0);
    drop(root);
    drop(input);
    unsafe { sys::ggml_backend_buffer_free(buf) };
}

#[test]
fn bad_input_is_an_error_and_context_stays_usable() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let f = |input: &mut Context, shape: &[i64]| {
        let n: i64 = shape.iter().product();
        upload(input, F32, shape, &vec![0.5; n as usize])
    };
    let a = f(&mut input, &[8, 4]);
    let b_k = f(&mut input, &[6, 4]);
    let b_batch = f(&mut input, &[8, 3, 3]);
    let a_batch = f(&mut input, &[8, 4, 2]);

    let e = root.mul_mat(a, b_k).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Shape);
    assert!(e.message.starts_with("mul_mat: dim 0 (K) differs"), "{}", e.message);
    assert!(e.message.contains("f32[8,4]") && e.message.contains("f32[6,4]"), "{}", e.message);

    let e = root.mul_mat(a_batch, b_batch).unwrap_err();
    assert!(e.message.starts_with("mul_mat: cannot broadcast"), "{}", e.message);

    // f16 b with an f32 a: the CPU has no such kernel.
    let b16 = upload(&mut input, F16, &[8, 2], &[0.0; 16]);
    let e = root.mul_mat(a, b16).unwrap_err();
    assert_eq!(e.kind, ErrorKind::DType);
    assert!(e.message.starts_with("mul_mat: b f16[8,2] cannot multiply a f32[8,4]"), "{}", e.message);

    // Quantized b.
    let q = input.from_bytes(Q8_0, &[32, 2], &quantize(Q8_0, &[0.25; 64], 32)).unwrap();
    let a32 = f(&mut input, &[32, 3]);
    let e = root.mul_mat(a32, q).unwrap_err();
    assert!(e.message.starts_with("mul_mat: b must be f32, f16 or bf16"), "{}", e.message);

    // Quantized a, transposed: refused (cannot be copied to dense rows).
    let q2 = input.from_bytes(Q8_0, &[64, 2], &quantize(Q8_0, &[0.25; 128], 64)).unwrap();
    let qt = unsafe { Tensor::from_raw(sys::ggml_transpose(root.ggml_context(), q2.as_ptr())) }.unwrap();
    let bq = f(&mut input, &[2, 5]);
    let e = root.mul_mat(qt, bq).unwrap_err();
    assert!(e.message.starts_with("mul_mat: a quantized a must have dense rows"), "{}", e.message);
    // A quantized view whose K is not a whole number of blocks.
    let qt1 = unsafe { Tensor::from_raw(sys::ggml_transpose(root.ggml_context(), q.as_ptr())) }.unwrap();
    let e = root.mul_mat(qt1, bq).unwrap_err();
    assert!(e.message.starts_with("mul_mat: the shared dimension K=2 must be a multiple of the q8_0 block size 32"), "{}", e.message);

    // An i32 a has no CPU matrix product.
    let ai = upload_i32(&mut input, &[8, 2], &[1; 16]);
    let e = root.mul_mat_full_prec(ai, a).unwrap_err();
    assert!(e.message.starts_with("mul_mat_full_prec: the CPU has no matrix product for a i32[8,2]"), "{}", e.message);

    // Still usable.
    let c = root.mul_mat(a, f(&mut input, &[8, 2])).unwrap();
    assert_eq!(eval(&mut root, c), vec![2.0; 8]);
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
extern "C" {
    fn ggml_rs_backend_new(params: *const std::ffi::c_void, out: *mut *mut Opaque, err: *mut CError) -> i32;
    fn ggml_rs_backend_free(b: *mut Opaque);
    fn ggml_rs_ctx_new(b: *const Opaque, size: usize, err: *mut CError) -> *mut Opaque;
    fn ggml_rs_ctx_input(c: *mut Opaque) -> *mut Opaque;
    fn ggml_rs_ctx_free(c: *mut Opaque);
    fn ggml_rs_ctx_from_data(c: *mut Opaque, ty: i32, ne: *const i64, n: usize, data: *const u8, len: usize, err: *mut CError) -> *mut Opaque;
    fn ggml_rs_ctx_compute(c: *mut Opaque, outs: *const *mut Opaque, n: usize, err: *mut CError) -> i32;
    fn ggml_rs_tensor_get_f32(t: *mut Opaque, dst: *mut f32, n: usize, err: *mut CError) -> i32;
    fn ggml_rs_mul_mat(c: *mut Opaque, a: *mut Opaque, b: *mut Opaque, err: *mut CError) -> *mut Opaque;
    fn ggml_rs_mul_mat_full_prec(c: *mut Opaque, a: *mut Opaque, b: *mut Opaque, err: *mut CError) -> *mut Opaque;
}

#[test]
fn c_abi_mul_mat() {
    unsafe {
        let mut err = CError::new();
        let mut be = std::ptr::null_mut();
        assert_eq!(ggml_rs_backend_new(std::ptr::null(), &mut be, &mut err), 0);
        let root = ggml_rs_ctx_new(be, 256, &mut err);
        let input = ggml_rs_ctx_input(root);
        let up = |ne: &[i64], vals: &[f32], err: &mut CError| {
            let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            ggml_rs_ctx_from_data(input, 0, ne.as_ptr(), ne.len(), bytes.as_ptr(), bytes.len(), err)
        };
        let a = up(&[3, 2], &[1., 2., 3., 4., 5., 6.], &mut err);
        let b = up(&[3, 1], &[1., 0., -1.], &mut err);
        assert!(!a.is_null() && !b.is_null());
        for f in [ggml_rs_mul_mat, ggml_rs_mul_mat_full_prec] {
            let c = f(root, a, b, &mut err);
            assert!(!c.is_null(), "{}", err.text());
            assert_eq!(ggml_rs_ctx_compute(root, &c, 1, &mut err), 0, "{}", err.text());
            let mut out = [0f32; 2];
            assert_eq!(ggml_rs_tensor_get_f32(c, out.as_mut_ptr(), 2, &mut err), 0);
            assert_eq!(out, [-2., -2.]);
        }
        // Errors: NULL argument, bad shapes (recorded on the context).
        let c = ggml_rs_mul_mat(root, a, std::ptr::null_mut(), &mut err);
        assert!(c.is_null());
        assert_eq!(err.status, 1);
        assert_eq!(err.text(), "mul_mat: b is NULL");
        let c = ggml_rs_mul_mat_full_prec(root, a, up(&[2], &[0., 0.], &mut CError::new()), &mut err);
        assert!(c.is_null());
        assert_eq!(err.status, 2);
        assert!(err.text().starts_with("mul_mat_full_prec: dim 0 (K) differs"), "{}", err.text());
        let c = ggml_rs_mul_mat(std::ptr::null_mut(), a, b, &mut err);
        assert!(c.is_null());
        assert_eq!(err.text(), "mul_mat: context is NULL");
        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
