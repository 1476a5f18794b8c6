//! Softmax and log-softmax along an axis (composed from other ops, so their
//! gradients and device support come for free).
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::{Const, ReplaceAxis, Shape};
use crate::tensor::{RawTensor, Tensor};
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp};

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// `x − max(x)` along `axis`; the max is a constant for autograd (it cancels).
    fn shifted(&self, axis: usize) -> Self {
        let max = self.detach().reduce(ReduceOp::Max, axis);
        self.binary(BinaryOp::Sub, &max.expand(self.dims()))
    }

    /// exp(x) / Σ exp(x) along `axis`, computed stably.
    pub fn softmax(&self, axis: usize) -> Self {
        let e = self.shifted(axis).unary(UnaryOp::Exp);
        let sum = e.reduce(ReduceOp::Sum, axis).expand(self.dims());
        e.binary(BinaryOp::Div, &sum)
    }

    /// x − log Σ exp(x) along `axis`, computed stably.
    pub fn log_softmax(&self, axis: usize) -> Self {
        let s = self.shifted(axis);
        let lse = s
            .unary(UnaryOp::Exp)
            .reduce(ReduceOp::Sum, axis)
            .unary(UnaryOp::Log);
        s.binary(BinaryOp::Sub, &lse.expand(self.dims()))
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Softmax along axis `Ax` (e.g. `x.softmax::<Axis<1>>()` for rows of a batch).
    pub fn softmax<Ax>(&self) -> Self
    where
        S: ReplaceAxis<Ax, Const<1>>,
    {
        self.map_raw(|r| r.softmax(<S as ReplaceAxis<Ax, Const<1>>>::AXIS))
    }

    /// Log-softmax along axis `Ax`.
    pub fn log_softmax<Ax>(&self) -> Self
    where
        S: ReplaceAxis<Ax, Const<1>>,
    {
        self.map_raw(|r| r.log_softmax(<S as ReplaceAxis<Ax, Const<1>>>::AXIS))
    }
}
