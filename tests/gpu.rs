//! ggml's GPU backends (the `vulkan` or the `cuda` feature) on the
//! machine's first device of that library. For Vulkan on a machine without
//! a GPU: Mesa's software device (llvmpipe), which ggml-vulkan lists only
//! when GGML_VK_VISIBLE_DEVICES names it (`make test-vulkan` sets it;
//! docs/notes/vulkan.md). For CUDA: the GPU machine's, run by
//! scripts/device-cuda.sh (docs/notes/cuda.md).
//!
//! * The device is enumerated as a GPU with its memory, and backends put it
//!   before the CPU.
//! * A graph (matmul + add + softmax + matmul) with its tensors spread over
//!   the GPU and the CPU gives the CPU-only result within the GPU's
//!   rounding, and computing one split graph again gives the same bits.
//! * Model layers placed on the GPU: each weight on its layer's device, and
//!   the memory accounted per device (before allocation, and by a
//!   sizing-only backend) equals what ggml allocated there, to the byte.
//! * Cancel: a graph alternating between the GPU and the CPU stops at its
//!   next CPU split with Aborted (neither GPU backend has an abort
//!   callback); a request made while no compute runs fails the next
//!   compute, even one with no CPU node; the backend then computes the same
//!   bits as before.
//!
//! ggml's device registry is process-wide, so the tests run one at a time.
#![cfg(any(feature = "vulkan", feature = "cuda"))]

mod common;
use common::*;

use std::sync::Mutex;
use std::time::Duration;

use common::gguf_write::Writer;
use ggml_rs::ml::gguf::Value;
use ggml_rs::ml::model::Layout;
use ggml_rs::ml::{data, device, Backend, BackendParams, Context, DeviceInfo, DeviceType, ErrorKind, Result};
use ggml_rs::sys;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The GPU library under test: CUDA when the build has it, else Vulkan.
const GPU: &str = if cfg!(feature = "cuda") { "CUDA" } else { "Vulkan" };

/// The first device of that library; fails when there is none (the test is
/// built only with the feature, and make test-vulkan makes the device
/// visible).
fn gpu() -> DeviceInfo {
    let all = device::list();
    all.iter().find(|d| d.library == GPU).cloned().unwrap_or_else(|| {
        panic!(
            "no {GPU} device among {all:?} (GGML_VK_VISIBLE_DEVICES={:?}; a CPU-type Vulkan device such as llvmpipe is listed only when it is named there)",
            std::env::var("GGML_VK_VISIBLE_DEVICES").ok()
        )
    })
}

fn new_backend() -> Backend {
    Backend::new(&BackendParams { n_threads: 2, ..Default::default() }).expect("backend")
}

fn position(b: &Backend, info: &DeviceInfo) -> usize {
    b.devices().iter().position(|d| d.index == info.index).expect("the device in the backend")
}

