//! Quantized data: every tensor type ggml knows through from_bytes (and
//! ggml_rs_ctx_from_data), dequantizing casts and copies, and mul_mat with
//! quantized weights of every type the CPU can multiply.
//!
//! Data are uniform random values in [-1, 1), quantized with ggml's own
//! quantizers (`ggml_quantize_chunk`; Q8_1 and Q8_K, which it does not
//! handle, with the CPU's row quantizers). Not quantized, with the reason
//! printed: IQ2_XXS, IQ2_XS and IQ1_S (`ggml_quantize_requires_imatrix`:
//! they need an importance matrix) and IQ2_S and IQ1_M (their quantizers
//! first build search tables: 4 to 9 s here, past this file's time
//! budget). Those five are still covered with synthetic blocks (random
//! bits, a sane f16 scale): from_bytes, dequantization and the strict
//! mul_mat check below.
//!
//! mul_mat tolerances:
//! * strict, against dequant(a)·convert(b), where convert(b) is b quantized
//!   to the type's CPU dot-product operand (Q8_0, Q8_1 or Q8_K) by the same
//!   CPU quantizer and decoded: atol 1e-3 + rtol 1e-4 (f32 summation order
//!   only; observed below 5e-6), atol 1.5e-2 with a Q8_1 operand (Q4_1,
//!   Q5_1: ggml adds each block's minimum times b's block sum rounded to
//!   f16; observed below 1e-2);
//! * against the exact f32 product a·b (K = 512, 288 outputs): the
//!   relative RMS error ‖got − a·b‖ / ‖a·b‖ must stay below the per-type
//!   bound of [`f32_product_bound`], about twice what was observed, which is
//!   a's quantization error: Q8_0 0.005 (bound 0.012), 5/6-bit ≤ 0.035
//!   (0.08), 4-bit ≤ 0.07 (0.15), MXFP4/NVFP4 ≤ 0.15 (0.3), 3-bit ≤ 0.18
//!   (0.35), Q2_K 0.25 (0.5), and ~0.5 for the 1- and 2-bit block types
//!   Q1_0, Q2_0, TQ1_0, TQ2_0 (1.0: uniform data suit them badly). For the
//!   synthetic types a is its own dequantized value, so only b's conversion
//!   counts: bound 0.05.
mod common;
use common::*;

use ggml_rs::ml::tensor::{is_valid_type, type_name};
use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const BF16: u32 = sys::GGML_TYPE_BF16;
const Q8_1: u32 = sys::GGML_TYPE_Q8_1;
const Q8_K: u32 = sys::GGML_TYPE_Q8_K;

fn all_types() -> Vec<u32> {
    (0..sys::GGML_TYPE_COUNT).filter(|&t| is_valid_type(t)).collect()
}

fn is_quantized(t: u32) -> bool {
    unsafe { sys::ggml_is_quantized(t) }
}

fn block(t: u32) -> usize {
    unsafe { sys::ggml_blck_size(t) as usize }
}

fn row_size(t: u32, n: usize) -> usize {
    unsafe { sys::ggml_row_size(t, n as i64) }
}

fn to_float(t: u32) -> Option<unsafe extern "C" fn(*const std::ffi::c_void, *mut f32, i64)> {
    unsafe { (*sys::ggml_get_type_traits(t)).to_float }
}

fn cpu_from_float(t: u32) -> Option<unsafe extern "C" fn(*const f32, *mut std::ffi::c_void, i64)> {
    unsafe { sys::ggml_get_type_traits_cpu(t).as_ref() }.and_then(|c| c.from_float)
}

/// Types whose blocks are made directly instead of by ggml's quantizer
/// (see the file comment).
fn synthetic(t: u32) -> bool {
    matches!(t, sys::GGML_TYPE_IQ2_XXS | sys::GGML_TYPE_IQ2_XS | sys::GGML_TYPE_IQ1_S | sys::GGML_TYPE_IQ1_M | sys::GGML_TYPE_IQ2_S)
}

fn why_synthetic(t: u32) -> &'static str {
    if unsafe { sys::ggml_quantize_requires_imatrix(t) } {
        "ggml's quantizer needs an importance matrix"
    } else {
        "ggml's quantizer builds search tables for seconds"
    }
}

