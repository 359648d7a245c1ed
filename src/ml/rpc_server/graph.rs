//! Tensors and graphs as a client describes them, checked before ggml sees
//! them: every tensor has a known type, a shape whose size fits in 64 bits
//! and bytes that lie inside a buffer this connection allocated; a graph's
//! nodes come in dependency order (no recursion, no cycles) and each one
//! passes [`rules::check`].

use std::collections::HashMap;

use super::rules;
use super::wire::{Fields, WireTensor, TENSOR};
use crate::sys;

/// A buffer this connection allocated: ggml's handle, its base address and
/// size.
pub struct Buffer {
    pub raw: sys::ggml_backend_buffer_t,
    pub base: u64,
    pub size: u64,
    /// Bytes booked against the server's memory budget.
    pub booked: u64,
}

/// The connection's buffers by the handle the client knows them by.
#[derive(Default)]
pub struct Buffers {
    pub map: HashMap<u64, Buffer>,
}

impl Buffers {
    pub fn get(&self, handle: u64) -> Result<&Buffer, String> {
        self.map.get(&handle).ok_or_else(|| format!("buffer {handle:#x} is not one of this connection's"))
    }
}

/// Tensor flags a client may set (input, output, param, loss, compute);
/// the rest are ggml-rs's (bit 30 marks a bad row id after compute).
const CLIENT_FLAGS: i32 = 0x1f;

/// The bytes a tensor spans from its data pointer: ggml's `nbytes` from its
/// strides, or the packed size if larger (kernels that treat a contiguous
/// tensor as flat read that many). None when it does not fit in 64 bits or
/// the type is not one ggml can hold.
pub fn span(dtype: u32, ne: [i64; 4], nb: [usize; 4]) -> Option<u64> {
    let t = dtype as sys::ggml_type;
    if !crate::ml::tensor::is_valid_type(t) {
        return None;
    }
    let blck = unsafe { sys::ggml_blck_size(t) } as u128;
    let size = unsafe { sys::ggml_type_size(t) } as u128;
    if ne.iter().any(|&n| n == 0) {
        return Some(0);
    }
    let mut strided: u128 = if blck == 1 { size } else { ne[0] as u128 * nb[0] as u128 / blck };
    let first = if blck == 1 { 0 } else { 1 };
    for i in first..4 {
        strided += (ne[i] as u128 - 1) * nb[i] as u128;
    }
    let n: u128 = ne.iter().map(|&x| x as u128).product();
    let packed = n / blck * size;
    u64::try_from(strided.max(packed)).ok()
}

/// Checks a wire tensor's type, shape and placement. `need_buffer`: it must
/// lie in one of the connection's buffers (otherwise it may also have no
/// buffer and no data, as the tensors of GET_ALLOC_SIZE).
pub fn check_tensor(w: &WireTensor, bufs: &Buffers, need_buffer: bool) -> Result<Option<(sys::ggml_backend_buffer_t, u64)>, String> {
    let t = w.dtype as sys::ggml_type;
    if !crate::ml::tensor::is_valid_type(t) {
        return Err(format!("tensor {}: unknown type {}", w.id, w.dtype));
    }
    let blck = unsafe { sys::ggml_blck_size(t) };
    if w.ne[0] as i64 % blck != 0 {
        return Err(format!("tensor {}: {} elements per row are not whole blocks of {}", w.id, w.ne[0], blck));
    }
    let ne = w.ne.map(|x| x as i64);
    let n: u128 = ne.iter().map(|&x| x as u128).product();
    if n > i64::MAX as u128 {
        return Err(format!("tensor {}: shape {:?} has more than 2^63 elements", w.id, w.ne));
    }
    let bytes = span(w.dtype, ne, w.nb.map(|x| x as usize))
        .ok_or_else(|| format!("tensor {}: shape {:?} with strides {:?} spans more than 2^64 bytes", w.id, w.ne, w.nb))?;
    if w.buffer == 0 {
        if need_buffer || w.data != 0 {
            return Err(format!("tensor {}: not in a buffer", w.id));
        }
        return Ok(None);
    }
    let b = bufs.get(w.buffer).map_err(|e| format!("tensor {}: {e}", w.id))?;
    let end = (w.data as u128) + bytes as u128;
    if w.data < b.base || end > b.base as u128 + b.size as u128 {
        return Err(format!(
            "tensor {}: bytes [{:#x}, {:#x}) outside its buffer [{:#x}, {:#x})",
            w.id,
            w.data,
            end,
            b.base,
            b.base as u128 + b.size as u128
        ));
    }
    Ok(Some((b.raw, bytes)))
}

