//! Quantization of f32 rows to a ggml type and conversion of any ggml type
//! back to f32, on host memory (no backend, no context).
//!
//! These wrap ggml's reference quantizers (`ggml_quantize_chunk`) and its
//! type traits' `to_float`, so the bytes are exactly ggml's. Every argument
//! is checked first: ggml reports bad arguments (an unknown type, a row
//! length its block size does not divide, a missing importance matrix)
//! with GGML_ASSERT, which aborts the process.

use crate::ml::{Error, Result};
use crate::sys;

/// `GGML_QNT_VERSION`: the version of the quantized block formats that
/// GGUF files record as `general.quantization_version`.
pub fn quantization_version() -> u32 {
    sys::GGML_QNT_VERSION
}

/// Block size (elements) and block byte size of a ggml type, or an error
/// naming the id if ggml has no such type (out of range, or a removed one).
pub fn type_layout(ty: u32) -> Result<(u64, u64)> {
    if ty >= sys::GGML_TYPE_COUNT {
        return Err(Error::dtype(format!("unknown ggml type {ty}")));
    }
    let blck = unsafe { sys::ggml_blck_size(ty) };
    let size = unsafe { sys::ggml_type_size(ty) };
    if blck <= 0 || size == 0 {
        return Err(Error::dtype(format!("unknown ggml type {ty} (removed from ggml)")));
    }
    Ok((blck as u64, size as u64))
}

