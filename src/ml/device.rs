//! The devices ggml knows (CPU, GPUs, accelerators, RPC servers).
//!
//! Enumeration reads names and types without initialising a backend, so
//! listing devices does not create GPU contexts. The first enumeration adds
//! the RPC servers of GGML_RS_RPC_SERVERS.

pub use super::device_info::{DeviceInfo, DeviceType};
pub(crate) use super::device_info::{dev, info_of};
use crate::sys;

pub fn count() -> usize {
    super::log::init();
    // Servers from GGML_RS_RPC_SERVERS join at the first enumeration.
    super::rpc::init_from_env();
    unsafe { sys::ggml_backend_dev_count() }
}

pub fn info(index: usize) -> Option<DeviceInfo> {
    if index >= count() {
        return None;
    }
    Some(info_of(index, dev(index)))
}

pub fn list() -> Vec<DeviceInfo> {
    (0..count()).map(|i| info_of(i, dev(i))).collect()
}
