//! The GGUF reader: valid files read back exactly, and every kind of broken
//! file gives an error that names the problem (never a crash). Fixtures are
//! written by `common::gguf_write` (tests/common/gguf_write.rs) into a temporary directory.

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::gguf_write::{self, fill_bytes, sample_all_types, sample_full, sample_minimal, TensorSpec, Writer};
use ggml_rs::ml::gguf::{Array, Gguf, Value, MAX_METADATA_BYTES};
use ggml_rs::ml::ErrorKind;
use ggml_rs::sys::*;

/// A fresh file path in a per-process temporary directory.
fn tmp_path(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!("ggml-rs-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{tag}-{}.gguf", N.fetch_add(1, Ordering::Relaxed)))
}

/// Opens `bytes` from memory and from a file; both must agree.
fn open_both(bytes: &[u8]) -> Result<Gguf, ggml_rs::ml::Error> {
    let path = tmp_path("f");
    std::fs::write(&path, bytes).unwrap();
    let from_file = Gguf::open(&path);
    let _ = std::fs::remove_file(&path);
    let from_mem = Gguf::from_bytes(bytes);
    match (&from_file, &from_mem) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.tensors(), b.tensors());
            assert_eq!(a.keys(), b.keys());
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.kind, b.kind);
            let tail = |m: &str| m.split_once(": ").map(|(_, t)| t.to_string()).unwrap_or_default();
            assert_eq!(tail(&a.message), tail(&b.message), "file and memory disagree");
        }
        _ => panic!("file and memory disagree: {from_file:?} vs {from_mem:?}"),
    }
    from_mem
}

/// The Format error for `bytes`; panics on success.
fn format_error(bytes: &[u8]) -> String {
    match open_both(bytes) {
        Ok(g) => panic!("expected an error, got {g:?}"),
        Err(e) => {
            assert_eq!(e.kind, ErrorKind::Format, "{}", e.message);
            assert!(!e.message.contains("disagrees"), "{}", e.message);
            assert!(!e.message.contains("ggml rejected"), "pre-check missed it: {}", e.message);
            e.message
        }
    }
}

fn expect_error(w: &Writer, needle: &str) -> String {
    let m = format_error(&w.write().bytes);
    assert!(m.contains(needle), "expected {needle:?} in: {m}");
    m
}