/// Random blocks of a synthetic type with an f16 scale in [0.005, 0.01):
/// every bit pattern is a valid grid index or sign. The scale is the
/// leading f16 of the block, except in IQ1_M, which spreads it over the top
/// nibbles of the four u16 words that end the block.
fn synthetic_blocks(t: u32, bytes: usize, rng: &mut Rng) -> Vec<u8> {
    let bs = unsafe { sys::ggml_type_size(t) };
    let mut out: Vec<u8> = (0..bytes).map(|_| rng.next_u64() as u8).collect();
    for b in out.chunks_mut(bs) {
        let d = f16_bits(0.0075 + 0.0025 * rng.f32());
        if t == sys::GGML_TYPE_IQ1_M {
            let sc = &mut b[bs - 8..];
            for i in 0..4 {
                let w = u16::from_le_bytes([sc[2 * i], sc[2 * i + 1]]);
                let w = (w & 0x0fff) | (((d >> (4 * i)) & 0xf) << 12);
                sc[2 * i..2 * i + 2].copy_from_slice(&w.to_le_bytes());
            }
        } else {
            b[..2].copy_from_slice(&d.to_le_bytes());
        }
    }
    out
}

/// Bytes of `vals` (rows of `n`) in type `t`: ggml's quantizer, the CPU
/// row quantizer for Q8_1/Q8_K, synthetic blocks for the [`synthetic`]
/// types (unrelated to `vals`), random bytes for the integer types and F64.
fn encode(t: u32, vals: &[f32], n: usize, rng: &mut Rng) -> Vec<u8> {
    let rows = vals.len() / n;
    let mut out = vec![0u8; row_size(t, n) * rows];
    if synthetic(t) {
        out = synthetic_blocks(t, out.len(), rng);
        let v = decode(t, &out, vals.len());
        assert!(v.iter().all(|x| x.is_finite() && x.abs() < 10.0), "{}: synthetic blocks decode to sane values", type_name(t));
        assert!(v.iter().any(|&x| x != 0.0));
    } else if t == Q8_1 || t == Q8_K {
        let f = cpu_from_float(t).unwrap();
        for (r, chunk) in vals.chunks(n).enumerate() {
            unsafe { f(chunk.as_ptr(), out[r * row_size(t, n)..].as_mut_ptr().cast(), n as i64) };
        }
    } else if is_quantized(t) || matches!(t, F32 | F16 | BF16) {
        let size = unsafe { sys::ggml_quantize_chunk(t, vals.as_ptr(), out.as_mut_ptr().cast(), 0, rows as i64, n as i64, std::ptr::null()) };
        assert_eq!(size, out.len(), "{}: quantized size", type_name(t));
    } else {
        for b in out.iter_mut() {
            *b = rng.next_u64() as u8;
        }
    }
    out
}

fn decode(t: u32, bytes: &[u8], n: usize) -> Vec<f32> {
    let f = to_float(t).unwrap_or_else(|| panic!("{} has no to_float", type_name(t)));
    let mut out = vec![0f32; n];
    unsafe { f(bytes.as_ptr().cast(), out.as_mut_ptr(), n as i64) };
    out
}

/// Decodes Q8_0/Q8_1/Q8_K blocks (ggml has no to_float for the last two):
/// Q8_1 = {f16 d, f16 s, i8 q[32]}, Q8_K = {f32 d, i8 q[256], i16 bsums[16]};
/// each value is d·q.
fn decode_q8(t: u32, bytes: &[u8], n: usize) -> Vec<f32> {
    match t {
        Q8_1 => {
            assert_eq!(unsafe { sys::ggml_type_size(t) }, 36, "Q8_1 block layout");
            bytes
                .chunks(36)
                .flat_map(|b| {
                    let d = unsafe { sys::ggml_fp16_to_fp32(u16::from_le_bytes([b[0], b[1]])) };
                    b[4..36].iter().map(move |&q| d * (q as i8) as f32)
                })
                .collect()
        }
        Q8_K => {
            assert_eq!(unsafe { sys::ggml_type_size(t) }, 4 + 256 + 32, "Q8_K block layout");
            bytes
                .chunks(292)
                .flat_map(|b| {
                    let d = f32::from_le_bytes(b[..4].try_into().unwrap());
                    b[4..260].iter().map(move |&q| d * (q as i8) as f32)
                })
                .collect()
        }
        _ => decode(t, bytes, n),
    }
}

