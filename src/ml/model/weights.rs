//! Creating a model's weight tensors on their devices: one ggml context and
//! (when memory is allocated) one backend buffer per buffer type, each tensor
//! accounted to its device and layer at the size ggml will allocate for it.

use std::collections::HashMap;
use std::ffi::CString;

use super::memory::Memory;
use super::placement::{self, Slot};
use crate::ml::gguf::{Gguf, TensorInfo};
use crate::ml::{Error, ErrorKind, Result, Tensor};
use crate::sys;

/// One buffer type's weights.
pub(crate) struct WeightSet {
    pub buft: sys::ggml_backend_buffer_type_t,
    /// Registry index of the device that owns the buffer type.
    pub device: usize,
    pub ctx: *mut sys::ggml_context,
    pub buffer: sys::ggml_backend_buffer_t,
}

/// All weights of a model, owned by the backend.
pub(crate) struct Weights {
    pub sets: Vec<WeightSet>,
    /// Target name → tensor.
    pub by_name: HashMap<String, Tensor>,
    /// For each file tensor (same order as `Gguf::tensors`), the tensors to
    /// fill with its data.
    pub sources: Vec<Vec<Tensor>>,
    /// Where each target went, in creation order: (name, set index, layer).
    pub placed: Vec<(String, usize, Option<usize>)>,
}

unsafe impl Send for Weights {}
unsafe impl Sync for Weights {}

impl Drop for Weights {
    fn drop(&mut self) {
        for s in &self.sets {
            unsafe {
                if !s.buffer.is_null() {
                    sys::ggml_backend_buffer_free(s.buffer);
                }
                sys::ggml_free(s.ctx);
            }
        }
    }
}

/// How the model is spread over devices.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Registry device index per layer `0..=blocks` (the last entry is the
    /// output layer); `None` (or a missing entry) keeps the layer on the CPU.
    pub layer_devices: Vec<Option<usize>>,
    /// Layers whose mixture-of-experts expert tensors (`ffn_*_exps`) stay in
    /// CPU memory while the rest of the layer goes to its device.
    pub cpu_expert_layers: Vec<usize>,
    /// Do not use the CPU's extra (repacking) buffer types.
    pub no_extra_bufts: bool,
    /// Let CPU matmul weights take kernels that are faster but round
    /// differently from ggml's (ik_llama.cpp's run-time repacking): Q8_0,
    /// Q5_0 and Q4_1 with each block's integer sum converted once, F16 weights rounded
    /// to bf16 at load and F16/BF16 products in bf16 (on CPUs with AVX-512
    /// BF16). Logits then no longer match llama.cpp's bit for bit. No
    /// effect with `no_extra_bufts`, on weights placed on a GPU, or where
    /// the CPU lacks the instructions.
    pub fast_kernels: bool,
}

/// The extra buffer types of a CPU device (repacked weights: ggml's repack,
/// AMX, KleidiAI), in ggml's order of preference.
pub(crate) fn extra_bufts(cpu_dev: sys::ggml_backend_dev_t) -> Vec<sys::ggml_backend_buffer_type_t> {
    let mut extra = Vec::new();
    unsafe {
        let reg = sys::ggml_backend_dev_backend_reg(cpu_dev);
        let name = CString::new("ggml_backend_dev_get_extra_bufts").unwrap();
        let f = sys::ggml_backend_reg_get_proc_address(reg, name.as_ptr());
        if !f.is_null() {
            let f: unsafe extern "C" fn(sys::ggml_backend_dev_t) -> *mut sys::ggml_backend_buffer_type_t = std::mem::transmute(f);
            let mut p = f(cpu_dev);
            while !p.is_null() && !(*p).is_null() {
                extra.push(*p);
                p = p.add(1);
            }
        }
    }
    extra
}

/// Picks buffer types: the device default, or for CPU-resident matmul
/// weights the first extra buffer type the CPU supports for that weight,
/// unless a GPU of the backend can take that weight's large batches (see
/// [`BuftChooser::cpu_buft_for`]).
pub(crate) struct BuftChooser {
    pub cpu_dev: sys::ggml_backend_dev_t,
    pub cpu_buft: sys::ggml_backend_buffer_type_t,
    pub extra: Vec<sys::ggml_backend_buffer_type_t>,
    /// The first GPU of the backend that has a host buffer type, with that
    /// type: the device ggml's scheduler offloads large CPU batches to.
    pub offload: Option<(sys::ggml_backend_dev_t, sys::ggml_backend_buffer_type_t)>,
    /// [`Layout::fast_kernels`]: candidates are marked with
    /// [`sys::GGML_RS_FLAG_FAST_KERNELS`] (see [`BuftChooser::mark`]).
    pub fast: bool,
    probe: *mut sys::ggml_context,
}

