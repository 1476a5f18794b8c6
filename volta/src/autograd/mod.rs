//! Reverse-mode automatic differentiation.
//!
//! Each op result remembers how it was computed (an `Op`) when gradients are enabled
//! and an input is tracked. `backward()` walks that graph once from a scalar loss and
//! returns a [`Gradients`] store keyed by tensor. The graph is owned by the tensors
//! (plain `Arc`s): it is freed when the last tensor that reaches it is dropped, and
//! `backward` consumes the loss. An op keeps only the input values its rule reads
//! (PyTorch's saved tensors), and the backward walk releases them as it runs each
//! op, even while the program still holds tensors of the graph: a second
//! backward through an op that saved values panics, as PyTorch raises without
//! `retain_graph` (`backward_retain_graph` keeps them); views and sums, which
//! save none, may be walked again.

pub(crate) mod anomaly;
mod backward;
mod grad_mode;
mod gradients;
mod op;
#[cfg(test)]
mod tests;

pub use anomaly::detect_anomaly;
pub use backward::GRAPH_RELEASED;
pub use grad_mode::{NoGradGuard, grad_enabled, no_grad};
pub use gradients::Gradients;
pub(crate) use op::{CustomBackward, Op};