fn tensor(name: &str, dtype: u32, ne: &[i64]) -> TensorSpec {
    TensorSpec { name: name.into(), dtype, ne: ne.to_vec(), n_dims: None, offset: None, data: None }
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

// --- valid files ---------------------------------------------------------

#[test]
fn every_value_type_reads_back_exactly() {
    let w = sample_full();
    let written = w.write();
    let g = open_both(&written.bytes).expect("valid file");
    assert_eq!(g.version(), 3);
    assert_eq!(g.alignment(), 32);
    assert_eq!(g.file_size(), written.bytes.len() as u64);
    assert_eq!(g.data_offset(), written.data_offset as u64);
    assert_eq!(g.arch().as_deref(), Some("llama"));
    let expect: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::Str("llama".into())),
        ("general.name", Value::Str("tiny test model ✓".into())),
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-100)),
        ("t.u16", Value::U16(60000)),
        ("t.i16", Value::I16(-30000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.u64", Value::U64(u64::MAX - 1)),
        ("t.i64", Value::I64(i64::MIN + 1)),
        ("t.f32", Value::F32(-1.5)),
        ("t.f64", Value::F64(std::f64::consts::PI)),
        ("t.bool", Value::Bool(true)),
        ("t.str.empty", Value::Str(String::new())),
        ("a.u8", Value::Array(Array::U8(vec![0, 1, 255]))),
        ("a.i8", Value::Array(Array::I8(vec![-128, 0, 127]))),
        ("a.u16", Value::Array(Array::U16(vec![1, 65535]))),
        ("a.i16", Value::Array(Array::I16(vec![-32768, 32767]))),
        ("a.u32", Value::Array(Array::U32(vec![7, u32::MAX]))),
        ("a.i32", Value::Array(Array::I32(vec![-7, i32::MAX, i32::MIN]))),
        ("a.u64", Value::Array(Array::U64(vec![u64::MAX]))),
        ("a.i64", Value::Array(Array::I64(vec![i64::MIN, -1, 1]))),
        ("a.f32", Value::Array(Array::F32(vec![0.25, -0.0, f32::INFINITY]))),
        ("a.f64", Value::Array(Array::F64(vec![1e300, -2.5]))),
        ("a.bool", Value::Array(Array::Bool(vec![true, false, true]))),
        ("a.str", Value::Array(Array::Str(vec!["a".into(), String::new(), "ünïcode".into()]))),
        ("a.empty", Value::Array(Array::I32(vec![]))),
    ];
    let keys: Vec<&str> = expect.iter().map(|(k, _)| *k).collect();
    assert_eq!(g.keys(), keys);
    for (k, v) in &expect {
        let got = g.get(k).unwrap_or_else(|| panic!("missing {k}"));
        assert_eq!(&got, v, "{k}");
        assert_eq!(got.type_name(), v.type_name());
    }
    assert_eq!(g.get("t.f32").unwrap().as_f64(), Some(-1.5));
    assert_eq!(g.get("t.i8").unwrap().as_u64(), None);
    assert_eq!(g.get("t.u32").unwrap().as_u64(), Some(4_000_000_000));
    assert!(g.get("no.such.key").is_none());
    // Signed zero survives.
    match g.get("a.f32") {
        Some(Value::Array(Array::F32(v))) => assert!(v[1].is_sign_negative()),
        other => panic!("{other:?}"),
    }

    let shapes: [(&str, u32, [i64; 4], u32, u64); 5] = [
        ("tok.weight", GGML_TYPE_F32, [4, 3, 1, 1], 2, 48),
        ("h.f16", GGML_TYPE_F16, [8, 1, 1, 1], 1, 16),
        ("h.q8_0", GGML_TYPE_Q8_0, [64, 2, 1, 1], 2, 4 * 34),
        ("h.q4_0", GGML_TYPE_Q4_0, [32, 1, 2, 1], 3, 2 * 18),
        ("h.q4_k", GGML_TYPE_Q4_K, [256, 1, 1, 2], 4, 2 * 144),
    ];
    assert_eq!(g.tensors().len(), shapes.len());
    for (i, (t, &(name, dtype, ne, n_dims, size))) in g.tensors().iter().zip(&shapes).enumerate() {
        assert_eq!(t.name, name);
        assert_eq!(t.dtype, dtype, "{name}");
        assert_eq!(t.ne, ne, "{name}");
        assert_eq!(t.n_dims, n_dims, "{name}");
        assert_eq!(t.size, size, "{name}");
        assert_eq!(t.offset, g.data_offset() + written.tensor_offsets[i], "{name}");
        assert_eq!(t.offset % 32, 0);
        assert_eq!(t.shape(), &ne[..n_dims as usize]);
        // The bytes at the offset are the ones written.
        let at = t.offset as usize;
        assert_eq!(&written.bytes[at..at + size as usize], &fill_bytes(name.as_bytes(), size as usize)[..], "{name}");
        assert_eq!(g.tensor(name), Some(t));
    }
    assert_eq!(g.tensors()[4].type_name(), "q4_K");
    assert!(g.tensor("missing").is_none());
}

#[test]
fn every_tensor_type_ggml_knows_is_accepted() {
    let written = sample_all_types().write();
    let g = open_both(&written.bytes).expect("valid file");
    assert_eq!(g.alignment(), 64);
    let mut n = 0;
    for t in 0..GGML_TYPE_COUNT {
        if !ggml_rs::ml::tensor::is_valid_type(t) {
            continue;
        }
        let info = &g.tensors()[n];
        n += 1;
        assert_eq!(info.dtype, t);
        assert_eq!(info.size, gguf_write::tensor_nbytes(t, &info.ne).unwrap());
        assert_eq!(info.offset % 64, 0);
    }
    assert_eq!(n, g.tensors().len());
    // The newer types are among them.
    for t in [GGML_TYPE_BF16, GGML_TYPE_MXFP4, GGML_TYPE_IQ2_XXS, GGML_TYPE_TQ2_0, GGML_TYPE_Q6_K] {
        assert!(g.tensors().iter().any(|i| i.dtype == t), "type {t}");
    }
}

