//! Backend, device, context and compute behaviour (not op numerics).
mod common;
use common::*;
use ggml_rs::ml::{device, threads, Backend, BackendParams, Context, DeviceType, ErrorKind};

#[test]
fn devices_include_a_cpu_with_memory() {
    let devs = device::list();
    assert!(!devs.is_empty());
    let cpu = devs.iter().find(|d| d.device_type == DeviceType::Cpu).expect("a CPU device");
    assert_eq!(cpu.library, "CPU");
    assert!(!cpu.name.is_empty() && !cpu.id.is_empty());
    assert!(cpu.memory_total > 0 && cpu.memory_free <= cpu.memory_total, "{cpu:?}");
    assert!(device::info(devs.len()).is_none());
}

#[test]
fn default_threads_respect_affinity() {
    let b = Backend::new(&BackendParams::default()).unwrap();
    assert_eq!(b.n_threads(), threads::default_threads());
    assert!(b.n_threads() >= 1 && b.n_threads() <= threads::affinity_cpus());
    // The scheduler's devices end with the CPU.
    assert_eq!(b.devices().last().unwrap().device_type, DeviceType::Cpu);
}

#[test]
fn context_size_is_bounded_by_the_backend() {
    let b = Backend::new(&BackendParams { max_graph_nodes: 1024, ..Default::default() }).unwrap();
    let e = Context::new(&b, 2048).err().expect("too large");
    assert!(e.message.contains("exceeds the backend's maximum of 1024"), "{}", e.message);
    assert_eq!(Context::new(&b, 0).unwrap().max_graph_nodes(), 1024);
}

#[test]
fn a_full_context_reports_out_of_memory() {
    let b = backend();
    let root = Context::new(&b, 8).unwrap();
    let mut input = root.input();
    let x = upload(&mut input, F32, &[4], &[1., 2., 3., 4.]);
    let mut last = None;
    for _ in 0..16 {
        match input.add(x, x) {
            Ok(_) => {}
            Err(e) => {
                last = Some(e);
                break;
            }
        }
    }
    let e = last.expect("context never filled up");
    assert_eq!(e.kind, ErrorKind::OutOfMemory);
    assert!(e.message.contains("context is full"), "{}", e.message);
}

#[test]
fn graph_capacity_is_checked_before_ggml() {
    let b = backend();
    // 64 tensors of headers but a graph chain longer than 64 nodes is
    // impossible in one context; use two contexts: build a long chain in a
    // big one and forward it from a small one.
    let (mut big, mut input) = contexts(&b);
    let x = upload(&mut input, F32, &[4], &[1.; 4]);
    let mut t = x;
    for _ in 0..100 {
        t = big.add(t, x).unwrap();
    }
    let mut small = Context::new(&b, 32).unwrap();
    let e = small.forward(&[t]).unwrap_err();
    assert!(e.message.contains("forward: graph would have"), "{}", e.message);
    // The big one computes it.
    assert_eq!(eval(&mut big, t), vec![101.; 4]);
}

#[test]
fn data_tensors_need_a_placement() {
    let b = backend();
    let mut root = Context::new(&b, 64).unwrap();
    let e = root.empty(F32, &[2]).unwrap_err();
    assert!(e.message.contains("set Input or Layer before creating tensors"), "{}", e.message);
    let mut layer = root.layer(0);
    let t = layer.zeros(F32, &[3, 2]).unwrap();
    assert_eq!(ggml_rs::ml::data::read_f32(t, "test").unwrap(), vec![0.; 6]);
    // Zero-element tensors have no memory, as in Ollama.
    let z = layer.empty(F32, &[]).unwrap();
    assert_eq!(z.nelements(), 0);
}

#[test]
fn from_bytes_checks_sizes_and_shapes() {
    let b = backend();
    let (_root, mut input) = contexts(&b);
    let e = input.from_bytes(F32, &[3], &[0u8; 8]).unwrap_err();
    assert!(e.message.contains("data size does not match tensor size"), "{}", e.message);
    assert!(input.from_bytes(F32, &[2, 0, 1, 1, 1], &[]).is_err());
    assert!(input.from_bytes(F32, &[-2], &[]).is_err());
    assert!(input.from_bytes(999, &[2], &[]).is_err());
    // q8_0 rows must be whole blocks.
    let e = input.from_bytes(ggml_rs::sys::GGML_TYPE_Q8_0, &[16], &[]).unwrap_err();
    assert!(e.message.contains("block size 32"), "{}", e.message);
}