fn cpu_position(b: &Backend) -> usize {
    let devs = b.devices();
    let i = devs.iter().position(|d| d.device_type == DeviceType::Cpu).expect("a CPU device");
    assert_eq!(i, devs.len() - 1, "the CPU comes last");
    i
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

const K: i64 = 64;
const M: i64 = 48;
const N: i64 = 8;
const P: i64 = 32;

/// y = W2 · softmax(W1 · x + b1), with W1, b1 and W2 on the backend's
/// devices `at[0..3]` (scheduler positions) and x in CPU input memory;
/// computed `times` times, every result returned.
fn run(b: &Backend, at: [usize; 3], times: usize) -> Result<Vec<Vec<f32>>> {
    let mut r = Rng::new(7);
    let (w1, x, b1, w2) = (r.vec((K * M) as usize), r.vec((K * N) as usize), r.vec(M as usize), r.vec((M * P) as usize));
    let mut root = Context::new(b, 256)?;
    let w1 = root.on_device(at[0]).from_bytes(F32, &[K, M], &bytes(&w1))?;
    let b1 = root.on_device(at[1]).from_bytes(F32, &[M], &bytes(&b1))?;
    let w2 = root.on_device(at[2]).from_bytes(F32, &[M, P], &bytes(&w2))?;
    let x = root.input().from_bytes(F32, &[K, N], &bytes(&x))?;
    let h = root.mul_mat(w1, x)?;
    let h = root.add(h, b1)?;
    let s = root.softmax(h)?;
    let y = root.mul_mat(w2, s)?;
    let mut out = Vec::new();
    for _ in 0..times {
        root.compute(&[y])?;
        out.push(data::read_f32(y, "y")?);
    }
    Ok(out)
}

#[test]
fn the_gpu_is_listed_with_its_memory() {
    let _s = serial();
    let vk = gpu();
    eprintln!("{GPU} device: {vk:?}");
    assert!(matches!(vk.device_type, DeviceType::Gpu | DeviceType::IntegratedGpu), "{vk:?}");
    assert!(vk.name.starts_with(GPU), "{vk:?}");
    assert!(vk.memory_total > 0 && vk.memory_free > 0 && vk.memory_free <= vk.memory_total, "{vk:?}");
    let b = new_backend();
    assert!(position(&b, &vk) < cpu_position(&b), "GPUs come before the CPU: {:?}", b.devices());
}

#[test]
fn a_graph_split_over_the_gpu_and_the_cpu_computes_like_the_cpu_and_again_to_the_same_bits() {
    let _s = serial();
    let vk = gpu();
    let b = new_backend();
    let (v, cpu) = (position(&b, &vk), cpu_position(&b));
    let want = run(&b, [cpu, cpu, cpu], 1).unwrap().remove(0);
    for at in [[v, v, v], [v, cpu, v], [cpu, v, cpu], [v, v, cpu]] {
        let runs = run(&b, at, 4).unwrap();
        // The GPU's F32 products and exp differ from the CPU's in the last
        // bits; the softmax outputs are below 1 and y sums 48 of them.
        assert_close(&format!("placement {at:?}"), &runs[0], &want, 1e-5, 1e-4);
        for (i, r) in runs.iter().enumerate().skip(1) {
            assert_eq!(bits(r), bits(&runs[0]), "placement {at:?}: compute {i} differs from the first");
        }
    }
}

fn model(dir: &std::path::Path, blocks: u32, d: i64) -> String {
    let mut w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(blocks))
        .tensor("token_embd.weight", F32, &[d, 16])
        .tensor("output_norm.weight", F32, &[d]);
    for i in 0..blocks {
        w = w
            .tensor(format!("blk.{i}.attn_norm.weight"), F32, &[d])
            .tensor(format!("blk.{i}.attn_q.weight"), F16, &[d, d])
            .tensor(format!("blk.{i}.ffn_up.weight"), sys::GGML_TYPE_Q4_0, &[d, 2 * d]);
    }
    let path = dir.join("model.gguf");
    w.write_to(&path).unwrap();
    path.to_str().unwrap().to_string()
}