/// A ggml context holding checked tensors (no data of its own).
pub struct Scratch {
    pub ctx: *mut sys::ggml_context,
}

impl Scratch {
    pub fn new(n_tensors: usize, graph_nodes: usize) -> Result<Scratch, String> {
        let mut mem = n_tensors.saturating_add(1).saturating_mul(unsafe { sys::ggml_tensor_overhead() });
        if graph_nodes > 0 {
            mem = mem.saturating_add(unsafe { sys::ggml_graph_overhead_custom(graph_nodes, false) });
        }
        let params = sys::ggml_init_params { mem_size: mem, mem_buffer: std::ptr::null_mut(), no_alloc: true };
        let ctx = unsafe { sys::ggml_init(params) };
        if ctx.is_null() {
            return Err(format!("no memory for a context of {mem} bytes"));
        }
        Ok(Scratch { ctx })
    }

    /// A ggml tensor for a checked wire tensor: type, shape, strides,
    /// buffer, data, parameters and name; no sources.
    pub fn tensor(&mut self, w: &WireTensor, bufs: &Buffers, need_buffer: bool) -> Result<*mut sys::ggml_tensor, String> {
        let placed = check_tensor(w, bufs, need_buffer)?;
        let ne = w.ne.map(|x| x as i64);
        let t = unsafe { sys::ggml_new_tensor(self.ctx, w.dtype as sys::ggml_type, 4, ne.as_ptr()) };
        if t.is_null() {
            return Err(format!("tensor {}: cannot be made", w.id));
        }
        let r = unsafe { &mut *t };
        r.nb = w.nb.map(|x| x as usize);
        if let Some((buf, _)) = placed {
            r.buffer = buf;
            r.data = w.data as *mut std::ffi::c_void;
        }
        r.op = w.op as sys::ggml_op;
        for (i, p) in r.op_params.iter_mut().enumerate() {
            *p = i32::from_ne_bytes(w.op_params[4 * i..4 * i + 4].try_into().unwrap());
        }
        r.flags = w.flags & CLIENT_FLAGS;
        let len = w.name.iter().position(|&c| c == 0).unwrap_or(w.name.len() - 1);
        for (d, &s) in r.name.iter_mut().zip(&w.name[..len]) {
            *d = s as std::ffi::c_char;
        }
        Ok(t)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        unsafe { sys::ggml_free(self.ctx) };
    }
}

/// A graph built from a GRAPH_COMPUTE request, ready for ggml.
pub struct Graph {
    /// Holds the tensors.
    _scratch: Scratch,
    pub graph: *mut sys::ggml_cgraph,
    pub nodes: Vec<*mut sys::ggml_tensor>,
}

/// Most nodes and tensors one graph may have (ggml's graphs of the largest
/// models have tens of thousands).
pub(super) const MAX_GRAPH_TENSORS: u32 = 1 << 20;

