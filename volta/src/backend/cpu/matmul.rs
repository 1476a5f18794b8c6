//! Batched matrix product through the `gemm` crate (AVX2/AVX-512/NEON kernels,
//! rayon-parallel), reading strided operands without copies.
use super::copy::strided_to_vec;
use crate::dtype::Float;
use crate::layout::Layout;
use gemm::Parallelism;
use std::any::TypeId;

/// `(batch, m, k) × (batch, k, n)` on rank-3 views; a batch stride of 0 broadcasts.
/// An element type that computes in another (`f16` in `f32`) is converted, multiplied
/// and accumulated there, and rounded once.
pub(crate) fn matmul<E: Float>(a: (&[E], &Layout), b: (&[E], &Layout)) -> Vec<E> {
    if TypeId::of::<E>() != TypeId::of::<E::Acc>() {
        let wide = |(x, l): (&[E], &Layout)| -> (Vec<E::Acc>, Layout) {
            // A broadcast batch (stride 0) is converted once and stays broadcast.
            let dims = &l.dims;
            let (read, flat) = if l.strides[0] == 0 {
                let one = Layout {
                    dims: crate::shape::Dims::new(&[1, dims[1], dims[2]]),
                    ..*l
                };
                (one, Layout::contiguous(&[1, dims[1], dims[2]]).expand(dims))
            } else {
                (*l, Layout::contiguous(dims))
            };
            let x = strided_to_vec(x, &read).into_iter().map(E::to_acc);
            (x.collect(), flat)
        };
        let (wa, la) = wide(a);
        let (wb, lb) = wide(b);
        let out = matmul::<E::Acc>((&wa, &la), (&wb, &lb));
        return out.into_iter().map(E::from_acc).collect();
    }
    let (la, lb) = (a.1, b.1);
    let (batch, m, k, n) = (la.dims[0], la.dims[1], la.dims[2], lb.dims[2]);
    let mut out = vec![E::ZERO; batch * m * n];
    if m * n == 0 {
        return out;
    }
    let parallelism = if m * n * k >= 48 * 48 * 48 {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    };
    let s = |l: &Layout, i: usize| l.strides[i] as isize;
    for (i, dst) in out.chunks_mut(m * n).enumerate() {
        let a_start = la.offset + i * la.strides[0];
        let b_start = lb.offset + i * lb.strides[0];
        // The views were built by `RawTensor` from tensors whose buffers hold every
        // element they address, so these reads stay inside `a.0` and `b.0`.
        assert!(
            a_start < a.0.len() || m * k == 0,
            "matmul: lhs view out of bounds"
        );
        assert!(
            b_start < b.0.len() || k * n == 0,
            "matmul: rhs view out of bounds"
        );
        // SAFETY: dst is m×n row-major; lhs/rhs pointers with their strides address
        // only elements inside the views (checked by the layout invariants above).
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.0.as_ptr().add(a_start),
                s(la, 2),
                s(la, 1),
                b.0.as_ptr().add(b_start),
                s(lb, 2),
                s(lb, 1),
                E::ZERO,
                E::ONE,
                false,
                false,
                false,
                parallelism,
            );
        }
    }
    out
}
