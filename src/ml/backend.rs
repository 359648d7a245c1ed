//! `Backend`: the devices a model runs on, its weights, and the scheduler
//! that splits graphs across the devices. Contexts keep their backend alive
//! (they hold an `Arc`), so freeing the backend handle before its contexts
//! is safe.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::cpu_load::CpuLoad;
use super::device::{self, DeviceInfo, DeviceType};
use super::flash::{self, AttentionShape};
use super::gguf::{Gguf, Value};
use super::model::memory::Memory;
use super::model::weights::{self, BuftChooser, Layout, Targets, Weights};
use super::threads::{self, ThreadPool};
use super::{Error, ErrorKind, Result, Tensor};
use crate::sys;

/// Flash attention choice, as Ollama's `ml.FlashAttentionType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashAttention {
    Auto,
    Disabled,
    Enabled,
}

#[derive(Debug, Clone)]
pub struct BackendParams {
    /// CPU threads; 0 picks [`threads::default_threads`].
    pub n_threads: usize,
    /// Graph node capacity of a default context; 0 picks the default:
    /// max(8192, 32 × tensors in the model).
    pub max_graph_nodes: usize,
    pub flash_attention: FlashAttention,
    /// False: size things without allocating (model "fit" checks); such a
    /// backend can neither load weights nor compute.
    pub alloc_memory: bool,
}

impl Default for BackendParams {
    fn default() -> Self {
        BackendParams { n_threads: 0, max_graph_nodes: 0, flash_attention: FlashAttention::Auto, alloc_memory: true }
    }
}

/// One initialised device backend.
pub(crate) struct DeviceBackend {
    pub info: DeviceInfo,
    pub backend: sys::ggml_backend_t,
    pub buft: sys::ggml_backend_buffer_type_t,
}

/// A model's file and weights.
pub(crate) struct Model {
    pub gguf: Gguf,
    pub path: String,
    pub blocks: usize,
    pub weights: Weights,
}

pub(crate) struct BackendInner {
    /// Scheduler order: GPUs, accelerators, then the CPU (ggml wants it last).
    pub devices: Vec<DeviceBackend>,
    pub sched: sys::ggml_backend_sched_t,
    pub cpu_index: usize,
    pub n_threads: usize,
    pub max_graph_nodes: usize,
    pub flash_attention: FlashAttention,
    pub alloc_memory: bool,
    /// Serialises compute and reserve: one graph at a time per backend.
    pub compute_lock: Mutex<()>,
    /// The version (`Graph::version`) of the graph the scheduler holds
    /// split and allocated, 0 for none; read and written under
    /// `compute_lock`. Computing that graph again skips the split and the
    /// allocation, as llama.cpp does for a reused graph.
    pub sched_graph: AtomicU64,
    pub model: Option<Model>,
    /// Registry device per layer `0..=blocks` (None: CPU).
    pub layer_devices: Vec<Option<usize>>,
    pub memory: Mutex<Memory>,
    /// Set by [`Backend::cancel`]; ggml's CPU backend polls it between
    /// nodes (its abort callback) and stops the compute.
    pub cancel: Arc<AtomicBool>,
    /// The CPU backend's workers, kept between graphs (see [`ThreadPool`]).
    /// Dropped after the device backends.
    pub threadpool: Option<ThreadPool>,
    /// Set when the thread count was left to the default: the load gauge
    /// that picks each graph's thread count (at most `n_threads`) and the
    /// count the CPU backend has now; read and written under `compute_lock`.
    pub cpu_load: Option<Mutex<(CpuLoad, usize)>>,
    /// Whether the model's weights hold the file's values: `WEIGHTS_LOADED`
    /// (or no weights to load), `WEIGHTS_NOT_LOADED` (allocated, never
    /// loaded: they read as zeros) or `WEIGHTS_INCOMPLETE` (a load is
    /// running, or was cancelled or failed). Compute refuses a graph that
    /// reads a weight in all but the first, so a forgotten
    /// [`Backend::load`] is an error, not zeros.
    pub weights: AtomicU8,
}

