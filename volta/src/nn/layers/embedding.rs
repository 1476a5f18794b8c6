//! Embedding tables: rows looked up by integer ids.
use crate::backend::Backend;
use crate::backend::cpu::Cpu;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::random::Rng;
use crate::shape::{AppendDim, Const, Rank2};
use crate::tensor::Tensor;

/// A table of `V` vectors of width `M`; `forward` replaces each id by its row, so
/// ids of shape `S` give `S` followed by `M` (`(B, T)` → `(B, T, M)`), as PyTorch's
/// `nn.Embedding(V, M)` (rows drawn from N(0, 1)). The gradient of a row is the sum
/// of the gradients at the positions that read it.
///
/// ```
/// use volta::prelude::*;
/// let mut rng = Rng::seed(0);
/// let emb = Embedding::<10, 4>::new(&mut rng);
/// let ids = Tensor::<Rank2<2, 3>, Cpu, u32>::from_array([[1, 2, 3], [9, 0, 1]]);
/// let x: Tensor<Rank3<2, 3, 4>> = emb.forward(&ids);
/// assert_eq!(x.to_vec()[..4], emb.weight.to_vec()[4..8]);
/// ```
#[derive(Clone, Debug)]
pub struct Embedding<const V: usize, const M: usize, D: Backend<E> = Cpu, E: Float = f32> {
    /// The `V × M` table.
    pub weight: Tensor<Rank2<V, M>, D, E>,
}

impl<const V: usize, const M: usize, D: Backend<E>, E: Float> Embedding<V, M, D, E> {
    /// A table drawn from N(0, 1).
    pub fn new(rng: &mut Rng) -> Self {
        Embedding {
            weight: Tensor::randn(rng).requires_grad(),
        }
    }

    /// A layer over the given table (tracked as given).
    pub fn from_tensor(weight: Tensor<Rank2<V, M>, D, E>) -> Self {
        Embedding { weight }
    }

    /// Looks up every id. An id `≥ V` panics on the CPU and is reported as an error
    /// at the next sync on the GPU.
    pub fn forward<S: AppendDim<Const<M>>>(
        &self,
        ids: &Tensor<S, D, u32>,
    ) -> Tensor<S::Output, D, E> {
        let n = ids.numel();
        let flat = ids.raw().reshape_any(&[n]);
        let rows = self.weight.raw().index_select(&flat);
        let mut dims = ids.dims().to_vec();
        dims.push(M);
        Tensor::from_raw(ids.shape().append(Const), rows.reshape(&dims))
    }
}

impl<const V: usize, const M: usize, D: Backend<E>, E: Float> Module<D, E>
    for Embedding<V, M, D, E>
{
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.param("weight", &mut self.weight);
    }
}

impl<const V: usize, const M: usize, D: Backend<E>, E: Float> ToDevice<E>
    for Embedding<V, M, D, E>
{
    type On<D2: Backend<E>> = Embedding<V, M, D2, E>;
    fn to<D2: Backend<E>>(&self) -> Embedding<V, M, D2, E> {
        Embedding {
            weight: self.weight.to::<D2>(),
        }
    }
}
