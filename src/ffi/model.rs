//! Model backends: opening a GGUF file with a layer placement, loading the
//! weights, reading metadata, weights and the memory report.

use std::ffi::{c_char, c_void, CStr};

use super::backend::{convert_params, ggml_rs_backend, ggml_rs_backend_params};
use super::{copy_str, guard, guard_status, ggml_rs_error, ggml_rs_status, ggml_rs_tensor, out_tensor, slice_arg};
use crate::ml::gguf::{Array, Value};
use crate::ml::model::{Layout, Memory};
use crate::ml::{Backend, Error, ErrorKind, Result};

/// Where a model's layers go. Zero-initialise it for "everything on the
/// CPU, repacking allowed".
#[repr(C)]
pub struct ggml_rs_model_params {
    /// Device per layer `0..=block_count` (the last one is the output
    /// layer): a ggml registry device index (see ggml_rs_device_get), which
    /// must be a GPU, or -1 for the CPU. Missing layers stay on the CPU.
    /// May be NULL when `n_layer_devices` is 0.
    pub layer_devices: *const i32,
    pub n_layer_devices: usize,
    /// Layers whose mixture-of-experts expert tensors (`ffn_*_exps`) stay
    /// in CPU memory while the rest of the layer goes to its device.
    pub cpu_expert_layers: *const i32,
    pub n_cpu_expert_layers: usize,
    /// Do not use the CPU's extra buffer types (weight repacking for faster
    /// CPU matmuls).
    pub no_extra_bufts: bool,
    /// Let CPU-resident matmul weights take kernels that are faster but
    /// round differently from ggml's (as ik_llama.cpp's run-time
    /// repacking): Q8_0, Q5_0 and Q4_1 products with each block's integer
    /// sum converted once; F16 weights rounded to bf16 at load, and F16 and BF16
    /// products in bf16, where the CPU has AVX-512 BF16. Logits are then
    /// close to, but no longer bit-identical with, llama.cpp's. Ignored
    /// with `no_extra_bufts`.
    pub fast_kernels: bool,
}

/// Opaque memory report (see ggml_rs_backend_memory).
pub struct ggml_rs_memory {
    memory: Memory,
}

fn layout_of(p: Option<&ggml_rs_model_params>) -> Result<Layout> {
    let Some(p) = p else { return Ok(Layout::default()) };
    let devs = slice_arg("backend_open", "layer_devices", p.layer_devices, p.n_layer_devices)?;
    let experts = slice_arg("backend_open", "cpu_expert_layers", p.cpu_expert_layers, p.n_cpu_expert_layers)?;
    let mut layout = Layout { no_extra_bufts: p.no_extra_bufts, fast_kernels: p.fast_kernels, ..Default::default() };
    for (l, &d) in devs.iter().enumerate() {
        layout.layer_devices.push(match d {
            -1 => None,
            d if d >= 0 => Some(d as usize),
            d => return Err(Error::invalid(format!("backend_open: layer {l}: device {d} (use -1 for the CPU)"))),
        });
    }
    for &l in experts {
        if l < 0 {
            return Err(Error::invalid(format!("backend_open: cpu_expert_layers holds {l}")));
        }
        layout.cpu_expert_layers.push(l as usize);
    }
    Ok(layout)
}

fn path_arg(path: *const c_char) -> Result<String> {
    if path.is_null() {
        return Err(Error::invalid("backend_open: path is NULL"));
    }
    unsafe { CStr::from_ptr(path) }
        .to_str()
        .map(str::to_owned)
        .map_err(|_| Error::invalid("backend_open: path is not UTF-8"))
}

