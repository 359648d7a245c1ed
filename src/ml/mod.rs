//! The safe layer: devices, backends, contexts, tensors and ops.
//!
//! Every op validates its arguments (types, shapes, strides, counts) before
//! calling ggml, because ggml reports bad arguments with GGML_ASSERT, which
//! aborts the process.

pub mod backend;
pub mod check;
pub mod context;
pub mod cpu_features;
pub mod cpu_load;
pub mod data;
pub mod device;
mod device_info;
pub mod error;
pub mod flash;
pub mod gguf;
pub mod log;
pub mod model;
pub mod ops;
pub mod quant;
pub mod quant_slab;
pub(crate) mod regular_file;
pub mod rpc;
pub mod rpc_server;
pub mod tensor;
pub mod threads;
mod profile;
mod trace;

pub use backend::{Backend, BackendParams, FlashAttention};
pub use context::{Context, Placement};
pub use device::{DeviceInfo, DeviceType};
pub use error::{Error, ErrorKind, Result};
pub use tensor::Tensor;
