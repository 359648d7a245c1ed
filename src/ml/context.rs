//! `Context`: where graphs are built and data tensors are created.
//!
//! A context family shares one ggml context (tensor headers) and one list
//! of backend buffers (the memory of data tensors). `input()` and `layer(i)`
//! make siblings that share both but put new data tensors in another buffer
//! type, as Ollama's `Context.Input()` / `Layer(i)` do. Each sibling has its
//! own graph, batch hint and recorded error. The shared memory is freed when
//! the last sibling is dropped.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes tensor addresses: they are distinct and 8-aligned, so a multiply
/// spreads them well, and SipHash (the default) showed in decode profiles.
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_usize(&mut self, n: usize) {
        // The product's high half depends on every address bit; fold it
        // into the low bits, which pick the bucket.
        let x = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = x ^ (x >> 32);
    }
}

/// A set of tensor addresses.
/// cbindgen:ignore
type PtrSet = HashSet<usize, BuildHasherDefault<PtrHasher>>;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use super::backend::Backend;
use super::{check, Error, ErrorKind, Result, Tensor};
use crate::sys;

/// Where `empty`/`zeros`/`from_*` put a new tensor's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// No buffer type: data tensors are refused (ops are fine).
    None,
    /// Host memory of the CPU device (model inputs).
    Input,
    /// The device that holds repeating layer `i` (KV cache, states).
    Layer(usize),
    /// The default buffer type of the backend's `i`-th scheduler device
    /// (an extension of ours: explicit placement, used by tests and RPC).
    Device(usize),
}

pub(crate) struct Shared {
    pub backend: Backend,
    pub ctx: *mut sys::ggml_context,
    pub max_nodes: usize,
    mem_size: usize,
    overhead: usize,
    buffers: Mutex<Vec<sys::ggml_backend_buffer_t>>,
    /// Matrix products of several rows are built as one-row products
    /// (see `Context::set_row_wise`).
    pub row_wise: std::sync::atomic::AtomicBool,
}

unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        unsafe {
            for b in self.buffers.get_mut().drain(..) {
                sys::ggml_backend_buffer_free(b);
            }
            sys::ggml_free(self.ctx);
        }
    }
}

/// A graph under construction, in a small ggml context of its own so that
/// each sibling can have one without eating into the tensor capacity.
struct Graph {
    ctx: *mut sys::ggml_context,
    graph: *mut sys::ggml_cgraph,
    /// Every tensor already in the graph (nodes and leaves), to check
    /// capacity before ggml would assert on it.
    members: PtrSet,
    /// Leaves without memory of their own that the scheduler placed in its
    /// compute buffers at the last compute/reserve (their addresses go stale).
    sched_leafs: Vec<usize>,
    /// Each op node's sources as built, when the backend has several
    /// devices: splitting a graph makes the scheduler point sources that
    /// cross devices at its own copies, which die with the next split, so
    /// they are restored before the graph is split again.
    sources: Vec<(usize, [*mut sys::ggml_tensor; sys::GGML_MAX_SRC as usize])>,
    n_nodes: usize,
    n_leafs: usize,
    /// Changes whenever the graph does (nodes added, outputs marked): the
    /// scheduler's split and allocation of one version serve it again.
    version: u64,
    /// The version whose nodes every device was checked to support.
    supported: u64,
    /// A leaf lives in a model's weight buffer: the compute needs the
    /// weights loaded.
    uses_weights: bool,
}

