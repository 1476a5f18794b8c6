//! Devices that run user kernels defined with `#[kernel]`.
use super::{Backend, Buf, View};
use volta_kernels::KernelDef;

/// A device that evaluates user kernels (`#[kernel]` functions), elementwise.
#[diagnostic::on_unimplemented(message = "the device `{Self}` cannot run `#[kernel]` functions")]
pub trait KernelBackend: Backend<f32> {
    /// Evaluates the kernel's value (`partial = None`) or its partial derivative with
    /// respect to argument `k`, at every element. `tensors` are the tensor arguments
    /// (equal dims; broadcasts are stride-0 views) and `scalars` the scalar ones, each
    /// in declaration order.
    fn call_kernel(
        def: &'static KernelDef,
        partial: Option<usize>,
        tensors: &[View<Self, f32>],
        scalars: &[f32],
    ) -> Buf<Self, f32>;
}
