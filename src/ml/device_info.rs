//! What ggml says of one device (name, type, library, memory), read
//! without initialising a backend. No enumeration side effects: the RPC
//! client describes the devices it adds with it, and [`device`](super::device)
//! lists them all.

use std::ffi::CStr;

use crate::sys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum DeviceType {
    Cpu = 0,
    Gpu = 1,
    IntegratedGpu = 2,
    Accelerator = 3,
    /// ggml's meta device (several devices as one); never used for placement.
    Meta = 4,
}

impl DeviceType {
    fn from_ggml(t: sys::ggml_backend_dev_type) -> DeviceType {
        match t {
            sys::GGML_BACKEND_DEVICE_TYPE_CPU => DeviceType::Cpu,
            sys::GGML_BACKEND_DEVICE_TYPE_GPU => DeviceType::Gpu,
            sys::GGML_BACKEND_DEVICE_TYPE_IGPU => DeviceType::IntegratedGpu,
            sys::GGML_BACKEND_DEVICE_TYPE_ACCEL => DeviceType::Accelerator,
            _ => DeviceType::Meta,
        }
    }
}

#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Index in ggml's device registry.
    pub index: usize,
    /// ggml's device name ("CPU", "CUDA0", "RPC[127.0.0.1:50052]").
    pub name: String,
    pub description: String,
    /// A stable identifier within `library`: the PCI bus id where ggml
    /// reports one, otherwise the device name.
    pub id: String,
    /// The backend that drives it ("CPU", "CUDA", "Vulkan", "Metal", "RPC").
    pub library: String,
    pub pci_id: String,
    pub device_type: DeviceType,
    pub memory_free: u64,
    pub memory_total: u64,
}

fn cstr(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

pub(crate) fn dev(i: usize) -> sys::ggml_backend_dev_t {
    unsafe { sys::ggml_backend_dev_get(i) }
}

pub(crate) fn info_of(index: usize, d: sys::ggml_backend_dev_t) -> DeviceInfo {
    unsafe {
        let mut props: sys::ggml_backend_dev_props = std::mem::zeroed();
        sys::ggml_backend_dev_get_props(d, &mut props);
        let (mut free, mut total) = (0usize, 0usize);
        sys::ggml_backend_dev_memory(d, &mut free, &mut total);
        let reg = sys::ggml_backend_dev_backend_reg(d);
        let mut library = if reg.is_null() { String::new() } else { cstr(sys::ggml_backend_reg_name(reg)) };
        if library == "MTL" {
            library = "Metal".into();
        }
        let name = cstr(sys::ggml_backend_dev_name(d));
        let pci_id = cstr(props.device_id);
        let id = if pci_id.is_empty() { name.clone() } else { pci_id.clone() };
        DeviceInfo {
            index,
            description: cstr(sys::ggml_backend_dev_description(d)),
            name,
            id,
            library,
            pci_id,
            device_type: DeviceType::from_ggml(sys::ggml_backend_dev_type(d)),
            memory_free: free as u64,
            memory_total: total as u64,
        }
    }
}