pub(crate) const WEIGHTS_LOADED: u8 = 0;
pub(crate) const WEIGHTS_NOT_LOADED: u8 = 1;
pub(crate) const WEIGHTS_INCOMPLETE: u8 = 2;

impl BackendInner {
    /// Fits the CPU backend's thread count to the CPUs other processes
    /// leave free (see [`CpuLoad`]); only for a default thread count. Call
    /// under `compute_lock`.
    pub fn fit_threads(&self) {
        let Some(load) = &self.cpu_load else { return };
        let mut load = load.lock();
        let n = load.0.threads(self.n_threads);
        if n != load.1 {
            load.1 = n;
            // SAFETY: the CPU backend lives as long as `self`; no graph runs.
            unsafe { sys::ggml_backend_cpu_set_n_threads(self.devices[self.cpu_index].backend, n as i32) };
        }
    }

    /// The backend that runs layer `l` (its registry device's, the CPU's
    /// when the layer has none).
    pub fn layer_backend(&self, l: usize) -> sys::ggml_backend_t {
        if let Some(Some(dev)) = self.layer_devices.get(l) {
            if let Some(d) = self.devices.iter().find(|d| d.info.index == *dev) {
                return d.backend;
            }
        }
        self.devices[self.cpu_index].backend
    }

    /// Whether every layer, the output layer included, runs off the CPU
    /// (llama.cpp's full offload).
    pub fn full_offload(&self) -> bool {
        !self.layer_devices.is_empty() && self.layer_devices.iter().all(|d| d.is_some())
    }

    /// The device backends, in scheduler order.
    pub fn backends(&self) -> impl Iterator<Item = sys::ggml_backend_t> + '_ {
        self.devices.iter().map(|d| d.backend)
    }
}

unsafe extern "C" fn abort_requested(data: *mut std::ffi::c_void) -> bool {
    // SAFETY: `data` is the `AtomicBool` of an `Arc` the backend keeps alive
    // as long as the CPU backend that calls this.
    (*(data as *const AtomicBool)).load(Ordering::Relaxed)
}

/// Installs ggml's abort callback on every device backend that offers one
/// (through its registry's "ggml_backend_set_abort_callback": the CPU's,
/// and RPC's through our patch 04).
fn install_abort_callbacks(devices: &[DeviceBackend], cancel: &Arc<AtomicBool>) {
    for d in devices {
        // SAFETY: the registry and its proc address come from ggml; the
        // function has the documented ggml_backend_set_abort_callback_t type.
        unsafe {
            let dev = sys::ggml_backend_get_device(d.backend);
            let reg = if dev.is_null() { std::ptr::null_mut() } else { sys::ggml_backend_dev_backend_reg(dev) };
            if reg.is_null() {
                continue;
            }
            let f = sys::ggml_backend_reg_get_proc_address(reg, c"ggml_backend_set_abort_callback".as_ptr());
            if f.is_null() {
                continue;
            }
            let set: sys::ggml_backend_set_abort_callback_t = std::mem::transmute(f);
            if let Some(set) = set {
                set(d.backend, Some(abort_requested), Arc::as_ptr(cancel) as *mut std::ffi::c_void);
            }
        }
    }
}

// The raw handles are only used under `compute_lock` (scheduler) or are
// immutable after creation (device backends, buffer types, weights).
unsafe impl Send for BackendInner {}
unsafe impl Sync for BackendInner {}

impl Drop for BackendInner {
    fn drop(&mut self) {
        if super::profile::enabled() {
            super::profile::report();
        }
        unsafe {
            if !self.sched.is_null() {
                sys::ggml_backend_sched_free(self.sched);
            }
            // Weights (their buffers) before the device backends.
            self.model = None;
            for d in &self.devices {
                sys::ggml_backend_free(d.backend);
            }
        }
        self.threadpool = None;
    }
}

#[derive(Clone)]
pub struct Backend {
    pub(crate) inner: Arc<BackendInner>,
}