fn shape_err(r: ggml_rs::ml::Result<Tensor>, part: &str) {
    let e = r.expect_err(part);
    assert_eq!(e.kind, ErrorKind::Shape, "{}", e.message);
    assert!(e.message.starts_with("from_bytes: ") && e.message.contains(part), "want '…{part}…', got '{}'", e.message);
}

#[test]
fn from_bytes_takes_every_type_with_checked_sizes() {
    let be = backend();
    let (_root, mut input) = contexts(&be);
    let mut rng = Rng::new(1);
    let types = all_types();
    assert_eq!(types.len(), 35, "ggml knows {} types (43 ids, 8 removed)", types.len());
    for &t in &types {
        let name = type_name(t);
        let bs = block(t);
        let (n, rows) = (2 * bs.max(16), 3usize);
        let vals = rng.vec(n * rows);
        let bytes = encode(t, &vals, n, &mut rng);
        let shape = [n as i64, rows as i64];
        let x = input.from_bytes(t, &shape, &bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((x.dtype(), x.ne()), (t, [n as i64, rows as i64, 1, 1]), "{name}");
        assert_eq!(data::read(x, "t").unwrap(), bytes, "{name}: bytes read back");
        // Values: what ggml's own conversion gives (f32 and i32 directly).
        let got = data::read_f32(x, "t");
        match t {
            F32 => assert_eq!(got.unwrap(), vals),
            I32 => assert_eq!(got.unwrap().len(), n * rows),
            _ if to_float(t).is_some() => {
                let (g, w) = (got.unwrap(), decode(t, &bytes, n * rows));
                assert!(g.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits()), "{name}: values");
                if is_quantized(t) && !synthetic(t) {
                    let err = g.iter().zip(&vals).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
                    assert!(err < 1.5, "{name}: dequantized values far from the originals ({err})");
                }
            }
            _ => assert!(got.unwrap_err().message.contains("cannot convert"), "{name}"),
        }
        // Sizes: one byte short or long, one row short.
        shape_err(input.from_bytes(t, &shape, &bytes[1..]), "data size does not match tensor size");
        let mut long = bytes.clone();
        long.push(0);
        shape_err(input.from_bytes(t, &shape, &long), &format!("{} bytes for {name}[{n}, 3] which needs {}", long.len(), bytes.len()));
        shape_err(input.from_bytes(t, &[n as i64, 4], &bytes), "data size does not match");
        // Rows that are not whole blocks.
        if bs > 1 {
            let e = input.from_bytes(t, &[bs as i64 + 1, 1], &bytes[..row_size(t, bs)]).unwrap_err();
            assert!(e.message.contains(&format!("must be a multiple of the {name} block size {bs}")), "{}", e.message);
            let e = input.empty(t, &[bs as i64 / 2]).unwrap_err();
            assert!(e.message.starts_with("empty: dim 0"), "{}", e.message);
        }
    }
    // Ids ggml removed or never had.
    for t in [4u32, 5, 31, 32, 33, 36, 37, 38, sys::GGML_TYPE_COUNT, 1000, u32::MAX] {
        let e = input.from_bytes(t, &[32], &[0u8; 64]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::DType);
        assert!(e.message.starts_with(&format!("from_bytes: unknown tensor type {t}")), "{}", e.message);
    }
}