/// Graph versions, unique in the process (0 is none).
static GRAPH_VERSION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn next_version() -> u64 {
    GRAPH_VERSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Drop for Graph {
    fn drop(&mut self) {
        unsafe { sys::ggml_free(self.ctx) };
    }
}

pub struct Context {
    pub(crate) shared: Arc<Shared>,
    placement: Placement,
    graph: Option<Graph>,
    batch_size: i32,
    first_error: Option<Error>,
    /// The layer whose weighted norms are being built (`set_norm_layer`).
    norm_layer: Option<usize>,
    /// Weighted norms and their layers: pinned to the layer's device.
    pins: Vec<(usize, usize)>,
}

unsafe impl Send for Context {}

fn is_leaf(t: &sys::ggml_tensor) -> bool {
    t.op == sys::GGML_OP_NONE && (t.flags & sys::GGML_TENSOR_FLAG_PARAM as i32) == 0
}

impl Context {
    /// A root context able to hold `max_nodes` tensors and graph nodes
    /// (0: the backend's default).
    pub fn new(backend: &Backend, max_nodes: usize) -> Result<Context> {
        let limit = backend.max_graph_nodes();
        let max_nodes = if max_nodes == 0 { limit } else { max_nodes };
        if max_nodes > limit {
            return Err(Error::invalid(format!(
                "new context: requested size {max_nodes} exceeds the backend's maximum of {limit} graph nodes"
            )));
        }
        let mem = max_nodes * unsafe { sys::ggml_tensor_overhead() };
        let params = sys::ggml_init_params { mem_size: mem, mem_buffer: std::ptr::null_mut(), no_alloc: true };
        let ctx = unsafe { sys::ggml_init(params) };
        if ctx.is_null() {
            return Err(Error::oom(format!("new context: cannot allocate {mem} bytes of tensor headers")));
        }
        Ok(Context {
            shared: Arc::new(Shared {
                backend: backend.clone(),
                ctx,
                max_nodes,
                mem_size: unsafe { sys::ggml_get_mem_size(ctx) },
                overhead: unsafe { sys::ggml_tensor_overhead() },
                buffers: Mutex::new(Vec::new()),
                row_wise: std::sync::atomic::AtomicBool::new(false) }),
            placement: Placement::None,
            graph: None,
            batch_size: -1,
            first_error: None,
            norm_layer: None,
            pins: Vec::new(),
        })
    }

    fn sibling(&self, placement: Placement) -> Context {
        Context { shared: self.shared.clone(), placement, graph: None, batch_size: -1, first_error: None, norm_layer: None, pins: Vec::new() }
    }

    /// A sibling whose data tensors live in CPU host memory.
    pub fn input(&self) -> Context {
        self.sibling(Placement::Input)
    }

    /// A sibling whose data tensors live on layer `i`'s device.
    pub fn layer(&self, i: usize) -> Context {
        self.sibling(Placement::Layer(i))
    }

    /// The underlying ggml context, for tests and for building ops that
    /// ggml-rs does not wrap. Tensors made in it belong to this family.
    pub fn ggml_context(&self) -> *mut sys::ggml_context {
        self.shared.ctx
    }

    /// A sibling whose data tensors live on the backend's `i`-th device
    /// (in scheduler order, CPU last). Checked when a tensor is created.
    pub fn on_device(&self, i: usize) -> Context {
        self.sibling(Placement::Device(i))
    }

    pub fn placement(&self) -> Placement {
        self.placement
    }
    pub fn backend(&self) -> &Backend {
        &self.shared.backend
    }
    pub fn max_graph_nodes(&self) -> usize {
        self.shared.max_nodes
    }
    pub fn set_batch_size(&mut self, n: i32) {
        // Upstream ggml has no scheduler batch hint; its per-op offload rule
        // (batch ≥ 32) already does what Ollama's hint was for. It decides
        // whether norms are pinned (`set_norm_layer`).
        self.batch_size = n;
    }
    pub fn batch_size(&self) -> i32 {
        self.batch_size
    }

    /// The layer whose ops are being built (None: none, e.g. the output
    /// head). The RMS and layer norms with a weight built meanwhile run on
    /// that layer's device when the batch has fewer than 32 tokens or every
    /// layer is offloaded, as llama.cpp pins its layers' "norm" nodes:
    /// ggml's scheduler would otherwise place a norm by its neighbours,
    /// where a layer meets the next device, and compute it elsewhere than
    /// llama.cpp does.
    pub fn set_norm_layer(&mut self, layer: Option<usize>) {
        self.norm_layer = layer;
    }

    /// Records the norm `t` of the current norm layer (see
    /// `set_norm_layer`).
    pub(crate) fn pin_norm(&mut self, t: Tensor) {
        if let Some(l) = self.norm_layer {
            self.pins.push((t.as_ptr() as usize, l));
        }
    }

    /// Assigns the pinned norms of this graph to their layers' backends
    /// (after the scheduler's reset, before it splits the graph).
    fn apply_pins(&self, inner: &super::backend::BackendInner) {
        let Some(g) = self.graph.as_ref() else { return };
        if self.pins.is_empty() || inner.devices.len() < 2 || !((0..32).contains(&self.batch_size) || inner.full_offload()) {
            return;
        }
        for &(t, l) in &self.pins {
            if !g.members.contains(&t) {
                continue;
            }
            let backend = inner.layer_backend(l);
            let node = t as *mut sys::ggml_tensor;
            // SAFETY: a member of this graph, alive with the family.
            unsafe {
                if sys::ggml_backend_supports_op(backend, node) {
                    sys::ggml_backend_sched_set_tensor_backend(inner.sched, node, backend);
                }
            }
        }
    }
    /// Row-wise mode, for the whole family: `mul_mat` of a 2-D `b` with
    /// several rows is then built with the rows as a batch dimension, so
    /// that each row's product is computed as a one-row product would be
    /// (on the CPU: the per-row dot products rather than llamafile's tiled
    /// kernels, which sum in another order), wherever the batch could
    /// change a row's bits (float weights, weights on other devices; not
    /// quantized weights on an x86 CPU: see `batch_changes_rows`).
    /// Speculative decoding verifies
    /// drafts with it so that each position's logits are bit for bit those
    /// of one-token decoding.
    pub fn set_row_wise(&self, on: bool) {
        self.shared.row_wise.store(on, Ordering::Relaxed);
    }
    pub fn row_wise(&self) -> bool {
        self.shared.row_wise.load(Ordering::Relaxed)
    }

    // ---- errors ---------------------------------------------------------

    /// Remembers the first failed op, so that a caller who ignored an op's
    /// error still gets it from `compute`.
    pub fn record(&mut self, e: &Error) {
        if self.first_error.is_none() {
            self.first_error = Some(e.clone());
        }
    }
    /// Forgets a recorded op error (the caller handled it).
    pub fn clear_error(&mut self) {
        self.first_error = None;
    }
    pub fn recorded_error(&self) -> Option<&Error> {
        self.first_error.as_ref()
    }

    // ---- tensor headers -------------------------------------------------

    /// The ggml context for an op that creates up to `n` tensors, after
    /// checking there is room for them (ggml would abort otherwise).
    pub(crate) fn room(&self, op: &str, n: usize) -> Result<*mut sys::ggml_context> {
        let ctx = self.shared.ctx;
        // mem_size and the per-tensor overhead never change: read at creation.
        let (size, used) = (self.shared.mem_size, unsafe { sys::ggml_used_mem(ctx) });
        let need = n * self.shared.overhead;
        if size.saturating_sub(used) < need {
            return Err(Error::oom(format!(
                "{op}: context is full ({} tensors); create it with a larger size",
                self.shared.max_nodes
            )));
        }
        Ok(ctx)
    }

    /// Wraps a tensor returned by a ggml constructor.
    pub(crate) fn made(&self, op: &str, p: *mut sys::ggml_tensor) -> Result<Tensor> {
        unsafe { Tensor::from_raw(p) }.ok_or_else(|| Error::oom(format!("{op}: ggml returned no tensor")))
    }

    /// A tensor header without memory (`ne` in ggml order).
    pub fn new_tensor(&mut self, op: &str, dtype: sys::ggml_type, ne: [i64; 4]) -> Result<Tensor> {
        check::type_arg(op, dtype)?;
        check::block_aligned(op, dtype, ne[0])?;
        let ctx = self.room(op, 1)?;
        let p = unsafe { sys::ggml_new_tensor(ctx, dtype, 4, ne.as_ptr()) };
        self.made(op, p)
    }

    // ---- data tensors ---------------------------------------------------

    fn buffer_type(&self, op: &str) -> Result<sys::ggml_backend_buffer_type_t> {
        Ok(self.target(op)?.0)
    }

    /// The buffer type for a new data tensor, and where to account it:
    /// `Layer(i)` tensors count as cache of layer `i` on its device.
    fn target(&self, op: &str) -> Result<(sys::ggml_backend_buffer_type_t, Option<(usize, usize)>)> {
        let backend = &self.shared.backend;
        match self.placement {
            Placement::None => Err(Error::invalid(format!(
                "{op}: set Input or Layer before creating tensors"
            ))),
            Placement::Input => Ok((backend.cpu_buft(), None)),
            Placement::Layer(i) => {
                let (buft, device) = backend.layer_buft(i);
                let layers = backend.block_count();
                Ok((buft, (i < layers).then_some((device, i))))
            }
            Placement::Device(i) => {
                let devices = &backend.inner.devices;
                devices.get(i).map(|d| (d.buft, None)).ok_or_else(|| {
                    Error::invalid(format!("{op}: device {i} out of range (backend has {})", devices.len()))
                })
            }
        }
    }

    /// A tensor with its own freshly allocated buffer; contents undefined.
    /// An empty `shape`, or `shape[0] == 0`, gives a 1-D zero-element tensor
    /// without memory (as Ollama's engine does); a 0 in another dim gives a
    /// zero-element tensor of that shape (e.g. `[n, 0]`, no rows).
    pub fn empty(&mut self, dtype: sys::ggml_type, shape: &[i64]) -> Result<Tensor> {
        const OP: &str = "empty";
        check::type_arg(OP, dtype)?;
        if shape.is_empty() || shape.contains(&0) {
            let (ne, n) = if shape.is_empty() || shape[0] == 0 {
                if shape.len() > 4 {
                    check::shape_arg(OP, shape, true)?;
                }
                ([0, 1, 1, 1], 1)
            } else {
                let ne = check::shape_arg(OP, shape, true)?;
                check::block_aligned(OP, dtype, ne[0])?;
                (ne, shape.len())
            };
            let ctx = self.room(OP, 1)?;
            let t = self.made(OP, unsafe { sys::ggml_new_tensor(ctx, dtype, n as i32, ne.as_ptr()) })?;
            // Give it a tiny buffer of its own: ggml's allocator asserts on a
            // memory-less leaf in a graph that has real nodes.
            let buft = self.buffer_type(OP).unwrap_or_else(|_| self.shared.backend.cpu_buft());
            self.place(OP, t, buft, unsafe { sys::ggml_backend_buft_get_alignment(buft) }.max(1))?;
            return Ok(t);
        }
        let ne = check::shape_arg(OP, shape, false)?;
        check::block_aligned(OP, dtype, ne[0])?;
        let (buft, account) = self.target(OP)?;
        let ctx = self.room(OP, 1)?;
        let t = self.made(OP, unsafe { sys::ggml_new_tensor(ctx, dtype, shape.len() as i32, ne.as_ptr()) })?;
        let size = unsafe { sys::ggml_backend_buft_get_alloc_size(buft, t.as_ptr()) };
        let align = unsafe { sys::ggml_backend_buft_get_alignment(buft) }.max(1);
        let size = size.div_ceil(align) * align;
        // Accounted before allocating, so a failure report includes it.
        if let Some((device, layer)) = account {
            self.shared.backend.inner.memory.lock().add_cache(device, layer, size as u64);
        }
        if !self.shared.backend.alloc_memory() {
            // Sizing only: a virtual buffer gives the tensor an address (so
            // graphs measure as with real memory) but no memory.
            let buf = crate::ml::model::virtual_buffer::new(buft, size);
            if buf.is_null() {
                return Err(Error::oom(format!("{OP}: cannot create a virtual buffer")));
            }
            self.shared.buffers.lock().push(buf);
            let status = unsafe { sys::ggml_backend_tensor_alloc(buf, t.as_ptr(), sys::ggml_backend_buffer_get_base(buf)) };
            if status != sys::GGML_STATUS_SUCCESS {
                return Err(Error::oom(format!("{OP}: could not place {} in its virtual buffer", t.describe())));
            }
            return Ok(t);
        }
        let max = unsafe { sys::ggml_backend_buft_get_max_size(buft) };
        if size > max {
            return Err(Error::oom(format!(
                "{OP}: {} needs {size} bytes, more than the largest buffer of {max} bytes",
                t.describe()
            )));
        }
        self.place(OP, t, buft, size)?;
        Ok(t)
    }

    /// Allocates a dedicated buffer of `size` bytes of `buft` for `t`.
    fn place(&mut self, op: &str, t: Tensor, buft: sys::ggml_backend_buffer_type_t, size: usize) -> Result<()> {
        let buf = unsafe { sys::ggml_backend_buft_alloc_buffer(buft, size) };
        if buf.is_null() {
            super::rpc::check_buft(buft, op)?;
            return Err(Error::oom(format!("{op}: failed to allocate {size} bytes for {}", t.describe())));
        }
        self.shared.buffers.lock().push(buf);
        let status = unsafe { sys::ggml_backend_tensor_alloc(buf, t.as_ptr(), sys::ggml_backend_buffer_get_base(buf)) };
        if status != sys::GGML_STATUS_SUCCESS {
            return Err(Error::oom(format!("{op}: could not place {} in its buffer", t.describe())));
        }
        Ok(())
    }

    pub fn zeros(&mut self, dtype: sys::ggml_type, shape: &[i64]) -> Result<Tensor> {
        let t = self.empty(dtype, shape)?;
        if t.has_data() {
            unsafe { sys::ggml_backend_tensor_memset(t.as_ptr(), 0, 0, t.nbytes()) };
        }
        Ok(t)
    }

    /// `empty` followed by an upload of `data` (exactly the tensor's size;
    /// an empty slice uploads nothing).
    pub fn from_bytes(&mut self, dtype: sys::ggml_type, shape: &[i64], data: &[u8]) -> Result<Tensor> {
        check::type_arg("from_bytes", dtype)?;
        if !data.is_empty() && !shape.is_empty() && shape.iter().all(|&d| d > 0) {
            // Check the size before allocating anything.
            let ne = check::shape_arg("from_bytes", shape, false)?;
            check::block_aligned("from_bytes", dtype, ne[0])?;
            let want = row_bytes(dtype, ne[0]) * (ne[1] * ne[2] * ne[3]) as usize;
            if want != data.len() {
                return Err(Error::shape(format!(
                    "from_bytes: data size does not match tensor size: {} bytes for {}{:?} which needs {want}",
                    data.len(),
                    super::tensor::type_name(dtype),
                    shape
                )));
            }
        }
        let t = self.empty(dtype, shape)?;
        if !data.is_empty() && self.shared.backend.alloc_memory() {
            super::data::write(t, data, "from_bytes")?;
        }
        Ok(t)
    }

    /// `[start, stop)` in steps of `step`: F32 as a graph node (computed at
    /// run time), I32 as host data.
    pub fn arange(&mut self, start: f32, stop: f32, step: f32, dtype: sys::ggml_type) -> Result<Tensor> {
        const OP: &str = "arange";
        if !(start.is_finite() && stop.is_finite() && step.is_finite()) || step == 0.0 || (stop - start) / step < 0.0 {
            return Err(Error::invalid(format!("{OP}: invalid range start={start} stop={stop} step={step}")));
        }
        let n = ((stop - start) / step).ceil() as i64;
        if n > (1 << 31) {
            return Err(Error::invalid(format!("{OP}: range of {n} elements is too large")));
        }
        match dtype {
            sys::GGML_TYPE_F32 => {
                if n <= 0 {
                    return Err(Error::invalid(format!("{OP}: empty range start={start} stop={stop}")));
                }
                let ctx = self.room(OP, 1)?;
                self.made(OP, unsafe { sys::ggml_arange(ctx, start, stop, step) })
            }
            sys::GGML_TYPE_I32 => {
                let vals: Vec<i32> = (0..n).map(|i| (start + step * i as f32) as i32).collect();
                let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
                let mut input = self.input();
                input.from_bytes(sys::GGML_TYPE_I32, &[n], &bytes)
            }
            _ => Err(Error::dtype(format!(
                "{OP}: unsupported dtype for arange: {}",
                super::tensor::type_name(dtype)
            ))),
        }
    }

    // ---- graphs -----------------------------------------------------------

    fn graph_mut(&mut self) -> Result<&mut Graph> {
        if self.graph.is_none() {
            let n = self.shared.max_nodes;
            let mem = unsafe { sys::ggml_graph_overhead_custom(n, false) };
            let params = sys::ggml_init_params { mem_size: mem, mem_buffer: std::ptr::null_mut(), no_alloc: true };
            let ctx = unsafe { sys::ggml_init(params) };
            if ctx.is_null() {
                return Err(Error::oom("forward: cannot allocate the graph"));
            }
            let graph = unsafe { sys::ggml_new_graph_custom(ctx, n, false) };
            self.graph = Some(Graph {
                ctx,
                graph,
                members: PtrSet::default(),
                sched_leafs: Vec::new(),
                sources: Vec::new(),
                n_nodes: 0,
                n_leafs: 0,
                version: next_version(),
                supported: 0,
                uses_weights: false,
            });
        }
        Ok(self.graph.as_mut().unwrap())
    }

    /// Adds `ts` and everything they depend on to this context's graph.
    pub fn forward(&mut self, ts: &[Tensor]) -> Result<()> {
        let cap = self.shared.max_nodes;
        let multi_device = self.shared.backend.inner.devices.len() > 1;
        let g = self.graph_mut()?;
        for &t in ts {
            // Count what ggml would add, so it never overflows the graph.
            let mut stack = vec![t.as_ptr()];
            let mut fresh: Vec<usize> = Vec::new();
            let mut seen = PtrSet::default();
            let (mut nodes, mut leafs) = (0usize, 0usize);
            while let Some(p) = stack.pop() {
                let key = p as usize;
                if g.members.contains(&key) || !seen.insert(key) {
                    continue;
                }
                let r = unsafe { &*p };
                if is_leaf(r) {
                    leafs += 1;
                    // SAFETY: a leaf's buffer is null or a live buffer.
                    if !r.buffer.is_null() && unsafe { sys::ggml_backend_buffer_get_usage(r.buffer) } == sys::GGML_BACKEND_BUFFER_USAGE_WEIGHTS {
                        g.uses_weights = true;
                    }
                } else {
                    nodes += 1;
                }
                fresh.push(key);
                for &s in r.src.iter() {
                    if !s.is_null() {
                        stack.push(s);
                    }
                }
            }
            if g.n_nodes + nodes > cap || g.n_leafs + leafs > cap {
                return Err(Error::oom(format!(
                    "forward: graph would have {} nodes and {} leaves, more than this context's {cap}",
                    g.n_nodes + nodes,
                    g.n_leafs + leafs
                )));
            }
            unsafe { sys::ggml_build_forward_expand(g.graph, t.as_ptr()) };
            g.n_nodes += nodes;
            g.n_leafs += leafs;
            if nodes + leafs > 0 {
                g.version = next_version();
            }
            if multi_device {
                for &key in &fresh {
                    let r = unsafe { &*(key as *const sys::ggml_tensor) };
                    if !is_leaf(r) {
                        g.sources.push((key, r.src));
                    }
                }
            }
            g.members.extend(fresh);
        }
        Ok(())
    }

    /// Fails with the first recorded op error, if any (and forgets it).
    fn check_recorded(&mut self, what: &str) -> Result<()> {
        if let Some(e) = self.first_error.take() {
            return Err(Error::new(e.kind, format!("{what}: an earlier op on this context failed: {}", e.message)));
        }
        Ok(())
    }

    /// Before (re)allocating a graph: forget addresses that a previous
    /// compute assigned from the scheduler's buffers, so the allocator plans
    /// every intermediate afresh (a graph may be computed many times as it
    /// grows; stale addresses would overlap new ones), and give back to op
    /// nodes the sources the last split replaced with scheduler copies.
    /// Points op nodes back at the sources they were built with (a split
    /// points cross-device sources at the scheduler's copies).
    fn restore_sources(&self) {
        let Some(g) = self.graph.as_ref() else { return };
        for (key, src) in &g.sources {
            unsafe { (*(*key as *mut sys::ggml_tensor)).src = *src };
        }
    }

    fn reset_allocations(&mut self) {
        // Never dereference a tensor's buffer here: the scheduler frees and
        // re-creates its compute buffers when another context's graph needs
        // more, so a node's old buffer pointer may be dangling.
        self.restore_sources();
        let Some(g) = self.graph.as_mut() else { return };
        for &key in &g.members {
            let t = unsafe { &mut *(key as *mut sys::ggml_tensor) };
            if !is_leaf(t) {
                // Op results (and views, re-derived from their source).
                t.data = std::ptr::null_mut();
                t.buffer = std::ptr::null_mut();
            }
        }
        for key in g.sched_leafs.drain(..) {
            let t = unsafe { &mut *(key as *mut sys::ggml_tensor) };
            t.data = std::ptr::null_mut();
            t.buffer = std::ptr::null_mut();
        }
        // Leaves that still have no memory will be placed by the scheduler.
        g.sched_leafs = g
            .members
            .iter()
            .copied()
            .filter(|&key| {
                let t = unsafe { &*(key as *const sys::ggml_tensor) };
                is_leaf(t) && t.data.is_null()
            })
            .collect();
    }

    /// False when the graph has no node with elements: nothing to compute,
    /// and ggml's allocator asserts on a graph whose buffers are all empty.
    fn has_work(&self) -> bool {
        let Some(g) = self.graph.as_ref() else { return false };
        let n = unsafe { sys::ggml_graph_n_nodes(g.graph) };
        (0..n).any(|i| unsafe { sys::ggml_nelements(sys::ggml_graph_node(g.graph, i)) } > 0)
    }

    /// Every node must be supported by some device of the scheduler, or
    /// ggml would abort while splitting the graph; row ids that are host data
    /// must be in range, or ggml's CPU kernels would abort.
    /// Each version of the graph is checked for support once.
    fn check_nodes(&mut self, check_ids: bool) -> Result<()> {
        let Some(g) = self.graph.as_ref() else { return Ok(()) };
        let inner = &self.shared.backend.inner;
        let n = unsafe { sys::ggml_graph_n_nodes(g.graph) };
        let check_support = g.supported != g.version;
        for i in 0..n {
            let node = unsafe { sys::ggml_graph_node(g.graph, i) };
            let ok = !check_support
                || inner.devices.iter().any(|d| unsafe { sys::ggml_backend_supports_op(d.backend, node) });
            if !ok {
                let t = unsafe { Tensor::from_raw(node) }.unwrap();
                let op = unsafe { std::ffi::CStr::from_ptr(sys::ggml_op_desc(node)) }.to_string_lossy();
                return Err(Error::unsupported(format!(
                    "compute: no device supports {op} producing {}",
                    t.describe()
                )));
            }
            if check_ids {
                super::ops::index::check_row_ids(unsafe { Tensor::from_raw(node) }.unwrap())?;
            }
        }
        let g = self.graph.as_mut().unwrap();
        g.supported = g.version;
        Ok(())
    }

    /// Finds and clears nodes the CPU kernels marked for out-of-range ids.
    fn take_bad_row_ids(&self) -> Option<Error> {
        let g = self.graph.as_ref()?;
        let mut first = None;
        let n = unsafe { sys::ggml_graph_n_nodes(g.graph) };
        for i in 0..n {
            let node = unsafe { &mut *sys::ggml_graph_node(g.graph, i) };
            if node.flags & sys::GGML_RS_FLAG_BAD_ROW_ID != 0 {
                node.flags &= !sys::GGML_RS_FLAG_BAD_ROW_ID;
                if first.is_none() {
                    let t = unsafe { Tensor::from_raw(node) }.unwrap();
                    let op = unsafe { std::ffi::CStr::from_ptr(sys::ggml_op_desc(node)) }.to_string_lossy().to_lowercase();
                    first = Some(Error::new(
                        ErrorKind::Compute,
                        format!("compute: {op} producing {} met row ids out of range; those rows were skipped", t.describe()),
                    ));
                }
            }
        }
        first
    }

    /// Computes this context's graph (after adding `outputs` to it). The
    /// outputs stay readable until the backend computes another graph.
    pub fn compute(&mut self, outputs: &[Tensor]) -> Result<()> {
        self.check_recorded("compute")?;
        self.forward(outputs)?;
        // A tensor newly marked as an output must keep its memory through
        // the compute; ggml's allocator would otherwise reuse the plan it
        // made before (it re-plans only for other nodes or sizes), in which
        // a later node may have been computed in place over it.
        let mut replan = false;
        for &t in outputs {
            if unsafe { (*t.as_ptr()).flags } & (sys::GGML_TENSOR_FLAG_OUTPUT as i32) == 0 {
                unsafe { sys::ggml_set_output(t.as_ptr()) };
                replan = true;
            }
        }
        if replan {
            if let Some(g) = self.graph.as_mut() {
                g.version = next_version();
            }
        }
        if !self.has_work() {
            return Ok(());
        }
        self.check_nodes(true)?;
        let inner = self.shared.backend.inner.clone();
        let _guard = inner.compute_lock.lock();
        if !inner.alloc_memory {
            return Err(Error::invalid("compute: backend was created without memory allocation"));
        }
        let uses_weights = self.graph.as_ref().is_some_and(|g| g.uses_weights);
        match inner.weights.load(Ordering::SeqCst) {
            _ if !uses_weights => {}
            super::backend::WEIGHTS_LOADED => {}
            super::backend::WEIGHTS_NOT_LOADED => {
                return Err(Error::invalid("compute: the model's weights are not loaded (call Load first: ml.Backend.Load in Go, ggml_rs_backend_load in C)"))
            }
            _ => return Err(Error::invalid("compute: the model's weights are incomplete (a load is running, or was cancelled or failed)")),
        }
        // A cancel requested while no compute ran (or during one that no
        // abort callback could stop: Vulkan, CUDA) fails this compute here,
        // before it starts. Without this, a graph with no CPU or RPC node
        // never polled the request, and it stayed pending.
        if inner.cancel.swap(false, Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::Aborted, "compute: cancelled"));
        }
        let version = self.graph.as_ref().unwrap().version;
        // The scheduler still holds this very graph split and allocated (no
        // other graph, reserve or measure since): compute it again as it
        // is. Else plan it afresh.
        let again = inner.sched_graph.load(Ordering::Relaxed) == version;
        inner.sched_graph.store(0, Ordering::Relaxed);
        let graph = self.graph.as_ref().unwrap().graph;
        if !again {
            self.reset_allocations();
        }
        unsafe {
            if !again {
                sys::ggml_backend_sched_reset(inner.sched);
                self.apply_pins(&inner);
                if replan {
                    if !sys::ggml_backend_sched_reserve(inner.sched, graph) {
                        super::rpc::check_graph(inner.sched, inner.backends(), graph, "compute")?;
                        return Err(Error::oom("compute: failed to allocate the compute buffers for this graph"));
                    }
                    // The reserve split the graph: undo its source rewrites
                    // before the allocation splits it again. It also reset
                    // the scheduler's assignments.
                    self.restore_sources();
                    self.apply_pins(&inner);
                }
                if !sys::ggml_backend_sched_alloc_graph(inner.sched, graph) {
                    super::rpc::check_graph(inner.sched, inner.backends(), graph, "compute")?;
                    return Err(Error::oom("compute: failed to allocate the compute buffers for this graph"));
                }
            }
            inner.fit_threads();
            let status = sys::ggml_backend_sched_graph_compute(inner.sched, graph);
            if status == sys::GGML_STATUS_SUCCESS {
                inner.sched_graph.store(version, Ordering::Relaxed);
            }
            // Ids the graph computes can only be checked by the kernels; our
            // patch makes them skip bad ones and mark the node.
            if let Some(e) = self.take_bad_row_ids() {
                return Err(e);
            }
            // A remote device lost during the compute gave zeros: an error.
            super::rpc::check_graph(inner.sched, inner.backends(), graph, "compute")?;
            match status {
                sys::GGML_STATUS_SUCCESS => Ok(()),
                sys::GGML_STATUS_ABORTED => {
                    inner.cancel.store(false, std::sync::atomic::Ordering::SeqCst);
                    Err(Error::new(ErrorKind::Aborted, "compute: cancelled"))
                }
                sys::GGML_STATUS_ALLOC_FAILED => Err(Error::oom("compute: allocation failed")),
                s => Err(Error::new(ErrorKind::Compute, format!("compute: ggml graph failed with status {s}"))),
            }
        }
    }

    /// The compute buffer bytes per scheduler device this graph needs,
    /// measured without allocating anything.
    pub fn measure(&mut self) -> Result<Vec<u64>> {
        self.size_graph(false)
    }

    /// Sizes (and, when the backend allocates, allocates) the compute
    /// buffers for this graph as a worst case. Returns the compute buffer
    /// bytes per scheduler device, in the backend's device order.
    pub fn reserve(&mut self) -> Result<Vec<u64>> {
        self.size_graph(true)
    }

    /// `measure` (`reserve` false) or `reserve`: the scheduler's sizes of
    /// this graph; with `reserve`, allocated where the backend allocates
    /// and recorded as each device's graph memory.
    fn size_graph(&mut self, reserve: bool) -> Result<Vec<u64>> {
        self.check_recorded("reserve")?;
        let inner = self.shared.backend.inner.clone();
        let n = inner.devices.len();
        if !self.has_work() {
            return Ok(vec![0; n]);
        }
        self.check_nodes(false)?;
        let _guard = inner.compute_lock.lock();
        inner.sched_graph.store(0, Ordering::Relaxed);
        self.reset_allocations();
        let graph = self.graph.as_ref().unwrap().graph;
        let mut sizes = vec![0usize; n];
        unsafe {
            // (reserve_size resets the scheduler itself: the pinned norms
            // are not assigned in this measure.)
            sys::ggml_backend_sched_reset(inner.sched);
            sys::ggml_backend_sched_reserve_size(inner.sched, graph, sizes.as_mut_ptr());
        }
        if !reserve {
            return Ok(sizes.into_iter().map(|s| s as u64).collect());
        }
        if inner.alloc_memory {
            unsafe {
                self.apply_pins(&inner);
                if !sys::ggml_backend_sched_reserve(inner.sched, graph) {
                    super::rpc::check_graph(inner.sched, inner.backends(), graph, "reserve")?;
                    return Err(Error::oom(format!(
                        "reserve: failed to allocate compute buffers of {:?} bytes per device",
                        sizes
                    )));
                }
                for (i, d) in inner.devices.iter().enumerate() {
                    sizes[i] = sys::ggml_backend_sched_get_buffer_size(inner.sched, d.backend);
                }
            }
        }
        let mut memory = inner.memory.lock();
        for (i, d) in inner.devices.iter().enumerate() {
            memory.set_graph(d.info.index, sizes[i] as u64);
        }
        drop(memory);
        Ok(sizes.into_iter().map(|s| s as u64).collect())
    }
}

/// Bytes of one row of `ne0` elements of type `t`.
pub(crate) fn row_bytes(t: sys::ggml_type, ne0: i64) -> usize {
    unsafe { sys::ggml_row_size(t, ne0) }
}
