//! Model backends: GGUF weights placed, sized, allocated and loaded.
mod common;
use common::*;
use ggml_rs::ml::gguf::Value;
use common::gguf_write::Writer;
use ggml_rs::ml::model::Layout;
use ggml_rs::ml::{data, Backend, BackendParams, Context, ErrorKind};
use ggml_rs::sys;

const Q4_0: u32 = sys::GGML_TYPE_Q4_0;
const Q4_K: u32 = sys::GGML_TYPE_Q4_K;

/// A small llama-like model: 3 layers, tied embeddings, rope_freqs.
fn model_file(dir: &std::path::Path) -> (String, Writer) {
    let mut w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(3))
        .tensor("token_embd.weight", F32, &[64, 16])
        .tensor("output_norm.weight", F32, &[64])
        .tensor("rope_freqs.weight", F32, &[8]);
    for i in 0..3 {
        w = w
            .tensor(format!("blk.{i}.attn_norm.weight"), F32, &[64])
            .tensor(format!("blk.{i}.attn_q.weight"), F16, &[64, 64])
            .tensor(format!("blk.{i}.ffn_up.weight"), Q4_0, &[64, 128]);
    }
    let path = dir.join("model.gguf");
    w.write_to(&path).unwrap();
    (path.to_string_lossy().into_owned(), w)
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ggml-rs-model-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn params(alloc: bool) -> BackendParams {
    BackendParams { n_threads: 2, alloc_memory: alloc, ..Default::default() }
}

