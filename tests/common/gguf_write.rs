//! A small GGUF writer for the tests, their fixtures and the fuzz seed
//! corpus (test code: not part of the library), written
//! from the format description in ggml's `gguf.h`: magic, version, tensor
//! count, key/value count (both u64), the key/value pairs (u64-length key,
//! i32 value type, value; arrays: element type, u64 count, elements; strings:
//! u64 length and bytes), the tensor infos (name, u32 n_dims, i64 per
//! dimension, i32 ggml type, u64 offset into the data section), padding to
//! the alignment, then the data. Everything little-endian.
//!
//! It writes what it is told, including broken files: raw keys and names
//! (empty, with NUL bytes), any type id, any dimensions, explicit offsets,
//! overridden counts, magic and version. [`Written::length_fields`] lists
//! where the u64 counts and lengths are, for fuzzers that inflate them.

use ggml_rs::ml::gguf::{Array, Value, DEFAULT_ALIGNMENT, GGUF_TYPE_ARRAY, KEY_ALIGNMENT};
use ggml_rs::ml::tensor::is_valid_type;
use ggml_rs::sys;

/// One tensor to write.
#[derive(Debug, Clone)]
pub struct TensorSpec {
    pub name: Vec<u8>,
    /// ggml type id, written as is.
    pub dtype: u32,
    /// The dimensions written (their count is n_dims unless overridden).
    pub ne: Vec<i64>,
    /// Written instead of `ne.len()` when set.
    pub n_dims: Option<u32>,
    /// Offset in the data section; None: after the previous tensor, padded.
    pub offset: Option<u64>,
    /// The data; None: deterministic bytes of the size ggml computes for
    /// the type and shape (nothing when that is not computable).
    pub data: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
enum Payload {
    Value(Value),
    /// Type id and value bytes, written as is.
    Raw(Vec<u8>),
}

/// A GGUF file to write.
#[derive(Debug, Clone)]
pub struct Writer {
    pub magic: [u8; 4],
    pub version: u32,
    /// Written instead of the number of key/value pairs when set.
    pub n_kv: Option<u64>,
    /// Written instead of the number of tensors when set.
    pub n_tensors: Option<u64>,
    /// Padding of the data section and of each tensor's data.
    pub alignment: u64,
    kvs: Vec<(Vec<u8>, Payload)>,
    tensors: Vec<TensorSpec>,
}

/// A written file and where its parts are.
#[derive(Debug, Clone)]
pub struct Written {
    pub bytes: Vec<u8>,
    /// Positions of the u64 count and length fields (tensor and key/value
    /// counts, string lengths, array lengths).
    pub length_fields: Vec<usize>,
    /// Position of each tensor info.
    pub tensor_infos: Vec<usize>,
    /// Position of the tensor data section.
    pub data_offset: usize,
    /// Offset of each tensor's data within the data section.
    pub tensor_offsets: Vec<u64>,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

/// ggml's size in bytes of a tensor of that type and shape, when valid.
pub fn tensor_nbytes(dtype: u32, ne: &[i64]) -> Option<u64> {
    if !is_valid_type(dtype) || ne.iter().any(|&d| d <= 0) {
        return None;
    }
    let n = ne.iter().try_fold(1i64, |a, &d| a.checked_mul(d))?;
    let (blck, size) = unsafe { (sys::ggml_blck_size(dtype), sys::ggml_type_size(dtype) as u64) };
    if ne.first().copied().unwrap_or(1) % blck != 0 {
        return None;
    }
    ((n / blck) as u64).checked_mul(size)
}

/// Deterministic filler bytes (a small LCG seeded from `seed`).
pub fn fill_bytes(seed: &[u8], n: usize) -> Vec<u8> {
    let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
    for &b in seed {
        s = (s ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .collect()
}

/// `x` rounded up to a multiple of `a`, wrapping: the writer also makes
/// deliberately broken files whose offsets overflow (as a release build
/// always did; a debug build panicked on them).
fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a).wrapping_mul(a)
}

struct Out {
    b: Vec<u8>,
    lengths: Vec<usize>,
}

impl Out {
    fn u32(&mut self, v: u32) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.b.extend_from_slice(&v.to_le_bytes());
    }
    fn len(&mut self, v: u64) {
        self.lengths.push(self.b.len());
        self.u64(v);
    }
    fn str(&mut self, s: &[u8]) {
        self.len(s.len() as u64);
        self.b.extend_from_slice(s);
    }
    fn array(&mut self, a: &Array) {
        self.u32(a.elem_type_id());
        self.len(a.len() as u64);
        match a {
            Array::U8(v) => self.b.extend_from_slice(v),
            Array::I8(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::U16(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::I16(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::U32(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::I32(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::U64(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::I64(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::F32(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::F64(v) => v.iter().for_each(|x| self.b.extend_from_slice(&x.to_le_bytes())),
            Array::Bool(v) => v.iter().for_each(|&x| self.b.push(x as u8)),
            Array::Str(v) => v.iter().for_each(|s| self.str(s.as_bytes())),
        }
    }
    fn value(&mut self, v: &Value) {
        self.u32(v.type_id());
        match v {
            Value::U8(x) => self.b.push(*x),
            Value::I8(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::U16(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::I16(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::U32(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::I32(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::U64(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::I64(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::F32(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::F64(x) => self.b.extend_from_slice(&x.to_le_bytes()),
            Value::Bool(x) => self.b.push(*x as u8),
            Value::Str(s) => self.str(s.as_bytes()),
            Value::Array(a) => self.array(a),
        }
    }
}

impl Writer {
    /// An empty version-3 file with the default alignment (32).
    pub fn new() -> Self {
        Writer {
            magic: *b"GGUF",
            version: 3,
            n_kv: None,
            n_tensors: None,
            alignment: DEFAULT_ALIGNMENT,
            kvs: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Adds a key/value pair.
    pub fn kv(mut self, key: impl AsRef<[u8]>, v: Value) -> Self {
        self.kvs.push((key.as_ref().to_vec(), Payload::Value(v)));
        self
    }

    /// Adds a key followed by `type_and_value`, written as is (for nested
    /// arrays, unknown types, lying lengths).
    pub fn kv_raw(mut self, key: impl AsRef<[u8]>, type_and_value: Vec<u8>) -> Self {
        self.kvs.push((key.as_ref().to_vec(), Payload::Raw(type_and_value)));
        self
    }

    /// Sets the alignment: adds `general.alignment` (u32) and pads with it.
    pub fn with_alignment(mut self, a: u32) -> Self {
        self.alignment = a.max(1).into();
        self.kv(KEY_ALIGNMENT, Value::U32(a))
    }

    /// Adds a tensor with deterministic data placed after the previous one.
    pub fn tensor(self, name: impl AsRef<[u8]>, dtype: u32, ne: &[i64]) -> Self {
        self.tensor_spec(TensorSpec {
            name: name.as_ref().to_vec(),
            dtype,
            ne: ne.to_vec(),
            n_dims: None,
            offset: None,
            data: None,
        })
    }

    pub fn tensor_spec(mut self, t: TensorSpec) -> Self {
        self.tensors.push(t);
        self
    }

    /// The data a tensor gets (explicit, or generated from its name).
    pub fn data_of(t: &TensorSpec) -> Vec<u8> {
        match &t.data {
            Some(d) => d.clone(),
            None => match tensor_nbytes(t.dtype, &t.ne) {
                Some(n) if n <= 1 << 26 => fill_bytes(&t.name, n as usize),
                _ => Vec::new(),
            },
        }
    }

    pub fn write(&self) -> Written {
        let mut o = Out { b: Vec::new(), lengths: Vec::new() };
        o.b.extend_from_slice(&self.magic);
        o.u32(self.version);
        o.len(self.n_tensors.unwrap_or(self.tensors.len() as u64));
        o.len(self.n_kv.unwrap_or(self.kvs.len() as u64));
        for (k, p) in &self.kvs {
            o.str(k);
            match p {
                Payload::Value(v) => o.value(v),
                Payload::Raw(r) => o.b.extend_from_slice(r),
            }
        }
        let a = self.alignment.max(1);
        let datas: Vec<Vec<u8>> = self.tensors.iter().map(Self::data_of).collect();
        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut next = 0u64;
        for (t, d) in self.tensors.iter().zip(&datas) {
            let off = t.offset.unwrap_or(next);
            offsets.push(off);
            next = align_up(off.saturating_add(d.len() as u64), a);
        }
        let mut infos = Vec::with_capacity(self.tensors.len());
        for (t, &off) in self.tensors.iter().zip(&offsets) {
            infos.push(o.b.len());
            o.str(&t.name);
            o.u32(t.n_dims.unwrap_or(t.ne.len() as u32));
            for &d in &t.ne {
                o.u64(d as u64);
            }
            o.u32(t.dtype);
            o.u64(off);
        }
        let data_offset = if self.tensors.is_empty() { o.b.len() } else { align_up(o.b.len() as u64, a) as usize };
        o.b.resize(data_offset, 0);
        // The data section: each tensor's bytes at its offset (skipped when
        // an offset is absurd), padded to the alignment at the end.
        let mut end = 0usize;
        for (d, &off) in datas.iter().zip(&offsets) {
            if off.saturating_add(d.len() as u64) <= 1 << 28 {
                end = end.max(off as usize + d.len());
            }
        }
        if !self.tensors.is_empty() {
            o.b.resize(data_offset + align_up(end as u64, a) as usize, 0);
        }
        for (d, &off) in datas.iter().zip(&offsets) {
            if off.saturating_add(d.len() as u64) <= 1 << 28 {
                let s = data_offset + off as usize;
                o.b[s..s + d.len()].copy_from_slice(d);
            }
        }
        Written { bytes: o.b, length_fields: o.lengths, tensor_infos: infos, data_offset, tensor_offsets: offsets }
    }

    /// Writes the file to `path`.
    pub fn write_to(&self, path: impl AsRef<std::path::Path>) -> std::io::Result<Written> {
        let w = self.write();
        std::fs::write(path, &w.bytes)?;
        Ok(w)
    }
}

/// The type-and-value bytes of an array of arrays (valid GGUF that ggml
/// cannot read), for [`Writer::kv_raw`].
pub fn nested_array_payload() -> Vec<u8> {
    let mut o = Out { b: Vec::new(), lengths: Vec::new() };
    o.u32(GGUF_TYPE_ARRAY);
    o.u32(GGUF_TYPE_ARRAY);
    o.u64(1);
    o.array(&Array::U8(vec![1, 2]));
    o.b
}

/// Fixture: one key of every value type (scalars, strings, an array of
/// each, an empty array) and tensors of several types (F32, F16, Q8_0,
/// Q4_0, Q4_K with ne[0] = 256), 1 to 4 dimensions.
pub fn sample_full() -> Writer {
    use ggml_rs::sys::*;
    Writer::new()
        .kv("general.architecture", Value::Str("llama".into()))
        .kv("general.name", Value::Str("tiny test model ✓".into()))
        .kv("t.u8", Value::U8(200))
        .kv("t.i8", Value::I8(-100))
        .kv("t.u16", Value::U16(60000))
        .kv("t.i16", Value::I16(-30000))
        .kv("t.u32", Value::U32(4_000_000_000))
        .kv("t.i32", Value::I32(-2_000_000_000))
        .kv("t.u64", Value::U64(u64::MAX - 1))
        .kv("t.i64", Value::I64(i64::MIN + 1))
        .kv("t.f32", Value::F32(-1.5))
        .kv("t.f64", Value::F64(std::f64::consts::PI))
        .kv("t.bool", Value::Bool(true))
        .kv("t.str.empty", Value::Str(String::new()))
        .kv("a.u8", Value::Array(Array::U8(vec![0, 1, 255])))
        .kv("a.i8", Value::Array(Array::I8(vec![-128, 0, 127])))
        .kv("a.u16", Value::Array(Array::U16(vec![1, 65535])))
        .kv("a.i16", Value::Array(Array::I16(vec![-32768, 32767])))
        .kv("a.u32", Value::Array(Array::U32(vec![7, u32::MAX])))
        .kv("a.i32", Value::Array(Array::I32(vec![-7, i32::MAX, i32::MIN])))
        .kv("a.u64", Value::Array(Array::U64(vec![u64::MAX])))
        .kv("a.i64", Value::Array(Array::I64(vec![i64::MIN, -1, 1])))
        .kv("a.f32", Value::Array(Array::F32(vec![0.25, -0.0, f32::INFINITY])))
        .kv("a.f64", Value::Array(Array::F64(vec![1e300, -2.5])))
        .kv("a.bool", Value::Array(Array::Bool(vec![true, false, true])))
        .kv("a.str", Value::Array(Array::Str(vec!["a".into(), String::new(), "ünïcode".into()])))
        .kv("a.empty", Value::Array(Array::I32(vec![])))
        .tensor("tok.weight", GGML_TYPE_F32, &[4, 3])
        .tensor("h.f16", GGML_TYPE_F16, &[8])
        .tensor("h.q8_0", GGML_TYPE_Q8_0, &[64, 2])
        .tensor("h.q4_0", GGML_TYPE_Q4_0, &[32, 1, 2])
        .tensor("h.q4_k", GGML_TYPE_Q4_K, &[256, 1, 1, 2])
}

/// Fixture: no tensors, only `general.architecture`.
pub fn sample_minimal() -> Writer {
    Writer::new().kv("general.architecture", Value::Str("llama".into()))
}

/// Fixture: one tensor of every type ggml can store (ne[0] two blocks).
pub fn sample_all_types() -> Writer {
    let mut w = Writer::new().kv("general.architecture", Value::Str("test".into())).with_alignment(64);
    for t in 0..sys::GGML_TYPE_COUNT {
        if is_valid_type(t) {
            let blck = unsafe { sys::ggml_blck_size(t) };
            w = w.tensor(format!("t{t}.{}", ggml_rs::ml::tensor::type_name(t)), t, &[2 * blck, 2]);
        }
    }
    w
}