impl Drop for BuftChooser {
    fn drop(&mut self) {
        unsafe { sys::ggml_free(self.probe) };
    }
}

impl BuftChooser {
    /// `gpus`: the GPUs the backend uses, in registry order; the first one
    /// with a host buffer type becomes the offload device (llama.cpp's
    /// `make_cpu_buft_list`).
    pub fn new(
        cpu_dev: sys::ggml_backend_dev_t,
        cpu_buft: sys::ggml_backend_buffer_type_t,
        use_extra: bool,
        fast: bool,
        gpus: &[sys::ggml_backend_dev_t],
    ) -> BuftChooser {
        let extra = if use_extra { extra_bufts(cpu_dev) } else { Vec::new() };
        let offload = gpus.iter().find_map(|&d| {
            let host = unsafe { sys::ggml_backend_dev_host_buffer_type(d) };
            (!host.is_null()).then_some((d, host))
        });
        let params = sys::ggml_init_params { mem_size: 8 * unsafe { sys::ggml_tensor_overhead() }, mem_buffer: std::ptr::null_mut(), no_alloc: true };
        let probe = unsafe { sys::ggml_init(params) };
        BuftChooser { cpu_dev, cpu_buft, extra, offload, fast, probe }
    }

    /// Marks a weight that is a candidate for repacking as allowed the fast
    /// kernels, when the layout asks for them; the repack buffer type reads
    /// the mark when it offers a layout (in the probe, and when the weight
    /// is allocated).
    fn mark(&self, w: *mut sys::ggml_tensor) {
        if self.fast {
            unsafe { (*w).flags |= sys::GGML_RS_FLAG_FAST_KERNELS };
        }
    }

    /// The buffer type for a CPU-resident weight. Only the weights that
    /// matmuls read are candidates for repacking (see
    /// [`placement::is_matmul_weight`]: embeddings are read with get_rows,
    /// convolution kernels with ssm_conv, neither of which can read a
    /// repacked layout): 2-D matrices, probed with a MUL_MAT, 3-D
    /// mixture-of-experts matrices, probed with the MUL_MAT_ID that reads
    /// them, and other 3-D stacks with a batched MUL_MAT (as llama.cpp
    /// chooses by the op that uses each weight).
    ///
    /// When the backend has a GPU with a host buffer type that supports the
    /// weight's op, the weight stays in the plain CPU buffer type, never
    /// repacked, as in llama.cpp (its CPU buffer list puts that GPU's host
    /// type before the extra types, and a mapped model then uses the CPU
    /// type): ggml's scheduler offloads an op whose weight is in a host
    /// buffer to the GPU for batches of 32 rows and more (prompts), which a
    /// repacked weight, in a buffer that is not host, cannot be.
    ///
    /// `rows`: the weight is also read with GET_ROWS (tied embeddings, the
    /// input and the output head in one tensor); a buffer type takes it
    /// only if it can do both (our repacked layouts can, ggml's cannot).
    pub fn cpu_buft_for(&self, info: &TensorInfo, candidate: bool, rows: bool) -> sys::ggml_backend_buffer_type_t {
        if !candidate || (self.extra.is_empty() && self.offload.is_none()) || self.probe.is_null() || !(info.n_dims == 2 || info.n_dims == 3) {
            return self.cpu_buft;
        }
        unsafe {
            sys::ggml_reset(self.probe);
            let w = sys::ggml_new_tensor(self.probe, info.dtype, 4, info.ne.as_ptr());
            self.mark(w);
            let op = if info.n_dims == 2 {
                let x = sys::ggml_new_tensor_2d(self.probe, sys::GGML_TYPE_F32, info.ne[0], 32);
                sys::ggml_mul_mat(self.probe, w, x)
            } else if !placement::is_expert_tensor(&info.name) {
                // A stack of matrices that a batched MUL_MAT reads (MLA's
                // per-head attn_k_b and attn_v_b).
                let x = sys::ggml_new_tensor_3d(self.probe, sys::GGML_TYPE_F32, info.ne[0], 32, info.ne[2]);
                sys::ggml_mul_mat(self.probe, w, x)
            } else {
                let used = info.ne[2].clamp(1, 8);
                let x = sys::ggml_new_tensor_3d(self.probe, sys::GGML_TYPE_F32, info.ne[0], 1, 32);
                let ids = sys::ggml_new_tensor_2d(self.probe, sys::GGML_TYPE_I32, used, 32);
                sys::ggml_mul_mat_id(self.probe, w, x, ids)
            };
            let get_rows = if rows && info.n_dims == 2 {
                let ids = sys::ggml_new_tensor_1d(self.probe, sys::GGML_TYPE_I32, 32);
                sys::ggml_get_rows(self.probe, w, ids)
            } else {
                std::ptr::null_mut()
            };
            // Devices decide from the weight's buffer type, so give the
            // probe weight an empty buffer of the type in question.
            let supports = |dev: sys::ggml_backend_dev_t, buft: sys::ggml_backend_buffer_type_t| {
                let buf = sys::ggml_backend_buft_alloc_buffer(buft, 0);
                if buf.is_null() {
                    return false;
                }
                (*w).buffer = buf;
                let ok = sys::ggml_backend_dev_supports_op(dev, op)
                    && (!rows || (!get_rows.is_null() && sys::ggml_backend_dev_supports_op(dev, get_rows)))
                    && sys::ggml_backend_buft_get_alloc_size(buft, w) > 0;
                (*w).buffer = std::ptr::null_mut();
                sys::ggml_backend_buffer_free(buf);
                ok
            };
            if let Some((gpu, host)) = self.offload {
                if supports(gpu, host) {
                    return self.cpu_buft;
                }
            }
            for &buft in &self.extra {
                if supports(self.cpu_dev, buft) {
                    return buft;
                }
            }
        }
        self.cpu_buft
    }
}