#[test]
fn arange_in_both_types() {
    let b = backend();
    let (mut root, _input) = contexts(&b);
    let f = root.arange(0., 5., 1.5, F32).unwrap();
    assert_eq!(eval(&mut root, f), vec![0., 1.5, 3., 4.5]);
    let i = root.arange(2., 6., 1., I32).unwrap();
    assert_eq!(ggml_rs::ml::data::read_f32(i, "test").unwrap(), vec![2., 3., 4., 5.]);
    assert!(root.arange(0., 5., 0., F32).is_err());
    assert!(root.arange(5., 0., 1., F32).is_err());
    assert!(root.arange(0., 5., 1., F16).is_err());
}

#[test]
fn an_ignored_op_error_fails_compute_once() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let x = upload(&mut input, F32, &[3], &[1., 2., 3.]);
    let y = upload(&mut input, F32, &[2], &[1., 2.]);
    let e = root.add(x, y).unwrap_err();
    root.record(&e);
    let good = root.add(x, x).unwrap();
    let e = root.compute(&[good]).unwrap_err();
    assert!(e.message.contains("an earlier op on this context failed: add:"), "{}", e.message);
    // Reported once; the next compute runs.
    assert_eq!(eval(&mut root, good), vec![2., 4., 6.]);
}

#[test]
fn a_growing_graph_recomputes_correctly() {
    // Compute, grow the graph, compute again: every result must be right
    // (stale scheduler addresses from the first run must not be reused).
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let mut rng = Rng::new(7);
    let xs: Vec<f32> = rng.vec(64);
    let x = upload(&mut input, F32, &[64], &xs);
    let mut outs = Vec::new();
    let mut t = x;
    for step in 0..6 {
        t = root.mul(t, x).unwrap();
        let s = root.scale(t, 0.5).unwrap();
        outs.push(s);
        root.compute(&outs).unwrap();
        for (k, &o) in outs.iter().enumerate() {
            let got = ggml_rs::ml::data::read_f32(o, "test").unwrap();
            let want: Vec<f32> = xs.iter().map(|v| v.powi(k as i32 + 2) * 0.5).collect();
            assert_close(&format!("step {step} output {k}"), &got, &want, 1e-6, 1e-5);
        }
    }
}

#[test]
fn a_graph_computed_again_keeps_its_allocation_only_while_valid() {
    // The scheduler keeps the last graph split and allocated, and computing
    // that graph again (new input data, same nodes) skips the planning.
    // Another graph in between, or a marked output, must plan it afresh:
    // every result right in each order, inputs rewritten between computes.
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let (mut other, mut other_in) = contexts(&b);
    let x = upload(&mut input, F32, &[256], &vec![0.0; 256]);
    let y = root.mul(x, x).unwrap();
    let z = root.scale(y, 2.0).unwrap();
    let w = root.add(z, x).unwrap();
    let o = upload(&mut other_in, F32, &[1024], &vec![1.0; 1024]);
    let p = other.scale(o, 3.0).unwrap();
    let check = |xs: &[f32], t: ggml_rs::ml::Tensor, f: &dyn Fn(f32) -> f32, what: &str| {
        let got = ggml_rs::ml::data::read_f32(t, "test").unwrap();
        let want: Vec<f32> = xs.iter().map(|&v| f(v)).collect();
        assert_close(what, &got, &want, 1e-6, 1e-6);
    };
    let mut rng = Rng::new(11);
    for round in 0..4 {
        let xs: Vec<f32> = rng.vec(256);
        let bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
        ggml_rs::ml::data::write(x, &bytes, "test").unwrap();
        root.compute(&[w]).unwrap();
        check(&xs, w, &|v| 2.0 * v * v + v, &format!("round {round}: w"));
        if round == 1 {
            // Another graph takes the scheduler.
            other.compute(&[p]).unwrap();
            assert!(ggml_rs::ml::data::read_f32(p, "test").unwrap().iter().all(|&v| v == 3.0));
        }
        if round == 2 {
            // A newly marked output: z must survive the compute too.
            root.compute(&[w, z]).unwrap();
            check(&xs, z, &|v| 2.0 * v * v, "round 2: z");
            check(&xs, w, &|v| 2.0 * v * v + v, "round 2: w again");
        }
    }
}