/// ggml's name of a type ("q4_K"), or "type N" for an unknown one.
pub fn type_name(ty: u32) -> String {
    if type_layout(ty).is_err() {
        return format!("type {ty}");
    }
    let p = unsafe { sys::ggml_type_name(ty) };
    if p.is_null() {
        return format!("type {ty}");
    }
    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Byte size of `nrows` rows of `n_per_row` elements of `ty`. Errors: an
/// unknown type, a row length the type's block size does not divide, a
/// size that does not fit in 64 bits (or in this machine's address space).
pub fn quantized_size(ty: u32, n_per_row: u64, nrows: u64) -> Result<u64> {
    let (blck, size) = type_layout(ty)?;
    let name = type_name(ty);
    if n_per_row % blck != 0 {
        return Err(Error::shape(format!(
            "{name}: row length {n_per_row} is not a multiple of the block size {blck}"
        )));
    }
    let row = (n_per_row / blck)
        .checked_mul(size)
        .ok_or_else(|| Error::shape(format!("{name}: a row of {n_per_row} elements overflows")))?;
    let total = row.checked_mul(nrows).ok_or_else(|| {
        Error::shape(format!("{name}: {nrows} rows of {n_per_row} elements overflow"))
    })?;
    if total > isize::MAX as u64 {
        return Err(Error::shape(format!("{name}: {total} bytes do not fit in memory")));
    }
    Ok(total)
}

/// Whether `ggml_quantize_chunk` can produce `ty` (F32, F16, BF16 and the
/// quantized types that have a reference quantizer).
pub fn can_quantize_to(ty: u32) -> bool {
    use sys::*;
    matches!(
        ty,
        GGML_TYPE_F32
            | GGML_TYPE_F16
            | GGML_TYPE_BF16
            | GGML_TYPE_Q1_0
            | GGML_TYPE_Q2_0
            | GGML_TYPE_Q4_0
            | GGML_TYPE_Q4_1
            | GGML_TYPE_Q5_0
            | GGML_TYPE_Q5_1
            | GGML_TYPE_Q8_0
            | GGML_TYPE_MXFP4
            | GGML_TYPE_NVFP4
            | GGML_TYPE_Q2_K
            | GGML_TYPE_Q3_K
            | GGML_TYPE_Q4_K
            | GGML_TYPE_Q5_K
            | GGML_TYPE_Q6_K
            | GGML_TYPE_TQ1_0
            | GGML_TYPE_TQ2_0
            | GGML_TYPE_IQ2_XXS
            | GGML_TYPE_IQ2_XS
            | GGML_TYPE_IQ3_XXS
            | GGML_TYPE_IQ3_S
            | GGML_TYPE_IQ2_S
            | GGML_TYPE_IQ1_S
            | GGML_TYPE_IQ1_M
            | GGML_TYPE_IQ4_NL
            | GGML_TYPE_IQ4_XS
    )
}

/// Whether quantizing to `ty` needs an importance matrix (IQ2_XXS, IQ2_XS,
/// IQ1_S in this ggml).
pub fn requires_imatrix(ty: u32) -> bool {
    ty < sys::GGML_TYPE_COUNT && unsafe { sys::ggml_quantize_requires_imatrix(ty) }
}

/// A buffer of `n` bytes aligned for any ggml block (8 bytes).
fn aligned_bytes(n: usize) -> Vec<u64> {
    vec![0u64; n.div_ceil(8)]
}

/// Quantizes `src` (whole rows of `n_per_row` f32 values, row after row)
/// to `ty` into `dst`, exactly as `ggml_quantize_chunk` does; returns the
/// number of bytes written (`quantized_size(ty, n_per_row, rows)`).
///
/// `imatrix` (optional) holds `n_per_row` importance weights (finite, not
/// negative), as in llama.cpp's imatrix files; the types of
/// [`requires_imatrix`] fail without one. Values of `src` must be finite
/// for quantized types (ggml's searches assert on NaN); F16, BF16 and F32
/// take any value. `dst` may have any alignment and may be longer than
/// needed.
pub fn quantize(ty: u32, src: &[f32], n_per_row: u64, imatrix: Option<&[f32]>, dst: &mut [u8]) -> Result<usize> {
    let name = type_name(ty);
    type_layout(ty)?;
    if !can_quantize_to(ty) {
        return Err(Error::unsupported(format!("quantize: ggml has no quantizer for {name}")));
    }
    if n_per_row == 0 {
        return Err(Error::shape(format!("quantize {name}: row length is 0")));
    }
    if src.len() as u64 % n_per_row != 0 {
        return Err(Error::shape(format!(
            "quantize {name}: {} values are not a whole number of rows of {n_per_row}",
            src.len()
        )));
    }
    let nrows = src.len() as u64 / n_per_row;
    let need = quantized_size(ty, n_per_row, nrows)?;
    if (dst.len() as u64) < need {
        return Err(Error::invalid(format!(
            "quantize {name}: output buffer of {} bytes is smaller than the {need} bytes of {nrows} rows of {n_per_row}",
            dst.len()
        )));
    }
    match imatrix {
        Some(w) => {
            if w.len() as u64 != n_per_row {
                return Err(Error::shape(format!(
                    "quantize {name}: importance matrix has {} values, the row length is {n_per_row}",
                    w.len()
                )));
            }
            if let Some(i) = w.iter().position(|v| !v.is_finite() || *v < 0.0) {
                return Err(Error::invalid(format!(
                    "quantize {name}: importance weight {i} is {} (must be finite and not negative)",
                    w[i]
                )));
            }
        }
        None if requires_imatrix(ty) => {
            return Err(Error::invalid(format!("quantize {name}: this type needs an importance matrix")));
        }
        None => {}
    }
    let is_quantized = unsafe { sys::ggml_is_quantized(ty) };
    if is_quantized {
        if let Some(i) = first_non_finite(src) {
            return Err(Error::invalid(format!(
                "quantize {name}: value {i} (row {}, column {}) is {}; quantized types need finite values",
                i as u64 / n_per_row,
                i as u64 % n_per_row,
                src[i]
            )));
        }
    }
    if nrows == 0 {
        return Ok(0);
    }
    let need = need as usize;
    let imatrix_ptr = imatrix.map_or(std::ptr::null(), |w| w.as_ptr());
    let chunk = |out: *mut u8| unsafe {
        sys::ggml_quantize_chunk(ty, src.as_ptr(), out.cast(), 0, nrows as i64, n_per_row as i64, imatrix_ptr)
    };
    let written = if dst.as_ptr() as usize % 8 == 0 {
        chunk(dst.as_mut_ptr())
    } else {
        let mut tmp = aligned_bytes(need);
        let n = chunk(tmp.as_mut_ptr().cast());
        let bytes = unsafe { std::slice::from_raw_parts(tmp.as_ptr().cast::<u8>(), need) };
        dst[..need].copy_from_slice(bytes);
        n
    };
    debug_assert_eq!(written, need);
    Ok(need)
}

/// Converts `n` elements of type `ty` stored in `src` to f32 in `dst`
/// (ggml's `to_float` of the type: dequantization for quantized types).
/// `src` must hold at least the `n` elements' bytes (any alignment);
/// `dst` at least `n` values. Errors: an unknown type, a type without a
/// conversion (integer types), `n` not a whole number of blocks, a buffer
/// too small.
pub fn to_f32(ty: u32, src: &[u8], n: u64, dst: &mut [f32]) -> Result<()> {
    let name = type_name(ty);
    type_layout(ty)?;
    let need = quantized_size(ty, n, 1).map_err(|e| Error::new(e.kind, format!("convert to f32: {}", e.message)))?;
    if (src.len() as u64) < need {
        return Err(Error::invalid(format!(
            "convert {name} to f32: {} bytes of data are fewer than the {need} bytes of {n} elements",
            src.len()
        )));
    }
    if (dst.len() as u64) < n {
        return Err(Error::invalid(format!(
            "convert {name} to f32: output of {} values is smaller than {n} elements",
            dst.len()
        )));
    }
    if n == 0 {
        return Ok(());
    }
    let need = need as usize;
    let n_us = n as usize;
    if ty == sys::GGML_TYPE_F32 {
        for (d, c) in dst[..n_us].iter_mut().zip(src[..need].chunks_exact(4)) {
            *d = f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
        }
        return Ok(());
    }
    let traits = unsafe { sys::ggml_get_type_traits(ty).as_ref() }
        .ok_or_else(|| Error::dtype(format!("convert {name} to f32: ggml has no traits for it")))?;
    let Some(to_float) = traits.to_float else {
        return Err(Error::unsupported(format!("convert {name} to f32: ggml has no conversion for {name}")));
    };
    if src.as_ptr() as usize % 8 == 0 {
        unsafe { to_float(src.as_ptr().cast(), dst.as_mut_ptr(), n as i64) };
    } else {
        let mut tmp = aligned_bytes(need);
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), tmp.as_mut_ptr().cast::<u8>(), need);
            to_float(tmp.as_ptr().cast(), dst.as_mut_ptr(), n as i64);
        }
    }
    Ok(())
}