#[test]
fn a_file_without_tensors_needs_only_its_metadata() {
    let written = sample_minimal().write();
    let g = open_both(&written.bytes).expect("valid file");
    assert_eq!(g.arch().as_deref(), Some("llama"));
    assert!(g.tensors().is_empty());
    assert_eq!(g.keys(), ["general.architecture"]);
    assert_eq!(g.data_offset(), written.bytes.len() as u64);
    // Not even an architecture.
    let g = open_both(&Writer::new().write().bytes).expect("empty file");
    assert_eq!(g.arch(), None);
    assert_eq!(g.data_offset(), 24);
}

#[test]
fn version_2_and_scalars_and_alignment_are_accepted() {
    let mut w = sample_minimal().with_alignment(128).tensor("a", GGML_TYPE_F32, &[3]).tensor("b", GGML_TYPE_F32, &[5]);
    w.version = 2;
    let g = open_both(&w.write().bytes).expect("v2");
    assert_eq!(g.version(), 2);
    assert_eq!(g.alignment(), 128);
    assert_eq!(g.tensors()[1].offset - g.tensors()[0].offset, 128);
    assert_eq!(g.data_offset() % 128, 0);

    // n_dims 0: a scalar (ggml accepts it).
    let w = Writer::new().tensor_spec(TensorSpec { n_dims: Some(0), ..tensor("s", GGML_TYPE_F32, &[]) });
    let g = open_both(&w.write().bytes).expect("scalar");
    assert_eq!(g.tensors()[0].ne, [1, 1, 1, 1]);
    assert_eq!(g.tensors()[0].n_dims, 0);
    assert_eq!(g.tensors()[0].size, 4);
}

#[test]
fn metadata_larger_than_the_first_read_is_read_in_steps() {
    let tokens: Vec<String> = (0..150_000).map(|i| format!("token-{i}")).collect();
    let w = sample_full().kv("tokenizer.ggml.tokens", Value::Array(Array::Str(tokens.clone())));
    let written = w.write();
    assert!(written.bytes.len() > 2 << 20);
    let path = tmp_path("big");
    std::fs::write(&path, &written.bytes).unwrap();
    let g = Gguf::open(&path).expect("valid file");
    let _ = std::fs::remove_file(&path);
    assert_eq!(g.get("tokenizer.ggml.tokens"), Some(Value::Array(Array::Str(tokens))));
    assert_eq!(g.tensors().len(), 5);
    const { assert!(MAX_METADATA_BYTES >= 64 << 20) };
}

#[test]
fn the_reader_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Gguf>();
}

// --- broken files --------------------------------------------------------

#[test]
fn every_truncation_is_an_error() {
    for w in [sample_full(), sample_minimal()] {
        let bytes = w.write().bytes;
        for n in 0..bytes.len() {
            let m = format_error(&bytes[..n]);
            assert!(
                m.contains("truncated") || m.contains("outside the file") || m.contains("left in the file"),
                "prefix {n}: {m}"
            );
        }
    }
}

#[test]
fn bad_magic_and_versions() {
    let mut w = sample_minimal();
    w.magic = *b"GGML";
    expect_error(&w, "bad magic: expected \"GGUF\", found \"GGML\"");
    w.magic = [0, 0xff, b'G', b'U'];
    expect_error(&w, "bad magic");
    for (v, needle) in [
        (1, "version 1 is not supported"),
        (99, "unsupported GGUF version 99"),
        (0, "unsupported GGUF version 0"),
        (3 << 24, "big-endian"),
    ] {
        let mut w = sample_minimal();
        w.version = v;
        expect_error(&w, needle);
    }
}