/// Where weights go, per layer slot: (registry device, default buft).
pub(crate) struct Targets<'a> {
    pub layout: &'a Layout,
    pub cpu_device: usize,
    /// Registry index → default buffer type of that device's backend.
    pub device_buft: &'a dyn Fn(usize) -> Option<sys::ggml_backend_buffer_type_t>,
    pub chooser: &'a BuftChooser,
}

fn format_err(msg: String) -> Error {
    Error::new(ErrorKind::Format, msg)
}

/// Creates every weight tensor (no data yet) and accounts its size.
pub(crate) fn create(gguf: &Gguf, blocks: usize, t: &Targets, memory: &mut Memory) -> Result<Weights> {
    let has_output = placement::has_output_group(gguf.tensors().iter().map(|i| i.name.as_str()));
    let arch = gguf.arch().unwrap_or_default();
    let infos = gguf.tensors();
    let mut weights = Weights { sets: Vec::new(), by_name: HashMap::new(), sources: Vec::new(), placed: Vec::new() };
    let n_targets_max = infos.len() * (blocks.max(1) + 1) + 1;
    let mut set_of: HashMap<usize, usize> = HashMap::new();
    for info in infos {
        let mut made = Vec::new();
        // A layer past block_count: name the key too, the likelier culprit.
        let targets = placement::targets(&info.name, blocks, has_output, &arch).map_err(|mut e| {
            if let Some(arch) = gguf.arch() {
                e.message = format!("{} ({arch}.block_count = {blocks})", e.message);
            }
            e
        })?;
        for target in targets {
            if let Some(&existing) = weights.by_name.get(&target.name) {
                // Two file tensors mapping to one name (e.g. a file that has
                // both output.weight and a tied copy): keep the first.
                made.push(existing);
                continue;
            }
            // The tied output head of a model without one: when the output
            // layer stays on the CPU, reuse the embeddings instead of a
            // second copy in the same memory (encoders such as BERT never
            // use it; decoders read it with a matmul either way).
            if target.name == "output.weight" && info.name == "token_embd.weight" {
                let out_dev = t.layout.layer_devices.get(blocks).copied().flatten();
                if out_dev.is_none() {
                    if let Some(&emb) = weights.by_name.get("token_embd.weight") {
                        weights.by_name.insert(target.name.clone(), emb);
                        let set = weights.placed.iter().find(|p| p.0 == "token_embd.weight").map(|p| p.1).unwrap_or(0);
                        weights.placed.push((target.name.clone(), set, Some(blocks)));
                        continue;
                    }
                }
            }
            // Tied embeddings whose output head stays on the CPU: one
            // tensor for the input's get_rows and the head's matmul, which
            // may be repacked for the matmul if the layout can do both.
            let tied = !has_output && target.name == "token_embd.weight" && t.layout.layer_devices.get(blocks).copied().flatten().is_none();
            let (device, layer, candidate) = match target.slot {
                Slot::Input => (t.cpu_device, None, tied),
                Slot::Layer(l) => {
                    let dev = t.layout.layer_devices.get(l).copied().flatten();
                    let expert_on_cpu = placement::is_expert_tensor(&target.name) && t.layout.cpu_expert_layers.contains(&l);
                    match dev {
                        Some(d) if !expert_on_cpu => (d, Some(l), false),
                        _ => (t.cpu_device, Some(l), placement::is_matmul_weight(&target.name)),
                    }
                }
            };
            let on_cpu = device == t.cpu_device;
            let buft = if on_cpu {
                t.chooser.cpu_buft_for(info, candidate, tied)
            } else {
                (t.device_buft)(device).ok_or_else(|| Error::invalid(format!("layer placement: device {device} is not usable")))?
            };
            let set_index = match set_of.get(&(buft as usize)) {
                Some(&i) => i,
                None => {
                    let mem = n_targets_max * unsafe { sys::ggml_tensor_overhead() };
                    let params = sys::ggml_init_params { mem_size: mem, mem_buffer: std::ptr::null_mut(), no_alloc: true };
                    let ctx = unsafe { sys::ggml_init(params) };
                    if ctx.is_null() {
                        return Err(Error::oom("load: cannot allocate weight tensor headers"));
                    }
                    weights.sets.push(WeightSet { buft, device, ctx, buffer: std::ptr::null_mut() });
                    set_of.insert(buft as usize, weights.sets.len() - 1);
                    weights.sets.len() - 1
                }
            };
            let set = &weights.sets[set_index];
            let p = unsafe { sys::ggml_new_tensor(set.ctx, info.dtype, 4, info.ne.as_ptr()) };
            let tensor = unsafe { Tensor::from_raw(p) }.ok_or_else(|| format_err(format!("tensor {}: cannot create", target.name)))?;
            if on_cpu && candidate && buft != t.chooser.cpu_buft {
                t.chooser.mark(p);
            }
            let cname = CString::new(target.name.clone()).map_err(|_| format_err(format!("tensor {:?}: name contains NUL", target.name)))?;
            if target.name.len() >= 64 {
                return Err(format_err(format!("tensor {}: name longer than ggml's 63 bytes", target.name)));
            }
            unsafe { sys::ggml_set_name(p, cname.as_ptr()) };
            let size = unsafe { sys::ggml_backend_buft_get_alloc_size(buft, p) };
            let align = unsafe { sys::ggml_backend_buft_get_alignment(buft) }.max(1);
            memory.add_weights(device, layer, (size.div_ceil(align) * align) as u64);
            weights.by_name.insert(target.name.clone(), tensor);
            weights.placed.push((target.name.clone(), set_index, layer));
            made.push(tensor);
        }
        weights.sources.push(made);
    }
    Ok(weights)
}

