//! Volta's kernel language.
//!
//! Every elementwise op is defined here once: its scalar meaning (used by the CPU
//! backend) and its WGSL expression (used by the GPU code generator). The `#[kernel]`
//! macro and the runtime's fusion build on the same definitions.

#![warn(missing_docs)]

mod float;
pub mod ir;
mod kernel_def;
mod ops;
pub mod wgsl;
mod window;

pub use float::Float;
pub use kernel_def::{ArgKind, KernelDef, ScalarFn};
pub use ops::{BinaryOp, ReduceOp, UnaryOp};
pub use window::{Window2d, WindowError};
