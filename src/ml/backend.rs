//! `Backend`: the devices a model runs on and the scheduler that splits
//! graphs across them. Contexts keep their backend alive (they hold an
//! `Arc`), so freeing the backend handle before its contexts is safe.

use std::sync::Arc;

use parking_lot::Mutex;

use super::device::{self, DeviceInfo, DeviceType};
use super::{threads, Error, Result};
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
    /// Graph node capacity of a default context; 0 picks the default (8192).
    pub max_graph_nodes: usize,
    pub flash_attention: FlashAttention,
    /// False: size things without allocating (model "fit" checks).
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
}

// The raw handles are only used under `compute_lock` (scheduler) or are
// immutable after creation (device backends, buffer types).
unsafe impl Send for BackendInner {}
unsafe impl Sync for BackendInner {}

impl Drop for BackendInner {
    fn drop(&mut self) {
        unsafe {
            if !self.sched.is_null() {
                sys::ggml_backend_sched_free(self.sched);
            }
            for d in &self.devices {
                sys::ggml_backend_free(d.backend);
            }
        }
    }
}

#[derive(Clone)]
pub struct Backend {
    pub(crate) inner: Arc<BackendInner>,
}

impl Backend {
    pub fn new(params: &BackendParams) -> Result<Backend> {
        super::log::init();
        let mut gpus = Vec::new();
        let mut accels = Vec::new();
        let mut cpu = None;
        for i in 0..device::count() {
            let d = device::dev(i);
            let info = device::info_of(i, d);
            match info.device_type {
                DeviceType::Cpu if cpu.is_none() => cpu = Some((info, d)),
                DeviceType::Gpu | DeviceType::IntegratedGpu => gpus.push((info, d)),
                DeviceType::Accelerator => accels.push((info, d)),
                _ => {}
            }
        }
        let cpu = cpu.ok_or_else(|| Error::unsupported("backend: ggml reports no CPU device"))?;
        let n_threads = if params.n_threads == 0 { threads::default_threads() } else { params.n_threads };
        if n_threads > 4096 {
            return Err(Error::invalid(format!("backend: {n_threads} threads is not a sensible thread count")));
        }

        let mut devices = Vec::new();
        let mut init = |(info, d): (DeviceInfo, sys::ggml_backend_dev_t)| -> Result<()> {
            let backend = unsafe { sys::ggml_backend_dev_init(d, std::ptr::null()) };
            if backend.is_null() {
                return Err(Error::unsupported(format!("backend: failed to initialise device {}", info.name)));
            }
            let buft = unsafe { sys::ggml_backend_get_default_buffer_type(backend) };
            devices.push(DeviceBackend { info, backend, buft });
            Ok(())
        };
        let mut result = Ok(());
        for g in gpus.into_iter().chain(accels).chain(std::iter::once(cpu)) {
            if let Err(e) = init(g) {
                result = Err(e);
                break;
            }
        }
        let cpu_index = devices.len().saturating_sub(1);
        let max_graph_nodes = if params.max_graph_nodes == 0 { 8192 } else { params.max_graph_nodes };
        let mut inner = BackendInner {
            devices,
            sched: std::ptr::null_mut(),
            cpu_index,
            n_threads,
            max_graph_nodes,
            flash_attention: params.flash_attention,
            alloc_memory: params.alloc_memory,
            compute_lock: Mutex::new(()),
        };
        result?; // `inner` frees what was initialised
        if !(16..=(1 << 24)).contains(&max_graph_nodes) {
            return Err(Error::invalid(format!("backend: max_graph_nodes {max_graph_nodes} out of range 16..2^24")));
        }
        unsafe {
            sys::ggml_backend_cpu_set_n_threads(inner.devices[cpu_index].backend, n_threads as i32);
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
        Ok(Backend { inner: Arc::new(inner) })
    }

    pub fn devices(&self) -> Vec<DeviceInfo> {
        self.inner.devices.iter().map(|d| d.info.clone()).collect()
    }
    pub fn n_threads(&self) -> usize {
        self.inner.n_threads
    }
    pub fn max_graph_nodes(&self) -> usize {
        self.inner.max_graph_nodes
    }
    pub fn flash_attention(&self) -> FlashAttention {
        self.inner.flash_attention
    }
    pub(crate) fn cpu_buft(&self) -> sys::ggml_backend_buffer_type_t {
        self.inner.devices[self.inner.cpu_index].buft
    }
}
