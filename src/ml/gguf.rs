//! A hardened GGUF reader over ggml's gguf API.
//!
//! ggml's gguf reader reports most bad input by returning NULL, but parts of
//! the gguf code check their invariants with `GGML_ASSERT` (an abort), and a
//! hostile header can make it allocate in proportion to the counts and lengths
//! it claims. So [`Gguf::open`] first walks the whole metadata section itself
//! (magic, version, every key and value, every tensor info), rejecting with a
//! specific message anything ggml would reject or could trip over, and only
//! then hands the *same bytes* to ggml (through `gguf_init_from_callback`
//! over our buffer: the file cannot change between our check and ggml's
//! read). Afterwards it checks that ggml's view agrees with ours.
//!
//! Limits, each reported with a message naming it:
//! * the metadata (everything before the tensor data) is at most
//!   [`MAX_METADATA_BYTES`]; at most [`MAX_KV`] keys and [`MAX_TENSORS`]
//!   tensors, and both counts must fit in the file at their minimum encoded
//!   sizes;
//! * strings and arrays stay within ggml's own limits (1 GiB, 2^30
//!   elements) and within the bytes left in the file;
//! * keys are non-empty UTF-8 without NUL bytes, at most 65535 bytes, and
//!   unique; tensor names are non-empty UTF-8 without NUL bytes, shorter than
//!   `GGML_MAX_NAME`, and unique;
//! * tensors have 0 to 4 dimensions (0: a scalar), each at least 1, an
//!   element count that fits in i64, a type ggml knows, `ne[0]` a multiple
//!   of the type's block size, data inside the file, not overlapping another
//!   tensor, and laid out the way ggml requires (in tensor order, each padded
//!   to the alignment).
//!
//! Arrays of arrays are valid GGUF but ggml cannot read them, so a file with
//! one is rejected (naming the key).
//!
//! String values come from ggml as C strings: a string with an embedded NUL
//! byte is cut there (as in llama.cpp), and invalid UTF-8 is replaced with
//! U+FFFD.

use std::collections::{HashMap, HashSet};
use std::ffi::{c_void, CStr};
use std::io::Read;
use std::path::Path;
use std::ptr::NonNull;

use super::tensor::{is_valid_type, type_name};
use super::{Error, ErrorKind, Result};
use crate::sys;

/// The largest metadata section (header, keys and values, tensor infos)
/// accepted. Real models need a few MiB (the tokenizer dominates).
pub const MAX_METADATA_BYTES: u64 = 256 << 20;
/// The most key/value pairs accepted (real models have well under 1000).
pub const MAX_KV: u64 = 1 << 20;
/// The most tensors accepted (real models have at most tens of thousands).
pub const MAX_TENSORS: u64 = 1 << 20;
/// ggml's limit on one string's length (GGUF_MAX_STRING_LENGTH).
const MAX_STRING: u64 = 1 << 30;
/// ggml's limit on the elements of one array (GGUF_MAX_ARRAY_ELEMENTS).
const MAX_ARRAY: u64 = 1 << 30;
/// The GGUF spec's limit on a key's length.
const MAX_KEY: usize = 65535;
/// ggml's default alignment of the tensor data (GGUF_DEFAULT_ALIGNMENT).
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The key that sets the alignment.
pub const KEY_ALIGNMENT: &str = "general.alignment";
/// The key that names the model architecture.
pub const KEY_ARCHITECTURE: &str = "general.architecture";

const HEADER_BYTES: u64 = 4 + 4 + 8 + 8;
/// key length, a 1-byte key, the value type, a 1-byte value.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// name length, a 1-byte name, n_dims (0 dims), type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 1 + 4 + 4 + 8;

// GGUF value type ids (enum gguf_type).
pub const GGUF_TYPE_UINT8: u32 = 0;
pub const GGUF_TYPE_INT8: u32 = 1;
pub const GGUF_TYPE_UINT16: u32 = 2;
pub const GGUF_TYPE_INT16: u32 = 3;
pub const GGUF_TYPE_UINT32: u32 = 4;
pub const GGUF_TYPE_INT32: u32 = 5;
pub const GGUF_TYPE_FLOAT32: u32 = 6;
pub const GGUF_TYPE_BOOL: u32 = 7;
pub const GGUF_TYPE_STRING: u32 = 8;
pub const GGUF_TYPE_ARRAY: u32 = 9;
pub const GGUF_TYPE_UINT64: u32 = 10;
pub const GGUF_TYPE_INT64: u32 = 11;
pub const GGUF_TYPE_FLOAT64: u32 = 12;
const GGUF_TYPE_COUNT: u32 = 13;

