//! Helpers shared by the Rust integration tests: a backend, random data,
//! uploads and read-backs, and tolerance checks.
#![allow(dead_code)]

pub mod arr;
pub mod fifo;
pub mod gguf_write;

use ggml_rs::ml::{Backend, BackendParams, Context, Tensor};
use ggml_rs::sys;

pub const F32: u32 = sys::GGML_TYPE_F32;
pub const F16: u32 = sys::GGML_TYPE_F16;
pub const I32: u32 = sys::GGML_TYPE_I32;

pub fn backend() -> Backend {
    Backend::new(&BackendParams { n_threads: 2, ..Default::default() }).expect("backend")
}

/// A root context and its Input() sibling.
pub fn contexts(b: &Backend) -> (Context, Context) {
    let root = Context::new(b, 4096).expect("context");
    let input = root.input();
    (root, input)
}

/// Deterministic xorshift random numbers in [-1, 1).
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
}

pub fn f16_bits(x: f32) -> u16 {
    unsafe { sys::ggml_fp32_to_fp16(x) }
}
pub fn f16_round(x: f32) -> f32 {
    unsafe { sys::ggml_fp16_to_fp32(sys::ggml_fp32_to_fp16(x)) }
}

/// Uploads `vals` (ggml order) as a tensor of `dtype` (F32 or F16).
pub fn upload(ctx: &mut Context, dtype: u32, shape: &[i64], vals: &[f32]) -> Tensor {
    let bytes: Vec<u8> = match dtype {
        sys::GGML_TYPE_F32 => vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
        sys::GGML_TYPE_F16 => vals.iter().flat_map(|&v| f16_bits(v).to_le_bytes()).collect(),
        _ => panic!("upload: unsupported dtype {dtype}"),
    };
    ctx.from_bytes(dtype, shape, &bytes).expect("upload")
}

pub fn upload_i32(ctx: &mut Context, shape: &[i64], vals: &[i32]) -> Tensor {
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    ctx.from_bytes(I32, shape, &bytes).expect("upload i32")
}

/// Computes `t` in `ctx` and reads it back as f32.
pub fn eval(ctx: &mut Context, t: Tensor) -> Vec<f32> {
    ctx.compute(&[t]).expect("compute");
    ggml_rs::ml::data::read_f32(t, "test").expect("read")
}

/// Asserts |got - want| <= atol + rtol*|want| everywhere.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan()) || (g == w);
        assert!(ok, "{what}: element {i}: got {g}, want {w} (atol {atol}, rtol {rtol})");
    }
}

/// Index of element (i0,i1,i2,i3) in a contiguous tensor of shape `ne`.
pub fn idx(ne: [usize; 4], i0: usize, i1: usize, i2: usize, i3: usize) -> usize {
    ((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0
}

// ---- views for non-contiguous inputs ------------------------------------------

pub fn view_of(p: *mut sys::ggml_tensor) -> Tensor {
    unsafe { Tensor::from_raw(p) }.expect("view")
}
pub fn transpose(root: &Context, t: Tensor) -> Tensor {
    view_of(unsafe { sys::ggml_transpose(root.ggml_context(), t.as_ptr()) })
}
pub fn permute(root: &Context, t: Tensor, ax: [i32; 4]) -> Tensor {
    view_of(unsafe { sys::ggml_permute(root.ggml_context(), t.as_ptr(), ax[0], ax[1], ax[2], ax[3]) })
}
/// The first `ne0` elements of every row of `t`, rows keeping their stride.
pub fn padded_rows(root: &Context, t: Tensor, ne0: i64) -> Tensor {
    let (ne, nb) = (t.ne(), t.nb());
    view_of(unsafe { sys::ggml_view_4d(root.ggml_context(), t.as_ptr(), ne0, ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], 0) })
}

/// The values of view `v` in logical order, given the contiguous values
/// `base` of the tensor it views.
pub fn logical<T: Copy>(v: Tensor, base: &[T]) -> Vec<T> {
    let es = unsafe { sys::ggml_type_size(v.dtype()) };
    let offs = unsafe { (*v.as_ptr()).view_offs };
    let (ne, nb) = (v.ne(), v.nb());
    let mut out = Vec::new();
    for i3 in 0..ne[3] as usize {
        for i2 in 0..ne[2] as usize {
            for i1 in 0..ne[1] as usize {
                for i0 in 0..ne[0] as usize {
                    out.push(base[(offs + i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]) / es]);
                }
            }
        }
    }
    out
}

/// A ggml-rs-rpc-server child process (the bin needs the `rpc` feature).
#[cfg(feature = "rpc")]
pub mod server;

/// The RPC protocol's command ids and sizes.
pub mod protocol;

/// The CPU device's extra buffer type named `name` (CPU_REPACK, AMX, ...),
/// if this build and CPU have it.
pub fn extra_buffer_type(name: &str) -> Option<sys::ggml_backend_buffer_type_t> {
    unsafe {
        let reg = sys::ggml_backend_cpu_reg();
        let f = sys::ggml_backend_reg_get_proc_address(reg, c"ggml_backend_dev_get_extra_bufts".as_ptr());
        if f.is_null() {
            return None;
        }
        let f: sys::ggml_backend_dev_get_extra_bufts_t = std::mem::transmute(f);
        let mut p = (f.unwrap())(sys::ggml_backend_reg_dev_get(reg, 0));
        while !p.is_null() && !(*p).is_null() {
            if std::ffi::CStr::from_ptr(sys::ggml_backend_buft_name(*p)).to_str() == Ok(name) {
                return Some(*p);
            }
            p = p.add(1);
        }
        None
    }
}

/// Cancels `b` 5 ms from now, from another thread, once both threads are
/// running: call it just before the compute it should stop, and join the
/// handle after.
pub fn cancel_soon(b: &Backend) -> std::thread::JoinHandle<()> {
    let started = std::sync::Arc::new(std::sync::Barrier::new(2));
    let (canceller, go) = (b.clone(), started.clone());
    let t = std::thread::spawn(move || {
        go.wait();
        std::thread::sleep(std::time::Duration::from_millis(5));
        canceller.cancel();
    });
    started.wait();
    t
}
