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