/// The name of a GGUF value type id ("u8", "str", "arr", …), or "unknown".
pub fn value_type_name(t: u32) -> &'static str {
    match t {
        GGUF_TYPE_UINT8 => "u8",
        GGUF_TYPE_INT8 => "i8",
        GGUF_TYPE_UINT16 => "u16",
        GGUF_TYPE_INT16 => "i16",
        GGUF_TYPE_UINT32 => "u32",
        GGUF_TYPE_INT32 => "i32",
        GGUF_TYPE_FLOAT32 => "f32",
        GGUF_TYPE_BOOL => "bool",
        GGUF_TYPE_STRING => "str",
        GGUF_TYPE_ARRAY => "arr",
        GGUF_TYPE_UINT64 => "u64",
        GGUF_TYPE_INT64 => "i64",
        GGUF_TYPE_FLOAT64 => "f64",
        _ => "unknown",
    }
}

/// Encoded size of a fixed-size value type (0 for str, arr and unknown ids).
fn value_type_size(t: u32) -> u64 {
    match t {
        GGUF_TYPE_UINT8 | GGUF_TYPE_INT8 | GGUF_TYPE_BOOL => 1,
        GGUF_TYPE_UINT16 | GGUF_TYPE_INT16 => 2,
        GGUF_TYPE_UINT32 | GGUF_TYPE_INT32 | GGUF_TYPE_FLOAT32 => 4,
        GGUF_TYPE_UINT64 | GGUF_TYPE_INT64 | GGUF_TYPE_FLOAT64 => 8,
        _ => 0,
    }
}

/// A GGUF value: every scalar type, strings, and arrays of each.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    Str(String),
    Array(Array),
}

/// A GGUF array (arrays of arrays cannot be read by ggml; see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
}