#[test]
fn contexts_keep_the_backend_alive() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    drop(b);
    let x = upload(&mut input, F32, &[2], &[1., 2.]);
    let y = root.add(x, x).unwrap();
    assert_eq!(eval(&mut root, y), vec![2., 4.]);
}

#[test]
fn reserve_reports_compute_buffer_sizes() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let x = upload(&mut input, F32, &[1024, 16], &vec![1.; 1024 * 16]);
    let mut t = root.mul(x, x).unwrap();
    t = root.add(t, x).unwrap();
    root.forward(&[t]).unwrap();
    let sizes = root.reserve().unwrap();
    assert_eq!(sizes.len(), b_devices(&root));
    // Two f32 [1024,16] intermediates (64 KiB each) may share memory; at
    // least one must be accounted on the CPU.
    assert!(*sizes.last().unwrap() >= 64 * 1024, "{sizes:?}");
    assert_eq!(eval(&mut root, t), vec![2.; 1024 * 16]);
}

fn b_devices(c: &Context) -> usize {
    c.backend().devices().len()
}

#[test]
fn ggml_log_reaches_the_sink() {
    use std::ffi::{c_char, c_void, CStr};
    use std::sync::atomic::{AtomicUsize, Ordering};
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn sink(_level: i32, target: *const c_char, msg: *const c_char, _: *mut c_void) {
        let target = unsafe { CStr::from_ptr(target) }.to_string_lossy();
        let msg = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
        if target == "ggml" && !msg.is_empty() && !msg.ends_with('\n') {
            SEEN.fetch_add(1, Ordering::SeqCst);
        }
    }
    ggml_rs::ml::log::set_sink(Some(sink), std::ptr::null_mut(), 1);
    // ggml's GGUF reader logs an error for a file that does not exist.
    let params = ggml_rs::sys::gguf_init_params { no_alloc: true, ctx: std::ptr::null_mut() };
    let path = std::ffi::CString::new("/nonexistent/ggml-rs-test.gguf").unwrap();
    let g = unsafe { ggml_rs::sys::gguf_init_from_file(path.as_ptr(), params) };
    assert!(g.is_null());
    ggml_rs::ml::log::set_sink(None, std::ptr::null_mut(), 3);
    assert!(SEEN.load(Ordering::SeqCst) > 0, "no ggml log record reached the sink");
}

#[test]
fn a_graph_of_empty_tensors_computes_to_nothing() {
    // ggml's allocator asserts on a graph whose nodes are all empty; we
    // treat it as nothing to compute.
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let z = input.empty(F32, &[0]).unwrap();
    let o = root.sqr(z).unwrap();
    root.compute(&[o]).unwrap();
    assert_eq!(ggml_rs::ml::data::read_f32(o, "test").unwrap(), Vec::<f32>::new());
    root.forward(&[o]).unwrap();
    assert_eq!(root.reserve().unwrap().iter().sum::<u64>(), 0);
}

#[test]
fn out_of_range_row_ids_fail_compute_instead_of_aborting() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let table = upload(&mut input, F32, &[2, 3], &[0., 1., 2., 3., 4., 5.]);
    let ids = upload_i32(&mut input, &[2], &[2, 0]);
    let rows = root.get_rows(table, ids).unwrap();
    assert_eq!(eval(&mut root, rows), vec![4., 5., 0., 1.]);
    // Ids are filled after the graph is built, as Ollama's runner does.
    let bad: Vec<u8> = [3i32, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
    ggml_rs::ml::data::write(ids, &bad, "test").unwrap();
    let e = root.compute(&[rows]).unwrap_err();
    assert!(e.message.contains("get_rows"), "{}", e.message);
}

