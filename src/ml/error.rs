//! The error type of the safe layer. Every failure carries a kind (mapped to
//! a C status code by the FFI layer) and a message that names the operation
//! and, for tensor ops, the shapes and types involved.

use std::fmt;

/// What went wrong, coarsely; the C ABI exposes it as `ggml_rs_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A NULL or otherwise unusable argument (bad enum value, bad count).
    InvalidArgument,
    /// Shapes, strides or dimension counts that the op cannot take.
    Shape,
    /// A tensor type the op cannot take.
    DType,
    /// A buffer could not be allocated (the message says how much, where).
    OutOfMemory,
    /// ggml reported a failure while computing a graph.
    Compute,
    /// A compute was cancelled through the abort callback.
    Aborted,
    /// The object was already closed.
    Closed,
    /// A file could not be read.
    Io,
    /// A file is not a valid GGUF model.
    Format,
    /// A Rust panic was caught at the FFI boundary (a bug in ggml-rs).
    Panic,
    /// The operation is not supported by this build or device.
    Unsupported,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }
    pub fn shape(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Shape, message)
    }
    pub fn dtype(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::DType, message)
    }
    pub fn oom(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::OutOfMemory, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// `bail!(kind, "fmt", args)` returns an error of that kind from the function.
#[macro_export]
macro_rules! bail {
    ($ctor:ident, $($arg:tt)*) => {
        return Err($crate::ml::Error::$ctor(format!($($arg)*)))
    };
}
