//! Normalisation of rows along an axis (layer norm, RMS norm, and batch norm
//! through a permuted view): one backend kernel computing the statistics and
//! writing the row, and one for the gradient (`Backend::normalize_grad`).
use crate::autograd::Op;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::tensor::RawTensor;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// Normalises each row along `axis`: with `center`, `(x − mean)/√(var + eps)`
    /// (the biased variance, computed in two passes); without (RMS),
    /// `x/√(mean(x²) + eps)`. No affine parameters: layers scale and shift after.
    ///
    /// ```
    /// use volta::{Cpu, RawTensor};
    /// let x = RawTensor::<Cpu, f64>::from_vec(vec![1.0, 3.0], &[1, 2]);
    /// assert_eq!(x.normalize(1, true, 0.0).to_vec(), vec![-1.0, 1.0]);
    /// assert_eq!(x.normalize(1, false, 0.0).to_vec(), vec![1.0 / 5f64.sqrt(), 3.0 / 5f64.sqrt()]);
    /// ```
    #[track_caller]
    pub fn normalize(&self, axis: usize, center: bool, eps: f64) -> Self {
        assert!(
            axis < self.dims().len(),
            "normalize: axis {axis} out of range for {:?}",
            self.dims()
        );
        assert!(eps >= 0.0, "normalize: eps must be non-negative, got {eps}");
        let eps = E::from_f64(eps);
        let buf = D::normalize(self.view(), axis, center, eps);
        Self::from_op(
            buf,
            Layout::contiguous(self.dims()),
            || Op::Normalize(self.clone(), axis, center, eps),
            &[self],
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::cpu::Cpu;
    use crate::tensor::RawTensor;
    use volta_kernels::{BinaryOp, ReduceOp};

    /// The gradient of `Σ w · normalize(x)` against central differences, in f64:
    /// layer and RMS norms, along the last axis (rows in memory order) and a
    /// middle one (interleaved rows), of a contiguous and a permuted input.
    #[test]
    fn the_gradient_matches_central_differences() {
        let dims = [3, 5, 18];
        let n: usize = dims.iter().product();
        let values = |seed: f64| -> Vec<f64> {
            (0..n)
                .map(|i| ((i as f64 + seed) * 0.7131).sin() * 1.5 + 0.3)
                .collect()
        };
        let (x0, w) = (values(0.0), values(5.0));
        for (axis, center, permuted) in [
            (2, true, false),
            (2, false, false),
            (1, true, false),
            (1, false, true),
            (2, true, true),
        ] {
            // The input: contiguous `dims`, or a `[3, 18, 5]` store read as `dims`.
            let input = |x: &[f64]| {
                if permuted {
                    let mut store = vec![0.0; n];
                    for a in 0..3 {
                        for b in 0..5 {
                            for c in 0..18 {
                                store[(a * 18 + c) * 5 + b] = x[(a * 5 + b) * 18 + c];
                            }
                        }
                    }
                    RawTensor::<Cpu, f64>::from_vec(store, &[3, 18, 5]).tracked_leaf()
                } else {
                    RawTensor::<Cpu, f64>::from_vec(x.to_vec(), &dims).tracked_leaf()
                }
            };
            let view = |t: &RawTensor<Cpu, f64>| {
                if permuted {
                    t.permute(&[0, 2, 1])
                } else {
                    t.clone()
                }
            };
            let weights = RawTensor::<Cpu, f64>::from_vec(w.clone(), &dims);
            let loss = |t: &RawTensor<Cpu, f64>| {
                view(t)
                    .normalize(axis, center, 1e-5)
                    .binary(BinaryOp::Mul, &weights)
                    .reduce_all(ReduceOp::Sum)
            };
            let leaf = input(&x0);
            let grads = loss(&leaf).backward();
            let got = grads.get_raw(leaf.id()).expect("a gradient").to_vec();
            // The gradient in the store's order, back to `dims` order.
            let at = |i: usize| {
                if permuted {
                    let (a, b, c) = (i / 90, i / 18 % 5, i % 18);
                    (a * 18 + c) * 5 + b
                } else {
                    i
                }
            };
            let h = 1e-6;
            for i in 0..n {
                let mut up = x0.clone();
                up[i] += h;
                let mut down = x0.clone();
                down[i] -= h;
                let value = |x: &[f64]| loss(&input(x)).to_vec()[0];
                let want = (value(&up) - value(&down)) / (2.0 * h);
                let g = got[at(i)];
                assert!(
                    (g - want).abs() < 1e-6 * (1.0 + want.abs()),
                    "axis {axis}, center {center}, permuted {permuted}, [{i}]: {g} vs {want}"
                );
            }
        }
    }
}
