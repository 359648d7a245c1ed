//! Host-side quantization (`ml::quant`, behind ggml_rs_quantize and
//! ggml_rs_convert_to_f32 and the Go package's Quantize/ConvertToF32):
//!
//! * differential, against ggml's reference quantizer called directly
//!   (`sys::ggml_quantize_chunk`) for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
//!   Q2_K..Q6_K, IQ4_NL, IQ4_XS, F16, BF16 (and against the type's
//!   `to_float` for the conversion), over rows of 32, 256, 512 and 4096
//!   elements, several rows each, with and without an importance matrix;
//! * independent: Q8_0 and Q4_0 re-implemented here from the block format
//!   (f16 scale, round to nearest) must give the same bytes; hand-built
//!   Q8_0, Q4_0, F16 and BF16 blocks decode to the values the format
//!   defines;
//! * round trip: dequantize(quantize(x)) stays within a per-type relative
//!   RMS error;
//! * bad input: each is an error, never an abort; through the C ABI too
//!   (NULL and misaligned pointers, short buffers, overflowing sizes).
//!
//! The FNV-1a hashes of `GOLDEN` pin the reference quantizer's bytes for a
//! fixed input (`golden_input`); go/ml/backend/quantization_test.go
//! checks Quantize's output through the C ABI against the same table.

use ggml_rs::ml::quant;
use ggml_rs::ml::ErrorKind;
use ggml_rs::sys;

/// xorshift64* in [-1, 1) with a few larger outliers; Go's test has the
/// same generator.
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
            let v = 2.0 * r - 1.0;
            if i % 97 == 0 { v * 8.0 } else { v }
        })
        .collect()
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x0100_0000_01b3))
}

const TYPES: &[(u32, &str)] = &[
    (sys::GGML_TYPE_Q4_0, "q4_0"),
    (sys::GGML_TYPE_Q4_1, "q4_1"),
    (sys::GGML_TYPE_Q5_0, "q5_0"),
    (sys::GGML_TYPE_Q5_1, "q5_1"),
    (sys::GGML_TYPE_Q8_0, "q8_0"),
    (sys::GGML_TYPE_Q2_K, "q2_K"),
    (sys::GGML_TYPE_Q3_K, "q3_K"),
    (sys::GGML_TYPE_Q4_K, "q4_K"),
    (sys::GGML_TYPE_Q5_K, "q5_K"),
    (sys::GGML_TYPE_Q6_K, "q6_K"),
    (sys::GGML_TYPE_IQ4_NL, "iq4_nl"),
    (sys::GGML_TYPE_IQ4_XS, "iq4_xs"),
    (sys::GGML_TYPE_F16, "f16"),
    (sys::GGML_TYPE_BF16, "bf16"),
];

fn block(ty: u32) -> u64 {
    quant::type_layout(ty).unwrap().0
}

/// ggml_quantize_chunk called directly, into an 8-aligned buffer.
fn reference(ty: u32, x: &[f32], n_per_row: usize, imatrix: Option<&[f32]>) -> Vec<u8> {
    let nrows = x.len() / n_per_row;
    let size = unsafe { sys::ggml_row_size(ty, n_per_row as i64) } * nrows;
    let mut buf = vec![0u64; size.div_ceil(8)];
    let n = unsafe {
        sys::ggml_quantize_chunk(
            ty,
            x.as_ptr(),
            buf.as_mut_ptr().cast(),
            0,
            nrows as i64,
            n_per_row as i64,
            imatrix.map_or(std::ptr::null(), |w| w.as_ptr()),
        )
    };
    assert_eq!(n, size);
    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), size) }.to_vec()
}

