//! Indexing: gather along an axis, and index-select (embedding lookups).
use crate::autograd::Op;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::shape::*;
use crate::tensor::{RawTensor, Tensor};

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// `out[.., i, ..] = self[.., idx[.., i, ..], ..]` along `axis` (torch.gather):
    /// `idx` has the rank of `self` and equal dims except along `axis`.
    #[track_caller]
    pub fn gather(&self, axis: usize, idx: &RawTensor<D, u32>) -> Self {
        let (x, i) = (self.dims(), idx.dims());
        assert!(
            x.len() == i.len()
                && x.iter()
                    .zip(i)
                    .enumerate()
                    .all(|(a, (p, q))| a == axis || p == q),
            "gather: index dims {i:?} must equal {x:?} except along axis {axis}"
        );
        let buf = D::gather(self.view(), axis, idx.view());
        Self::from_op(
            buf,
            Layout::contiguous(i),
            || Op::Gather(self.clone(), axis, idx.clone()),
            &[self],
        )
    }

    /// The adjoint of [`gather`](Self::gather): zeros of `dims` with each element of
    /// `self` added at the position `idx` names along `axis`.
    #[track_caller]
    pub fn scatter_add(&self, dims: &[usize], axis: usize, idx: &RawTensor<D, u32>) -> Self {
        let buf = D::scatter_add(dims, axis, idx.view(), self.view());
        Self::leaf(buf, Layout::contiguous(dims))
    }

    /// Rows `ids` of `self` along axis 0 (an embedding lookup).
    #[track_caller]
    pub fn index_select(&self, ids: &RawTensor<D, u32>) -> Self {
        assert_eq!(ids.dims().len(), 1, "index_select: ids must be rank 1");
        let n = ids.dims()[0];
        let mut kept = vec![1; self.dims().len()];
        kept[0] = n;
        let mut dims = self.dims().to_vec();
        dims[0] = n;
        let idx = ids.reshape_any(&kept).expand_any(&dims);
        self.gather(0, &idx)
    }
}

impl<D: crate::backend::Device> RawTensor<D, u32> {
    /// Reshape for index tensors (a view when possible).
    #[track_caller]
    pub fn reshape_any(&self, dims: &[usize]) -> Self {
        match self.layout().reshape(dims) {
            Some(l) => Self::leaf(self.buffer().clone(), l),
            None => Self::leaf(
                D::contiguous(self.buffer(), self.layout()),
                Layout::contiguous(dims),
            ),
        }
    }
    /// Broadcast view for index tensors.
    #[track_caller]
    pub fn expand_any(&self, dims: &[usize]) -> Self {
        Self::leaf(self.buffer().clone(), self.layout().expand(dims))
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Picks elements along axis `Ax` by index (torch.gather). The index tensor has
    /// the output's shape, which equals `S` except along `Ax`. Out-of-range indices
    /// panic on the CPU.
    ///
    /// ```
    /// use volta::prelude::*;
    /// let x = Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    /// let idx = Tensor::<Rank2<2, 1>, Cpu, u32>::from_array([[2], [0]]);
    /// assert_eq!(x.gather::<Axis<1>, _>(&idx).to_vec(), vec![3.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn gather<Ax, Dst: Shape>(&self, idx: &Tensor<Dst, D, u32>) -> Tensor<Dst, D, E>
    where
        S: ResizeAxis<Ax, Dst>,
    {
        let axis = <S as ResizeAxis<Ax, Dst>>::AXIS;
        Tensor::from_raw(idx.shape(), self.raw().gather(axis, idx.raw()))
    }

    /// Rows of `self` (along axis 0) named by `ids`: an embedding lookup.
    #[track_caller]
    pub fn index_select<N: Dim>(
        &self,
        ids: &Tensor<(N,), D, u32>,
    ) -> Tensor<<S as ReplaceAxis<Axis<0>, N>>::Output, D, E>
    where
        S: ReplaceAxis<Axis<0>, N>,
    {
        Tensor::try_from_raw(self.raw().index_select(ids.raw()))
            .expect("selected dims match the type")
    }
}