#[test]
fn computed_out_of_range_ids_fail_compute_instead_of_aborting() {
    // Ids produced by the graph cannot be checked before compute; the
    // patched CPU kernels skip and count them, and compute reports it.
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let table = upload(&mut input, F32, &[2, 4], &[0., 1., 2., 3., 4., 5., 6., 7.]);
    let host_ids = upload_i32(&mut input, &[2], &[0, 100]);
    let ids = root.dup(host_ids).unwrap();
    let rows = root.get_rows(table, ids).unwrap();
    let e = root.compute(&[rows]).unwrap_err();
    assert!(e.message.contains("get_rows producing f32[2,2] met row ids out of range"), "{}", e.message);
    // set_rows into a destination with computed ids.
    let dst = input.zeros(F32, &[2, 4]).unwrap();
    let src = upload(&mut input, F32, &[2, 2], &[1., 2., 3., 4.]);
    let set = root.set_rows(dst, src, ids).unwrap();
    assert!(root.compute(&[set]).is_err());
    // Good ids still work afterwards.
    let good = upload_i32(&mut input, &[2], &[3, 1]);
    let gd = root.dup(good).unwrap();
    let rows = root.get_rows(table, gd).unwrap();
    let mut fresh = Context::new(&b, 256).unwrap();
    assert_eq!(eval(&mut fresh, rows), vec![6., 7., 2., 3.]);
}

#[test]
fn empty_data_tensors_mix_with_real_nodes() {
    // A zero-element data tensor forwarded into a graph with real nodes used
    // to trip ggml's allocator (buffer_id >= 0).
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let e = input.empty(F32, &[]).unwrap();
    root.compute(&[e]).unwrap();
    let x = upload(&mut input, F32, &[3], &[1., 2., 3.]);
    let y = root.add(x, x).unwrap();
    assert_eq!(eval(&mut root, y), vec![2., 4., 6.]);
    // Also a root (placement-less) zero-element tensor.
    let z = root.empty(F32, &[0]).unwrap();
    root.forward(&[z]).unwrap();
    let w = root.mul(x, x).unwrap();
    assert_eq!(eval(&mut root, w), vec![1., 4., 9.]);
}

#[test]
fn a_running_compute_can_be_cancelled_and_the_backend_stays_usable() {
    // Independent of the machine's speed and load: the graph is far longer
    // than any delay the cancel can suffer (4,000 products of 512x512 by
    // 512x64, each normalised: ~134 GFLOP, seconds on most CPUs, and more
    // than 60 ms even at 2 TFLOP/s), and the
    // cancel is requested once the compute is under way (or, on a loaded
    // machine, just before it starts: it then stops at its first node;
    // both are the documented behaviour). The graph cannot finish first.
    let b = backend();
    let mut rng = Rng::new(11);
    let wv = rng.vec(512 * 512);
    let xv = rng.vec(512 * 64);
    let n = 4_000;
    let mut root = Context::new(&b, 2 * n + 16).unwrap();
    let w = upload(&mut root.input(), F32, &[512, 512], &wv);
    let mut x = upload(&mut root.input(), F32, &[512, 64], &xv);
    for _ in 0..n {
        x = root.mul_mat(w, x).unwrap();
        x = root.rms_norm(x, None, 1e-6).unwrap();
    }
    let t = cancel_soon(&b);
    let e = root.compute(&[x]).unwrap_err();
    t.join().unwrap();
    assert_eq!(e.kind, ErrorKind::Aborted, "{}", e.message);
    // The request was consumed: the next computes run to the end.
    let small = root.add(w, w).unwrap();
    assert_eq!(eval(&mut root, small)[0], 2.0 * wv[0]);
    let mut y = upload(&mut root.input(), F32, &[512, 64], &xv);
    for _ in 0..3 {
        y = root.mul_mat(w, y).unwrap();
        y = root.rms_norm(y, None, 1e-6).unwrap();
    }
    let got = eval(&mut root, y);
    assert!(got.iter().all(|v| v.is_finite()) && got.len() == 512 * 64);
}