/// Opens the GGUF model at `path` and places its weights as `model` says
/// (NULL: everything on the CPU); `params` as for ggml_rs_backend_new (NULL:
/// defaults). With `params->alloc_memory` the weights are allocated (read
/// them with ggml_rs_backend_load); without, only sized (a "fit" check:
/// ggml_rs_backend_memory tells what the model needs).
/// On success stores a new handle in `*out` (free with ggml_rs_backend_free).
/// If `out_memory` is not NULL it receives a new memory report (free with
/// ggml_rs_memory_free) on success and also when the weights did not fit
/// (GGML_RS_ERR_OUT_OF_MEMORY), so a caller can retry with fewer layers on
/// a device. Errors: GGML_RS_ERR_IO / _FORMAT for unreadable or invalid
/// files (the message names the problem and the tensor), _INVALID_ARGUMENT
/// for a bad placement, _OUT_OF_MEMORY.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_open(
    path: *const c_char,
    params: *const ggml_rs_backend_params,
    model: *const ggml_rs_model_params,
    out: *mut *mut ggml_rs_backend,
    out_memory: *mut *mut ggml_rs_memory,
    err: *mut ggml_rs_error,
) -> ggml_rs_status {
    guard_status(err, || {
        if out.is_null() {
            return Err(Error::invalid("backend_open: out is NULL"));
        }
        let path = path_arg(path)?;
        let p = convert_params(unsafe { params.as_ref() })?;
        let layout = layout_of(unsafe { model.as_ref() })?;
        let give_memory = |m: Memory| {
            if !out_memory.is_null() {
                unsafe { *out_memory = Box::into_raw(Box::new(ggml_rs_memory { memory: m })) };
            }
        };
        match Backend::open(Some(&path), &p, &layout) {
            Ok(b) => {
                give_memory(b.memory());
                unsafe { *out = Box::into_raw(Box::new(ggml_rs_backend { backend: b })) };
                Ok(())
            }
            Err(e) if e.kind == ErrorKind::OutOfMemory && p.alloc_memory => {
                // Size it again without allocating, to report what it needs.
                let sizing = crate::ml::BackendParams { alloc_memory: false, ..p };
                if let Ok(b) = Backend::open(Some(&path), &sizing, &layout) {
                    give_memory(b.memory());
                }
                Err(e)
            }
            Err(e) => Err(e),
        }
    })
}

/// Called with the fraction of weights loaded (0 to 1, never decreasing),
/// always on the thread that called ggml_rs_backend_load. Return false to
/// cancel the load.
pub type ggml_rs_progress_fn = Option<extern "C" fn(fraction: f32, user_data: *mut c_void) -> bool>;

/// Reads the model's weights from its file, in parallel. `progress` may be
/// NULL. Errors: GGML_RS_ERR_ABORTED when `progress` returned false (the
/// backend stays valid; its weights are incomplete until a later load
/// succeeds), _IO, _INVALID_ARGUMENT for a backend made without memory
/// allocation. A backend without a model loads nothing and succeeds.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_load(b: *const ggml_rs_backend, progress: ggml_rs_progress_fn, user_data: *mut c_void, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let b = unsafe { b.as_ref() }.ok_or_else(|| Error::invalid("backend_load: backend is NULL"))?;
        let mut cb = |f: f32| match progress {
            Some(p) => p(f, user_data),
            None => true,
        };
        b.backend.load(&mut cb)
    })
}

/// Repeating layers of the backend's model (0 without a model or NULL).
#[no_mangle]
pub extern "C" fn ggml_rs_backend_block_count(b: *const ggml_rs_backend) -> usize {
    unsafe { b.as_ref() }.map(|b| b.backend.block_count()).unwrap_or(0)
}

/// The weight named `name` (e.g. "blk.3.attn_q.weight"; "output.weight" may
/// be a tied copy of the token embeddings, and rope frequency tensors exist
/// per layer as "blk.N.rope_freqs.weight"), or NULL when there is none. The
/// tensor belongs to the backend and lives as long as it (or any context
/// made from it).
#[no_mangle]
pub extern "C" fn ggml_rs_backend_get(b: *const ggml_rs_backend, name: *const c_char) -> *mut ggml_rs_tensor {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || {
        let (Some(b), false) = (unsafe { b.as_ref() }, name.is_null()) else { return Ok(std::ptr::null_mut()) };
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        Ok(b.backend.get(&name).map(out_tensor).unwrap_or(std::ptr::null_mut()))
    })
}

/// Where one weight went.
#[repr(C)]
pub struct ggml_rs_weight_info {
    /// NUL-terminated tensor name.
    pub name: [c_char; 64],
    /// NUL-terminated ggml buffer type name ("CPU", "CPU_REPACK", "CUDA0" …).
    pub buffer_type: [c_char; 64],
    /// ggml registry index of the device that holds it.
    pub device: i64,
    /// Layer (0..block_count, block_count = output layer), or -1 for input
    /// weights (token embeddings), which always stay on the CPU.
    pub layer: i64,
    pub type_: i32,
    pub ne: [i64; 4],
    pub nbytes: u64,
}