impl Value {
    /// The GGUF type id of the value (`GGUF_TYPE_ARRAY` for arrays).
    pub fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => GGUF_TYPE_UINT8,
            Value::I8(_) => GGUF_TYPE_INT8,
            Value::U16(_) => GGUF_TYPE_UINT16,
            Value::I16(_) => GGUF_TYPE_INT16,
            Value::U32(_) => GGUF_TYPE_UINT32,
            Value::I32(_) => GGUF_TYPE_INT32,
            Value::U64(_) => GGUF_TYPE_UINT64,
            Value::I64(_) => GGUF_TYPE_INT64,
            Value::F32(_) => GGUF_TYPE_FLOAT32,
            Value::F64(_) => GGUF_TYPE_FLOAT64,
            Value::Bool(_) => GGUF_TYPE_BOOL,
            Value::Str(_) => GGUF_TYPE_STRING,
            Value::Array(_) => GGUF_TYPE_ARRAY,
        }
    }
    /// "u32", "str", "arr[f32]", …
    pub fn type_name(&self) -> String {
        match self {
            Value::Array(a) => format!("arr[{}]", value_type_name(a.elem_type_id())),
            v => value_type_name(v.type_id()).to_string(),
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// Any integer value that fits in u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }
    /// Any integer value that fits in i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }
    /// Any float value, or an integer converted.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64),
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl Array {
    /// The GGUF type id of the elements.
    pub fn elem_type_id(&self) -> u32 {
        match self {
            Array::U8(_) => GGUF_TYPE_UINT8,
            Array::I8(_) => GGUF_TYPE_INT8,
            Array::U16(_) => GGUF_TYPE_UINT16,
            Array::I16(_) => GGUF_TYPE_INT16,
            Array::U32(_) => GGUF_TYPE_UINT32,
            Array::I32(_) => GGUF_TYPE_INT32,
            Array::U64(_) => GGUF_TYPE_UINT64,
            Array::I64(_) => GGUF_TYPE_INT64,
            Array::F32(_) => GGUF_TYPE_FLOAT32,
            Array::F64(_) => GGUF_TYPE_FLOAT64,
            Array::Bool(_) => GGUF_TYPE_BOOL,
            Array::Str(_) => GGUF_TYPE_STRING,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::Str(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One tensor of the file, as described by its tensor info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml type id (`sys::GGML_TYPE_*`).
    pub dtype: sys::ggml_type,
    /// Elements per dimension, ggml order; 1 beyond `n_dims`.
    pub ne: [i64; 4],
    /// Dimensions as stored in the file (0 to 4).
    pub n_dims: u32,
    /// Absolute offset of the data in the file.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
}

impl TensorInfo {
    /// ggml's name of the type ("f32", "q4_K", …).
    pub fn type_name(&self) -> &'static str {
        type_name(self.dtype)
    }
    pub fn nelements(&self) -> i64 {
        self.ne.iter().product()
    }
    /// Shape with trailing 1-dimensions beyond `n_dims` dropped.
    pub fn shape(&self) -> &[i64] {
        &self.ne[..self.n_dims as usize]
    }
}

/// An open GGUF file: its key/value metadata and tensor table (the tensor
/// data stays in the file; [`TensorInfo::offset`] says where).
pub struct Gguf {
    ctx: NonNull<sys::gguf_context>,
    source: String,
    version: u32,
    alignment: u64,
    data_offset: u64,
    file_size: u64,
    keys: Vec<String>,
    key_index: HashMap<String, i64>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
}

// SAFETY: the gguf context is created once, never mutated afterwards (only
// ggml's const getters are called) and freed once in Drop.
unsafe impl Send for Gguf {}
unsafe impl Sync for Gguf {}

impl Drop for Gguf {
    fn drop(&mut self) {
        unsafe { sys::gguf_free(self.ctx.as_ptr()) };
    }
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("source", &self.source)
            .field("version", &self.version)
            .field("n_kv", &self.keys.len())
            .field("n_tensors", &self.tensors.len())
            .finish()
    }
}

/// Why a parse stopped: more bytes are needed (that are in the file), or the
/// input is bad.
enum Stop {
    Need(u64),
    Bad(String),
}

type Parse<T> = std::result::Result<T, Stop>;

fn bad<T>(msg: String) -> Parse<T> {
    Err(Stop::Bad(msg))
}

/// What our own walk of the metadata found.
struct Parsed {
    version: u32,
    keys: Vec<String>,
    /// (value type, element type for arrays else u32::MAX) per key.
    kv_types: Vec<(u32, u32)>,
    alignment: u64,
    header_end: u64,
    data_offset: u64,
    tensors: Vec<TensorInfo>,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: u64,
    total: u64,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> u64 {
        self.total - self.pos
    }

    fn bytes(&mut self, n: u64, what: &dyn Fn() -> String) -> Parse<&'a [u8]> {
        let end = match self.pos.checked_add(n) {
            Some(end) if end <= self.total => end,
            _ => {
                return bad(format!(
                    "truncated file: {} needs {n} bytes at offset {}, but the file ends at {}",
                    what(),
                    self.pos,
                    self.total
                ))
            }
        };
        if end > MAX_METADATA_BYTES {
            return bad(format!(
                "the metadata is larger than this reader accepts ({MAX_METADATA_BYTES} bytes), at {} (offset {})",
                what(),
                self.pos
            ));
        }
        if end > self.buf.len() as u64 {
            return Err(Stop::Need(end));
        }
        let s = &self.buf[self.pos as usize..end as usize];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Parse<u32> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Parse<u64> {
        let b = self.bytes(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A GGUF string: u64 length, then the bytes.
    fn string(&mut self, what: &dyn Fn() -> String) -> Parse<&'a [u8]> {
        let len = self.u64(&|| format!("the length of {}", what()))?;
        if len > MAX_STRING {
            return bad(format!("{}: string length {len} exceeds ggml's limit of {MAX_STRING} bytes", what()));
        }
        if len > self.left() {
            return bad(format!(
                "{}: string length {len} at offset {} exceeds the {} bytes left in the file (truncated or corrupt)",
                what(),
                self.pos - 8,
                self.left()
            ));
        }
        self.bytes(len, what)
    }
}

fn show_bytes(b: &[u8]) -> String {
    let text: String = b.iter().map(|&c| if c.is_ascii_graphic() || c == b' ' { c as char } else { '?' }).collect();
    let hex: Vec<String> = b.iter().map(|c| format!("{c:02x}")).collect();
    format!("\"{text}\" ({})", hex.join(" "))
}

/// A name (key or tensor name) as UTF-8 without NUL bytes.
fn name_text(b: &[u8], what: &dyn Fn() -> String) -> Parse<String> {
    if b.contains(&0) {
        return bad(format!("{} contains a NUL byte: {}", what(), String::from_utf8_lossy(b).replace('\0', "\\0")));
    }
    match std::str::from_utf8(b) {
        Ok(s) => Ok(s.to_string()),
        Err(_) => bad(format!("{} is not valid UTF-8: {}", what(), String::from_utf8_lossy(b))),
    }
}

fn align_up(x: u64, a: u64) -> Option<u64> {
    x.checked_add(a - 1).map(|v| v / a * a)
}

/// Walks the metadata in `buf` (the first bytes of a file of `total` bytes).
fn parse(buf: &[u8], total: u64) -> Parse<Parsed> {
    let mut c = Cursor { buf, pos: 0, total };
    if total < 4 {
        return bad(format!("truncated file: {total} bytes, too short for the GGUF magic"));
    }
    let magic = c.bytes(4, &|| "the magic".into())?;
    if magic != b"GGUF" {
        return bad(format!("bad magic: expected \"GGUF\", found {}", show_bytes(magic)));
    }
    let version = c.u32(&|| "the version".into())?;
    if version != 2 && version != 3 {
        if version == 1 {
            return bad("GGUF version 1 is not supported (only versions 2 and 3)".into());
        }
        if version & 0xffff == 0 && version != 0 {
            return bad(format!(
                "unsupported GGUF version {version:#x}: a big-endian file? (only little-endian versions 2 and 3)"
            ));
        }
        return bad(format!("unsupported GGUF version {version} (only versions 2 and 3)"));
    }
    if total < HEADER_BYTES {
        return bad(format!("truncated file: {total} bytes, too short for the {HEADER_BYTES}-byte GGUF header"));
    }
    let n_tensors = c.u64(&|| "the tensor count".into())?;
    let n_kv = c.u64(&|| "the key/value count".into())?;
    let room = total - HEADER_BYTES;
    if n_tensors > room / MIN_TENSOR_INFO_BYTES {
        return bad(format!(
            "the header claims {n_tensors} tensors, but a file of {total} bytes has room for at most {} (truncated or corrupt)",
            room / MIN_TENSOR_INFO_BYTES
        ));
    }
    if n_tensors > MAX_TENSORS {
        return bad(format!("the header claims {n_tensors} tensors, more than this reader accepts ({MAX_TENSORS})"));
    }
    let room = room - n_tensors * MIN_TENSOR_INFO_BYTES;
    if n_kv > room / MIN_KV_BYTES {
        return bad(format!(
            "the header claims {n_kv} key/value pairs, but a file of {total} bytes with {n_tensors} tensors has room for at most {} (truncated or corrupt)",
            room / MIN_KV_BYTES
        ));
    }
    if n_kv > MAX_KV {
        return bad(format!("the header claims {n_kv} key/value pairs, more than this reader accepts ({MAX_KV})"));
    }

    let mut keys = Vec::with_capacity(n_kv as usize);
    let mut kv_types = Vec::with_capacity(n_kv as usize);
    let mut seen = HashSet::with_capacity(n_kv as usize);
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..n_kv {
        let raw = c.string(&|| format!("the key of key/value pair {i}"))?;
        if raw.is_empty() {
            return bad(format!("key/value pair {i} has an empty key"));
        }
        if raw.len() > MAX_KEY {
            return bad(format!("the key of key/value pair {i} is {} bytes long (at most {MAX_KEY})", raw.len()));
        }
        let key = name_text(raw, &|| format!("the key of key/value pair {i}"))?;
        if !seen.insert(key.clone()) {
            return bad(format!("duplicate key '{key}' (key/value pair {i})"));
        }
        let k = key.as_str();
        let t = c.u32(&|| format!("the value type of key '{k}'"))?;
        let mut elem = u32::MAX;
        if t == GGUF_TYPE_ARRAY {
            let e = c.u32(&|| format!("the element type of array '{k}'"))?;
            let n = c.u64(&|| format!("the length of array '{k}'"))?;
            if e == GGUF_TYPE_ARRAY {
                return bad(format!("key '{k}' is an array of arrays, which ggml cannot read"));
            }
            if e >= GGUF_TYPE_COUNT {
                return bad(format!("key '{k}' is an array of unknown value type {}", e as i32));
            }
            if n > MAX_ARRAY {
                return bad(format!("key '{k}': array length {n} exceeds ggml's limit of {MAX_ARRAY} elements"));
            }
            if e == GGUF_TYPE_STRING {
                if n * 8 > c.left() {
                    return bad(format!(
                        "key '{k}': array length {n} of strings needs at least {} bytes, but only {} are left in the file",
                        n * 8,
                        c.left()
                    ));
                }
                for j in 0..n {
                    c.string(&|| format!("string {j} of array '{k}'"))?;
                }
            } else {
                let need = n * value_type_size(e);
                if need > c.left() {
                    return bad(format!(
                        "key '{k}': array length {n} of {} needs {need} bytes, but only {} are left in the file",
                        value_type_name(e),
                        c.left()
                    ));
                }
                c.bytes(need, &|| format!("array '{k}'"))?;
            }
            elem = e;
        } else if t == GGUF_TYPE_STRING {
            c.string(&|| format!("the value of key '{k}'"))?;
        } else if t < GGUF_TYPE_COUNT {
            let v = c.bytes(value_type_size(t), &|| format!("the value of key '{k}'"))?;
            if k == KEY_ALIGNMENT && t == GGUF_TYPE_UINT32 {
                let a = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                if !a.is_power_of_two() {
                    return bad(format!("{KEY_ALIGNMENT} is {a}, not a power of two"));
                }
                alignment = a.into();
            }
        } else {
            return bad(format!("key '{k}' has unknown value type {}", t as i32));
        }
        if k == KEY_ALIGNMENT && (t != GGUF_TYPE_UINT32) {
            let tn = if t == GGUF_TYPE_ARRAY {
                format!("arr[{}]", value_type_name(elem))
            } else {
                value_type_name(t).into()
            };
            return bad(format!("{KEY_ALIGNMENT} must be a u32, not {tn}"));
        }
        keys.push(key);
        kv_types.push((t, elem));
    }

    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors as usize);
    let mut names: HashMap<String, u64> = HashMap::with_capacity(n_tensors as usize);
    for i in 0..n_tensors {
        let raw = c.string(&|| format!("the name of tensor {i}"))?;
        if raw.is_empty() {
            return bad(format!("tensor {i} has an empty name"));
        }
        let name = name_text(raw, &|| format!("the name of tensor {i}"))?;
        if raw.len() >= sys::GGML_MAX_NAME as usize {
            return bad(format!(
                "tensor {i} name '{name}' is {} bytes long; ggml allows at most {}",
                raw.len(),
                sys::GGML_MAX_NAME - 1
            ));
        }
        if let Some(j) = names.insert(name.clone(), i) {
            return bad(format!("duplicate tensor name '{name}' (tensors {j} and {i})"));
        }
        let nm = name.as_str();
        let n_dims = c.u32(&|| format!("the dimension count of tensor '{nm}'"))?;
        if n_dims > sys::GGML_MAX_DIMS {
            return bad(format!("tensor '{nm}' has {n_dims} dimensions; ggml supports at most {}", sys::GGML_MAX_DIMS));
        }
        let mut ne = [1i64; 4];
        for (d, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
            let v = c.u64(&|| format!("dimension {d} of tensor '{nm}'"))? as i64;
            if v <= 0 {
                return bad(format!("tensor '{nm}' dimension {d} is {v}; every dimension must be at least 1"));
            }
            *slot = v;
        }
        let shape =
            || format!("[{}]", ne[..n_dims as usize].iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "));
        let nelements = match ne.iter().try_fold(1i64, |acc, &v| acc.checked_mul(v)) {
            Some(n) => n,
            None => return bad(format!("tensor '{nm}' shape {} has more elements than fit in 64 bits", shape())),
        };
        let dtype = c.u32(&|| format!("the type of tensor '{nm}'"))?;
        if !is_valid_type(dtype) {
            return bad(format!("tensor '{nm}' has unknown ggml type id {}", dtype as i32));
        }
        // SAFETY: dtype is a valid type id (checked above).
        let (blck, tsize) = unsafe { (sys::ggml_blck_size(dtype), sys::ggml_type_size(dtype) as u64) };
        if ne[0] % blck != 0 {
            return bad(format!(
                "tensor '{nm}' of type {} has ne[0] = {}, not a multiple of the type's block size {blck}",
                type_name(dtype),
                ne[0]
            ));
        }
        let size = match ((nelements / blck) as u64).checked_mul(tsize) {
            Some(s) => s,
            None => {
                return bad(format!(
                    "tensor '{nm}' of type {} and shape {} has a size in bytes that overflows",
                    type_name(dtype),
                    shape()
                ))
            }
        };
        let offset = c.u64(&|| format!("the data offset of tensor '{nm}'"))?;
        if offset % alignment != 0 {
            return bad(format!("tensor '{nm}' data offset {offset} is not a multiple of the alignment {alignment}"));
        }
        tensors.push(TensorInfo { name, dtype, ne, n_dims, offset, size });
    }

    let header_end = c.pos;
    let data_offset = if n_tensors > 0 {
        match align_up(header_end, alignment) {
            Some(d) if d <= total => d,
            _ => {
                return bad(format!(
                    "truncated file: the tensor data starts at offset {} (the metadata ends at {header_end}, padded to the alignment {alignment}), but the file is {total} bytes",
                    align_up(header_end, alignment).map_or("beyond 2^64".into(), |d| d.to_string())
                ))
            }
        }
    } else {
        header_end
    };
    for t in &tensors {
        let start = data_offset.checked_add(t.offset);
        match start.and_then(|s| s.checked_add(t.size)) {
            Some(end) if end <= total => {}
            end => {
                return bad(format!(
                    "tensor '{}' data [{}, {}) lies outside the file ({total} bytes)",
                    t.name,
                    start.map_or("beyond 2^64".into(), |s| s.to_string()),
                    end.map_or("beyond 2^64".into(), |e| e.to_string()),
                ))
            }
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| tensors[i].offset);
    for w in order.windows(2) {
        let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
        if a.offset + a.size > b.offset {
            return bad(format!(
                "tensors '{}' (data [{}, {})) and '{}' (data [{}, {})) overlap",
                a.name,
                data_offset + a.offset,
                data_offset + a.offset + a.size,
                b.name,
                data_offset + b.offset,
                data_offset + b.offset + b.size
            ));
        }
    }
    // ggml's own rule: tensor i's data follows tensor i-1's, padded.
    let mut expected = 0u64;
    for t in &tensors {
        if t.offset != expected {
            return bad(format!(
                "tensor '{}' data offset {} is not where ggml requires it ({expected}): the data of each tensor must follow the previous tensor's, padded to the alignment {alignment}",
                t.name, t.offset
            ));
        }
        // Cannot overflow: the data lies inside the file (checked above).
        expected = align_up(t.offset + t.size, alignment).unwrap_or(u64::MAX);
    }
    for t in &mut tensors {
        t.offset += data_offset;
    }
    Ok(Parsed { version, keys, kv_types, alignment, header_end, data_offset, tensors })
}

/// ggml reads the metadata through this callback, from our buffer.
struct Source<'a> {
    buf: &'a [u8],
}

unsafe extern "C" fn read_source(user: *mut c_void, out: *mut c_void, offset: u64, len: usize) -> usize {
    // SAFETY: `user` is the &Source passed to gguf_init_from_callback, alive
    // for the call; ggml passes an output buffer of `len` bytes.
    let src = unsafe { &*(user as *const Source) };
    let n = src.buf.len() as u64;
    if offset >= n {
        return 0;
    }
    let k = (len as u64).min(n - offset) as usize;
    unsafe { std::ptr::copy_nonoverlapping(src.buf.as_ptr().add(offset as usize), out as *mut u8, k) };
    k
}

fn format_err(source: &str, msg: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Format, format!("gguf {source}: {msg}"))
}

fn io_err(source: &str, msg: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("gguf {source}: {msg}"))
}

fn cstr(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Gguf {
    /// Opens and validates a GGUF file; reads only its metadata.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf> {
        let path = path.as_ref();
        let source = format!("'{}'", path.display());
        // A named pipe or a device is refused without blocking on it.
        let (mut f, meta) =
            super::regular_file::open(path).map_err(|e| io_err(&source, format_args!("cannot open: {e}")))?;
        let total = meta.len();
        let mut buf = Vec::new();
        let mut want = total.min(1 << 20);
        loop {
            if (buf.len() as u64) < want {
                let more = want - buf.len() as u64;
                buf.try_reserve_exact(more as usize)
                    .map_err(|_| Error::oom(format!("gguf {source}: cannot allocate {want} bytes for the metadata")))?;
                let got = (&mut f)
                    .take(more)
                    .read_to_end(&mut buf)
                    .map_err(|e| io_err(&source, format_args!("read failed: {e}")))?;
                if (got as u64) < more {
                    return Err(io_err(
                        &source,
                        format_args!("the file shrank while being read (expected {total} bytes)"),
                    ));
                }
            }
            match parse(&buf, total) {
                Ok(p) => {
                    drop(f);
                    return Self::with_ggml(source, &buf, total, p);
                }
                Err(Stop::Bad(m)) => return Err(format_err(&source, m)),
                Err(Stop::Need(end)) => {
                    want = end.max((buf.len() as u64).saturating_mul(2)).min(total).min(MAX_METADATA_BYTES);
                }
            }
        }
    }

    /// Validates a GGUF file held in memory (the tensor data must be there
    /// too: offsets are checked against `bytes.len()`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Gguf> {
        let source = "(in memory)".to_string();
        match parse(bytes, bytes.len() as u64) {
            Ok(p) => Self::with_ggml(source, bytes, bytes.len() as u64, p),
            Err(Stop::Bad(m)) => Err(format_err(&source, m)),
            Err(Stop::Need(_)) => Err(format_err(&source, "internal error: parse wanted bytes beyond the buffer")),
        }
    }

    /// Hands the validated metadata to ggml and checks that it agrees.
    fn with_ggml(source: String, buf: &[u8], total: u64, p: Parsed) -> Result<Gguf> {
        super::log::init();
        let src = Source { buf: &buf[..p.header_end as usize] };
        let params = sys::gguf_init_params { no_alloc: true, ctx: std::ptr::null_mut() };
        // SAFETY: the callback reads from `src`, which outlives the call;
        // ggml reads at most `data_offset` bytes (it only seeks over the
        // padding after the metadata).
        let ctx = unsafe {
            sys::gguf_init_from_callback(
                Some(read_source),
                &src as *const Source as *mut c_void,
                0,
                p.data_offset,
                params,
            )
        };
        let ctx = NonNull::new(ctx).ok_or_else(|| {
            format_err(&source, "ggml rejected the metadata after our checks passed (ggml's log says why)")
        })?;
        let mut g = Gguf {
            ctx,
            source,
            version: p.version,
            alignment: p.alignment,
            data_offset: p.data_offset,
            file_size: total,
            keys: Vec::new(),
            key_index: HashMap::new(),
            tensors: Vec::new(),
            tensor_index: HashMap::new(),
        };
        g.adopt(p)?;
        Ok(g)
    }

    /// Reads the key and tensor tables from ggml, checking them against ours.
    fn adopt(&mut self, p: Parsed) -> Result<()> {
        let c = self.ctx.as_ptr();
        let disagree =
            |what: String| format_err(&self.source, format_args!("ggml's reading disagrees with ours: {what}"));
        let (n_kv, n_tensors) = unsafe { (sys::gguf_get_n_kv(c), sys::gguf_get_n_tensors(c)) };
        if n_kv != p.keys.len() as i64 || n_tensors != p.tensors.len() as i64 {
            return Err(disagree(format!(
                "{n_kv} keys and {n_tensors} tensors, expected {} and {}",
                p.keys.len(),
                p.tensors.len()
            )));
        }
        let (version, alignment, data_offset) = unsafe {
            (sys::gguf_get_version(c), sys::gguf_get_alignment(c) as u64, sys::gguf_get_data_offset(c) as u64)
        };
        if version != p.version || alignment != p.alignment || data_offset != p.data_offset {
            return Err(disagree(format!(
                "version {version}, alignment {alignment}, data offset {data_offset}; expected {}, {}, {}",
                p.version, p.alignment, p.data_offset
            )));
        }
        for (i, (key, &(t, elem))) in p.keys.iter().zip(&p.kv_types).enumerate() {
            let id = i as i64;
            let k = cstr(unsafe { sys::gguf_get_key(c, id) });
            let kt = unsafe { sys::gguf_get_kv_type(c, id) };
            let et = if kt == sys::GGUF_TYPE_ARRAY { unsafe { sys::gguf_get_arr_type(c, id) } } else { u32::MAX };
            if &k != key || kt != t || et != elem {
                return Err(disagree(format!(
                    "key {i} is '{k}' of type {}/{}, expected '{key}' of type {}/{}",
                    value_type_name(kt),
                    value_type_name(et),
                    value_type_name(t),
                    value_type_name(elem)
                )));
            }
            self.key_index.insert(k, id);
        }
        self.keys = p.keys;
        for (i, ours) in p.tensors.into_iter().enumerate() {
            let id = i as i64;
            let theirs = unsafe {
                let ne = sys::gguf_get_tensor_ne(c, id);
                let mut a = [0i64; 4];
                if !ne.is_null() {
                    a.copy_from_slice(std::slice::from_raw_parts(ne, 4));
                }
                TensorInfo {
                    name: cstr(sys::gguf_get_tensor_name(c, id)),
                    dtype: sys::gguf_get_tensor_type(c, id),
                    ne: a,
                    n_dims: ours.n_dims,
                    offset: (sys::gguf_get_tensor_offset(c, id) as u64).saturating_add(data_offset),
                    size: sys::gguf_get_tensor_size(c, id) as u64,
                }
            };
            if theirs != ours {
                return Err(disagree(format!("tensor {i} is {theirs:?}, expected {ours:?}")));
            }
            self.tensor_index.insert(ours.name.clone(), i);
            self.tensors.push(ours);
        }
        Ok(())
    }

    /// Where the file came from, for messages (`'path'` or `(in memory)`).
    pub fn source(&self) -> &str {
        &self.source
    }
    /// GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }
    /// Alignment of the tensor data (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
    /// Absolute offset of the tensor data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }
    /// The keys, in file order.
    pub fn keys(&self) -> &[String] {
        &self.keys
    }
    /// The tensors, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }
    /// The tensor of that name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }
    /// `general.architecture`, when it is a string.
    pub fn arch(&self) -> Option<String> {
        match self.get(KEY_ARCHITECTURE) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<Value> {
        let &id = self.key_index.get(key)?;
        let c = self.ctx.as_ptr();
        // SAFETY: `id` is a valid key id, and each getter is called only for
        // the type ggml reports for the key (its getters assert on a mismatch).
        unsafe {
            let t = sys::gguf_get_kv_type(c, id);
            Some(match t {
                sys::GGUF_TYPE_UINT8 => Value::U8(sys::gguf_get_val_u8(c, id)),
                sys::GGUF_TYPE_INT8 => Value::I8(sys::gguf_get_val_i8(c, id)),
                sys::GGUF_TYPE_UINT16 => Value::U16(sys::gguf_get_val_u16(c, id)),
                sys::GGUF_TYPE_INT16 => Value::I16(sys::gguf_get_val_i16(c, id)),
                sys::GGUF_TYPE_UINT32 => Value::U32(sys::gguf_get_val_u32(c, id)),
                sys::GGUF_TYPE_INT32 => Value::I32(sys::gguf_get_val_i32(c, id)),
                sys::GGUF_TYPE_UINT64 => Value::U64(sys::gguf_get_val_u64(c, id)),
                sys::GGUF_TYPE_INT64 => Value::I64(sys::gguf_get_val_i64(c, id)),
                sys::GGUF_TYPE_FLOAT32 => Value::F32(sys::gguf_get_val_f32(c, id)),
                sys::GGUF_TYPE_FLOAT64 => Value::F64(sys::gguf_get_val_f64(c, id)),
                sys::GGUF_TYPE_BOOL => Value::Bool(sys::gguf_get_val_bool(c, id)),
                sys::GGUF_TYPE_STRING => Value::Str(cstr(sys::gguf_get_val_str(c, id))),
                sys::GGUF_TYPE_ARRAY => Value::Array(self.array(id)?),
                _ => return None,
            })
        }
    }

    /// # Safety
    /// `id` must be a valid key id whose type is `GGUF_TYPE_ARRAY`.
    unsafe fn array(&self, id: i64) -> Option<Array> {
        let c = self.ctx.as_ptr();
        let et = unsafe { sys::gguf_get_arr_type(c, id) };
        let n = unsafe { sys::gguf_get_arr_n(c, id) };
        if et == sys::GGUF_TYPE_STRING {
            let v = (0..n).map(|i| cstr(unsafe { sys::gguf_get_arr_str(c, id, i) })).collect();
            return Some(Array::Str(v));
        }
        let size = value_type_size(et) as usize;
        if size == 0 {
            return None;
        }
        let raw: &[u8] = if n == 0 {
            &[]
        } else {
            let p = unsafe { sys::gguf_get_arr_data(c, id) } as *const u8;
            if p.is_null() {
                return None;
            }
            // SAFETY: ggml holds n elements of `size` bytes for the key.
            unsafe { std::slice::from_raw_parts(p, n * size) }
        };
        fn conv<T, const N: usize>(raw: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
            raw.chunks_exact(N).map(|c| f(c.try_into().unwrap())).collect()
        }
        Some(match et {
            sys::GGUF_TYPE_UINT8 => Array::U8(raw.to_vec()),
            sys::GGUF_TYPE_INT8 => Array::I8(conv(raw, i8::from_ne_bytes)),
            sys::GGUF_TYPE_UINT16 => Array::U16(conv(raw, u16::from_ne_bytes)),
            sys::GGUF_TYPE_INT16 => Array::I16(conv(raw, i16::from_ne_bytes)),
            sys::GGUF_TYPE_UINT32 => Array::U32(conv(raw, u32::from_ne_bytes)),
            sys::GGUF_TYPE_INT32 => Array::I32(conv(raw, i32::from_ne_bytes)),
            sys::GGUF_TYPE_UINT64 => Array::U64(conv(raw, u64::from_ne_bytes)),
            sys::GGUF_TYPE_INT64 => Array::I64(conv(raw, i64::from_ne_bytes)),
            sys::GGUF_TYPE_FLOAT32 => Array::F32(conv(raw, f32::from_ne_bytes)),
            sys::GGUF_TYPE_FLOAT64 => Array::F64(conv(raw, f64::from_ne_bytes)),
            sys::GGUF_TYPE_BOOL => Array::Bool(raw.iter().map(|&b| b != 0).collect()),
            _ => return None,
        })
    }
}
