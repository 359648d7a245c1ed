//! Resolving "auto" flash attention: ask ggml, per device that will run
//! attention, whether it supports the flash-attention op with the model's
//! head sizes and the cache's types, instead of guessing from a driver
//! version as Ollama's engine did.

use super::gguf::{Array, Gguf, Value};
use crate::sys;

/// The attention shape to probe: head sizes and head counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub head_k: i64,
    pub head_v: i64,
    pub heads: i64,
    pub kv_heads: i64,
}

impl Default for AttentionShape {
    /// A common shape, for backends without a model.
    fn default() -> Self {
        AttentionShape { head_k: 128, head_v: 128, heads: 8, kv_heads: 8 }
    }
}

fn as_count(v: Option<Value>) -> Option<i64> {
    match v? {
        // Per-layer head counts (arrays) are common in hybrid models: the
        // largest count is the one attention layers use.
        Value::Array(a) => {
            let counts: Vec<i64> = match a {
                Array::U32(v) => v.into_iter().map(i64::from).collect(),
                Array::I32(v) => v.into_iter().map(i64::from).collect(),
                Array::U64(v) => v.into_iter().filter_map(|x| i64::try_from(x).ok()).collect(),
                Array::I64(v) => v,
                Array::U16(v) => v.into_iter().map(i64::from).collect(),
                Array::U8(v) => v.into_iter().map(i64::from).collect(),
                _ => Vec::new(),
            };
            counts.into_iter().filter(|&n| n > 0).max()
        }
        v => v.as_i64().filter(|&n| n > 0),
    }
}

impl AttentionShape {
    /// The shape a model's metadata describes, where it describes one.
    pub fn of_model(g: &Gguf) -> Option<AttentionShape> {
        let arch = g.arch()?;
        let key = |k: &str| g.get(&format!("{arch}.{k}"));
        let heads = as_count(key("attention.head_count"))?;
        let kv_heads = as_count(key("attention.head_count_kv")).unwrap_or(heads);
        let embd = as_count(key("embedding_length"));
        let head_k = as_count(key("attention.key_length")).or(embd.map(|e| e / heads))?;
        let head_v = as_count(key("attention.value_length")).unwrap_or(head_k);
        let sane = |n: i64| (1..=65536).contains(&n);
        (sane(head_k) && sane(head_v) && sane(heads) && sane(kv_heads) && heads % kv_heads == 0)
            .then_some(AttentionShape { head_k, head_v, heads, kv_heads })
    }
}

/// Whether every device in `devices` supports flash attention on F16 K/V
/// (the cache type ggml-rs uses) for `shape`, for a single token and for a
/// batch. The probe op is built in a metadata-only context.
pub fn supported(devices: &[sys::ggml_backend_dev_t], shape: AttentionShape) -> bool {
    if devices.is_empty() {
        return false;
    }
    // SAFETY: a no_alloc context holds tensor headers only; the pointers
    // live until ggml_free below, and supports_op only reads them.
    unsafe {
        let params = sys::ggml_init_params { mem_size: 64 * 1024, mem_buffer: std::ptr::null_mut(), no_alloc: true };
        let ctx = sys::ggml_init(params);
        if ctx.is_null() {
            return false;
        }
        let s = shape;
        let kv_len = 256;
        let mut ok = true;
        for batch in [1i64, 32] {
            let q = sys::ggml_new_tensor_4d(ctx, sys::GGML_TYPE_F32, s.head_k, batch, s.heads, 1);
            let k = sys::ggml_new_tensor_4d(ctx, sys::GGML_TYPE_F16, s.head_k, kv_len, s.kv_heads, 1);
            let v = sys::ggml_new_tensor_4d(ctx, sys::GGML_TYPE_F16, s.head_v, kv_len, s.kv_heads, 1);
            let mask = sys::ggml_new_tensor_4d(ctx, sys::GGML_TYPE_F16, kv_len, batch, 1, 1);
            let fa = sys::ggml_flash_attn_ext(ctx, q, k, v, mask, 1.0 / (s.head_k as f32).sqrt(), 0.0, 0.0);
            sys::ggml_flash_attn_ext_set_prec(fa, sys::GGML_PREC_F32);
            ok &= devices.iter().all(|&d| sys::ggml_backend_dev_supports_op(d, fa));
        }
        sys::ggml_free(ctx);
        ok
    }
}