/// Number of weight tensors the backend created (0 without a model).
#[no_mangle]
pub extern "C" fn ggml_rs_backend_weight_count(b: *const ggml_rs_backend) -> usize {
    unsafe { b.as_ref() }.map(|b| b.backend.placements().len()).unwrap_or(0)
}

/// Fills `*out` with the `i`-th weight's placement (creation order).
/// Errors: NULL arguments, `i` out of range.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_weight_info(b: *const ggml_rs_backend, i: usize, out: *mut ggml_rs_weight_info, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let b = unsafe { b.as_ref() }.ok_or_else(|| Error::invalid("weight_info: backend is NULL"))?;
        let out = unsafe { out.as_mut() }.ok_or_else(|| Error::invalid("weight_info: out is NULL"))?;
        let all = b.backend.placements();
        let (name, buft, device, layer) = all
            .get(i)
            .ok_or_else(|| Error::invalid(format!("weight_info: index {i} out of range ({} weights)", all.len())))?;
        let t = b.backend.get(name).ok_or_else(|| Error::invalid(format!("weight_info: {name} vanished")))?;
        copy_str(&mut out.name, name);
        copy_str(&mut out.buffer_type, buft);
        out.device = *device as i64;
        out.layer = layer.map(|l| l as i64).unwrap_or(-1);
        out.type_ = t.dtype() as i32;
        out.ne = t.ne();
        out.nbytes = t.nbytes() as u64;
        Ok(())
    })
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_f64(out: &mut String, v: f64) {
    if v.is_finite() {
        out.push_str(&format!("{v:?}"));
    } else if v.is_nan() {
        out.push_str("\"nan\"");
    } else if v > 0.0 {
        out.push_str("\"inf\"");
    } else {
        out.push_str("\"-inf\"");
    }
}

fn json_list<T>(out: &mut String, xs: &[T], f: impl Fn(&mut String, &T)) {
    out.push('[');
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        f(out, x);
    }
    out.push(']');
}

fn json_value(out: &mut String, v: &Value) {
    let ty = v.type_name();
    out.push_str("{\"type\":");
    json_str(out, &ty);
    out.push_str(",\"value\":");
    match v {
        Value::U8(x) => out.push_str(&x.to_string()),
        Value::I8(x) => out.push_str(&x.to_string()),
        Value::U16(x) => out.push_str(&x.to_string()),
        Value::I16(x) => out.push_str(&x.to_string()),
        Value::U32(x) => out.push_str(&x.to_string()),
        Value::I32(x) => out.push_str(&x.to_string()),
        Value::U64(x) => out.push_str(&x.to_string()),
        Value::I64(x) => out.push_str(&x.to_string()),
        Value::F32(x) => json_f64(out, *x as f64),
        Value::F64(x) => json_f64(out, *x),
        Value::Bool(x) => out.push_str(if *x { "true" } else { "false" }),
        Value::Str(s) => json_str(out, s),
        Value::Array(a) => json_array(out, a),
    }
    out.push('}');
}