#[test]
fn cast_and_cpy_dequantize_every_type() {
    let be = backend();
    let mut rng = Rng::new(2);
    let mut covered = Vec::new();
    for t in all_types().into_iter().filter(|&t| is_quantized(t)) {
        let name = type_name(t);
        let (mut root, mut input) = contexts(&be);
        let n = 2 * block(t).max(32);
        let rows = 3;
        let vals = rng.vec(n * rows);
        let bytes = encode(t, &vals, n, &mut rng);
        let q = input.from_bytes(t, &[n as i64, rows as i64], &bytes).unwrap();
        if to_float(t).is_none() {
            // Q8_1 and Q8_K exist only as dot-product operands.
            for r in [root.cast(q, F32), root.cpy(q, input.zeros(F32, &[n as i64, rows as i64]).unwrap())] {
                let e = r.unwrap_err();
                assert_eq!(e.kind, ErrorKind::Unsupported);
                assert!(e.message.contains(&format!("cannot dequantize {name}[{n},3]")), "{}", e.message);
            }
            continue;
        }
        let want = decode(t, &bytes, n * rows);
        // cast: a new f32 tensor of the same shape.
        let c = root.cast(q, F32).unwrap();
        assert_eq!((c.dtype(), c.ne()), (F32, q.ne()));
        // cpy into a contiguous f32 tensor of another shape (rows cut through blocks).
        let flat = input.zeros(F32, &[(n / 4) as i64, 4 * rows as i64]).unwrap();
        let f = root.cpy(q, flat).unwrap();
        // cpy into a strided f32 view with whole blocks per row: every
        // other row of a [n, 2*rows] tensor.
        let wide = input.zeros(F32, &[n as i64, 2 * rows as i64]).unwrap();
        let strided = root.slice(wide, 1, 0, 2 * rows as i64, 2).unwrap();
        assert!(!strided.is_contiguous());
        let s = root.cpy(q, strided).unwrap();
        root.compute(&[c, f, s]).unwrap();
        assert_eq!(data::read_f32(c, "t").unwrap(), want, "{name}: cast to f32");
        assert_eq!(data::read_f32(f, "t").unwrap(), want, "{name}: cpy into [n/4, 4 rows]");
        let w = data::read_f32(wide, "t").unwrap();
        for r in 0..rows {
            assert_eq!(&w[2 * r * n..(2 * r + 1) * n], &want[r * n..(r + 1) * n], "{name}: strided cpy, row {r}");
            assert!(w[(2 * r + 1) * n..(2 * r + 2) * n].iter().all(|&v| v == 0.0), "{name}: rows in between untouched");
        }
        // ggml's CPU copy dequantizes to f32 only: f16/bf16 are clear errors.
        for target in [F16, BF16] {
            let e = root.cast(q, target).unwrap_err();
            assert_eq!(e.kind, ErrorKind::DType);
            assert!(e.message.starts_with(&format!("cast: cannot convert {name}[{n},3] to {}", type_name(target))), "{}", e.message);
            assert!(e.message.contains("cast to f32 first"), "{}", e.message);
            let e = root.cpy(q, input.zeros(target, &[n as i64, rows as i64]).unwrap()).unwrap_err();
            assert!(e.message.starts_with(&format!("cpy: cannot convert {name}[{n},3] to {}", type_name(target))), "{}", e.message);
        }
        // Dequantizing into a strided destination whose rows split blocks.
        if block(t) > 1 {
            let quarter = (n / 4) as i64;
            let big = input.zeros(F32, &[quarter, 8 * rows as i64]).unwrap();
            let sv = root.slice(big, 1, 0, 8 * rows as i64, 2).unwrap();
            assert_eq!(sv.ne(), [quarter, 4 * rows as i64, 1, 1]);
            let e = root.cpy(q, sv).unwrap_err();
            assert!(e.message.contains("needs a contiguous destination or rows of whole blocks"), "{name}: {}", e.message);
        }
        // The context still works: cast again through f32 to f16.
        let f32q = root.cast(q, F32).unwrap();
        let h = root.cast(f32q, F16).unwrap();
        let got = eval(&mut root, h);
        assert!(got.iter().zip(&want).all(|(g, w)| *g == f16_round(*w)), "{name}: f32 then f16");
        covered.push(name);
    }
    eprintln!("dequantized by cast and cpy: {}", covered.join(" "));
    assert!(covered.len() >= 25, "{covered:?}");
}

/// Naive [M, N·batch] product of a = [K, M] and b = [K, N·batch] in f64.
fn naive(a: &[f32], b: &[f32], k: usize) -> Vec<f32> {
    let (m, nb) = (a.len() / k, b.len() / k);
    let mut out = vec![0f32; m * nb];
    for j in 0..nb {
        for i in 0..m {
            out[j * m + i] = (0..k).map(|kk| a[i * k + kk] as f64 * b[j * k + kk] as f64).sum::<f64>() as f32;
        }
    }
    out
}

