//! Softmax and log-softmax along an axis: one backend kernel each (a row is read
//! for its max and its sum, then written), so that the GPU does not write and
//! re-read `exp(x − max)`; the backward rules compose other ops.
use crate::autograd::Op;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::shape::{Const, ReplaceAxis, Shape};
use crate::tensor::{RawTensor, Tensor};

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// exp(x) / Σ exp(x) along `axis`, computed stably (shifted by the row's max).
    #[track_caller]
    pub fn softmax(&self, axis: usize) -> Self {
        self.softmax_kernel(axis, false)
    }

    /// x − log Σ exp(x) along `axis`, computed stably.
    #[track_caller]
    pub fn log_softmax(&self, axis: usize) -> Self {
        self.softmax_kernel(axis, true)
    }

    /// One kernel per call (each row read for its max and sum, then written), with
    /// the backward rule in `autograd::backward`.
    #[track_caller]
    fn softmax_kernel(&self, axis: usize, log: bool) -> Self {
        assert!(
            axis < self.dims().len(),
            "softmax: axis {axis} out of range for {:?}",
            self.dims()
        );
        let buf = D::softmax(self.view(), axis, log);
        Self::from_op(
            buf,
            Layout::contiguous(self.dims()),
            || Op::Softmax(self.clone(), axis, log),
            &[self],
        )
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Softmax along axis `Ax` (e.g. `x.softmax::<Axis<1>>()` for rows of a batch).
    #[track_caller]
    pub fn softmax<Ax>(&self) -> Self
    where
        S: ReplaceAxis<Ax, Const<1>>,
    {
        self.map_raw(|r| r.softmax(<S as ReplaceAxis<Ax, Const<1>>>::AXIS))
    }

    /// Log-softmax along axis `Ax`.
    #[track_caller]
    pub fn log_softmax<Ax>(&self) -> Self
    where
        S: ReplaceAxis<Ax, Const<1>>,
    {
        self.map_raw(|r| r.log_softmax(<S as ReplaceAxis<Ax, Const<1>>>::AXIS))
    }
}