/// The index of the first NaN or infinity in `v`. Blocks of 256 are
/// scanned without an early exit (the exponent bits of each value ORed
/// together), which the compiler vectorises; the scan runs on every value
/// a quantize sees, so it must cost little next to the quantization.
fn first_non_finite(v: &[f32]) -> Option<usize> {
    const EXP: u32 = 0x7f80_0000;
    for (b, block) in v.chunks(256).enumerate() {
        let bad = block.iter().fold(false, |acc, x| acc | (x.to_bits() & EXP == EXP));
        if bad {
            return block.iter().position(|x| !x.is_finite()).map(|i| b * 256 + i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::first_non_finite;

    #[test]
    fn first_non_finite_finds_the_first_bad_value_in_any_block() {
        let mut v = vec![1.0f32; 1000];
        assert_eq!(first_non_finite(&v), None);
        assert_eq!(first_non_finite(&[]), None);
        for (at, bad) in [(0, f32::NAN), (255, f32::INFINITY), (256, f32::NEG_INFINITY), (999, f32::NAN)] {
            v[at] = bad;
            v[at.min(998) + 1..].iter_mut().for_each(|x| *x = f32::NAN); // later ones do not matter
            assert_eq!(first_non_finite(&v), Some(at), "at {at}");
            v.iter_mut().for_each(|x| *x = 1.0);
        }
        // the largest finite values and subnormals are finite
        assert_eq!(first_non_finite(&[f32::MAX, f32::MIN, f32::MIN_POSITIVE / 2.0, -0.0]), None);
    }
}
