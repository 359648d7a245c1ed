//! Quantization on host memory: f32 rows to a ggml type (ggml's reference
//! quantizers, byte for byte) and any ggml type back to f32. No context or
//! backend is involved. Types are ggml type ids (`enum ggml_type` values:
//! 0 = f32, 1 = f16, 2 = q4_0, 8 = q8_0, 12 = q4_K, 30 = bf16, ...).

use std::ffi::c_void;

use super::{ggml_rs_error, ggml_rs_status, guard_status, slice_arg};
use crate::ml::{quant, Error, Result};

/// A pointer argument that must be non-NULL and aligned for `T`.
fn aligned<T>(op: &str, what: &str, p: *const T) -> Result<()> {
    if !p.is_null() && p as usize % std::mem::align_of::<T>() != 0 {
        return Err(Error::invalid(format!("{op}: {what} is not aligned for its element type")));
    }
    Ok(())
}

/// A count that must fit in this machine's address space.
fn count(op: &str, what: &str, n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::invalid(format!("{op}: {what} {n} does not fit in memory")))
}

/// An output pointer that must not be NULL.
fn out<'a, T>(op: &str, what: &str, p: *mut T) -> Result<&'a mut T> {
    unsafe { p.as_mut() }.ok_or_else(|| Error::invalid(format!("{op}: {what} is NULL")))
}

/// GGML_QNT_VERSION of the bundled ggml: the version of the quantized block
/// formats, which GGUF files record as `general.quantization_version`.
#[no_mangle]
pub extern "C" fn ggml_rs_quantization_version() -> u32 { quant::quantization_version() }

/// Writes to `*size` the byte size of `nrows` rows of `n_per_row` elements
/// of ggml type `dtype`. Fails (status, err set, `*size` untouched) for an
/// unknown type, a row length the type's block size does not divide, or a
/// size that overflows, or a NULL `size`.
#[no_mangle]
pub extern "C" fn ggml_rs_quantized_size(dtype: u32, n_per_row: u64, nrows: u64, size: *mut u64, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || { let s = quant::quantized_size(dtype, n_per_row, nrows)?; *out("quantized_size", "size", size)? = s; Ok(()) })
}

/// Whether quantizing to `dtype` needs an importance matrix (IQ2_XXS,
/// IQ2_XS, IQ1_S); false for unknown types.
#[no_mangle]
pub extern "C" fn ggml_rs_quantize_requires_imatrix(dtype: u32) -> bool { quant::requires_imatrix(dtype) }

/// Quantizes `nrows` rows of `n_per_row` f32 values at `src` (4-byte
/// aligned; row after row) to ggml type `dtype` into `dst` (`dst_size`
/// bytes, any alignment), byte for byte as ggml_quantize_chunk, and writes
/// the byte count to `*written` (= ggml_rs_quantized_size). `imatrix`
/// (nullable): `n_per_row` importance weights, finite and not negative;
/// required by the types of ggml_rs_quantize_requires_imatrix. Quantized
/// types need finite input values. Fails (status, err set, nothing written
/// to `*written`) for an unknown or unquantizable type, a row length the
/// block size does not divide, NULL or misaligned pointers, a `dst` too
/// small, or a size that overflows.
#[no_mangle]
pub extern "C" fn ggml_rs_quantize(
    dtype: u32,
    src: *const f32,
    n_per_row: u64,
    nrows: u64,
    imatrix: *const f32,
    dst: *mut c_void,
    dst_size: usize,
    written: *mut usize,
    err: *mut ggml_rs_error,
) -> ggml_rs_status {
    guard_status(err, || {
        let op = "quantize";
        let written = out(op, "written", written)?;
        aligned(op, "src", src)?;
        aligned(op, "imatrix", imatrix)?;
        let n = n_per_row.checked_mul(nrows).ok_or_else(|| Error::shape(format!("{op}: {nrows} rows of {n_per_row} values overflow")))?;
        let src = slice_arg(op, "src", src, count(op, "value count", n)?)?;
        let imatrix = if imatrix.is_null() { None } else { Some(slice_arg(op, "imatrix", imatrix, count(op, "row length", n_per_row)?)?) };
        let dst = if dst_size == 0 { &mut [][..] } else { slice_mut(op, "dst", dst.cast::<u8>(), dst_size)? };
        *written = quant::quantize(dtype, src, n_per_row, imatrix, dst)?;
        Ok(())
    })
}

/// Converts `nelements` elements of ggml type `dtype` at `src` (`src_size`
/// bytes, any alignment) to f32 in `dst` (4-byte aligned, room for
/// `nelements` values): ggml's to_float of the type (dequantization for
/// quantized types). Fails (status, err set) for an unknown type, a type
/// with no conversion (integer types), `nelements` not a whole number of
/// blocks, a `src` shorter than the elements' bytes, NULL or misaligned
/// pointers.
#[no_mangle]
pub extern "C" fn ggml_rs_convert_to_f32(dtype: u32, src: *const c_void, src_size: usize, nelements: u64, dst: *mut f32, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let op = "convert_to_f32";
        aligned(op, "dst", dst)?;
        let src = slice_arg(op, "src", src.cast::<u8>(), src_size)?;
        let dst = if nelements == 0 { &mut [][..] } else { slice_mut(op, "dst", dst, count(op, "element count", nelements)?)? };
        quant::to_f32(dtype, src, nelements, dst)
    })
}

/// A mutable slice argument: NULL is an error (the length is not 0 here).
fn slice_mut<'a, T>(op: &str, what: &str, p: *mut T, n: usize) -> Result<&'a mut [T]> {
    slice_arg(op, what, p.cast_const(), n)?;
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}
