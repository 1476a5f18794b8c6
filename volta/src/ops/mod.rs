//! The op set, written once for every device.
//!
//! Each file holds one family: the untyped op on [`RawTensor`](crate::RawTensor)
//! (run-time shape logic, kernel call, autograd record) and the typed methods on
//! [`Tensor`](crate::Tensor) that add the compile-time shape and device checks.
//! Backward rules are in `autograd/backward.rs`.

mod activation;
pub(crate) mod attention;
mod compare;
mod elementwise;
mod index;
pub(crate) mod infer;
mod matmul;
mod movement;
mod norm;
mod random;
mod reduce;
mod rope;
mod window;

pub use elementwise::SameDevice;