fn ours(ty: u32, x: &[f32], n_per_row: usize, imatrix: Option<&[f32]>) -> Vec<u8> {
    let size = quant::quantized_size(ty, n_per_row as u64, (x.len() / n_per_row) as u64).unwrap() as usize;
    let mut out = vec![0xAAu8; size + 8];
    // An odd offset: the safe layer must cope with any alignment.
    let n = quant::quantize(ty, x, n_per_row as u64, imatrix, &mut out[1..]).unwrap();
    assert_eq!(n, size);
    assert!(out[size + 1..].iter().all(|&b| b == 0xAA), "wrote past its size");
    out[1..size + 1].to_vec()
}

fn dequant(ty: u32, q: &[u8], n: usize) -> Vec<f32> {
    let mut y = vec![f32::NAN; n];
    quant::to_f32(ty, q, n as u64, &mut y).unwrap();
    y
}

#[test]
fn matches_ggml_reference_quantizer() {
    for &(ty, name) in TYPES {
        for (seed, &n_per_row) in [32usize, 256, 512, 4096].iter().enumerate() {
            if n_per_row as u64 % block(ty) != 0 {
                continue;
            }
            let rows = if n_per_row == 4096 { 3 } else { 5 };
            let x = values(seed as u64 + 1, n_per_row * rows);
            let want = reference(ty, &x, n_per_row, None);
            assert_eq!(ours(ty, &x, n_per_row, None), want, "{name} rows of {n_per_row}");
            // With an importance matrix (ignored by F16/BF16/Q8_0).
            let w: Vec<f32> = values(seed as u64 + 100, n_per_row).iter().map(|v| v * v + 0.01).collect();
            let want_w = reference(ty, &x, n_per_row, Some(&w));
            assert_eq!(ours(ty, &x, n_per_row, Some(&w)), want_w, "{name} rows of {n_per_row} with imatrix");

            // to_f32 against the type's to_float called directly.
            let n = x.len();
            let mut direct = vec![0f32; n];
            if ty == sys::GGML_TYPE_F16 {
                unsafe { sys::ggml_fp16_to_fp32_row(want.as_ptr().cast(), direct.as_mut_ptr(), n as i64) };
            } else {
                let tf = unsafe { (*sys::ggml_get_type_traits(ty)).to_float.unwrap() };
                let aligned: Vec<u64> = want.chunks(8).map(|c| { let mut b = [0u8; 8]; b[..c.len()].copy_from_slice(c); u64::from_ne_bytes(b) }).collect();
                unsafe { tf(aligned.as_ptr().cast(), direct.as_mut_ptr(), n as i64) };
            }
            let got = dequant(ty, &want, n);
            assert!(got.iter().zip(&direct).all(|(a, b)| a.to_bits() == b.to_bits()), "{name} to_f32 rows of {n_per_row}");
        }
    }
}

/// The golden table shared with the Go test: FNV-1a of the reference
/// quantizer's bytes for `golden_input` as 4 rows of 512 values.
const GOLDEN: &[(&str, u64)] = &[
    ("q4_0", 0x838440cf381ed520),
    ("q4_1", 0x7aee2740b99e014b),
    ("q5_0", 0xa8cfc9b381c970ca),
    ("q5_1", 0x2eccb6d3dd770b93),
    ("q8_0", 0x6a8e491b1aa33a08),
    ("q2_K", 0x19449d2803964696),
    ("q3_K", 0xbecce43b8f44f909),
    ("q4_K", 0xabc7808f2a905658),
    ("q5_K", 0x340e152f6fecdf84),
    ("q6_K", 0xb8e113df2e4bde61),
    ("iq4_nl", 0x3d1d042a70e59bcb),
    ("iq4_xs", 0x9563c37575691825),
    ("f16", 0x438a5e7abe919b2c),
    ("bf16", 0x1959b1a9344835ca),
];

fn golden_input() -> Vec<f32> {
    values(42, 4 * 512)
}