#[test]
fn counts_beyond_the_file_are_rejected_before_allocating() {
    for n in [1 << 40, u64::MAX, 1 << 63, 1_000] {
        let mut w = sample_full();
        w.n_tensors = Some(n);
        expect_error(&w, &format!("the header claims {n} tensors"));
        let mut w = sample_full();
        w.n_kv = Some(n);
        expect_error(&w, &format!("the header claims {n} key/value pairs"));
    }
    // A count that fits but lies: the next item is read from the wrong place.
    let mut w = sample_minimal();
    w.n_kv = Some(2);
    expect_error(&w, "truncated");
}

#[test]
fn huge_string_and_array_lengths() {
    let written = sample_full().write();
    // length_fields: [n_tensors, n_kv, key 0 length, value 0 length, ...]
    for huge in [1u64 << 40, u64::MAX, (1 << 30) + 1, written.bytes.len() as u64] {
        let mut b = written.bytes.clone();
        set_u64(&mut b, written.length_fields[2], huge);
        let m = format_error(&b);
        assert!(m.contains("the key of key/value pair 0: string length"), "{m}");
        let mut b = written.bytes.clone();
        set_u64(&mut b, written.length_fields[3], huge);
        let m = format_error(&b);
        assert!(m.contains("the value of key 'general.architecture': string length"), "{m}");
    }
    // The length of the u8 array (the field after key "a.u8").
    let w = Writer::new().kv("a", Value::Array(Array::U32(vec![1, 2])));
    let written = w.write();
    let at = *written.length_fields.last().unwrap();
    for huge in [1u64 << 40, 1 << 29, 3] {
        let mut b = written.bytes.clone();
        set_u64(&mut b, at, huge);
        let m = format_error(&b);
        assert!(m.contains("key 'a': array length"), "{m}");
    }
    let w = Writer::new().kv("s", Value::Array(Array::Str(vec!["x".into()])));
    let written = w.write();
    let mut b = written.bytes.clone();
    set_u64(&mut b, written.length_fields[3], 1 << 28);
    let m = format_error(&b);
    assert!(m.contains("key 's': array length 268435456 of strings needs at least 2147483648 bytes"), "{m}");
    set_u64(&mut b, written.length_fields[3], 1 << 35);
    let m = format_error(&b);
    assert!(m.contains("key 's': array length 34359738368 exceeds ggml's limit"), "{m}");
}

#[test]
fn bad_keys() {
    expect_error(&sample_minimal().kv("", Value::U8(1)), "key/value pair 1 has an empty key");
    expect_error(&sample_minimal().kv("general.architecture", Value::U8(1)), "duplicate key 'general.architecture'");
    expect_error(&Writer::new().kv(b"a\0b", Value::U8(1)), "contains a NUL byte");
    expect_error(&Writer::new().kv([0xffu8, 0xfe], Value::U8(1)), "not valid UTF-8");
    expect_error(&Writer::new().kv("k".repeat(70_000), Value::U8(1)), "70000 bytes long (at most 65535)");
}

#[test]
fn bad_values() {
    let raw = |t: u32, payload: &[u8]| {
        let mut v = t.to_le_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    };
    expect_error(&Writer::new().kv_raw("x", raw(13, &[0])), "key 'x' has unknown value type 13");
    expect_error(&Writer::new().kv_raw("x", raw(u32::MAX, &[0])), "key 'x' has unknown value type -1");
    let mut arr = raw(GGUF_TYPE_ARRAY, &77u32.to_le_bytes());
    arr.extend_from_slice(&0u64.to_le_bytes());
    expect_error(&Writer::new().kv_raw("x", arr), "key 'x' is an array of unknown value type 77");
    expect_error(&Writer::new().kv_raw("nested", gguf_write::nested_array_payload()), "key 'nested' is an array of arrays");
    // general.alignment: a u32 power of two.
    expect_error(&sample_full().with_alignment(0), "general.alignment is 0, not a power of two");
    expect_error(&sample_full().with_alignment(48), "general.alignment is 48, not a power of two");
    expect_error(&Writer::new().kv("general.alignment", Value::U64(32)), "general.alignment must be a u32, not u64");
    expect_error(
        &Writer::new().kv("general.alignment", Value::Array(Array::U32(vec![32]))),
        "general.alignment must be a u32, not arr[u32]",
    );
}

