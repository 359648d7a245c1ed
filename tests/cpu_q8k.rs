//! ggml-cpu's Q8_K activation quantizer (`quantize_row_q8_K`, the
//! `from_float` of the CPU type traits that every K-quant product runs its
//! activations through; AVX-512 in our patch 22) against ggml's scalar
//! reference, `quantize_row_q8_K_ref`, byte for byte: random rows, rows
//! whose largest magnitude appears with both signs (the first one sets the
//! scale's sign), all-zero blocks (whose bsums the reference leaves as they
//! were), signed zeros, infinities, NaNs, subnormals and huge values.

use ggml_rs::sys;

const QK_K: usize = 256;
/// {f32 d; i8 qs[256]; i16 bsums[16]}
const BLOCK: usize = 4 + 256 + 32;

extern "C" {
    fn quantize_row_q8_K_ref(x: *const f32, y: *mut std::ffi::c_void, k: i64);
}

/// xorshift64* in [-1, 1).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (r >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn both(x: &[f32], fill: u8) -> (Vec<u8>, Vec<u8>) {
    assert_eq!(x.len() % QK_K, 0);
    assert_eq!(unsafe { sys::ggml_type_size(sys::GGML_TYPE_Q8_K) }, BLOCK);
    let cpu = unsafe { &*sys::ggml_get_type_traits_cpu(sys::GGML_TYPE_Q8_K) };
    let from = cpu.from_float.expect("Q8_K from_float");
    let n = x.len() / QK_K * BLOCK;
    let (mut got, mut want) = (vec![fill; n], vec![fill; n]);
    unsafe {
        from(x.as_ptr(), got.as_mut_ptr().cast(), x.len() as i64);
        quantize_row_q8_K_ref(x.as_ptr(), want.as_mut_ptr().cast(), x.len() as i64);
    }
    (got, want)
}

fn check(what: &str, x: &[f32]) {
    for fill in [0u8, 0xA5] {
        let (got, want) = both(x, fill);
        for (b, (g, w)) in got.chunks(BLOCK).zip(want.chunks(BLOCK)).enumerate() {
            assert_eq!(g, w, "{what}: block {b} (buffer filled with {fill:#x}), input {:?}", &x[b * QK_K..(b + 1) * QK_K]);
        }
    }
}

#[test]
fn the_cpu_quantizer_gives_the_reference_bytes() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for blocks in [1usize, 4, 16] {
        for scale in [1e-6f32, 1.0, 3e4] {
            let x: Vec<f32> = (0..blocks * QK_K).map(|_| rng.next() * scale).collect();
            check(&format!("random x {scale}, {blocks} blocks"), &x);
        }
    }
    // Rounding: values landing on .5 after the scale (127/max exact).
    let x: Vec<f32> = (0..QK_K).map(|i| (i as f32 - 128.0) * 0.5).collect();
    check("halves", &x);

    // Products landing next to k + 0.5: x·(-127/max) rounded to f32 and
    // then offset by 1.5·2^23 (the reference's two roundings; an FMA, one
    // rounding, gives another integer for some of these).
    for max in [3.0f32, 0.7, 113.0] {
        let iscale = -127.0f32 / max;
        let mut x = Vec::new();
        'fill: for k in -126i32..126 {
            let mid = ((k as f64 + 0.5) / iscale as f64) as f32;
            for d in -3i32..=3 {
                let v = f32::from_bits((mid.to_bits() as i32 + d) as u32);
                if v.abs() < max {
                    x.push(v);
                }
                if x.len() % QK_K == QK_K - 1 {
                    x.push(max);
                }
                if x.len() >= 8 * QK_K {
                    break 'fill;
                }
            }
        }
        while x.len() % QK_K != 0 {
            x.push(max);
        }
        check(&format!("values next to a rounding tie, max {max}"), &x);
    }

    let mut specials = Vec::new();
    for (i, v) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, f32::MIN_POSITIVE / 4.0, 3e38, -3e38]
        .into_iter()
        .enumerate()
    {
        let mut x: Vec<f32> = (0..QK_K).map(|_| rng.next()).collect();
        x[(i * 37) % QK_K] = v;
        specials.push((format!("one {v}"), x));
    }
    // The largest magnitude with both signs, either first, 16 values apart
    // or fewer.
    for (a, b) in [(17, 200), (3, 9), (240, 255)] {
        for first in [1.0f32, -1.0] {
            let mut x: Vec<f32> = (0..QK_K).map(|_| rng.next() * 0.5).collect();
            x[a] = 2.0 * first;
            x[b] = -2.0 * first;
            specials.push((format!("tie of |max| at {a} and {b}, {first} first"), x));
        }
    }
    specials.push(("zeros".into(), vec![0.0; QK_K]));
    specials.push(("negative zeros".into(), vec![-0.0; QK_K]));
    specials.push(("NaNs".into(), vec![f32::NAN; QK_K]));
    let mut mixed: Vec<f32> = (0..QK_K).map(|_| rng.next()).collect();
    mixed[5] = f32::NAN;
    mixed[6] = -f32::NAN;
    specials.push(("NaNs among values".into(), mixed));
    specials.push(("subnormals".into(), (0..QK_K).map(|i| f32::from_bits(i as u32 + 1)).collect()));
    specials.push(("a constant".into(), vec![0.75; QK_K]));
    for (what, x) in &specials {
        check(what, x);
    }
    // All of them as consecutive blocks of one row.
    let row: Vec<f32> = specials.iter().flat_map(|(_, x)| x.iter().copied()).collect();
    check("every case in one row", &row);
}
