//! Tensor metadata and data transfer.

use super::{guard_status, ggml_rs_error, ggml_rs_status, ggml_rs_tensor, slice_arg, tensor_arg};
use crate::ml::{data, Error};

/// A tensor's type and layout, read in one call.
#[repr(C)]
#[derive(Default)]
pub struct ggml_rs_tensor_meta {
    /// ggml type id (0 f32, 1 f16, 8 q8_0, 26 i32, …).
    pub type_: i32,
    /// Dimensions up to the last one that is not 1 (at least 1).
    pub n_dims: i32,
    /// Elements per dimension, ggml order (ne[0] varies fastest).
    pub ne: [i64; 4],
    /// Byte stride per dimension.
    pub nb: [u64; 4],
    /// Bytes the tensor spans.
    pub nbytes: u64,
    /// Whether the elements are stored densely in order.
    pub contiguous: bool,
    /// Whether the tensor has memory (a data tensor, a weight, or a
    /// computed output).
    pub has_data: bool,
    /// Bytes of the elements in logical order (what ggml_rs_tensor_get
    /// copies): nelements × type size / block size.
    pub data_size: u64,
    /// Size of the backend buffer holding the tensor when the tensor owns a
    /// dedicated one (data tensors of a context: its padded allocation);
    /// 0 otherwise.
    pub buffer_size: u64,
}

/// Fills `*out` with `t`'s metadata. Errors: NULL `t` or `out`.
#[no_mangle]
pub extern "C" fn ggml_rs_tensor_get_meta(t: *mut ggml_rs_tensor, out: *mut ggml_rs_tensor_meta, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let t = tensor_arg("tensor_meta", "tensor", t)?;
        let out = unsafe { out.as_mut() }.ok_or_else(|| Error::invalid("tensor_meta: out is NULL"))?;
        let nb = t.nb();
        *out = ggml_rs_tensor_meta {
            type_: t.dtype() as i32,
            n_dims: t.n_dims() as i32,
            ne: t.ne(),
            nb: [nb[0] as u64, nb[1] as u64, nb[2] as u64, nb[3] as u64],
            nbytes: t.nbytes() as u64,
            contiguous: t.is_contiguous(),
            has_data: t.has_data(),
            data_size: data_size(t),
            buffer_size: owned_buffer_size(t),
        };
        Ok(())
    })
}

fn data_size(t: crate::ml::Tensor) -> u64 {
    let ne = t.ne();
    (unsafe { crate::sys::ggml_row_size(t.dtype(), ne[0]) } as u64) * (ne[1] * ne[2] * ne[3]) as u64
}

fn owned_buffer_size(t: crate::ml::Tensor) -> u64 {
    let r = t.raw();
    if r.buffer.is_null() || !r.view_src.is_null() {
        return 0;
    }
    let buf = r.buffer;
    let (base, size) = unsafe { (crate::sys::ggml_backend_buffer_get_base(buf), crate::sys::ggml_backend_buffer_get_size(buf)) };
    // A dedicated buffer starts at the tensor and is no larger than its
    // padded size (compute buffers and weight buffers hold many tensors).
    let padded = unsafe { crate::sys::ggml_backend_buffer_get_alloc_size(buf, t.as_ptr()) };
    let align = unsafe { crate::sys::ggml_backend_buffer_get_alignment(buf) }.max(1);
    if base == r.data && size <= padded.div_ceil(align) * align.max(1) && unsafe { crate::sys::ggml_backend_buffer_get_usage(buf) } != crate::sys::GGML_BACKEND_BUFFER_USAGE_COMPUTE {
        size as u64
    } else {
        0
    }
}

/// Copies `t`'s name (NUL-terminated, truncated to fit) into
/// `dst[0..len]`; returns the name's full length in bytes (without NUL),
/// or 0 for a NULL `t`. `dst` may be NULL when `len` is 0.
#[no_mangle]
pub extern "C" fn ggml_rs_tensor_name(t: *mut ggml_rs_tensor, dst: *mut std::ffi::c_char, len: usize) -> usize {
    super::guard(std::ptr::null_mut(), 0, || {
        let Some(t) = super::opt_tensor(t) else { return Ok(0) };
        let name = t.name();
        if len > 0 && !dst.is_null() {
            let n = name.len().min(len - 1);
            unsafe {
                std::ptr::copy_nonoverlapping(name.as_ptr().cast(), dst, n);
                *dst.add(n) = 0;
            }
        }
        Ok(name.len())
    })
}

/// Overwrites all of `t` with `len` bytes from `src` (`len` must equal the
/// tensor's byte size; 0 does nothing). `t` must have memory and be
/// contiguous. The caller keeps ownership of `src`.
#[no_mangle]
pub extern "C" fn ggml_rs_tensor_set(t: *mut ggml_rs_tensor, src: *const u8, len: usize, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let t = tensor_arg("tensor_set", "tensor", t)?;
        let bytes = slice_arg("tensor_set", "src", src, len)?;
        if len == 0 {
            return Ok(());
        }
        data::write(t, bytes, "tensor_set")
    })
}

/// Copies `t`'s elements in logical order (a non-contiguous view is
/// gathered) into `dst`, which must hold exactly
/// `nelements * element size` bytes (`ggml_row_size` of each row for
/// quantized types). Use it after a compute that listed `t`, or on data
/// tensors and weights. Errors: no memory, wrong `len`.
#[no_mangle]
pub extern "C" fn ggml_rs_tensor_get(t: *mut ggml_rs_tensor, dst: *mut u8, len: usize, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let t = tensor_arg("tensor_get", "tensor", t)?;
        let bytes = data::read(t, "tensor_get")?;
        if bytes.len() != len {
            return Err(Error::shape(format!(
                "tensor_get: destination holds {len} bytes but {} has {}",
                t.describe(),
                bytes.len()
            )));
        }
        if len > 0 {
            if dst.is_null() {
                return Err(Error::invalid("tensor_get: dst is NULL"));
            }
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, len) };
        }
        Ok(())
    })
}

/// Copies `t`'s elements as f32 (converting f16/bf16/i32, dequantizing
/// quantized types) into `dst[0..n]`; `n` must equal the element count.
#[no_mangle]
pub extern "C" fn ggml_rs_tensor_get_f32(t: *mut ggml_rs_tensor, dst: *mut f32, n: usize, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let t = tensor_arg("tensor_get_f32", "tensor", t)?;
        let vals = data::read_f32(t, "tensor_get_f32")?;
        if vals.len() != n {
            return Err(Error::shape(format!(
                "tensor_get_f32: destination holds {n} floats but {} has {}",
                t.describe(),
                vals.len()
            )));
        }
        if n > 0 {
            if dst.is_null() {
                return Err(Error::invalid("tensor_get_f32: dst is NULL"));
            }
            unsafe { std::ptr::copy_nonoverlapping(vals.as_ptr(), dst, n) };
        }
        Ok(())
    })
}