#[test]
fn loads_every_weight_with_monotonic_progress() {
    let dir = tmpdir("load");
    let (path, w) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    assert_eq!(b.block_count(), 3);
    let mut seen = Vec::new();
    b.load(&mut |f| {
        seen.push(f);
        true
    })
    .unwrap();
    assert_eq!(*seen.first().unwrap(), 0.0);
    assert_eq!(*seen.last().unwrap(), 1.0);
    assert!(seen.windows(2).all(|p| p[0] <= p[1]), "{seen:?}");
    // Every weight holds its file bytes (F32/F16 exactly; repacked weights
    // are checked through a matmul below).
    let written = w.write();
    let g = b.gguf().unwrap();
    for (i, info) in g.tensors().iter().enumerate() {
        if info.dtype == Q4_0 {
            continue;
        }
        // rope_freqs exists only as per-layer copies.
        let names: Vec<String> = if info.name == "rope_freqs.weight" {
            (0..3).map(|l| format!("blk.{l}.rope_freqs.weight")).collect()
        } else {
            vec![info.name.clone()]
        };
        let start = written.data_offset + written.tensor_offsets[i] as usize;
        for name in names {
            let got = data::read(b.get(&name).unwrap(), "test").unwrap();
            assert_eq!(got, &written.bytes[start..start + info.size as usize], "{name}");
        }
    }
    // Tied embeddings: output.weight is a copy of token_embd.weight.
    let out = data::read(b.get("output.weight").unwrap(), "test").unwrap();
    assert_eq!(out, data::read(b.get("token_embd.weight").unwrap(), "test").unwrap());
    // rope_freqs is copied into every layer.
    for i in 0..3 {
        assert!(b.get(&format!("blk.{i}.rope_freqs.weight")).is_some());
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn placement_and_memory_follow_the_rules() {
    let dir = tmpdir("place");
    let (path, _) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    let mem = b.memory();
    let cpu = &mem.devices[0];
    assert_eq!(cpu.weights.len(), 4);
    // token_embd (f32 64x16) is an input weight.
    assert_eq!(mem.input_weights, 64 * 16 * 4);
    for (name, buft, _dev, layer) in b.placements() {
        match name.as_str() {
            "token_embd.weight" => assert_eq!(layer, None),
            "output.weight" | "output_norm.weight" => assert_eq!(layer, Some(3)),
            n if n.starts_with("blk.") => {
                let l: usize = n[4..5].parse().unwrap();
                assert_eq!(layer, Some(l), "{n}");
            }
            n => panic!("unexpected weight {n} in {buft}"),
        }
        // Only 2-D matmul weights may use a repacking buffer type.
        if buft != "CPU" {
            assert!(name.contains("ffn_up") || name.contains("attn_q") || name == "output.weight", "{name} in {buft}");
        }
    }
    // Accounting equals what ggml allocated, to the byte.
    let allocated: u64 = b.allocated_weights().values().sum();
    assert_eq!(allocated, mem.input_weights + cpu.weights.iter().sum::<u64>(), "{mem}");
    // Layer 1 holds attn_norm (256 B) + attn_q (8 KiB f16) + ffn_up
    // (64x128 q4_0 = 4608 B) + rope_freqs (32 B), each padded to 32 B.
    assert!(cpu.weights[1] >= 256 + 8192 + 4608 + 32, "{mem}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn sizing_without_allocation_matches_and_refuses_to_load() {
    let dir = tmpdir("fit");
    let (path, _) = model_file(&dir);
    let real = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    let fit = Backend::open(Some(&path), &params(false), &Layout::default()).unwrap();
    assert_eq!(fit.memory(), real.memory());
    assert!(fit.allocated_weights().is_empty());
    let e = fit.load(&mut |_| true).unwrap_err();
    assert!(e.message.contains("cannot load model without memory allocation"), "{}", e.message);
    // Cache tensors are accounted but not allocated.
    let root = Context::new(&fit, 64).unwrap();
    let mut layer = root.layer(2);
    let k = layer.zeros(F16, &[64, 8]).unwrap();
    assert!(data::read(k, "test").is_err(), "virtual memory must not be readable");
    assert_eq!(fit.memory().devices[0].cache[2], 64 * 8 * 2);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn cancelling_a_load_stops_it() {
    let dir = tmpdir("cancel");
    let (path, _) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    let e = b.load(&mut |f| f < 0.0).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Aborted);
    // Loading again works.
    b.load(&mut |_| true).unwrap();
    std::fs::remove_dir_all(dir).ok();
}

/// A graph over weights that were never loaded (or whose load was
/// cancelled) is refused with a clear error, not computed over zeros.
#[test]
fn computing_before_the_weights_are_loaded_is_an_error() {
    let dir = tmpdir("unloaded");
    let (path, _) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    let compute = |b: &Backend| {
        let mut root = Context::new(b, 256).unwrap();
        let mut inp = root.input();
        let ids = upload_i32(&mut inp, &[1], &[3]);
        let emb = root.get_rows(b.get("token_embd.weight").unwrap(), ids).unwrap();
        root.compute(&[emb])
    };
    let e = compute(&b).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.contains("weights are not loaded (call Load first"), "{}", e.message);
    // A graph that reads no weight computes (Ollama's pooling test does so
    // on a model backend it never loads).
    let mut root = Context::new(&b, 256).unwrap();
    let mut inp = root.input();
    let x = upload(&mut inp, F32, &[4, 1], &[1.0, 2.0, 3.0, 4.0]);
    let y = root.scale(x, 2.0).unwrap();
    assert_eq!(eval(&mut root, y), vec![2.0, 4.0, 6.0, 8.0]);
    b.load(&mut |f| f < 0.5).unwrap_err();
    let e = compute(&b).unwrap_err();
    assert!(e.message.contains("weights are incomplete"), "{}", e.message);
    b.load(&mut |_| true).unwrap();
    compute(&b).unwrap();
    std::fs::remove_dir_all(dir).ok();
}

/// The file is opened again to load: if its path names a named pipe by
/// then, the load is refused at once instead of waiting for a writer.
#[test]
fn a_model_replaced_by_a_pipe_is_refused_at_load() {
    let dir = tmpdir("fifo");
    let (path, _) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    fifo::make(std::path::Path::new(&path));
    let t0 = std::time::Instant::now();
    let e = b.load(&mut |_| true).unwrap_err();
    assert!(t0.elapsed() < fifo::PATIENCE, "load waited {:?} on a named pipe", t0.elapsed());
    assert_eq!(e.kind, ErrorKind::Io);
    assert!(e.message.contains("not a regular file (a named pipe)"), "{}", e.message);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn weights_compute_like_their_data() {
    let dir = tmpdir("compute");
    let (path, w) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    b.load(&mut |_| true).unwrap();
    let (mut root, mut input) = (Context::new(&b, 256).unwrap(), None::<Context>);
    let mut inp = root.input();
    let ids = upload_i32(&mut inp, &[2], &[3, 0]);
    let emb = root.get_rows(b.get("token_embd.weight").unwrap(), ids).unwrap();
    let got = eval(&mut root, emb);
    let table = data::read_f32(b.get("token_embd.weight").unwrap(), "test").unwrap();
    let want: Vec<f32> = table[3 * 64..4 * 64].iter().chain(&table[0..64]).copied().collect();
    assert_eq!(got, want);
    // A Q4_0 weight (possibly repacked) multiplies like its dequantized data.
    let written = w.write();
    let g = b.gguf().unwrap();
    let (i, info) = g.tensors().iter().enumerate().find(|(_, t)| t.name == "blk.1.ffn_up.weight").unwrap();
    let start = written.data_offset + written.tensor_offsets[i] as usize;
    let raw = &written.bytes[start..start + info.size as usize];
    let mut deq = vec![0f32; 64 * 128];
    unsafe {
        let tr = &*sys::ggml_get_type_traits(Q4_0);
        (tr.to_float.unwrap())(raw.as_ptr().cast(), deq.as_mut_ptr(), deq.len() as i64);
    }
    let mut rng = Rng::new(3);
    let x: Vec<f32> = rng.vec(64);
    let xt = upload(&mut inp, F32, &[64, 1], &x);
    let y = root.mul_mat(b.get("blk.1.ffn_up.weight").unwrap(), xt).unwrap();
    let got = eval(&mut root, y);
    // Q4_0 × f32 quantizes x to q8_0 (per 32-block scale max|x|/127), so
    // each output may be off by up to sum_k |w_rk| · max|x| / 127 (plus
    // f32 rounding).
    let xmax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    for r in 0..128 {
        let row = &deq[r * 64..(r + 1) * 64];
        if row.iter().any(|v| !v.is_finite()) {
            continue; // random scale bits can encode inf/NaN
        }
        let want: f32 = row.iter().zip(&x).map(|(w, x)| w * x).sum();
        let bound = row.iter().map(|w| w.abs()).sum::<f32>() * xmax / 127.0 * 1.01 + 1e-3 * want.abs();
        assert!((got[r] - want).abs() <= bound, "row {r}: got {}, want {want}, bound {bound}", got[r]);
    }
    input.take();
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn bad_layouts_and_files_are_errors() {
    let dir = tmpdir("bad");
    let (path, _) = model_file(&dir);
    let layout = Layout { layer_devices: vec![None, Some(999)], ..Default::default() };
    let e = Backend::open(Some(&path), &params(true), &layout).err().unwrap();
    assert!(e.message.contains("device 999 is not a GPU"), "{}", e.message);
    let e = Backend::open(Some("/nonexistent/model.gguf"), &params(true), &Layout::default()).err().unwrap();
    assert!(matches!(e.kind, ErrorKind::Io | ErrorKind::Format), "{e:?}");
    // A layer index beyond block_count in a tensor name.
    let bad = dir.join("bad.gguf");
    Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(1))
        .tensor("blk.5.attn_q.weight", F32, &[4, 4])
        .write_to(&bad)
        .unwrap();
    let e = Backend::open(Some(bad.to_str().unwrap()), &params(true), &Layout::default()).err().unwrap();
    assert!(e.message.contains("blk.5.attn_q.weight: layer 5 is out of range"), "{}", e.message);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn print_placements_for_the_record() {
    let dir = tmpdir("print");
    let (path, _) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(false), &Layout::default()).unwrap();
    for (name, buft, dev, layer) in b.placements() {
        println!("{name:28} {buft:12} device {dev} layer {layer:?}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn repacked_and_virtual_weights_refuse_reads_instead_of_crashing() {
    let dir = tmpdir("reads");
    let (path, _) = model_file(&dir);
    let b = Backend::open(Some(&path), &params(true), &Layout::default()).unwrap();
    b.load(&mut |_| true).unwrap();
    for (name, buft, _, _) in b.placements() {
        let r = data::read(b.get(&name).unwrap(), "test");
        if buft == "CPU" {
            assert!(r.is_ok(), "{name}");
        } else {
            let e = r.unwrap_err();
            assert!(e.message.contains("cannot be read back"), "{name}: {}", e.message);
        }
    }
    let fit = Backend::open(Some(&path), &params(false), &Layout::default()).unwrap();
    let e = data::read(fit.get("token_embd.weight").unwrap(), "test").unwrap_err();
    assert!(e.message.contains("cannot be read back"), "{}", e.message);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn sizing_measures_the_same_graph_as_a_real_backend() {
    // Weights (and cache tensors) have virtual addresses in a sizing-only
    // backend, so they are not counted as graph memory.
    let dir = tmpdir("graph");
    let (path, _) = model_file(&dir);
    let mut graphs = Vec::new();
    for alloc in [true, false] {
        let b = Backend::open(Some(&path), &params(alloc), &Layout::default()).unwrap();
        let mut root = Context::new(&b, 512).unwrap();
        let mut inp = root.input();
        let mut cache = root.layer(1);
        let k = cache.zeros(F32, &[64, 32]).unwrap();
        let ids = inp.empty(I32, &[8]).unwrap();
        let x = root.get_rows(b.get("token_embd.weight").unwrap(), ids).unwrap();
        let h = root.mul_mat(b.get("blk.1.ffn_up.weight").unwrap(), x).unwrap();
        let s = root.mul_mat(k, x).unwrap();
        root.forward(&[h, s]).unwrap();
        root.reserve().unwrap();
        graphs.push(b.memory());
    }
    assert_eq!(graphs[0], graphs[1]);
    assert!(graphs[0].devices[0].graph > 0);
    // The graph holds activations only: far less than the 64x128 weight
    // plus the 64x32 cache.
    assert!(graphs[0].devices[0].graph < 16 << 10, "{}", graphs[0]);
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn auto_flash_attention_asks_the_devices() {
    use ggml_rs::ml::flash::{self, AttentionShape};
    use ggml_rs::ml::FlashAttention;
    let dir = tmpdir("flash");
    let (path, _) = model_file(&dir);
    let g = ggml_rs::ml::gguf::Gguf::open(&path).unwrap();
    // No head counts in the metadata: no shape, the default is probed.
    assert_eq!(AttentionShape::of_model(&g), None);

    let path2 = dir.join("heads.gguf");
    Writer::new()
        .kv("general.architecture", Value::Str("qwen3".into()))
        .kv("qwen3.block_count", Value::U32(1))
        .kv("qwen3.embedding_length", Value::U32(256))
        .kv("qwen3.attention.head_count", Value::U32(8))
        .kv("qwen3.attention.head_count_kv", Value::U32(2))
        .kv("qwen3.attention.key_length", Value::U32(64))
        .tensor("token_embd.weight", F32, &[256, 4])
        .write_to(&path2)
        .unwrap();
    let g2 = ggml_rs::ml::gguf::Gguf::open(path2.to_str().unwrap()).unwrap();
    let shape = AttentionShape::of_model(&g2).unwrap();
    assert_eq!(shape, AttentionShape { head_k: 64, head_v: 64, heads: 8, kv_heads: 2 });

    // ggml's CPU backend supports the op; asking no device means no.
    let cpu = (0..ggml_rs::ml::device::count())
        .map(|i| unsafe { sys::ggml_backend_dev_get(i) })
        .find(|&d| unsafe { sys::ggml_backend_dev_type(d) } == sys::GGML_BACKEND_DEVICE_TYPE_CPU)
        .unwrap();
    assert!(flash::supported(&[cpu], shape));
    assert!(!flash::supported(&[], shape));

    // Auto resolves when the backend is made; explicit settings stay.
    let only_cpu = ggml_rs::ml::device::list().iter().all(|d| d.device_type == ggml_rs::ml::DeviceType::Cpu);
    for (want, got) in [
        (FlashAttention::Enabled, FlashAttention::Enabled),
        (FlashAttention::Disabled, FlashAttention::Disabled),
        (FlashAttention::Auto, FlashAttention::Enabled),
    ] {
        if want == FlashAttention::Auto && !only_cpu {
            continue;
        }
        let p = BackendParams { flash_attention: want, ..params(false) };
        let b = Backend::open(Some(path2.to_str().unwrap()), &p, &Layout::default()).unwrap();
        assert_eq!(b.flash_attention(), got, "{want:?}");
    }
}

#[test]
fn large_repacked_q4_0_and_q4_k_weights_load() {
    // Over 8 MiB, the loader's piece size: ggml's repacking layouts must get
    // a tensor in one write (ggml asserts offset == 0), ours (rows a multiple
    // of 16, where the build has our kernels) take pieces of whole 16-row
    // groups. One weight of each for Q4_0 and Q4_K: 4096 rows (ours, or
    // ggml's where our kernels are not built) and 4104 (8 modulo 16:
    // ggml's q4_0_8x8, q4_K_8x8).
    let dir = tmpdir("bigq4");
    let k = 4096i64;
    let weights = [
        ("blk.0.ffn_up.weight", Q4_0, 4096i64),
        ("blk.0.ffn_down.weight", Q4_0, 4104),
        ("blk.0.attn_q.weight", Q4_K, 4096),
        ("blk.0.attn_k.weight", Q4_K, 4104),
    ];
    let mut w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(1))
        .tensor("token_embd.weight", F32, &[64, 4]);
    for (i, &(name, ty, n)) in weights.iter().enumerate() {
        // Real data (ggml's quantizer), so every row is a usable check.
        let src = Rng::new(9 + i as u64).vec((k * n) as usize);
        let mut q = vec![0u8; unsafe { sys::ggml_row_size(ty, k) } * n as usize];
        unsafe { sys::ggml_quantize_chunk(ty, src.as_ptr(), q.as_mut_ptr().cast(), 0, n, k, std::ptr::null()) };
        w = w.tensor_spec(common::gguf_write::TensorSpec { name: name.as_bytes().to_vec(), dtype: ty, ne: vec![k, n], n_dims: None, offset: None, data: Some(q) });
    }
    let path = dir.join("big.gguf");
    let written = w.write_to(&path).unwrap();
    let b = Backend::open(Some(path.to_str().unwrap()), &params(true), &Layout::default()).unwrap();
    b.load(&mut |_| true).unwrap();
    let g = b.gguf().unwrap();
    for &(name, ty, n) in &weights {
        let buft = b.placements().into_iter().find(|p| p.0 == name).unwrap().1;
        println!("{name} ({} MiB) in {buft}", (unsafe { sys::ggml_row_size(ty, k) } * n as usize) >> 20);
        let (i, info) = g.tensors().iter().enumerate().find(|(_, t)| t.name == name).unwrap();
        let start = written.data_offset + written.tensor_offsets[i] as usize;
        let raw = &written.bytes[start..start + info.size as usize];
        let mut deq = vec![0f32; (k * n) as usize];
        unsafe {
            let tr = &*sys::ggml_get_type_traits(ty);
            (tr.to_float.unwrap())(raw.as_ptr().cast(), deq.as_mut_ptr(), deq.len() as i64);
        }
        let x = Rng::new(5).vec(k as usize);
        let mut root = Context::new(&b, 64).unwrap();
        let xt = upload(&mut root.input(), F32, &[k, 1], &x);
        let y = root.mul_mat(b.get(name).unwrap(), xt).unwrap();
        let got = eval(&mut root, y);
        // As in weights_compute_like_their_data: x is quantized to q8_0
        // (q8_K for Q4_K: a step of at most max|x|/127 too).
        let xmax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut checked = 0;
        for r in 0..n as usize {
            let row = &deq[r * k as usize..(r + 1) * k as usize];
            let want: f32 = row.iter().zip(&x).map(|(w, x)| w * x).sum();
            let bound = row.iter().map(|w| w.abs()).sum::<f32>() * xmax / 127.0 * 1.01 + 1e-3 * want.abs();
            assert!((got[r] - want).abs() <= bound, "{name} row {r}: got {}, want {want}, bound {bound}", got[r]);
            checked += 1;
        }
        assert_eq!(checked, n as usize);
    }
    std::fs::remove_dir_all(dir).ok();
}
