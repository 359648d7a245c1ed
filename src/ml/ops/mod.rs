//! Graph-building ops, one file per family. Each op is a method on
//! [`Context`](super::Context) that validates its arguments, asks
//! `self.room(op, n)` for the ggml context (n = tensors it will create),
//! calls ggml, and wraps the result with `self.made(op, p)`.

pub mod arith;
pub mod attention;
pub mod conv;
pub mod index;
pub mod linalg;
pub mod matmul;
pub mod moe;
pub mod norm;
pub mod rope;
pub mod shape;
pub mod ssm;
pub mod unary;