fn init_device(info: DeviceInfo, d: sys::ggml_backend_dev_t) -> Result<DeviceBackend> {
    let backend = unsafe { sys::ggml_backend_dev_init(d, std::ptr::null()) };
    if backend.is_null() {
        return Err(Error::unsupported(format!("backend: failed to initialise device {}", info.name)));
    }
    super::rpc::check_init(backend, &info)?;
    let buft = unsafe { sys::ggml_backend_get_default_buffer_type(backend) };
    Ok(DeviceBackend { info, backend, buft })
}

/// Frees device backends if creation fails half-way.
struct Pending(Vec<DeviceBackend>);
impl Drop for Pending {
    fn drop(&mut self) {
        for d in self.0.drain(..) {
            unsafe { sys::ggml_backend_free(d.backend) };
        }
    }
}

impl Backend {
    /// A backend without a model: every device, one scheduler.
    pub fn new(params: &BackendParams) -> Result<Backend> {
        Self::open(None, params, &Layout::default())
    }

    /// A backend for the GGUF model at `path` (or none), its weights placed
    /// by `layout`. With `params.alloc_memory` the weights are allocated
    /// (call [`Backend::load`] to read them); without, only sized.
    pub fn open(path: Option<&str>, params: &BackendParams, layout: &Layout) -> Result<Backend> {
        super::log::init();
        let n_threads = if params.n_threads == 0 { threads::default_threads() } else { params.n_threads };
        if n_threads > sys::GGML_MAX_N_THREADS as usize {
            return Err(Error::invalid(format!(
                "backend: {n_threads} threads, more than ggml's limit of {}",
                sys::GGML_MAX_N_THREADS
            )));
        }
        if params.max_graph_nodes != 0 && !(16..=(1 << 24)).contains(&params.max_graph_nodes) {
            return Err(Error::invalid(format!(
                "backend: max_graph_nodes {} out of range 16..2^24",
                params.max_graph_nodes
            )));
        }

        // Devices by kind, in registry order.
        let mut gpus = Vec::new();
        let mut accels = Vec::new();
        let mut cpu = None;
        let mut raw = HashMap::new();
        for i in 0..device::count() {
            let d = device::dev(i);
            let info = device::info_of(i, d);
            if !super::rpc::device_usable(d) {
                continue; // its RPC server was lost
            }
            raw.insert(i, d);
            match info.device_type {
                DeviceType::Cpu if cpu.is_none() => cpu = Some(info),
                DeviceType::Gpu | DeviceType::IntegratedGpu => gpus.push(info),
                DeviceType::Accelerator => accels.push(info),
                _ => {}
            }
        }
        let cpu = cpu.ok_or_else(|| Error::unsupported("backend: ggml reports no CPU device"))?;
        let cpu_dev = raw[&cpu.index];

        let gguf = match path {
            Some(p) => Some(Gguf::open(p)?),
            None => None,
        };
        let blocks = match &gguf {
            Some(g) => block_count(g)?,
            None => 0,
        };
        let layers = blocks + 1;
        for (l, d) in layout.layer_devices.iter().enumerate() {
            if let Some(d) = d {
                if l >= layers && gguf.is_some() {
                    return Err(Error::invalid(format!("layer placement: layer {l} does not exist (model has {blocks} layers + output)")));
                }
                if !gpus.iter().any(|g| g.index == *d) {
                    return Err(Error::invalid(format!("layer placement: device {d} is not a GPU of this process")));
                }
            }
        }

        // Initialise the GPUs that will be used: without a model, all; with
        // one, those that receive layers (idle GPUs are never touched).
        let used_gpu = |g: &DeviceInfo| gguf.is_none() || layout.layer_devices.iter().take(layers).any(|d| *d == Some(g.index));
        let mut pending = Pending(Vec::new());
        for g in gpus.iter().filter(|g| used_gpu(g)) {
            pending.0.push(init_device(g.clone(), raw[&g.index])?);
        }
        for a in &accels {
            pending.0.push(init_device(a.clone(), raw[&a.index])?);
        }
        pending.0.push(init_device(cpu.clone(), cpu_dev)?);
        let cpu_index = pending.0.len() - 1;
        let cancel = Arc::new(AtomicBool::new(false));
        // The pool's threads are made now: a system that refuses them
        // (thread or memory limits) gives an error here, not at compute.
        let threadpool = ThreadPool::new(n_threads).ok_or_else(|| {
            Error::oom(format!("backend: the system refused to start {n_threads} CPU threads (thread or memory limits)"))
        })?;
        unsafe {
            sys::ggml_backend_cpu_set_n_threads(pending.0[cpu_index].backend, n_threads as i32);
            sys::ggml_backend_cpu_set_threadpool(pending.0[cpu_index].backend, threadpool.raw());
        }
        install_abort_callbacks(&pending.0, &cancel);

        // Memory report: the CPU, then every GPU in registry order.
        let mut report: Vec<(usize, String)> = vec![(cpu.index, cpu.name.clone())];
        report.extend(gpus.iter().map(|g| (g.index, g.name.clone())));
        let mut memory = Memory::new(&report, layers);

        let mut model = None;
        if let Some(g) = gguf {
            let used_gpus: Vec<_> = pending.0.iter().filter(|d| gpus.iter().any(|g| g.index == d.info.index)).map(|d| raw[&d.info.index]).collect();
            let chooser = BuftChooser::new(cpu_dev, pending.0[cpu_index].buft, !layout.no_extra_bufts, layout.fast_kernels, &used_gpus);
            let bufts: HashMap<usize, sys::ggml_backend_buffer_type_t> =
                pending.0.iter().map(|d| (d.info.index, d.buft)).collect();
            let device_buft = |i: usize| bufts.get(&i).copied();
            let targets = Targets { layout, cpu_device: cpu.index, device_buft: &device_buft, chooser: &chooser };
            let mut w = weights::create(&g, blocks, &targets, &mut memory)?;
            if params.alloc_memory {
                weights::allocate(&mut w, &memory)?;
            } else {
                weights::allocate_virtual(&mut w)?;
            }
            let path = path.unwrap_or_default().to_string();
            model = Some(Model { gguf: g, path, blocks, weights: w });
        }

        let flash_attention = match params.flash_attention {
            FlashAttention::Auto => {
                // The devices that run attention: with a model, those with
                // repeating layers (the CPU for layers no GPU took); without
                // one the scheduler may put it on any device.
                let attention_devices: Vec<sys::ggml_backend_dev_t> = pending
                    .0
                    .iter()
                    .filter(|d| {
                        if model.is_none() {
                            return true;
                        }
                        let on = |dev: Option<usize>| (0..blocks.max(1)).any(|l| layout.layer_devices.get(l).copied().flatten() == dev);
                        if d.info.index == cpu.index {
                            on(None)
                        } else {
                            on(Some(d.info.index))
                        }
                    })
                    .map(|d| raw[&d.info.index])
                    .collect();
                let shape = model.as_ref().and_then(|m| AttentionShape::of_model(&m.gguf)).unwrap_or_default();
                let ok = flash::supported(&attention_devices, shape);
                log::info!(
                    "flash attention auto: {} ({} device(s) asked, head size {}/{})",
                    if ok { "enabled" } else { "disabled" },
                    attention_devices.len(),
                    shape.head_k,
                    shape.head_v
                );
                if ok {
                    FlashAttention::Enabled
                } else {
                    FlashAttention::Disabled
                }
            }
            f => f,
        };

        let n_tensors = model.as_ref().map(|m| m.weights.by_name.len()).unwrap_or(0);
        let max_graph_nodes = if params.max_graph_nodes == 0 { 8192.max(32 * n_tensors) } else { params.max_graph_nodes };
        let devices = std::mem::take(&mut pending.0);
        let mut inner = BackendInner {
            devices,
            sched: std::ptr::null_mut(),
            cpu_index,
            n_threads,
            max_graph_nodes,
            flash_attention,
            alloc_memory: params.alloc_memory,
            compute_lock: Mutex::new(()),
            sched_graph: AtomicU64::new(0),
            model,
            layer_devices: (0..layers).map(|l| layout.layer_devices.get(l).copied().flatten()).collect(),
            memory: Mutex::new(memory),
            cancel,
            threadpool: Some(threadpool),
            cpu_load: (params.n_threads == 0 && n_threads > 1).then(|| Mutex::new((CpuLoad::new(n_threads), n_threads))),
            weights: AtomicU8::new(if n_tensors > 0 && params.alloc_memory { WEIGHTS_NOT_LOADED } else { WEIGHTS_LOADED }),
        };
        unsafe {
            let mut backends: Vec<_> = inner.devices.iter().map(|d| d.backend).collect();
            let mut bufts: Vec<_> = inner.devices.iter().map(|d| d.buft).collect();
            inner.sched = sys::ggml_backend_sched_new(
                backends.as_mut_ptr(),
                bufts.as_mut_ptr(),
                backends.len() as i32,
                max_graph_nodes,
                false,
                true,
            );
        }
        if inner.sched.is_null() {
            return Err(Error::oom("backend: could not create the scheduler"));
        }
        if super::trace::enabled() {
            unsafe { sys::ggml_backend_sched_set_eval_callback(inner.sched, Some(super::trace::callback), std::ptr::null_mut()) };
        } else if super::profile::enabled() {
            unsafe { sys::ggml_backend_sched_set_eval_callback(inner.sched, Some(super::profile::callback), std::ptr::null_mut()) };
        }
        Ok(Backend { inner: Arc::new(inner) })
    }