#[test]
fn golden_table_matches_reference() {
    let x = golden_input();
    let mut table = Vec::new();
    for &(ty, name) in TYPES {
        let h = fnv1a(&reference(ty, &x, 512, None));
        assert_eq!(fnv1a(&ours(ty, &x, 512, None)), h, "{name}");
        table.push((name, h));
    }
    for (name, h) in &table {
        println!("    (\"{name}\", 0x{h:016x}),"); // to regenerate GOLDEN
    }
    for &(name, want) in GOLDEN {
        let got = table.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(got, want, "{name}: the reference quantizer's bytes changed");
    }
    assert_eq!(GOLDEN.len(), TYPES.len(), "GOLDEN table incomplete");
}

// --- independent re-implementations -----------------------------------------

/// f32 -> f16 bits, round to nearest even (IEEE 754 binary16).
fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let mut r = m >> shift;
        let rem = m & ((1 << shift) - 1);
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

fn f16_value(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f32;
    match e {
        0 => sign * m * 2f32.powi(-24),
        0x1f => if m == 0.0 { sign * f32::INFINITY } else { f32::NAN },
        _ => sign * (1.0 + m / 1024.0) * 2f32.powi(e - 15),
    }
}

/// Q8_0: per 32 values, d = max|x| / 127 (as f16), q = round(x / d).
fn naive_q8_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in x.chunks(32) {
        let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f16_bits(d).to_le_bytes());
        out.extend(b.iter().map(|v| (v * id).round() as i8 as u8));
    }
    out
}

/// Q4_0: per 32 values, the value m of largest magnitude, d = m / -8 (as
/// f16), q = min(15, trunc(x / d + 8.5)); value j in the low nibble of byte
/// j, value j + 16 in its high nibble.
fn naive_q4_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in x.chunks(32) {
        let m = b.iter().fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
        let d = m / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f16_bits(d).to_le_bytes());
        let q = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
        out.extend((0..16).map(|j| q(b[j]) | (q(b[j + 16]) << 4)));
    }
    out
}

#[test]
fn independent_q8_0_and_q4_0() {
    for n_per_row in [32usize, 256, 4096] {
        let x = values(7 + n_per_row as u64, n_per_row * 3);
        assert_eq!(ours(sys::GGML_TYPE_Q8_0, &x, n_per_row, None), naive_q8_0(&x), "q8_0 rows of {n_per_row}");
        assert_eq!(ours(sys::GGML_TYPE_Q4_0, &x, n_per_row, None), naive_q4_0(&x), "q4_0 rows of {n_per_row}");
        let h: Vec<u8> = x.iter().flat_map(|&v| f16_bits(v).to_le_bytes()).collect();
        assert_eq!(ours(sys::GGML_TYPE_F16, &x, n_per_row, None), h, "f16 rows of {n_per_row}");
    }
    // Zeros: scale 0, all quants 0 (Q8_0) or 8 (Q4_0); Q4_0's scale is
    // 0 / -8 = -0 (f16 0x8000).
    let z = vec![0f32; 32];
    assert_eq!(ours(sys::GGML_TYPE_Q8_0, &z, 32, None), vec![0u8; 34]);
    let mut q4 = vec![0x00u8, 0x80];
    q4.extend([0x88u8; 16]);
    assert_eq!(ours(sys::GGML_TYPE_Q4_0, &z, 32, None), q4);
}