/// Gives the weights virtual addresses (sizing-only backends), so graphs
/// are measured as if the weights were in memory.
pub(crate) fn allocate_virtual(weights: &mut Weights) -> Result<()> {
    for set in weights.sets.iter_mut() {
        let align = unsafe { sys::ggml_backend_buft_get_alignment(set.buft) }.max(1);
        let mut tensors = Vec::new();
        let mut size = 0usize;
        let mut t = unsafe { sys::ggml_get_first_tensor(set.ctx) };
        while !t.is_null() {
            let s = unsafe { sys::ggml_backend_buft_get_alloc_size(set.buft, t) };
            tensors.push((t, size));
            size += s.div_ceil(align) * align;
            t = unsafe { sys::ggml_get_next_tensor(set.ctx, t) };
        }
        if tensors.is_empty() {
            continue;
        }
        let buf = super::virtual_buffer::new(set.buft, size);
        if buf.is_null() {
            return Err(Error::oom("load: cannot create a virtual weight buffer"));
        }
        set.buffer = buf;
        let base = unsafe { sys::ggml_backend_buffer_get_base(buf) } as usize;
        for (t, off) in tensors {
            let status = unsafe { sys::ggml_backend_tensor_alloc(buf, t, (base + off) as *mut std::ffi::c_void) };
            if status != sys::GGML_STATUS_SUCCESS {
                return Err(Error::oom("load: cannot place a weight in its virtual buffer"));
            }
        }
        unsafe { sys::ggml_backend_buffer_set_usage(buf, sys::GGML_BACKEND_BUFFER_USAGE_WEIGHTS) };
    }
    Ok(())
}

/// Allocates one buffer per buffer type (marked as holding weights, which
/// tells the scheduler it may offload ops that read them).
pub(crate) fn allocate(weights: &mut Weights, memory: &Memory) -> Result<()> {
    for i in 0..weights.sets.len() {
        let set = &weights.sets[i];
        if unsafe { sys::ggml_get_first_tensor(set.ctx) }.is_null() {
            continue;
        }
        let buf = unsafe { sys::ggml_backend_alloc_ctx_tensors_from_buft(set.ctx, set.buft) };
        if buf.is_null() {
            crate::ml::rpc::check_buft(set.buft, "load")?;
            let name = unsafe { std::ffi::CStr::from_ptr(sys::ggml_backend_buft_name(set.buft)) }.to_string_lossy();
            return Err(Error::oom(format!("load: failed to allocate the weights in {name}; required memory: {memory}")));
        }
        unsafe { sys::ggml_backend_buffer_set_usage(buf, sys::GGML_BACKEND_BUFFER_USAGE_WEIGHTS) };
        weights.sets[i].buffer = buf;
        // A remote buffer whose server broke a rule while it was placed.
        crate::ml::rpc::check_buffer(buf, "load")?;
    }
    Ok(())
}
