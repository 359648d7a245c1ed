//! Models: which device each weight goes to, how big everything is, and
//! reading the weights from a GGUF file.

pub mod load;
pub mod memory;
pub mod placement;
pub(crate) mod virtual_buffer;
pub mod weights;

pub use memory::{DeviceMemory, Memory};
pub use weights::Layout;