#[test]
fn hand_built_blocks_decode() {
    // Q8_0: d = 0.5 (f16 0x3800), q_i = i - 16.
    let mut b = 0x3800u16.to_le_bytes().to_vec();
    b.extend((0..32).map(|i| (i as i8 - 16) as u8));
    let want: Vec<f32> = (0..32).map(|i| (i as f32 - 16.0) * 0.5).collect();
    assert_eq!(dequant(sys::GGML_TYPE_Q8_0, &b, 32), want);
    // Q4_0: d = 2 (0x4000); byte j holds q_j = j (low) and q_{j+16} = 15 - j (high); value (q - 8) * d.
    let mut b = 0x4000u16.to_le_bytes().to_vec();
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let want: Vec<f32> = (0..32).map(|i| if i < 16 { (i as f32 - 8.0) * 2.0 } else { (15.0 - (i - 16) as f32 - 8.0) * 2.0 }).collect();
    assert_eq!(dequant(sys::GGML_TYPE_Q4_0, &b, 32), want);
    // F16: 1, -2, 65504, smallest subnormal, -0, inf.
    let bits = [0x3C00u16, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00];
    let raw: Vec<u8> = bits.iter().flat_map(|h| h.to_le_bytes()).collect();
    let got = dequant(sys::GGML_TYPE_F16, &raw, bits.len());
    let want: Vec<f32> = bits.iter().map(|&h| f16_value(h)).collect();
    assert_eq!(got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    assert_eq!(&got[..4], &[1.0, -2.0, 65504.0, 2f32.powi(-24)]);
    // BF16: the top half of the f32 bits.
    let vals = [1.0f32, -3.5, 1e30, f32::MIN_POSITIVE];
    let raw: Vec<u8> = vals.iter().flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes()).collect();
    assert_eq!(dequant(sys::GGML_TYPE_BF16, &raw, 4), vals.iter().map(|v| f32::from_bits(v.to_bits() & 0xffff_0000)).collect::<Vec<_>>());
    // F32 passes through, from an unaligned buffer too.
    let raw: Vec<u8> = std::iter::once(0u8).chain(vals.iter().flat_map(|v| v.to_le_bytes())).collect();
    assert_eq!(dequant(sys::GGML_TYPE_F32, &raw[1..], 4), vals);
}

#[test]
fn round_trip_error_bounds() {
    // Relative RMS error bounds, about 1.25 times the observed errors
    // (which the outliers of `values` make larger than for smooth data);
    // F16 and BF16: their half-ulp relative bounds 2^-11 and 2^-8.
    let bounds: &[(u32, f32)] = &[
        (sys::GGML_TYPE_Q4_0, 0.17),
        (sys::GGML_TYPE_Q4_1, 0.11),
        (sys::GGML_TYPE_Q5_0, 0.09),
        (sys::GGML_TYPE_Q5_1, 0.055),
        (sys::GGML_TYPE_Q8_0, 0.011),
        (sys::GGML_TYPE_Q2_K, 0.41),
        (sys::GGML_TYPE_Q3_K, 0.27),
        (sys::GGML_TYPE_Q4_K, 0.105),
        (sys::GGML_TYPE_Q5_K, 0.055),
        (sys::GGML_TYPE_Q6_K, 0.032),
        (sys::GGML_TYPE_IQ4_NL, 0.135),
        (sys::GGML_TYPE_IQ4_XS, 0.14),
        (sys::GGML_TYPE_F16, 0.0005),
        (sys::GGML_TYPE_BF16, 0.004),
    ];
    for &(ty, bound) in bounds {
        for n_per_row in [256usize, 4096] {
            let x = values(3, n_per_row * 4);
            let y = dequant(ty, &ours(ty, &x, n_per_row, None), x.len());
            let err: f32 = x.iter().zip(&y).map(|(a, b)| (a - b) * (a - b)).sum::<f32>();
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>();
            let rel = (err / norm).sqrt();
            println!("{} rows of {n_per_row}: relative RMS error {rel}", quant::type_name(ty));
            assert!(rel < bound, "{}: relative RMS error {rel} >= {bound}", quant::type_name(ty));
        }
    }
}

