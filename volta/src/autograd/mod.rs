//! Reverse-mode automatic differentiation.
//!
//! Each op result remembers how it was computed (an `Op`) when gradients are enabled
//! and an input is tracked. `backward()` walks that graph once from a scalar loss and
//! returns a [`Gradients`] store keyed by tensor. The graph is owned by the tensors
//! (plain `Arc`s, no interior mutability): it is freed when the last tensor that
//! reaches it is dropped, and `backward` consumes the loss.

pub(crate) mod anomaly;
mod backward;
mod grad_mode;
mod gradients;
mod op;

pub use anomaly::detect_anomaly;
pub use grad_mode::{NoGradGuard, grad_enabled, no_grad};
pub use gradients::Gradients;
pub(crate) use op::{CustomBackward, Op};
