//! Learned absolute positions (GPT-2's `wpe`): row `p` of a table is added to the
//! features of the token at position `p`.
use super::Sequence;
use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::random::Rng;
use crate::shape::{Const, Dim, Rank2, ShapeError};
use crate::tensor::Tensor;
use volta_kernels::BinaryOp;

/// A table of `MAX_T` learned position vectors of width `C` (drawn from N(0, 1), as
/// [`Embedding`](crate::nn::Embedding)'s tokens and PyTorch's `nn.Embedding`: on the
/// tokens' scale, positions are not drowned by them), added to sequences `(B, T, C)`
/// with `T ≤ MAX_T`.
/// A longer sequence is a [`ShapeError`] from [`try_forward`](Self::try_forward).
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::PositionalEmbedding;
/// let pos = PositionalEmbedding::<8, 4>::new(&mut Rng::seed(0));
/// let x = Tensor::<(Const<1>, usize, Const<4>)>::zeros_shaped((Const, 3, Const));
/// assert_eq!(pos.forward(&x).to_vec(), pos.weight.to_vec()[..12]);
/// let long = Tensor::<(Const<1>, usize, Const<4>)>::zeros_shaped((Const, 9, Const));
/// assert!(pos.try_forward(&long, 0).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct PositionalEmbedding<
    const MAX_T: usize,
    const C: usize,
    D: Backend<E> = Cpu,
    E: Float = f32,
> {
    /// The `MAX_T × C` table (nanoGPT's `wpe.weight`).
    pub weight: Tensor<Rank2<MAX_T, C>, D, E>,
}

impl<const MAX_T: usize, const C: usize, D: Backend<E>, E: Float>
    PositionalEmbedding<MAX_T, C, D, E>
{
    /// A table drawn from N(0, 1).
    pub fn new(rng: &mut Rng) -> Self {
        PositionalEmbedding {
            weight: Tensor::<Rank2<MAX_T, C>, D, E>::randn(rng).requires_grad(),
        }
    }

    /// Adds positions `start..start + T` to `x`, or says why the sequence does not
    /// fit the table.
    pub fn try_forward<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
        start: usize,
    ) -> Result<Sequence<B, T, C, D, E>, ShapeError> {
        let (b, t) = (x.dims()[0], x.dims()[1]);
        if start + t > MAX_T {
            return Err(ShapeError::Mismatch {
                expected: format!(
                    "a sequence of at most {MAX_T} positions (PositionalEmbedding<{MAX_T}, {C}>), \
                     here from position {start}"
                ),
                found: x.dims().to_vec(),
            });
        }
        let rows = self
            .weight
            .raw()
            .narrow(0, start, t)
            .reshape(&[1, t, C])
            .expand(&[b, t, C]);
        Ok(x.map_raw(|r| r.binary(BinaryOp::Add, &rows)))
    }

    /// [`try_forward`](Self::try_forward) from position 0.
    ///
    /// # Panics
    /// When the sequence is longer than `MAX_T`, with the error's text.
    #[track_caller]
    pub fn forward<B: Dim, T: Dim>(
        &self,
        x: &Tensor<(B, T, Const<C>), D, E>,
    ) -> Tensor<(B, T, Const<C>), D, E> {
        self.try_forward(x, 0).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl<const MAX_T: usize, const C: usize, D: Backend<E>, E: Float> Module<D, E>
    for PositionalEmbedding<MAX_T, C, D, E>
{
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("weight", &mut self.weight);
    }
}

impl<const MAX_T: usize, const C: usize, D: Backend<E>, E: Float> ToDevice<E>
    for PositionalEmbedding<MAX_T, C, D, E>
{
    type On<D2: Backend<E>> = PositionalEmbedding<MAX_T, C, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        PositionalEmbedding {
            weight: self.weight.to::<D2>(),
        }
    }
}