#[test]
fn bad_input_is_an_error() {
    let x = values(1, 512);
    let mut dst = vec![0u8; 4096];
    let kind = |r: ggml_rs::ml::Result<usize>| r.unwrap_err().kind;
    // Unknown and removed types.
    assert_eq!(kind(quant::quantize(999, &x, 256, None, &mut dst)), ErrorKind::DType);
    assert_eq!(kind(quant::quantize(4, &x, 256, None, &mut dst)), ErrorKind::DType);
    // A type with no quantizer (integers, Q8_K).
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_I32, &x, 256, None, &mut dst)), ErrorKind::Unsupported);
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q8_K, &x, 256, None, &mut dst)), ErrorKind::Unsupported);
    // Row length not a multiple of the block size.
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q4_K, &x, 128, None, &mut dst)), ErrorKind::Shape);
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q8_0, &x[..48], 48, None, &mut dst)), ErrorKind::Shape);
    // Values not a whole number of rows; zero row length.
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q8_0, &x[..100], 64, None, &mut dst)), ErrorKind::Shape);
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q8_0, &x, 0, None, &mut dst)), ErrorKind::Shape);
    // Output too small.
    let e = quant::quantize(sys::GGML_TYPE_Q8_0, &x, 256, None, &mut dst[..543]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("544"), "{}", e.message);
    // Needs an importance matrix.
    for ty in [sys::GGML_TYPE_IQ2_XXS, sys::GGML_TYPE_IQ2_XS, sys::GGML_TYPE_IQ1_S] {
        let e = quant::quantize(ty, &x, 256, None, &mut dst).unwrap_err();
        assert!(e.message.contains("importance matrix"), "{}", e.message);
    }
    // Importance matrix of the wrong length, or with bad values.
    let w = vec![1f32; 255];
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q4_K, &x, 256, Some(&w), &mut dst)), ErrorKind::Shape);
    let mut w = vec![1f32; 256];
    w[3] = f32::NAN;
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q4_K, &x, 256, Some(&w), &mut dst)), ErrorKind::InvalidArgument);
    w[3] = -1.0;
    assert_eq!(kind(quant::quantize(sys::GGML_TYPE_Q4_K, &x, 256, Some(&w), &mut dst)), ErrorKind::InvalidArgument);
    // Non-finite values for a quantized type; fine for F16.
    let mut y = x.clone();
    y[300] = f32::INFINITY;
    let e = quant::quantize(sys::GGML_TYPE_Q4_K, &y, 256, None, &mut dst).unwrap_err();
    assert!(e.message.contains("row 1, column 44"), "{}", e.message);
    quant::quantize(sys::GGML_TYPE_F16, &y, 256, None, &mut dst).unwrap();
    // Sizes that overflow.
    assert_eq!(quant::quantized_size(sys::GGML_TYPE_F32, u64::MAX / 2, 4).unwrap_err().kind, ErrorKind::Shape);
    assert_eq!(quant::quantized_size(sys::GGML_TYPE_F32, 1 << 40, 1 << 30).unwrap_err().kind, ErrorKind::Shape);

    // to_f32: unknown type, no conversion, partial block, short input, short output.
    let q = vec![0u8; 34 * 4];
    let mut y = vec![0f32; 128];
    let k = |r: ggml_rs::ml::Result<()>| r.unwrap_err().kind;
    assert_eq!(k(quant::to_f32(999, &q, 32, &mut y)), ErrorKind::DType);
    assert_eq!(k(quant::to_f32(sys::GGML_TYPE_I32, &q, 32, &mut y)), ErrorKind::Unsupported);
    assert_eq!(k(quant::to_f32(sys::GGML_TYPE_Q8_0, &q, 33, &mut y)), ErrorKind::Shape);
    assert_eq!(k(quant::to_f32(sys::GGML_TYPE_Q8_0, &q[..67], 64, &mut y)), ErrorKind::InvalidArgument);
    assert_eq!(k(quant::to_f32(sys::GGML_TYPE_Q8_0, &q, 128, &mut y[..127])), ErrorKind::InvalidArgument);
    quant::to_f32(sys::GGML_TYPE_Q8_0, &q, 128, &mut y).unwrap();
}

#[test]
fn version_and_sizes() {
    assert_eq!(quant::quantization_version(), 2);
    for &(ty, _) in TYPES {
        let want = unsafe { sys::ggml_row_size(ty, 4096) } as u64 * 3;
        assert_eq!(quant::quantized_size(ty, 4096, 3).unwrap(), want);
    }
    assert!(quant::requires_imatrix(sys::GGML_TYPE_IQ2_XXS));
    assert!(!quant::requires_imatrix(sys::GGML_TYPE_Q4_K));
    assert!(!quant::requires_imatrix(9999));
}