/// Bound on ‖got − a·b‖ / ‖a·b‖ for uniform data and K = 512, by type
/// (about twice the observed error of the type's quantization).
fn f32_product_bound(t: u32) -> f64 {
    if synthetic(t) {
        return 0.05;
    }
    match t {
        sys::GGML_TYPE_Q8_0 => 0.012,
        sys::GGML_TYPE_Q5_0 | sys::GGML_TYPE_Q5_1 | sys::GGML_TYPE_Q5_K | sys::GGML_TYPE_Q6_K => 0.08,
        sys::GGML_TYPE_Q4_0 | sys::GGML_TYPE_Q4_1 | sys::GGML_TYPE_Q4_K | sys::GGML_TYPE_IQ4_NL | sys::GGML_TYPE_IQ4_XS => 0.15,
        sys::GGML_TYPE_MXFP4 | sys::GGML_TYPE_NVFP4 => 0.3,
        sys::GGML_TYPE_Q3_K | sys::GGML_TYPE_IQ3_XXS | sys::GGML_TYPE_IQ3_S => 0.35,
        sys::GGML_TYPE_Q2_K => 0.5,
        _ => 1.0, // Q1_0, Q2_0, TQ1_0, TQ2_0
    }
}

fn rel_rms(got: &[f32], want: &[f32]) -> f64 {
    let num: f64 = got.iter().zip(want).map(|(g, w)| ((g - w) as f64).powi(2)).sum();
    let den: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
    (num / den).sqrt()
}

/// b converted as ggml-cpu converts an f32 right operand for a `t` matrix
/// (its CPU quantizer into the dot-product type), then decoded.
fn as_operand(t: u32, b: &[f32], k: usize) -> Vec<f32> {
    let vdt = unsafe { &*sys::ggml_get_type_traits_cpu(t) }.vec_dot_type;
    let from = cpu_from_float(vdt).unwrap();
    let row = row_size(vdt, k);
    let mut q = vec![0u8; row * (b.len() / k)];
    for (r, chunk) in b.chunks(k).enumerate() {
        unsafe { from(chunk.as_ptr(), q[r * row..].as_mut_ptr().cast(), k as i64) };
    }
    decode_q8(vdt, &q, b.len())
}

/// Multiplies a quantized `a` [k, m] by an f32 `b` [k, n, batch]; checks
/// the strict bound and returns the relative RMS error against a·b (a as
/// dequantized for the synthetic types).
#[allow(clippy::too_many_arguments)]
fn mul_mat_case(root: &mut Context, input: &mut Context, rng: &mut Rng, t: u32, k: usize, m: usize, n: usize, batch: usize) -> f64 {
    let name = type_name(t);
    let (av, bv) = (rng.vec(k * m), rng.vec(k * n * batch));
    let qa = encode(t, &av, k, rng);
    let a = input.from_bytes(t, &[k as i64, m as i64], &qa).unwrap();
    let b = upload(input, F32, &[k as i64, n as i64, batch as i64], &bv);
    let c = root.mul_mat(a, b).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(c.ne(), [m as i64, n as i64, batch as i64, 1]);
    let got = eval(root, c);
    let a_deq = decode(t, &qa, k * m);
    let strict = naive(&a_deq, &as_operand(t, &bv, k), k);
    let what = format!("{name} [{k},{m}] x f32 [{k},{n},{batch}]");
    // With a Q8_1 operand (Q4_1, Q5_1) ggml adds each block's minimum times
    // b's block sum rounded to f16, which the decoded b does not round.
    let vdt = unsafe { &*sys::ggml_get_type_traits_cpu(t) }.vec_dot_type;
    let atol = if vdt == Q8_1 { 1.5e-2 } else { 1e-3 };
    assert_close(&format!("{what} vs dequant(a)·convert(b)"), &got, &strict, atol, 1e-4);
    let exact = naive(if synthetic(t) { &a_deq } else { &av }, &bv, k);
    rel_rms(&got, &exact)
}

