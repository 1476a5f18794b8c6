//! Flattening every axis but the batch axis.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::shape::{BatchFirst, Const};
use crate::tensor::Tensor;

/// `(B, d₁, …, dₖ) → (B, d₁·…·dₖ)`, as PyTorch's `nn.Flatten()`; the flattened
/// width `N` is named by the result type (a `model!` block computes it).
///
/// ```
/// use volta::prelude::*;
/// let x = Tensor::<Rank4<2, 3, 4, 5>>::zeros();
/// let y: Tensor<Rank2<2, 60>> = Flatten.forward(&x);
/// # let _ = y;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flatten;

impl Flatten {
    /// Flattens all axes after the first.
    ///
    /// # Panics
    /// When those axes do not hold `N` elements per sample.
    pub fn forward<S: BatchFirst, const N: usize, D: Backend<E>, E: Float>(
        &self,
        x: &Tensor<S, D, E>,
    ) -> Tensor<(S::Batch, Const<N>), D, E> {
        let b = x.dims()[0];
        let per_sample: usize = x.dims()[1..].iter().product();
        assert_eq!(
            per_sample,
            N,
            "Flatten: {:?} holds {per_sample} elements per sample, the result type says {N}",
            &x.dims()[1..]
        );
        Tensor::from_raw((x.shape().batch(), Const), x.raw().reshape(&[b, N]))
    }
}

impl<D: Backend<E>, E: Float> Module<D, E> for Flatten {
    fn visit(&mut self, _: &mut Visitor<'_, D, E>) {}
}

impl<E: Float> ToDevice<E> for Flatten {
    type On<D2: Backend<E>> = Flatten;
    fn to<D2: Backend<E>>(&self) -> Flatten {
        *self
    }
}
