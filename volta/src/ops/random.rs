//! Random tensors made on the device: a counter-based generator, so that a seed
//! gives the same values on every device and no host data is uploaded.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::layout::Layout;
use crate::tensor::RawTensor;

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// Uniform numbers in `[0, 1)` with `dims`, an untracked leaf: element `i`
    /// (row-major) depends only on `(seed, i)` and is the same, bit for bit, on every
    /// device ([`uniform_at`](crate::random::uniform_at)). Different seeds give
    /// unrelated streams; draw a fresh seed per call (e.g. per dropout step).
    ///
    /// ```
    /// use volta::{Cpu, RawTensor};
    /// let u = RawTensor::<Cpu, f32>::uniform(&[2, 3], 7);
    /// assert!(u.to_vec().iter().all(|&v| (0.0..1.0).contains(&v)));
    /// assert_eq!(u.to_vec(), RawTensor::<Cpu, f32>::uniform(&[6], 7).to_vec());
    /// ```
    #[track_caller]
    pub fn uniform(dims: &[usize], seed: u64) -> Self {
        let layout = Layout::contiguous(dims);
        Self::leaf(D::uniform(layout.numel(), seed), layout)
    }
}