// --- the C ABI's own checks ------------------------------------------------

#[repr(C)]
struct CError {
    status: i32,
    message: [std::ffi::c_char; 1024],
}

extern "C" {
    fn ggml_rs_quantize(
        dtype: u32,
        src: *const f32,
        n_per_row: u64,
        nrows: u64,
        imatrix: *const f32,
        dst: *mut std::ffi::c_void,
        dst_size: usize,
        written: *mut usize,
        err: *mut CError,
    ) -> i32;
    fn ggml_rs_convert_to_f32(dtype: u32, src: *const std::ffi::c_void, src_size: usize, nelements: u64, dst: *mut f32, err: *mut CError) -> i32;
    fn ggml_rs_quantized_size(dtype: u32, n_per_row: u64, nrows: u64, size: *mut u64, err: *mut CError) -> i32;
    fn ggml_rs_quantization_version() -> u32;
    fn ggml_rs_quantize_slab(
        slab: *const Slab,
        next: *mut u64,
        failed: *mut i32,
        scratch: *mut f32,
        scratch_len: u64,
        in_convert: *mut i32,
        err: *mut CError,
    ) -> i32;
}

/// ggml_rs_quantize_slab_rows.
#[repr(C)]
#[derive(Clone, Copy)]
struct Slab {
    from: u32,
    to: u32,
    src: *const u8,
    src_row: u64,
    dst: *mut u8,
    dst_row: u64,
    ncols: u64,
    rows: u64,
    chunk: u64,
    threads: u64,
    imatrix: *const f32,
    imatrix_len: u64,
    per_expert: u64,
    first: u64,
}
unsafe impl Send for Slab {}
unsafe impl Sync for Slab {}