    /// Reads the weights from the file (parallel, `n_threads` readers).
    /// `progress` gets fractions from 0 to 1 on the calling thread and
    /// returns false to cancel (the load then fails with ErrorKind::Aborted;
    /// the backend stays valid but its weights are incomplete).
    pub fn load(&self, progress: &mut dyn FnMut(f32) -> bool) -> Result<()> {
        let inner = &self.inner;
        if !inner.alloc_memory {
            return Err(Error::invalid("load: cannot load model without memory allocation"));
        }
        let Some(m) = &inner.model else {
            progress(1.0);
            return Ok(());
        };
        // Idle compute workers poll for work for a while after each graph:
        // park them, or they take a core from the readers (the next compute
        // wakes them). Under the compute lock, so no graph is running.
        if let Some(tp) = &inner.threadpool {
            let _guard = inner.compute_lock.lock();
            tp.pause();
        }
        inner.weights.store(WEIGHTS_INCOMPLETE, Ordering::SeqCst);
        super::model::load::load(&m.path, m.gguf.tensors(), &m.weights.sources, inner.n_threads.clamp(1, 16), progress)?;
        inner.weights.store(WEIGHTS_LOADED, Ordering::SeqCst);
        Ok(())
    }

    /// Stops the compute in progress at its next node (or, when none is
    /// running, the next one to start): it fails with `ErrorKind::Aborted`
    /// and the request is consumed. The backend stays usable. Safe to call
    /// from any thread. CPU work stops at its next node, remote (RPC) work
    /// at its next split (a split already sent finishes on the server);
    /// backends without an abort callback (CUDA, Vulkan) finish the graph,
    /// and the request then fails the next compute.
    pub fn cancel(&self) {
        self.inner.cancel.store(true, Ordering::SeqCst);
    }

