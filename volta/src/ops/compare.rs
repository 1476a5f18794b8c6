//! Comparisons: masks of 0 and 1 in the tensor's element type (no gradient).
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::{SameShape, Shape};
use crate::tensor::Tensor;
use volta_kernels::BinaryOp;

use super::SameDevice;

macro_rules! comparisons {
    ($($(#[$doc:meta])* $name:ident, $scalar:ident => $op:ident;)*) => {
        impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
            $(
                $(#[$doc])*
                pub fn $name<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(&self, rhs: &Tensor<R, D2, E>) -> Self {
                    let rhs = D2::same_device(rhs.raw());
                    self.map_raw(|r| r.binary(BinaryOp::$op, &rhs))
                }
                $(#[$doc])*
                /// (against a scalar)
                pub fn $scalar(&self, c: E) -> Self {
                    self.map_raw(|r| r.scalar(BinaryOp::$op, c))
                }
            )*
        }
    };
}
comparisons! {
    /// 1 where a < b, else 0.
    lt, lt_scalar => Lt;
    /// 1 where a ≤ b, else 0.
    le, le_scalar => Le;
    /// 1 where a > b, else 0.
    gt, gt_scalar => Gt;
    /// 1 where a ≥ b, else 0.
    ge, ge_scalar => Ge;
    /// 1 where a = b, else 0.
    eq, eq_scalar => Eq;
    /// 1 where a ≠ b, else 0.
    ne, ne_scalar => Ne;
}