/// A slab through the C ABI, three threads at once: the bytes of one
/// ggml_rs_quantize call per expert; bad slabs and pointers are errors,
/// and the first failure stops the others.
#[test]
fn c_abi_quantize_slab() {
    let (ncols, rows, per_expert) = (256usize, 23usize, 8usize);
    let x = values(9, ncols * rows);
    let src: Vec<u8> = x.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let w: Vec<f32> = (0..ncols * 3).map(|i| 0.25 + (i % 11) as f32 / 4.0).collect();
    let q4k = sys::GGML_TYPE_Q4_K;
    let dst_row = 144usize;
    let mut want = vec![0u8; rows * dst_row];
    for e in 0..3 {
        let (a, b) = (e * per_expert, ((e + 1) * per_expert).min(rows));
        want[a * dst_row..b * dst_row].copy_from_slice(&reference(q4k, &x[a * ncols..b * ncols], ncols, Some(&w[e * ncols..(e + 1) * ncols])));
    }
    let mut dst = vec![0u8; rows * dst_row];
    let slab = Slab {
        from: sys::GGML_TYPE_F32,
        to: q4k,
        src: src.as_ptr(),
        src_row: (ncols * 4) as u64,
        dst: dst.as_mut_ptr(),
        dst_row: dst_row as u64,
        ncols: ncols as u64,
        rows: rows as u64,
        chunk: 2,
        threads: 3,
        imatrix: w.as_ptr(),
        imatrix_len: w.len() as u64,
        per_expert: per_expert as u64,
        first: 0,
    };
    let run = |slab: Slab, scratch_len: usize| -> Vec<(i32, String, i32)> {
        let mut next = 0u64;
        let mut failed = 0i32;
        let (np, fp) = (&mut next as *mut u64 as usize, &mut failed as *mut i32 as usize);
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..slab.threads.max(1))
                .map(|_| {
                    s.spawn(move || {
                        let mut scratch = vec![0f32; scratch_len];
                        let mut e = CError { status: 0, message: [0; 1024] };
                        let mut conv = 0i32;
                        let st = unsafe {
                            ggml_rs_quantize_slab(&slab, np as *mut u64, fp as *mut i32, scratch.as_mut_ptr(), scratch_len as u64, &mut conv, &mut e)
                        };
                        (st, c_message(&e), conv)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    for (st, msg, _) in run(slab, 2 * ncols) {
        assert_eq!(st, 0, "{msg}");
    }
    assert!(dst == want, "the slab's bytes differ from one call per expert");

    let first_error = |slab: Slab, scratch_len: usize| run(slab, scratch_len).into_iter().find(|r| r.0 != 0).expect("no thread failed");
    // (The C ABI takes the caller's sizes; those it can check:)
    let (st, msg, _) = first_error(Slab { chunk: 0, ..slab }, 2 * ncols);
    assert!(st != 0 && msg.contains("chunks of 0 rows"), "{msg}");
    let (_, msg, _) = first_error(Slab { dst_row: 143, ..slab }, 2 * ncols);
    assert!(msg.contains("smaller than"), "{msg}");
    let (_, msg, _) = first_error(Slab { imatrix_len: 2 * ncols as u64, ..slab }, 2 * ncols);
    assert!(msg.contains("importance weights"), "{msg}");
    let (_, msg, _) = first_error(slab, ncols);
    assert!(msg.contains("scratch"), "{msg}");
    let (_, msg, conv) = first_error(Slab { from: sys::GGML_TYPE_I32, ..slab }, 2 * ncols);
    assert!(conv == 1 && msg.contains("no conversion"), "{msg}");
    let (_, msg, _) = first_error(Slab { src: std::ptr::null(), ..slab }, 2 * ncols);
    assert!(msg.contains("src is NULL"), "{msg}");
    let mut e = CError { status: 0, message: [0; 1024] };
    let mut f = 0i32;
    unsafe {
        assert_eq!(ggml_rs_quantize_slab(std::ptr::null(), &mut 0, &mut f, std::ptr::null_mut(), 0, std::ptr::null_mut(), &mut e), 1);
        assert!(c_message(&e).contains("slab is NULL"));
        assert_eq!(ggml_rs_quantize_slab(&slab, std::ptr::null_mut(), &mut f, std::ptr::null_mut(), 0, std::ptr::null_mut(), std::ptr::null_mut()), 1);
    }
}

fn c_message(e: &CError) -> String {
    unsafe { std::ffi::CStr::from_ptr(e.message.as_ptr()) }.to_string_lossy().into_owned()
}

#[test]
fn c_abi_checks_pointers_and_sizes() {
    let x = values(5, 512);
    let w = vec![1f32; 256];
    let mut dst = vec![0u64; 512];
    let dp = dst.as_mut_ptr().cast::<std::ffi::c_void>();
    let mut written = 0usize;
    let mut e = CError { status: 0, message: [0; 1024] };
    let q8 = sys::GGML_TYPE_Q8_0;
    unsafe {
        // Success, with and without an imatrix; equal to the safe layer.
        assert_eq!(ggml_rs_quantize(q8, x.as_ptr(), 256, 2, std::ptr::null(), dp, 4096, &mut written, &mut e), 0);
        assert_eq!(written, 544);
        let bytes = std::slice::from_raw_parts(dp.cast::<u8>(), 544).to_vec();
        assert_eq!(bytes, reference(q8, &x, 256, None));
        let q4k = sys::GGML_TYPE_Q4_K;
        assert_eq!(ggml_rs_quantize(q4k, x.as_ptr(), 256, 2, w.as_ptr(), dp, 4096, &mut written, &mut e), 0);
        assert_eq!(std::slice::from_raw_parts(dp.cast::<u8>(), written), &reference(q4k, &x, 256, Some(&w))[..]);

        let fails = |status: i32, want: &str, f: &mut dyn FnMut(*mut CError) -> i32| {
            let mut e = CError { status: 0, message: [0; 1024] };
            let s = f(&mut e);
            assert_eq!(s, status, "{want}: {}", c_message(&e));
            assert_eq!(e.status, status);
            assert!(c_message(&e).contains(want), "{:?} does not contain {want:?}", c_message(&e));
            // A NULL err is fine too.
            assert_eq!(f(std::ptr::null_mut()), status);
        };
        let mut w_ = 0usize;
        fails(1, "src is NULL", &mut |e| ggml_rs_quantize(q8, std::ptr::null(), 256, 2, std::ptr::null(), dp, 4096, &mut w_, e));
        fails(1, "written is NULL", &mut |e| ggml_rs_quantize(q8, x.as_ptr(), 256, 2, std::ptr::null(), dp, 4096, std::ptr::null_mut(), e));
        fails(1, "dst is NULL", &mut |e| ggml_rs_quantize(q8, x.as_ptr(), 256, 2, std::ptr::null(), std::ptr::null_mut(), 4096, &mut w_, e));
        fails(1, "src is not aligned", &mut |e| ggml_rs_quantize(q8, x.as_ptr().cast::<u8>().add(1).cast(), 256, 1, std::ptr::null(), dp, 4096, &mut w_, e));
        fails(1, "smaller than the 544 bytes", &mut |e| ggml_rs_quantize(q8, x.as_ptr(), 256, 2, std::ptr::null(), dp, 543, &mut w_, e));
        fails(2, "overflow", &mut |e| ggml_rs_quantize(q8, x.as_ptr(), 1 << 40, 1 << 40, std::ptr::null(), dp, 4096, &mut w_, e));
        fails(3, "unknown ggml type 77", &mut |e| ggml_rs_quantize(77, x.as_ptr(), 256, 2, std::ptr::null(), dp, 4096, &mut w_, e));
        fails(2, "block size 256", &mut |e| ggml_rs_quantize(q4k, x.as_ptr(), 128, 4, std::ptr::null(), dp, 4096, &mut w_, e));
        fails(1, "importance matrix", &mut |e| ggml_rs_quantize(sys::GGML_TYPE_IQ1_S, x.as_ptr(), 256, 2, std::ptr::null(), dp, 4096, &mut w_, e));

        let mut y = vec![0f32; 64];
        fails(1, "src is NULL", &mut |e| ggml_rs_convert_to_f32(q8, std::ptr::null(), 68, 64, y.as_mut_ptr(), e));
        fails(1, "dst is NULL", &mut |e| ggml_rs_convert_to_f32(q8, dp, 68, 64, std::ptr::null_mut(), e));
        fails(1, "dst is not aligned", &mut |e| ggml_rs_convert_to_f32(q8, dp, 68, 32, y.as_mut_ptr().cast::<u8>().add(2).cast(), e));
        fails(1, "fewer than the 68 bytes", &mut |e| ggml_rs_convert_to_f32(q8, dp, 67, 64, y.as_mut_ptr(), e));
        fails(11, "no conversion", &mut |e| ggml_rs_convert_to_f32(sys::GGML_TYPE_I32, dp, 256, 64, y.as_mut_ptr(), e));
        assert_eq!(ggml_rs_convert_to_f32(q8, dp, 68, 64, y.as_mut_ptr(), &mut e), 0);

        let mut size = 7u64;
        fails(1, "size is NULL", &mut |e| ggml_rs_quantized_size(q8, 32, 1, std::ptr::null_mut(), e));
        fails(2, "overflow", &mut |e| ggml_rs_quantized_size(q8, u64::MAX - 31, 1, &mut size, e));
        assert_eq!(size, 7, "untouched on failure");
        assert_eq!(ggml_rs_quantized_size(q8, 64, 3, &mut size, &mut e), 0);
        assert_eq!(size, 3 * 68);
        assert_eq!(ggml_rs_quantization_version(), sys::GGML_QNT_VERSION);
    }
}