fn tmpdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ggml-rs-gpu-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn model_layers_on_the_gpu_are_accounted_to_the_byte() {
    let _s = serial();
    let vk = gpu();
    let dir = tmpdir("model");
    let path = model(&dir, 3, 64);
    // Layers 1 and 2 on the GPU; layer 0 and the output layer on the CPU.
    let layout = Layout { layer_devices: vec![None, Some(vk.index), Some(vk.index), None], ..Default::default() };
    let params = |alloc| BackendParams { n_threads: 2, alloc_memory: alloc, ..Default::default() };
    let b = Backend::open(Some(&path), &params(true), &layout).expect("open");
    b.load(&mut |_| true).unwrap();
    for (name, buft, dev, layer) in b.placements() {
        let on_vk = matches!(layer, Some(1) | Some(2));
        assert_eq!(dev == vk.index, on_vk, "{name} in {buft} on device {dev}");
        if on_vk {
            assert!(buft.starts_with(GPU), "{name} in {buft}");
        }
    }
    let mem = b.memory();
    let allocated = b.allocated_weights();
    eprintln!("memory: {mem}\nallocated by ggml: {allocated:?}");
    let dm = |i: usize| mem.devices.iter().find(|d| d.device == i).unwrap_or_else(|| panic!("no memory entry for device {i}: {mem}"));
    let vk_mem = dm(vk.index);
    assert_eq!(vk_mem.weights[0] + vk_mem.weights[3], 0, "{mem}");
    assert!(vk_mem.weights[1] > 0 && vk_mem.weights[2] > 0, "{mem}");
    assert_eq!(allocated.get(&vk.index).copied(), Some(vk_mem.weights.iter().sum::<u64>()), "{GPU}: {mem}");
    let cpu = b.devices().into_iter().find(|d| d.device_type == DeviceType::Cpu).unwrap();
    let cpu_mem = dm(cpu.index);
    assert_eq!(
        allocated.get(&cpu.index).copied(),
        Some(mem.input_weights + cpu_mem.weights.iter().sum::<u64>()),
        "CPU: {mem}"
    );
    // A sizing-only backend reports the same, per device and layer.
    let fit = Backend::open(Some(&path), &params(false), &layout).expect("open to size");
    assert_eq!(fit.memory(), mem);
    // Cache tensors of a GPU layer count there, at the GPU's sizes, in
    // both.
    for be in [&b, &fit] {
        let root = Context::new(be, 64).unwrap();
        let mut l1 = root.layer(1);
        l1.zeros(F16, &[64, 8]).unwrap();
    }
    assert_eq!(fit.memory(), b.memory());
    assert!(dm(vk.index).cache[1] == 0 && b.memory().devices.iter().find(|d| d.device == vk.index).unwrap().cache[1] >= 64 * 8 * 2);
    // A weight on the GPU reads back as written, and a product with it
    // equals the same product on the CPU within the GPU's rounding.
    let q = b.get("blk.1.attn_q.weight").unwrap();
    let qv = Rng::new(3).vec(64 * 64).into_iter().map(f16_round).collect::<Vec<_>>();
    let f16: Vec<u8> = qv.iter().flat_map(|&v| f16_bits(v).to_le_bytes()).collect();
    data::write(q, &f16, "q").unwrap();
    assert_eq!(data::read_f32(q, "q").unwrap(), qv);
    let x = Rng::new(5).vec(64 * 4);
    let mut root = Context::new(&b, 64).unwrap();
    let xt = upload(&mut root.input(), F32, &[64, 4], &x);
    let y = root.mul_mat(q, xt).unwrap();
    let got = eval(&mut root, y);
    let mut cpu_ctx = Context::new(&b, 64).unwrap();
    let qc = upload(&mut cpu_ctx.on_device(cpu_position(&b)), F16, &[64, 64], &qv);
    let xc = upload(&mut cpu_ctx.input(), F32, &[64, 4], &x);
    let yc = cpu_ctx.mul_mat(qc, xc).unwrap();
    let cpu_y = eval(&mut cpu_ctx, yc);
    // Naive products in f64: of x as it is, and of x rounded to F16 (the
    // CPU's vec_dot_f16 rounds the activations to F16 first).
    let naive = |round: bool| -> Vec<f32> {
        let mut y = vec![0f32; 64 * 4];
        for j in 0..4 {
            for i in 0..64 {
                let mut acc = 0f64;
                for k in 0..64 {
                    let xv = if round { f16_round(x[j * 64 + k]) } else { x[j * 64 + k] };
                    acc += qv[i * 64 + k] as f64 * xv as f64;
                }
                y[j * 64 + i] = acc as f32;
            }
        }
        y
    };
    let worst = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| (p - q).abs()).fold(0f32, f32::max);
    // Vulkan multiplies F16 weights with the activations in F32, the CPU
    // with them rounded to F16: that rounding is the whole difference
    // between the two devices here (1.5e-3 on these sums of 64 products;
    // the models' logits differ from the CPU's for the same reason). CUDA
    // may take either path (its vector kernel in F32, cuBLAS in F16), so
    // there the product must match one of the two naive ones.
    let on_gpu = worst(&got, &naive(false)).min(if GPU == "CUDA" { worst(&got, &naive(true)) } else { f32::INFINITY });
    assert!(on_gpu <= 1e-5, "{GPU} against the naive F32 product");
    assert!(worst(&cpu_y, &naive(true)) <= 1e-5, "CPU against the naive product of x rounded to F16");
    eprintln!(
        "F16 weight x F32 activations on {GPU}: |GPU - naive| {:.2e}, |GPU - naive with x in F16| {:.2e}, |CPU - naive with x in F16| {:.2e}, |GPU - CPU| {:.2e}",
        worst(&got, &naive(false)),
        worst(&got, &naive(true)),
        worst(&cpu_y, &naive(true)),
        worst(&got, &cpu_y)
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn cancel_stops_a_graph_split_between_the_gpu_and_the_cpu() {
    let _s = serial();
    let vk = gpu();
    const D: i64 = 256;
    let dir = tmpdir("cancel");
    let mut w = Writer::new()
        .kv("general.architecture", Value::Str("test".into()))
        .kv("test.block_count", Value::U32(4))
        .tensor("token_embd.weight", F32, &[D, 4]);
    for i in 0..4 {
        w = w.tensor(format!("blk.{i}.attn_q.weight"), F32, &[D, D]);
    }
    let path = dir.join("model.gguf");
    w.write_to(&path).unwrap();
    // Layers 0 and 2 on the GPU, 1 and 3 on the CPU: a chain through them
    // alternates splits. Eight columns: from 32 on, ggml's scheduler
    // offloads a CPU weight's matmul to the GPU (op offload), and the whole
    // graph would run on the GPU, which cannot be interrupted.
    let v = Some(vk.index);
    let layout = Layout { layer_devices: vec![v, None, v, None, None], ..Default::default() };
    let b = Backend::open(Some(path.to_str().unwrap()), &BackendParams { n_threads: 2, ..Default::default() }, &layout).unwrap();
    b.load(&mut |_| true).unwrap();
    let ws: Vec<_> = (0..4).map(|i| b.get(&format!("blk.{i}.attn_q.weight")).unwrap()).collect();
    let mut r = Rng::new(9);
    for &t in &ws {
        data::write(t, &bytes(&r.vec((D * D) as usize)), "w").unwrap();
    }
    let x0 = r.vec((D * 8) as usize);
    let build = |layers: &[usize], rounds: usize| {
        let mut root = Context::new(&b, 8 * rounds + 16).unwrap();
        let mut x = upload(&mut root.input(), F32, &[D, 8], &x0);
        for _ in 0..rounds {
            for &l in layers {
                x = root.mul_mat(ws[l], x).unwrap();
                x = root.rms_norm(x, None, 1e-6).unwrap();
            }
        }
        (root, x)
    };
    let (mut small, y) = build(&[0, 1, 2, 3], 4);
    small.compute(&[y]).unwrap();
    let want = data::read_f32(y, "y").unwrap();
    assert!(want.iter().all(|x| x.is_finite()));

    // A graph far longer than any delay the cancel can suffer (900
    // rounds: 3,600 splits), cancelled once its compute is under way.
    let (mut long, x) = build(&[0, 1, 2, 3], 900);
    let t = cancel_soon(&b);
    let t0 = std::time::Instant::now();
    let e = long.compute(&[x]).expect_err("the cancelled compute fails");
    t.join().unwrap();
    assert_eq!(e.kind, ErrorKind::Aborted, "{}", e.message);
    assert!(t0.elapsed() < Duration::from_secs(20), "the cancel took {:?}", t0.elapsed());
    small.compute(&[y]).unwrap();
    assert_eq!(bits(&data::read_f32(y, "y").unwrap()), bits(&want), "a compute after the cancel");

    // A graph on the GPU alone (its input lives there too) cannot be
    // interrupted; a request made before it fails it all the same, once.
    let mut root = Context::new(&b, 64).unwrap();
    let xv = upload(&mut root.layer(0), F32, &[D, 8], &x0);
    let y1 = root.mul_mat(ws[0], xv).unwrap();
    let y2 = root.mul_mat(ws[2], y1).unwrap();
    root.compute(&[y2]).unwrap();
    let first = data::read_f32(y2, "y").unwrap();
    b.cancel();
    let e = root.compute(&[y2]).expect_err("a pending cancel fails the next compute");
    assert_eq!(e.kind, ErrorKind::Aborted, "{}", e.message);
    root.compute(&[y2]).unwrap();
    assert_eq!(bits(&data::read_f32(y2, "y").unwrap()), bits(&first), "a GPU-only compute after the cancel");
    std::fs::remove_dir_all(dir).ok();
}