#[test]
fn mul_mat_takes_every_cpu_quantized_type() {
    let be = backend();
    let mut rng = Rng::new(3);
    let mut report = Vec::new();
    for t in all_types().into_iter().filter(|&t| is_quantized(t)) {
        let name = type_name(t);
        let cpu = unsafe { &*sys::ggml_get_type_traits_cpu(t) };
        if cpu.vec_dot.is_none() {
            // Q8_1, Q8_K: no CPU matrix product; refused with a clear error.
            let (mut root, mut input) = contexts(&be);
            let bytes = encode(t, &rng.vec(256 * 2), 256, &mut rng);
            let a = input.from_bytes(t, &[256, 2], &bytes).unwrap();
            let b = upload(&mut input, F32, &[256, 1], &rng.vec(256));
            let e = root.mul_mat(a, b).unwrap_err();
            assert!(e.message.starts_with(&format!("mul_mat: the CPU has no matrix product for a {name}[256,2]")), "{}", e.message);
            eprintln!("{name:8} no CPU matrix product (refused)");
            continue;
        }
        if synthetic(t) {
            eprintln!("{name:8} not quantized ({}): synthetic blocks", why_synthetic(t));
        }
        let (mut root, mut input) = contexts(&be);
        // Several rows of b and a batch (ggml's tiled kernels), then a vector.
        let err = mul_mat_case(&mut root, &mut input, &mut rng, t, 512, 16, 9, 2);
        mul_mat_case(&mut root, &mut input, &mut rng, t, 512, 8, 1, 1);
        let bound = f32_product_bound(t);
        eprintln!("{name:8} (b as {:4}) relative RMS error against the f32 product {err:.4} (bound {bound})", type_name(cpu.vec_dot_type));
        assert!(err < bound, "{name}: relative RMS error {err:.4} against the f32 product exceeds {bound}");
        report.push(name);
    }
    assert!(report.len() >= 25, "{report:?}");
}

// ---- the C function -----------------------------------------------------

#[repr(C)]
struct CError {
    status: i32,
    message: [std::ffi::c_char; 1024],
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
    fn ggml_rs_ctx_clear_error(c: T);
    fn ggml_rs_ctx_from_data(c: T, ty: i32, ne: *const i64, n: usize, data: *const u8, len: usize, err: *mut CError) -> T;
    fn ggml_rs_tensor_get(t: T, dst: *mut u8, len: usize, err: *mut CError) -> i32;
}

#[test]
fn c_from_data_takes_every_type() {
    unsafe {
        let mut err = CError { status: 0, message: [0; 1024] };
        let text = |e: &CError| std::ffi::CStr::from_ptr(e.message.as_ptr()).to_string_lossy().into_owned();
        let mut be = std::ptr::null_mut();
        assert_eq!(ggml_rs_backend_new(std::ptr::null(), &mut be, &mut err), 0);
        let root = ggml_rs_ctx_new(be, 1024, &mut err);
        let input = ggml_rs_ctx_input(root);
        let mut rng = Rng::new(4);
        for t in all_types() {
            let n = 2 * block(t).max(16);
            let bytes = encode(t, &rng.vec(n * 2), n, &mut rng);
            let ne = [n as i64, 2];
            let x = ggml_rs_ctx_from_data(input, t as i32, ne.as_ptr(), 2, bytes.as_ptr(), bytes.len(), &mut err);
            assert!(!x.is_null(), "{}: {}", type_name(t), text(&err));
            let mut back = vec![0u8; bytes.len()];
            assert_eq!(ggml_rs_tensor_get(x, back.as_mut_ptr(), back.len(), &mut err), 0, "{}", text(&err));
            assert_eq!(back, bytes, "{}", type_name(t));
            let x = ggml_rs_ctx_from_data(input, t as i32, ne.as_ptr(), 2, bytes.as_ptr(), bytes.len() - 1, &mut err);
            assert!(x.is_null());
            assert_eq!(err.status, 2, "{}", text(&err));
            assert!(text(&err).starts_with("from_bytes: data size does not match tensor size"), "{}", text(&err));
            ggml_rs_ctx_clear_error(input);
        }
        for t in [-1i32, 4, 43, i32::MIN] {
            let x = ggml_rs_ctx_from_data(input, t, [32i64].as_ptr(), 1, [0u8; 4].as_ptr(), 4, &mut err);
            assert!(x.is_null());
            assert_eq!(err.status, 3, "{}", text(&err));
            assert!(text(&err).contains("unknown tensor type"), "{}", text(&err));
        }
        ggml_rs_ctx_free(input);
        ggml_rs_ctx_free(root);
        ggml_rs_backend_free(be);
    }
}
