//! `Tensor`: a handle to a ggml tensor owned by a [`Context`](super::Context).
//!
//! A `Tensor` is a plain pointer: it stays valid while the context family
//! that created it (or, for weights, the backend) is alive. The safe layer
//! never frees tensors one by one; contexts free them all at once.

use std::ffi::CStr;
use std::ptr::NonNull;

use crate::sys;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct Tensor(NonNull<sys::ggml_tensor>);

// Tensors are only metadata plus a pointer into a backend buffer; moving the
// handle between threads is fine (Go moves goroutines between OS threads).
// Using one context from two threads at once is not, and is documented.
unsafe impl Send for Tensor {}
// Shared references only read metadata (the model loader hands the weight
// list to its reader threads).
unsafe impl Sync for Tensor {}

impl Tensor {
    /// # Safety
    /// `p` must be NULL or point to a live ggml tensor.
    pub unsafe fn from_raw(p: *mut sys::ggml_tensor) -> Option<Tensor> {
        NonNull::new(p).map(Tensor)
    }

    pub fn as_ptr(self) -> *mut sys::ggml_tensor {
        self.0.as_ptr()
    }

    pub(crate) fn raw(&self) -> &sys::ggml_tensor {
        // SAFETY: the type invariant: the tensor is alive while its context is.
        unsafe { self.0.as_ref() }
    }

    pub fn dtype(self) -> sys::ggml_type {
        self.raw().type_
    }
    /// Elements per dimension, ggml order (`ne[0]` varies fastest).
    pub fn ne(self) -> [i64; 4] {
        self.raw().ne
    }
    /// Byte strides per dimension.
    pub fn nb(self) -> [usize; 4] {
        self.raw().nb
    }
    pub fn dim(self, i: usize) -> i64 {
        self.raw().ne[i]
    }
    pub fn n_dims(self) -> usize {
        unsafe { sys::ggml_n_dims(self.as_ptr()) as usize }
    }
    pub fn nelements(self) -> i64 {
        self.ne().iter().product()
    }
    /// Bytes spanned by the tensor (for a non-contiguous view: its extent).
    pub fn nbytes(self) -> usize {
        unsafe { sys::ggml_nbytes(self.as_ptr()) }
    }
    pub fn is_contiguous(self) -> bool {
        unsafe { sys::ggml_is_contiguous(self.as_ptr()) }
    }
    pub fn is_quantized(self) -> bool {
        unsafe { sys::ggml_is_quantized(self.dtype()) }
    }
    /// True when the tensor (or the tensor it views) has backend memory.
    pub fn has_data(self) -> bool {
        let r = self.raw();
        !r.buffer.is_null() && !r.data.is_null()
    }
    /// True when the tensor is (a view of) a model weight: memory in a
    /// buffer of weights, which graphs only read.
    pub fn is_weight(self) -> bool {
        let mut r = self.raw();
        while !r.view_src.is_null() {
            // SAFETY: a view's source outlives the view (same context family).
            r = unsafe { &*r.view_src };
        }
        // SAFETY: a tensor's buffer is null or a live buffer.
        !r.buffer.is_null() && unsafe { sys::ggml_backend_buffer_get_usage(r.buffer) } == sys::GGML_BACKEND_BUFFER_USAGE_WEIGHTS
    }
    pub fn name(self) -> String {
        let r = self.raw();
        unsafe { CStr::from_ptr(r.name.as_ptr()) }.to_string_lossy().into_owned()
    }
    pub fn type_name(self) -> &'static str {
        type_name(self.dtype())
    }

    /// `f32[4,3]`: type and shape with trailing 1-dims dropped, for messages.
    pub fn describe(self) -> String {
        let ne = self.ne();
        let mut n = 4;
        while n > 1 && ne[n - 1] == 1 {
            n -= 1;
        }
        let dims: Vec<String> = ne[..n].iter().map(|d| d.to_string()).collect();
        let view = if self.is_contiguous() { "" } else { " (non-contiguous)" };
        format!("{}[{}]{}", self.type_name(), dims.join(","), view)
    }
}

/// ggml's name of a type ("f32", "q8_0", …), or "invalid".
pub fn type_name(t: sys::ggml_type) -> &'static str {
    if !(0..sys::GGML_TYPE_COUNT).contains(&t) {
        return "invalid";
    }
    let p = unsafe { sys::ggml_type_name(t) };
    if p.is_null() {
        return "invalid";
    }
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("invalid")
}

/// True for a type id that ggml knows and can store (removed ids excluded).
pub fn is_valid_type(t: sys::ggml_type) -> bool {
    if !(0..sys::GGML_TYPE_COUNT).contains(&t) {
        return false;
    }
    let traits = unsafe { sys::ggml_get_type_traits(t) };
    !traits.is_null() && unsafe { (*traits).blck_size } > 0
}

/// Bytes per element (per block for quantized types), without a call into
/// ggml for the common types (checks run on every op).
#[inline]
pub fn elem_size(t: sys::ggml_type) -> usize {
    match t {
        sys::GGML_TYPE_F32 | sys::GGML_TYPE_I32 => 4,
        sys::GGML_TYPE_F16 | sys::GGML_TYPE_BF16 => 2,
        _ => unsafe { sys::ggml_type_size(t) },
    }
}
