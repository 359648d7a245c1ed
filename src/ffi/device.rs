//! Device enumeration.

use std::ffi::c_char;

use super::{copy_str, guard, guard_status, ggml_rs_error, ggml_rs_status};
use crate::ml::{device, threads, Error};

/// What ggml says about one device. Strings are NUL-terminated, truncated.
#[repr(C)]
pub struct ggml_rs_device_info {
    /// Index in ggml's device registry (the argument of ggml_rs_device_get).
    pub index: usize,
    /// ggml's device name, e.g. "CPU", "CUDA0", "RPC[127.0.0.1:50052]".
    pub name: [c_char; 128],
    pub description: [c_char; 256],
    /// Stable identifier within `library` (PCI bus id when known, else name).
    pub id: [c_char; 128],
    /// The ggml backend that drives it: "CPU", "CUDA", "Vulkan", "Metal", "RPC".
    pub library: [c_char; 32],
    /// PCI bus id, empty when unknown.
    pub pci_id: [c_char; 64],
    /// 0 CPU, 1 GPU, 2 integrated GPU, 3 accelerator, 4 meta.
    pub device_type: i32,
    pub memory_free: u64,
    pub memory_total: u64,
}

/// Number of devices ggml knows in this process (CPU included).
#[no_mangle]
pub extern "C" fn ggml_rs_device_count() -> usize {
    guard(std::ptr::null_mut(), 0, || Ok(device::count()))
}

/// Fills `*out` with device `index`'s description and current memory.
/// Errors: GGML_RS_ERR_INVALID_ARGUMENT for a NULL `out` or an index out of
/// range. `out` is written only on success.
#[no_mangle]
pub extern "C" fn ggml_rs_device_get(index: usize, out: *mut ggml_rs_device_info, err: *mut ggml_rs_error) -> ggml_rs_status {
    guard_status(err, || {
        let out = unsafe { out.as_mut() }.ok_or_else(|| Error::invalid("device_get: out is NULL"))?;
        let info = device::info(index)
            .ok_or_else(|| Error::invalid(format!("device_get: index {index} out of range ({} devices)", device::count())))?;
        out.index = info.index;
        copy_str(&mut out.name, &info.name);
        copy_str(&mut out.description, &info.description);
        copy_str(&mut out.id, &info.id);
        copy_str(&mut out.library, &info.library);
        copy_str(&mut out.pci_id, &info.pci_id);
        out.device_type = info.device_type as i32;
        out.memory_free = info.memory_free;
        out.memory_total = info.memory_total;
        Ok(())
    })
}

/// The CPU thread count used when a backend is created with 0 threads: the
/// CPUs this process may run on (affinity mask), limited by any cgroup CPU
/// quota. Never 0.
#[no_mangle]
pub extern "C" fn ggml_rs_default_threads() -> usize {
    guard(std::ptr::null_mut(), 1, || Ok(threads::default_threads()))
}
