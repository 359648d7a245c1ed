//! Quantization on host memory: f32 rows to a ggml type (ggml's reference
//! quantizers, byte for byte) and any ggml type back to f32. No context or
//! backend is involved. Types are ggml type ids (`enum ggml_type` values:
//! 0 = f32, 1 = f16, 2 = q4_0, 8 = q8_0, 12 = q4_K, 30 = bf16, ...).

use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, AtomicU64};

use super::{ggml_rs_error, ggml_rs_status, guard_status, slice_arg};
use crate::ml::quant_slab::{self, SharedRows, Slab};
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

/// One slab of rows for ggml_rs_quantize_slab: `rows` rows of `ncols`
/// values of ggml type `from` at `src` (row after row, `src_row` bytes
/// each), to type `to` at `dst` (`dst_row` bytes each), in chunks of at
/// most `chunk` rows taken by `threads` threads. `imatrix` (nullable,
/// `imatrix_len` values, 4-byte aligned): `ncols` importance weights per
/// expert of `per_expert` rows; the slab's first row is row `first` of the
/// tensor.
#[repr(C)]
pub struct ggml_rs_quantize_slab_rows {
    pub from: u32,
    pub to: u32,
    pub src: *const u8,
    pub src_row: u64,
    pub dst: *mut u8,
    pub dst_row: u64,
    pub ncols: u64,
    pub rows: u64,
    pub chunk: u64,
    pub threads: u64,
    pub imatrix: *const f32,
    pub imatrix_len: u64,
    pub per_expert: u64,
    pub first: u64,
}

/// Converts and quantizes this thread's part of the slab `*slab`, which
/// `threads` threads call at once: each takes chunks of rows in turn from
/// `*next` (the first row not yet taken; 0 before the first call, 8-byte
/// aligned, shared) until none is left or `*failed` (shared, 4-byte
/// aligned; may be shared by several slabs) is set; each chunk goes to
/// f32 in `scratch` (`scratch_len` values, at least chunk × ncols), then
/// ggml_quantize_chunk writes its rows of `dst`. Threads write disjoint
/// rows; `dst` must not be read until all have returned. Fails (status,
/// err set, `*failed` set, `*in_convert` (nullable) set to 1 when the
/// source type could not be converted) for a slab whose sizes do not hold
/// together, bad pointers, an unconvertible or unquantizable type, or
/// values a quantizer refuses.
#[no_mangle]
pub extern "C" fn ggml_rs_quantize_slab(
    slab: *const ggml_rs_quantize_slab_rows,
    next: *mut u64,
    failed: *mut i32,
    scratch: *mut f32,
    scratch_len: u64,
    in_convert: *mut i32,
    err: *mut ggml_rs_error,
) -> ggml_rs_status {
    guard_status(err, || {
        let op = "quantize_slab";
        let s = unsafe { slab.as_ref() }.ok_or_else(|| Error::invalid(format!("{op}: slab is NULL")))?;
        for (what, p) in [("next", next as usize), ("failed", failed as usize)] {
            if p == 0 {
                return Err(Error::invalid(format!("{op}: {what} is NULL")));
            }
        }
        aligned(op, "next", next)?;
        aligned(op, "failed", failed)?;
        aligned(op, "scratch", scratch)?;
        aligned(op, "imatrix", s.imatrix)?;
        // SAFETY: non-NULL and aligned (above); the caller shares them
        // between the slab's threads only through these atomics.
        let (next, failed) = unsafe { (AtomicU64::from_ptr(next), AtomicI32::from_ptr(failed)) };
        let size = |rows: u64, row: u64, what| count(op, what, rows.saturating_mul(row));
        let (src_size, dst_size) = (size(s.rows, s.src_row, "source size")?, size(s.rows, s.dst_row, "destination size")?);
        let src = if src_size == 0 { &[][..] } else { slice_arg(op, "src", s.src, src_size)? };
        if dst_size > 0 && s.dst.is_null() {
            return Err(Error::invalid(format!("{op}: dst is NULL")));
        }
        let imatrix = if s.imatrix.is_null() { None } else { Some(slice_arg(op, "imatrix", s.imatrix, count(op, "imatrix length", s.imatrix_len)?)?) };
        let slab = Slab {
            from: s.from,
            to: s.to,
            src,
            src_row: count(op, "source row", s.src_row)?,
            // SAFETY: the caller gives dst_size writable bytes for the call.
            dst: unsafe { SharedRows::new(s.dst, dst_size) },
            dst_row: count(op, "destination row", s.dst_row)?,
            ncols: count(op, "columns", s.ncols)?,
            rows: count(op, "rows", s.rows)?,
            chunk: count(op, "chunk", s.chunk)?,
            threads: count(op, "threads", s.threads)?,
            imatrix,
            per_expert: count(op, "expert rows", s.per_expert)?,
            first: count(op, "first row", s.first)?,
        };
        if let Err(e) = slab.check() {
            failed.store(1, std::sync::atomic::Ordering::Relaxed);
            return Err(e);
        }
        let scratch = if scratch_len == 0 { &mut [][..] } else { slice_mut(op, "scratch", scratch, count(op, "scratch length", scratch_len)?)? };
        quant_slab::quantize_slab(&slab, next, failed, scratch).map_err(|e| {
            if let Some(c) = unsafe { in_convert.as_mut() } {
                *c = e.in_convert as i32;
            }
            e.error
        })
    })
}

/// A mutable slice argument: NULL is an error (the length is not 0 here).
fn slice_mut<'a, T>(op: &str, what: &str, p: *mut T, n: usize) -> Result<&'a mut [T]> {
    slice_arg(op, what, p.cast_const(), n)?;
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}
