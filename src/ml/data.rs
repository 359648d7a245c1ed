//! Moving tensor data between the caller's memory and backend buffers.

use super::{Error, Result, Tensor};
use crate::sys;

/// The tensor has memory that this process can read (`read`) or write.
fn need_memory_for(t: Tensor, op: &str, read: bool) -> Result<()> {
    need_memory(t, op)?;
    let buf = t.raw().buffer;
    let ops = unsafe { sys::internal::iface(buf) };
    let supported = if read { ops.get_tensor.is_some() } else { ops.set_tensor.is_some() };
    if supported {
        return Ok(());
    }
    let buft = unsafe { std::ffi::CStr::from_ptr(sys::ggml_backend_buft_name(sys::ggml_backend_buffer_get_type(buf))) };
    Err(Error::unsupported(format!(
        "{op}: {} lives in a {} buffer that cannot be {} (repacked weights, or a sizing-only backend)",
        t.describe(),
        buft.to_string_lossy(),
        if read { "read back" } else { "written" }
    )))
}

fn need_memory(t: Tensor, op: &str) -> Result<()> {
    if t.has_data() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{op}: {} has no memory (not computed, or created without Input/Layer)",
            t.describe()
        )))
    }
}

/// Overwrites the whole (contiguous) tensor with `data`.
pub fn write(t: Tensor, data: &[u8], op: &str) -> Result<()> {
    need_memory_for(t, op, false)?;
    if !t.is_contiguous() {
        return Err(Error::shape(format!("{op}: cannot write into non-contiguous {}", t.describe())));
    }
    if data.len() != t.nbytes() {
        return Err(Error::shape(format!(
            "{op}: data size does not match tensor size: {} bytes for {} ({} bytes)",
            data.len(),
            t.describe(),
            t.nbytes()
        )));
    }
    if !data.is_empty() {
        unsafe { sys::ggml_backend_tensor_set(t.as_ptr(), data.as_ptr().cast(), 0, data.len()) };
        super::rpc::check_tensor(t, op)?;
    }
    Ok(())
}

/// Bytes of the tensor in logical order (row-major over ne[0..4]); a
/// non-contiguous view is gathered element by element (row by row for
/// quantized types, which only allow contiguous rows).
pub fn read(t: Tensor, op: &str) -> Result<Vec<u8>> {
    if t.nelements() == 0 {
        return Ok(Vec::new());
    }
    need_memory_for(t, op, true)?;
    let n = t.nbytes();
    let mut raw = vec![0u8; n];
    unsafe { sys::ggml_backend_tensor_get(t.as_ptr(), raw.as_mut_ptr().cast(), 0, n) };
    super::rpc::check_tensor(t, op)?;
    if t.is_contiguous() {
        return Ok(raw);
    }
    let (ne, nb) = (t.ne(), t.nb());
    let (unit, units) = if t.is_quantized() {
        if nb[0] != crate::ml::tensor::elem_size(t.dtype()) {
            return Err(Error::shape(format!("{op}: cannot read {}: rows are not contiguous", t.describe())));
        }
        (unsafe { sys::ggml_row_size(t.dtype(), ne[0]) }, 1)
    } else {
        (crate::ml::tensor::elem_size(t.dtype()), ne[0] as usize)
    };
    let mut out = Vec::with_capacity(unit * units * (ne[1] * ne[2] * ne[3]) as usize);
    for i3 in 0..ne[3] as usize {
        for i2 in 0..ne[2] as usize {
            for i1 in 0..ne[1] as usize {
                let base = i3 * nb[3] + i2 * nb[2] + i1 * nb[1];
                if units == 1 {
                    out.extend_from_slice(&raw[base..base + unit]);
                } else {
                    for i0 in 0..units {
                        let o = base + i0 * nb[0];
                        out.extend_from_slice(&raw[o..o + unit]);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The tensor as f32 values, converting F16/BF16/I32 and dequantizing.
pub fn read_f32(t: Tensor, op: &str) -> Result<Vec<f32>> {
    let bytes = read(t, op)?;
    let n = t.nelements() as usize;
    match t.dtype() {
        sys::GGML_TYPE_F32 => Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()),
        sys::GGML_TYPE_I32 => Ok(bytes.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f32).collect()),
        ty => {
            let traits = unsafe { &*sys::ggml_get_type_traits(ty) };
            let Some(to_float) = traits.to_float else {
                return Err(Error::dtype(format!("{op}: cannot convert {} to f32", t.describe())));
            };
            let mut out = vec![0f32; n];
            unsafe { to_float(bytes.as_ptr().cast(), out.as_mut_ptr(), n as i64) };
            Ok(out)
        }
    }
}
