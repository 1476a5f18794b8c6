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
    if m * n == 0 {
        return Vec::new();
    }
    let parallelism = if m * n * k >= 48 * 48 * 48 {
        Parallelism::Rayon(0)
    } else {
        Parallelism::None
    };
    let s = |l: &Layout, i: usize| l.strides[i] as isize;
    let products = |out: super::buffers::Unwritten<E>| {
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
            // Without `read_dst`, gemm writes every element of dst before it reads
            // any (its first K block stores, later ones add; a K of 0 stores zeros).
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    dst.as_mut_ptr().cast::<E>(),
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
    };
    // SAFETY: the chunks cover the output, and gemm writes every element of each
    // (see above).
    unsafe { super::buffers::filled_by(batch * m * n, products) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(batch, m, k) × (batch, k, n)` one multiply-add at a time, in f64.
    fn naive(a: &[f32], la: &Layout, b: &[f32], lb: &Layout) -> Vec<f32> {
        let (batch, m, k, n) = (la.dims[0], la.dims[1], la.dims[2], lb.dims[2]);
        let at = |l: &Layout, i: usize, r: usize, c: usize| {
            l.offset + i * l.strides[0] + r * l.strides[1] + c * l.strides[2]
        };
        let mut out = Vec::new();
        for i in 0..batch {
            for r in 0..m {
                for c in 0..n {
                    let dot: f64 = (0..k)
                        .map(|j| a[at(la, i, r, j)] as f64 * b[at(lb, i, j, c)] as f64)
                        .sum();
                    out.push(dot as f32);
                }
            }
        }
        out
    }

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 17)
            .map(|x| x as f32 - 8.0)
            .collect()
    }

    /// Every element of the (never zeroed) output is written: batches, a
    /// broadcast batch, a transposed operand, large products split across
    /// threads, and a K of 0 (zeros).
    #[test]
    fn every_output_element_is_written() {
        for &(batch, m, k, n, broadcast_b, transposed_a) in &[
            (1, 3, 0, 5, false, false),
            (2, 4, 0, 3, true, false),
            (1, 5, 7, 3, false, false),
            (3, 6, 9, 4, true, false),
            (2, 5, 8, 6, false, true),
            (1, 96, 80, 72, false, true),
        ] {
            let a = values(batch * m * k, 1);
            let b = values(if broadcast_b { k * n } else { batch * k * n }, 2);
            let la = if transposed_a {
                Layout::contiguous(&[batch, k, m]).permute(&[0, 2, 1])
            } else {
                Layout::contiguous(&[batch, m, k])
            };
            let lb = if broadcast_b {
                Layout::contiguous(&[1, k, n]).expand(&[batch, k, n])
            } else {
                Layout::contiguous(&[batch, k, n])
            };
            // A freed block of NaNs, likely handed out again for the output: an
            // element left unwritten would show.
            drop(std::hint::black_box(vec![f32::NAN; batch * m * n]));
            let got = matmul::<f32>((&a, &la), (&b, &lb));
            assert_eq!(got, naive(&a, &la, &b, &lb), "{batch}×{m}×{k}×{n}");
        }
    }
}