    pub fn devices(&self) -> Vec<DeviceInfo> {
        self.inner.devices.iter().map(|d| d.info.clone()).collect()
    }
    /// Whether the scheduler has CPU devices only: every node runs on the
    /// CPU backend, on its inputs where they are (no copies for a device).
    pub fn cpu_only(&self) -> bool {
        self.inner.devices.iter().all(|d| d.info.device_type == DeviceType::Cpu)
    }
    /// The most CPU threads a graph computes on.
    pub fn n_threads(&self) -> usize {
        self.inner.n_threads
    }
    /// The CPU threads the last graph computed on: `n_threads`, or fewer
    /// where a default thread count followed the load (`cpu_load`).
    pub fn threads_now(&self) -> usize {
        self.inner.cpu_load.as_ref().map(|l| l.lock().1).unwrap_or(self.inner.n_threads)
    }
    pub fn max_graph_nodes(&self) -> usize {
        self.inner.max_graph_nodes
    }
    /// Enabled or Disabled: Auto was resolved when the backend was made.
    pub fn flash_attention(&self) -> FlashAttention {
        self.inner.flash_attention
    }
    pub fn alloc_memory(&self) -> bool {
        self.inner.alloc_memory
    }
    /// Repeating layers of the model (0 without one).
    pub fn block_count(&self) -> usize {
        self.inner.model.as_ref().map(|m| m.blocks).unwrap_or(0)
    }
    pub fn gguf(&self) -> Option<&Gguf> {
        self.inner.model.as_ref().map(|m| &m.gguf)
    }
    /// A weight by (target) name, e.g. `blk.3.attn_q.weight`.
    pub fn get(&self, name: &str) -> Option<Tensor> {
        self.inner.model.as_ref()?.weights.by_name.get(name).copied()
    }
    /// Every weight: (name, buffer type name, registry device, layer).
    pub fn placements(&self) -> Vec<(String, String, usize, Option<usize>)> {
        let Some(m) = &self.inner.model else { return Vec::new() };
        m.weights
            .placed
            .iter()
            .map(|(name, set, layer)| {
                let s = &m.weights.sets[*set];
                let buft = unsafe { std::ffi::CStr::from_ptr(sys::ggml_backend_buft_name(s.buft)) }.to_string_lossy().into_owned();
                (name.clone(), buft, s.device, *layer)
            })
            .collect()
    }
    /// Bytes allocated for weights per registry device (what ggml really
    /// allocated; compare with [`Backend::memory`]). Empty for a sizing-only
    /// backend.
    pub fn allocated_weights(&self) -> HashMap<usize, u64> {
        let mut out = HashMap::new();
        if !self.inner.alloc_memory {
            return out;
        }
        if let Some(m) = &self.inner.model {
            for s in &m.weights.sets {
                if !s.buffer.is_null() {
                    *out.entry(s.device).or_insert(0) += unsafe { sys::ggml_backend_buffer_get_size(s.buffer) } as u64;
                }
            }
        }
        out
    }
    pub fn memory(&self) -> Memory {
        self.inner.memory.lock().clone()
    }