/// Parses and checks `device u32 | n_nodes u32 | ids u64[n] | n_tensors u32 |
/// rpc_tensor[]`; returns the device and the graph.
pub fn build(payload: &[u8], bufs: &Buffers) -> Result<(u32, Graph), String> {
    let mut f = Fields::new(payload);
    let device = f.u32()?;
    let n_nodes = f.u32()?;
    if n_nodes == 0 || n_nodes > MAX_GRAPH_TENSORS {
        return Err(format!("{n_nodes} nodes (1 to {MAX_GRAPH_TENSORS})"));
    }
    let ids: Vec<u64> = (0..n_nodes).map(|_| f.u64()).collect::<Result<_, _>>()?;
    let n_tensors = f.u32()?;
    if n_tensors > MAX_GRAPH_TENSORS || f.rest() != n_tensors as usize * TENSOR {
        return Err(format!("{n_tensors} tensors announced, {} bytes of them sent", f.rest()));
    }
    let wires: Vec<WireTensor> = (0..n_tensors).map(|_| f.tensor()).collect::<Result<_, _>>()?;
    let mut by_id: HashMap<u64, usize> = HashMap::with_capacity(wires.len());
    for (i, w) in wires.iter().enumerate() {
        if w.id == 0 || by_id.insert(w.id, i).is_some() {
            return Err(format!("tensor id {} is zero or repeated", w.id));
        }
    }
    // Position of each node in the list: a node's sources that are nodes
    // must come before it.
    let mut order: HashMap<u64, usize> = HashMap::with_capacity(ids.len());
    for (i, &id) in ids.iter().enumerate() {
        if !by_id.contains_key(&id) {
            return Err(format!("node {i}: tensor {id} is not in the request"));
        }
        if order.insert(id, i).is_some() {
            return Err(format!("node {i}: tensor {id} listed twice"));
        }
    }
    let mut scratch = Scratch::new(wires.len(), ids.len())?;
    let mut made: HashMap<u64, *mut sys::ggml_tensor> = HashMap::with_capacity(wires.len());
    let graph = unsafe { sys::ggml_new_graph_custom(scratch.ctx, ids.len(), false) };
    if graph.is_null() {
        return Err("cannot make the graph".into());
    }
    let mut nodes = Vec::with_capacity(ids.len());
    for (i, &id) in ids.iter().enumerate() {
        let w = &wires[by_id[&id]];
        // A view the client left unplaced (a view of a tensor in another
        // backend's memory, whose consumers read a copy) computes nothing;
        // any other node must have its bytes in a buffer.
        let computes = !no_compute(w.op);
        let t = scratch.tensor(w, bufs, computes).map_err(|e| format!("node {i}: {e}"))?;
        // A node without an op is data (ggml skips it); it has no sources.
        if w.op == sys::GGML_OP_NONE as u32 && w.src.iter().any(|&s| s != 0) {
            return Err(format!("node {i} (tensor {id}) has sources but no op"));
        }
        for (s, &sid) in w.src.iter().enumerate() {
            if sid == 0 {
                continue;
            }
            let p = match (made.get(&sid), order.get(&sid)) {
                (Some(&p), _) => p,
                // ggml's scheduler can leave a copy naming itself as its
                // destination; upstream's server allows it too.
                (None, Some(&at)) if at == i => t,
                (None, Some(&at)) => {
                    let w2 = &wires[by_id[&sid]];
                    return Err(format!(
                        "node {i} ({} {:?}): source {s} is node {at} ({} {:?}), which does not come before it",
                        rules::op_name(w.op),
                        name(w),
                        rules::op_name(w2.op),
                        name(w2)
                    ));
                }
                (None, None) => {
                    let sw = by_id.get(&sid).map(|&k| &wires[k]);
                    let sw = sw.ok_or_else(|| format!("node {i}: source {s} (tensor {sid}) is not in the request"))?;
                    // A tensor made outside this graph: data, not an op.
                    let mut leaf = sw.clone();
                    leaf.op = sys::GGML_OP_NONE as u32;
                    let p = scratch.tensor(&leaf, bufs, false).map_err(|e| format!("node {i}, source {s}: {e}"))?;
                    made.insert(sid, p);
                    p
                }
            };
            if computes && unsafe { (*p).data.is_null() } {
                return Err(format!("node {i} ({}): source {s} (tensor {sid}) is not in a buffer", rules::op_name(w.op)));
            }
            unsafe { (*t).src[s] = p };
        }
        if w.op != sys::GGML_OP_NONE as u32 {
            rules::check(unsafe { &*t }).map_err(|e| format!("node {i} ({} {:?}): {e}", rules::op_name(w.op), name(w)))?;
        }
        made.insert(id, t);
        unsafe { sys::ggml_graph_add_node(graph, t) };
        nodes.push(t);
    }
    Ok((device, Graph { _scratch: scratch, graph, nodes }))
}

/// Ops ggml's CPU backend skips: their result is a view or nothing.
fn no_compute(op: u32) -> bool {
    [sys::GGML_OP_NONE, sys::GGML_OP_VIEW, sys::GGML_OP_RESHAPE, sys::GGML_OP_PERMUTE, sys::GGML_OP_TRANSPOSE]
        .contains(&(op as sys::ggml_op))
}

fn name(w: &WireTensor) -> String {
    let len = w.name.iter().position(|&c| c == 0).unwrap_or(w.name.len());
    String::from_utf8_lossy(&w.name[..len]).into_owned()
}