fn json_array(out: &mut String, a: &Array) {
    match a {
        Array::U8(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::I8(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::U16(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::I16(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::U32(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::I32(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::U64(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::I64(v) => json_list(out, v, |o, x| o.push_str(&x.to_string())),
        Array::F32(v) => json_list(out, v, |o, x| json_f64(o, *x as f64)),
        Array::F64(v) => json_list(out, v, |o, x| json_f64(o, *x)),
        Array::Bool(v) => json_list(out, v, |o, x| o.push_str(if *x { "true" } else { "false" })),
        Array::Str(v) => json_list(out, v, |o, x| json_str(o, x)),
    }
}

/// The model's key/value metadata as one JSON object:
/// `{"key": {"type": "u32", "value": 3}, "k2": {"type": "arr[str]", "value": [...]}, ...}`
/// in file order; types are the GGUF names (u8 … f64, bool, str, and
/// arr[T]); non-finite floats are the strings "nan", "inf", "-inf".
/// Copies at most `len - 1` bytes plus a NUL into `dst` and returns the full
/// length (without NUL): call once with `len == 0` to size the buffer.
/// Returns 0 for a NULL backend; "{}" without a model.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_kv_json(b: *const ggml_rs_backend, dst: *mut c_char, len: usize) -> usize {
    guard(std::ptr::null_mut(), 0, || {
        let Some(b) = (unsafe { b.as_ref() }) else { return Ok(0) };
        let mut out = String::from("{");
        if let Some(g) = b.backend.gguf() {
            for (i, key) in g.keys().iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_str(&mut out, key);
                out.push(':');
                match g.get(key) {
                    Some(v) => json_value(&mut out, &v),
                    None => out.push_str("null"),
                }
            }
        }
        out.push('}');
        if len > 0 && !dst.is_null() {
            let n = out.len().min(len - 1);
            unsafe {
                std::ptr::copy_nonoverlapping(out.as_ptr().cast(), dst, n);
                *dst.add(n) = 0;
            }
        }
        Ok(out.len())
    })
}

/// A snapshot of the backend's memory report: weights and cache per layer
/// and compute graph per device, as ggml allocates (or would allocate)
/// them. Cache counts data tensors of layer contexts; graph is the largest
/// compute buffer measured by ggml_rs_ctx_reserve. Returns a new handle
/// (free with ggml_rs_memory_free), or NULL for a NULL backend.
#[no_mangle]
pub extern "C" fn ggml_rs_backend_memory(b: *const ggml_rs_backend) -> *mut ggml_rs_memory {
    guard(std::ptr::null_mut(), std::ptr::null_mut(), || {
        let Some(b) = (unsafe { b.as_ref() }) else { return Ok(std::ptr::null_mut()) };
        Ok(Box::into_raw(Box::new(ggml_rs_memory { memory: b.backend.memory() })))
    })
}

/// Releases a memory report. NULL is ignored.
#[no_mangle]
pub extern "C" fn ggml_rs_memory_free(m: *mut ggml_rs_memory) {
    if !m.is_null() {
        drop(unsafe { Box::from_raw(m) });
    }
}

/// Devices in the report: the CPU first, then every GPU in registry order.
#[no_mangle]
pub extern "C" fn ggml_rs_memory_device_count(m: *const ggml_rs_memory) -> usize {
    unsafe { m.as_ref() }.map(|m| m.memory.devices.len()).unwrap_or(0)
}

/// ggml registry index of the report's `i`-th device, or -1.
#[no_mangle]
pub extern "C" fn ggml_rs_memory_device(m: *const ggml_rs_memory, i: usize) -> i64 {
    unsafe { m.as_ref() }.and_then(|m| m.memory.devices.get(i)).map(|d| d.device as i64).unwrap_or(-1)
}

/// Entries per layer vector: block_count + 1 (the output layer last).
#[no_mangle]
pub extern "C" fn ggml_rs_memory_layers(m: *const ggml_rs_memory) -> usize {
    unsafe { m.as_ref() }.and_then(|m| m.memory.devices.first()).map(|d| d.weights.len()).unwrap_or(0)
}

/// Bytes of input weights (token embeddings …), always in CPU memory.
#[no_mangle]
pub extern "C" fn ggml_rs_memory_input_weights(m: *const ggml_rs_memory) -> u64 {
    unsafe { m.as_ref() }.map(|m| m.memory.input_weights).unwrap_or(0)
}

/// Bytes of layer `layer`'s weights on the report's `i`-th device (0 when
/// out of range).
#[no_mangle]
pub extern "C" fn ggml_rs_memory_weights(m: *const ggml_rs_memory, i: usize, layer: usize) -> u64 {
    unsafe { m.as_ref() }
        .and_then(|m| m.memory.devices.get(i))
        .and_then(|d| d.weights.get(layer).copied())
        .unwrap_or(0)
}

/// Bytes of layer `layer`'s cache tensors on the report's `i`-th device.
#[no_mangle]
pub extern "C" fn ggml_rs_memory_cache(m: *const ggml_rs_memory, i: usize, layer: usize) -> u64 {
    unsafe { m.as_ref() }
        .and_then(|m| m.memory.devices.get(i))
        .and_then(|d| d.cache.get(layer).copied())
        .unwrap_or(0)
}

/// Bytes of the compute graph buffer on the report's `i`-th device.
#[no_mangle]
pub extern "C" fn ggml_rs_memory_graph(m: *const ggml_rs_memory, i: usize) -> u64 {
    unsafe { m.as_ref() }.and_then(|m| m.memory.devices.get(i)).map(|d| d.graph).unwrap_or(0)
}
