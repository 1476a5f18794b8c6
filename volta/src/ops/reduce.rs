//! Reductions: sum, mean, max, min over axes (dropping or keeping them) or over all.
use crate::autograd::Op;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::shape::*;
use crate::tensor::{RawTensor, Tensor};
use volta_kernels::ReduceOp;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// Reduces along `axis`, keeping it with size 1.
    #[track_caller]
    pub fn reduce(&self, op: ReduceOp, axis: usize) -> Self {
        let mut dims = Dims::new(self.dims());
        assert!(
            axis < dims.len(),
            "reduce: axis {axis} out of range for {:?}",
            self.dims()
        );
        dims[axis] = 1;
        let buf = D::reduce(op, self.view(), axis);
        Self::from_op(
            buf,
            Layout::contiguous(&dims),
            || Op::Reduce(self.clone(), op, axis),
            &[self],
        )
    }

    /// Reduces along several axes, keeping them. Neighbouring axes that the
    /// layout can view as one (a contiguous `[B, T, C]` summed over `B` and `T`)
    /// are reduced as one: a single long reduction runs far faster than a short
    /// one per axis.
    #[track_caller]
    pub fn reduce_axes(&self, op: ReduceOp, axes: &[usize]) -> Self {
        // Fixed arrays, not vectors: every broadcast op's backward comes here.
        let from = self.dims();
        let reduced = |a: usize| axes.contains(&a) && from[a] != 1;
        let (mut merged, mut merged_reduced, mut len) = ([0; MAX_RANK], [false; MAX_RANK], 0);
        for (a, &d) in from.iter().enumerate() {
            if a > 0 && reduced(a) && reduced(a - 1) {
                merged[len - 1] *= d;
            } else {
                merged[len] = d;
                merged_reduced[len] = reduced(a);
                len += 1;
            }
        }
        if len < from.len() && self.layout().reshape(&merged[..len]).is_some() {
            let mut out = self.reshape(&merged[..len]);
            for a in (0..len).filter(|&a| merged_reduced[a]) {
                out = out.reduce(op, a);
            }
            let mut kept = Dims::new(from);
            for &a in axes {
                kept[a] = 1;
            }
            return out.reshape(&kept);
        }
        axes.iter().fold(self.clone(), |t, &a| t.reduce(op, a))
    }

    /// Mean along `axis`, keeping it.
    #[track_caller]
    pub fn mean_axis(&self, axis: usize) -> Self {
        let n = self.dims()[axis] as f64;
        self.reduce(ReduceOp::Sum, axis)
            .scalar(volta_kernels::BinaryOp::Mul, E::from_f64(1.0 / n))
    }

    /// Reduces every element to a rank-0 tensor.
    #[track_caller]
    pub fn reduce_all(&self, op: ReduceOp) -> Self {
        self.reshape(&[self.layout().numel()])
            .reduce(op, 0)
            .reshape(&[])
    }
}

macro_rules! reductions {
    ($($(#[$doc:meta])* $name:ident, $keep:ident, $all:ident => $op:ident;)*) => {
        impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
            $(
                $(#[$doc])*
                /// Drops the reduced axes; `Dst` and `Ax` are inferred from each other when unambiguous.
                pub fn $name<Dst: Shape, Ax: Axes>(&self) -> Tensor<Dst, D, E>
                where
                    S: ReduceShapeTo<Dst, Ax>,
                {
                    self.reduce_drop(ReduceOp::$op, Ax::LIST)
                }
                $(#[$doc])*
                /// Keeps the reduced axis with size 1.
                pub fn $keep<Ax>(&self) -> Tensor<<S as ReplaceAxis<Ax, Const<1>>>::Output, D, E>
                where
                    S: ReplaceAxis<Ax, Const<1>>,
                {
                    let raw = self.raw().reduce(ReduceOp::$op, <S as ReplaceAxis<Ax, Const<1>>>::AXIS);
                    Tensor::try_from_raw(raw).expect("reduced dims match the type")
                }
                $(#[$doc])*
                /// Over all elements, to a scalar.
                pub fn $all(&self) -> Tensor<(), D, E> {
                    Tensor::from_raw((), self.raw().reduce_all(ReduceOp::$op))
                }
            )*
        }
    };
}
reductions! {
    /// Sum. The gradient broadcasts back to every summed element.
    sum, sum_keepdim, sum_all => Sum;
    /// Maximum. The gradient goes to the maximal elements (split evenly on ties).
    max, max_keepdim, max_all => Max;
    /// Minimum. The gradient goes to the minimal elements (split evenly on ties).
    min, min_keepdim, min_all => Min;
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    #[track_caller]
    fn reduce_drop<Dst: Shape>(&self, op: ReduceOp, axes: &[usize]) -> Tensor<Dst, D, E> {
        let kept = self.raw().reduce_axes(op, axes);
        let dims: Vec<usize> = self
            .dims()
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        Tensor::try_from_raw(kept.reshape(&dims)).expect("reduced dims match the type")
    }

    /// Mean over the axes `Ax`, dropping them.
    #[track_caller]
    pub fn mean<Dst: Shape, Ax: Axes>(&self) -> Tensor<Dst, D, E>
    where
        S: ReduceShapeTo<Dst, Ax>,
    {
        let n: usize = Ax::LIST.iter().map(|&a| self.dims()[a]).product();
        self.sum::<Dst, Ax>()
            .mul_scalar(E::from_f64(1.0 / n as f64))
    }
    /// Mean over the axis `Ax`, keeping it with size 1.
    #[track_caller]
    pub fn mean_keepdim<Ax>(&self) -> Tensor<<S as ReplaceAxis<Ax, Const<1>>>::Output, D, E>
    where
        S: ReplaceAxis<Ax, Const<1>>,
    {
        let n = self.dims()[<S as ReplaceAxis<Ax, Const<1>>>::AXIS];
        self.sum_keepdim::<Ax>()
            .mul_scalar(E::from_f64(1.0 / n as f64))
    }
    /// Mean of all elements.
    #[track_caller]
    pub fn mean_all(&self) -> Tensor<(), D, E> {
        self.sum_all()
            .mul_scalar(E::from_f64(1.0 / self.numel() as f64))
    }
}
