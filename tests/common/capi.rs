#![allow(dead_code)]
//! Declarations matching include/ggml_rs.h for the tests that call the
//! exported symbols the way a C (or Go) caller does. Each test file adds the
//! op functions it exercises in its own `capi` module.

use std::ffi::c_char;

#[repr(C)]
pub struct Error {
    pub status: i32,
    pub message: [c_char; 1024],
}
impl Error {
    pub fn new() -> Error {
        Error { status: 0, message: [0; 1024] }
    }
    pub fn text(&self) -> String {
        unsafe { std::ffi::CStr::from_ptr(self.message.as_ptr()) }.to_string_lossy().into_owned()
    }
}
#[repr(C)]
pub struct BackendParams {
    pub n_threads: u32,
    pub max_graph_nodes: u32,
    pub flash_attention: i32,
    pub alloc_memory: bool,
}
pub enum Backend {}
pub enum Ctx {}
pub enum T {}

pub const OK: i32 = 0;
pub const INVALID_ARGUMENT: i32 = 1;
pub const SHAPE: i32 = 2;
pub const DTYPE: i32 = 3;
pub const COMPUTE: i32 = 5;
pub const UNSUPPORTED: i32 = 11;

extern "C" {
    pub fn ggml_rs_backend_new(p: *const BackendParams, out: *mut *mut Backend, err: *mut Error) -> i32;
    pub fn ggml_rs_backend_free(b: *mut Backend);
    pub fn ggml_rs_ctx_new(b: *const Backend, size: usize, err: *mut Error) -> *mut Ctx;
    pub fn ggml_rs_ctx_input(c: *mut Ctx) -> *mut Ctx;
    pub fn ggml_rs_ctx_free(c: *mut Ctx);
    pub fn ggml_rs_ctx_from_data(
        c: *mut Ctx,
        type_: i32,
        ne: *const i64,
        n_dims: usize,
        data: *const u8,
        len: usize,
        err: *mut Error,
    ) -> *mut T;
    pub fn ggml_rs_ctx_compute(c: *mut Ctx, outs: *const *mut T, n: usize, err: *mut Error) -> i32;
    pub fn ggml_rs_ctx_recorded_error(c: *const Ctx, err: *mut Error) -> i32;
    pub fn ggml_rs_ctx_clear_error(c: *mut Ctx);
    pub fn ggml_rs_tensor_get_f32(t: *mut T, dst: *mut f32, n: usize, err: *mut Error) -> i32;
}