#[test]
fn unknown_tensor_types() {
    for (t, shown) in [(4u32, "4"), (31, "31"), (GGML_TYPE_COUNT, "43"), (1000, "1000"), (u32::MAX, "-1")] {
        let w = sample_minimal().tensor_spec(TensorSpec { data: Some(vec![0; 64]), ..tensor("bad.type", t, &[32]) });
        expect_error(&w, &format!("tensor 'bad.type' has unknown ggml type id {shown}"));
    }
}

#[test]
fn bad_dimensions() {
    let w = |ne: &[i64]| {
        sample_minimal().tensor_spec(TensorSpec { data: Some(vec![0; 64]), ..tensor("w", GGML_TYPE_F32, ne) })
    };
    expect_error(&w(&[4, 0]), "tensor 'w' dimension 1 is 0; every dimension must be at least 1");
    expect_error(&w(&[-3]), "tensor 'w' dimension 0 is -3");
    // ggml's reader accepts a zero dimension, and this shape then aborts in
    // ggml_new_tensor (GGML_ASSERT(INT64_MAX / ne[i] > current_nelements))
    // when a caller asks gguf for its ggml context: found by fuzzing raw ggml.
    expect_error(&w(&[1 << 60, 0, 0, 1 << 50]), "tensor 'w' dimension 1 is 0");
    expect_error(&w(&[i64::MIN, 2]), "dimension 0 is -9223372036854775808");
    expect_error(
        &w(&[1 << 32, 1 << 32, 1 << 32]),
        "tensor 'w' shape [4294967296, 4294967296, 4294967296] has more elements than fit in 64 bits",
    );
    expect_error(&w(&[i64::MAX, 2]), "more elements than fit in 64 bits");
    expect_error(&w(&[1, 1, 1, 1, 1]), "tensor 'w' has 5 dimensions; ggml supports at most 4");
    let q =
        sample_minimal().tensor_spec(TensorSpec { data: Some(vec![0; 144]), ..tensor("q", GGML_TYPE_Q4_K, &[100]) });
    expect_error(&q, "tensor 'q' of type q4_K has ne[0] = 100, not a multiple of the type's block size 256");
    // Huge but representable: the data cannot be in the file.
    expect_error(&w(&[1 << 40, 1 << 20]), "tensor 'w' data [");
    // Size in bytes overflows u64 although the element count fits i64.
    expect_error(&w(&[1 << 62]), "size in bytes that overflows");
}

#[test]
fn tensor_data_out_of_range() {
    let w = sample_full();
    let bytes = w.write().bytes;
    // The last tensor's data cut short.
    let m = format_error(&bytes[..bytes.len() - 1]);
    assert!(m.contains("tensor 'h.q4_k' data [") && m.contains("lies outside the file"), "{m}");
    // An offset far beyond the end.
    let w = sample_minimal()
        .tensor("a", GGML_TYPE_F32, &[8])
        .tensor_spec(TensorSpec { offset: Some(1 << 40), ..tensor("far", GGML_TYPE_F32, &[8]) });
    expect_error(&w, "tensor 'far' data [");
    let w =
        sample_minimal().tensor_spec(TensorSpec { offset: Some(u64::MAX - 31), ..tensor("wrap", GGML_TYPE_F32, &[8]) });
    expect_error(&w, "tensor 'wrap' data [beyond 2^64");
    // Misaligned.
    let w = sample_minimal()
        .tensor("a", GGML_TYPE_F32, &[8])
        .tensor_spec(TensorSpec { offset: Some(36), ..tensor("odd", GGML_TYPE_F32, &[8]) });
    expect_error(&w, "tensor 'odd' data offset 36 is not a multiple of the alignment 32");
}