    pub(crate) fn cpu_buft(&self) -> sys::ggml_backend_buffer_type_t {
        self.inner.devices[self.inner.cpu_index].buft
    }

    /// Buffer type and registry device for data tensors of layer `i`.
    pub(crate) fn layer_buft(&self, i: usize) -> (sys::ggml_backend_buffer_type_t, usize) {
        let inner = &self.inner;
        if let Some(Some(dev)) = inner.layer_devices.get(i) {
            if let Some(d) = inner.devices.iter().find(|d| d.info.index == *dev) {
                return (d.buft, d.info.index);
            }
        }
        (self.cpu_buft(), inner.devices[inner.cpu_index].info.index)
    }
}

/// `<arch>.block_count`, 0 when absent; an error when absurd.
fn block_count(g: &Gguf) -> Result<usize> {
    let Some(arch) = g.arch() else { return Ok(0) };
    match g.get(&format!("{arch}.block_count")) {
        None => Ok(0),
        Some(v) => match v {
            Value::U8(_) | Value::U16(_) | Value::U32(_) | Value::U64(_) | Value::I8(_) | Value::I16(_) | Value::I32(_) | Value::I64(_) => {
                let n = v.as_i64().unwrap_or(-1);
                if (0..=65536).contains(&n) {
                    Ok(n as usize)
                } else {
                    Err(Error::new(ErrorKind::Format, format!("{arch}.block_count {n} is not a plausible layer count")))
                }
            }
            other => Err(Error::new(ErrorKind::Format, format!("{arch}.block_count has type {}, not an integer", other.type_name()))),
        },
    }
}
