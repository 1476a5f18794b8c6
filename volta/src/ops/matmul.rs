//! Matrix products.
use crate::autograd::Op;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::shape::{MatMulRhs, Shape};
use crate::tensor::{RawTensor, Tensor};

use super::SameDevice;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// Matrix product with numpy semantics for ranks ≥ 1: `(.., m, k) × (.., k, n)`
    /// with equal batch dims, or a rank-2 right operand shared across the batch.
    #[track_caller]
    pub fn matmul(&self, rhs: &Self) -> Self {
        let (a, b) = (self.dims(), rhs.dims());
        assert!(
            !a.is_empty() && !b.is_empty(),
            "matmul: operands must have rank ≥ 1"
        );
        if a.len() == 1 {
            let out = self.reshape(&[1, a[0]]).matmul(rhs);
            let mut dims = out.dims().to_vec();
            // The promoted row axis: last but one, or the only axis left when `rhs`
            // is a vector too (its own axis already dropped): a dot product, 0-d.
            dims.remove(dims.len().saturating_sub(2));
            return out.reshape(&dims);
        }
        if b.len() == 1 {
            let out = self.matmul(&rhs.reshape(&[b[0], 1]));
            let dims = out.dims()[..out.dims().len() - 1].to_vec();
            return out.reshape(&dims);
        }
        let (m, k, n) = (a[a.len() - 2], a[a.len() - 1], b[b.len() - 1]);
        assert_eq!(
            k,
            b[b.len() - 2],
            "matmul: inner dims differ at run time: {a:?} × {b:?}"
        );
        let batch = &a[..a.len() - 2];
        let mut out_dims = batch.to_vec();
        out_dims.extend([m, n]);
        if b.len() == 2 {
            // A shared weight: fold the batch into the rows — one large GEMM.
            let rows = batch.iter().product::<usize>() * m;
            let out = self.reshape(&[1, rows, k]).bmm(&rhs.reshape(&[1, k, n]));
            return out.reshape(&out_dims);
        }
        assert_eq!(
            batch,
            &b[..b.len() - 2],
            "matmul: batch dims differ: {a:?} × {b:?}"
        );
        let bs = batch.iter().product::<usize>();
        self.reshape(&[bs, m, k])
            .bmm(&rhs.reshape(&[bs, k, n]))
            .reshape(&out_dims)
    }

    /// `self × rhs + addend` (`torch.addmm`), for a left operand of rank ≥ 2 and a
    /// shared weight `rhs` `(k, n)`; `addend` has the product's dims (a bias
    /// expanded along the rows). One kernel where the backend starts its product
    /// from the addend ([`Backend::matmul_add`]).
    #[track_caller]
    pub fn matmul_add(&self, rhs: &Self, addend: &Self) -> Self {
        let (a, b) = (self.dims(), rhs.dims());
        if a.len() < 2 || b.len() != 2 {
            return self
                .matmul(rhs)
                .binary(volta_kernels::BinaryOp::Add, addend);
        }
        let (k, n) = (a[a.len() - 1], b[1]);
        assert_eq!(
            k, b[0],
            "matmul_add: inner dims differ at run time: {a:?} × {b:?}"
        );
        let mut out_dims = a[..a.len() - 1].to_vec();
        out_dims.push(n);
        assert_eq!(
            addend.dims(),
            &out_dims[..],
            "matmul_add: the addend's dims {:?} are not the product's {out_dims:?}",
            addend.dims()
        );
        let rows = out_dims[..out_dims.len() - 1].iter().product::<usize>();
        let (lhs, rhs) = (self.reshape(&[1, rows, k]), rhs.reshape(&[1, k, n]));
        let addend = addend.reshape(&[1, rows, n]);
        let buf = D::matmul_add(lhs.view(), rhs.view(), addend.view());
        Self::from_op(
            buf,
            Layout::contiguous(&[1, rows, n]),
            || Op::MatMulAdd(lhs.clone(), rhs.clone(), addend.clone()),
            &[&lhs, &rhs, &addend],
        )
        .reshape(&out_dims)
    }

    /// `(batch, m, k) × (batch, k, n)`.
    #[track_caller]
    pub(crate) fn bmm(&self, rhs: &Self) -> Self {
        let (a, b) = (self.dims(), rhs.dims());
        let buf = D::matmul(self.view(), rhs.view());
        Self::from_op(
            buf,
            Layout::contiguous(&[a[0], a[1], b[2]]),
            || Op::MatMul(self.clone(), rhs.clone()),
            &[self, rhs],
        )
    }
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// Matrix product: `(M, K)×(K, N)`, `(K,)×(K, N)`, `(B, M, K)×(B, K, N)`,
    /// `(B, M, K)×(K, N)`, `(B, H, M, K)×(B, H, K, N)`. Inner dims are checked at
    /// compile time (at run time when dynamic).
    #[track_caller]
    pub fn matmul<R: MatMulRhs<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Tensor<R::Output, D, E> {
        let out = R::output(&self.shape(), &rhs.shape());
        let rhs = D2::same_device(rhs.raw());
        Tensor::from_raw(out, self.raw().matmul(&rhs))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Cpu, RawTensor};

    #[test]
    fn vector_times_vector_is_a_dot_product() {
        let a = RawTensor::<Cpu, f32>::from_vec(vec![1.0, 2.0, 3.0], &[3]);
        let b = RawTensor::<Cpu, f32>::from_vec(vec![4.0, -5.0, 6.0], &[3]);
        let dot = a.matmul(&b);
        assert!(dot.dims().is_empty());
        assert_eq!(dot.to_vec(), vec![12.0]);
        let m = RawTensor::<Cpu, f32>::from_vec(vec![1.0, 0.0, 2.0, 1.0, 0.0, 3.0], &[3, 2]);
        assert_eq!(a.matmul(&m).dims(), &[2]);
        assert_eq!(a.matmul(&m).to_vec(), vec![5.0, 11.0]);
    }
}