#[test]
fn overlapping_and_misplaced_tensors() {
    let w = sample_minimal()
        .tensor("a", GGML_TYPE_F32, &[16])
        .tensor_spec(TensorSpec { offset: Some(32), ..tensor("b", GGML_TYPE_F32, &[16]) });
    expect_error(&w, "tensors 'a' (data [");
    let m = expect_error(&w, "overlap");
    assert!(m.contains("and 'b' (data ["), "{m}");
    // Same offset.
    let w = sample_minimal()
        .tensor("a", GGML_TYPE_F32, &[8])
        .tensor_spec(TensorSpec { offset: Some(0), ..tensor("b", GGML_TYPE_F32, &[8]) });
    expect_error(&w, "overlap");
    // No overlap, but not where ggml expects the data (a gap, or out of order).
    let w = sample_minimal()
        .tensor("a", GGML_TYPE_F32, &[8])
        .tensor_spec(TensorSpec { offset: Some(64), ..tensor("b", GGML_TYPE_F32, &[8]) });
    expect_error(&w, "tensor 'b' data offset 64 is not where ggml requires it (32)");
    let w = sample_minimal()
        .tensor_spec(TensorSpec { offset: Some(32), ..tensor("a", GGML_TYPE_F32, &[8]) })
        .tensor_spec(TensorSpec { offset: Some(0), ..tensor("b", GGML_TYPE_F32, &[8]) });
    expect_error(&w, "tensor 'a' data offset 32 is not where ggml requires it (0)");
}

#[test]
fn bad_tensor_names() {
    let w = sample_minimal().tensor("x", GGML_TYPE_F32, &[4]).tensor("y", GGML_TYPE_F32, &[4]).tensor(
        "x",
        GGML_TYPE_F32,
        &[4],
    );
    expect_error(&w, "duplicate tensor name 'x' (tensors 0 and 2)");
    expect_error(&sample_minimal().tensor("", GGML_TYPE_F32, &[4]), "tensor 0 has an empty name");
    expect_error(
        &sample_minimal().tensor("n".repeat(64), GGML_TYPE_F32, &[4]),
        "is 64 bytes long; ggml allows at most 63",
    );
    open_both(&sample_minimal().tensor("n".repeat(63), GGML_TYPE_F32, &[4]).write().bytes).expect("63 bytes is fine");
    expect_error(&sample_minimal().tensor(b"a\0b", GGML_TYPE_F32, &[4]), "the name of tensor 0 contains a NUL byte");
    expect_error(&sample_minimal().tensor([0xc3u8], GGML_TYPE_F32, &[4]), "the name of tensor 0 is not valid UTF-8");
}

#[test]
fn io_errors() {
    let e = Gguf::open("/nonexistent/dir/model.gguf").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.message.contains("cannot open"), "{}", e.message);
    let dir = std::env::temp_dir();
    let e = Gguf::open(&dir).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.message.contains("not a regular file"), "{}", e.message);
    // Empty file.
    let m = format_error(&[]);
    assert!(m.contains("truncated file: 0 bytes"), "{m}");
}

/// A named pipe is refused at once, not waited on for a writer, and so is
/// an endless device.
#[test]
fn pipes_and_devices_are_refused_without_blocking() {
    let path = tmp_path("fifo");
    common::fifo::make(&path);
    let t0 = Instant::now();
    let e = Gguf::open(&path).unwrap_err();
    assert!(t0.elapsed() < common::fifo::PATIENCE, "open waited {:?} on a named pipe", t0.elapsed());
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.message.contains("not a regular file (a named pipe)"), "{}", e.message);
    let _ = std::fs::remove_file(&path);
    let e = Gguf::open("/dev/zero").unwrap_err();
    assert!(e.message.contains("not a regular file (a character device)"), "{}", e.message);
}
