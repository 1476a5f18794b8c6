//! The result of `backward()`: gradients keyed by tensor.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::Shape;
use crate::tensor::{RawTensor, Tensor, TensorId};
use std::collections::HashMap;
use volta_kernels::BinaryOp;

/// Gradients of a scalar with respect to the tracked leaves it depends on.
///
/// Accumulate over micro-batches with [`accumulate`](Self::accumulate); reset with
/// [`clear`](Self::clear).
pub struct Gradients<D: Backend<E>, E: Float = f32> {
    grads: HashMap<TensorId, RawTensor<D, E>>,
}

impl<D: Backend<E>, E: Float> Default for Gradients<D, E> {
    fn default() -> Self {
        Gradients {
            grads: HashMap::new(),
        }
    }
}

impl<D: Backend<E>, E: Float> Gradients<D, E> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The gradient of `t`, with `t`'s own type; `None` if the loss does not depend
    /// on it (or it is not tracked).
    pub fn get<S: Shape>(&self, t: &Tensor<S, D, E>) -> Option<Tensor<S, D, E>> {
        self.grads
            .get(&t.id())
            .map(|g| Tensor::try_from_raw(g.clone()).expect("a gradient has its tensor's dims"))
    }

    /// The gradient of the tensor `id` as recorded (run-time dims).
    pub fn get_raw(&self, id: TensorId) -> Option<&RawTensor<D, E>> {
        self.grads.get(&id)
    }

    /// Every gradient with its tensor's id, consuming the store (in no particular
    /// order).
    pub fn into_raw(self) -> impl Iterator<Item = (TensorId, RawTensor<D, E>)> {
        self.grads.into_iter()
    }

    /// Adds `g` to the gradient of the tensor `id`.
    pub(crate) fn add_raw(&mut self, id: TensorId, g: RawTensor<D, E>) {
        let merged = match self.grads.remove(&id) {
            Some(old) => old.binary(BinaryOp::Add, &g),
            None => g,
        };
        self.grads.insert(id, merged);
    }

    /// Adds every gradient of `other` into `self` (gradient accumulation).
    pub fn accumulate(&mut self, other: Gradients<D, E>) {
        let _guard = super::no_grad();
        for (id, g) in other.grads {
            self.add_raw(id, g);
        }
    }

    /// Forgets every gradient (zeroing).
    pub fn clear(&mut self) {
        self.grads.clear();
    }

    /// Number of tensors with a gradient.
    pub fn len(&self) -> usize {
        self.grads.len()
    }

    /// Whether no tensor has a gradient.
    pub fn is_empty(&self) -> bool {
        self.grads.is_empty()
    }

    /// Every gradient, mutably, with its tensor's id (in no particular order).
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (TensorId, &mut RawTensor<D, E>)> {
        self.grads.iter_mut().map(|(id, g)| (*id, g))
    }

    /// Removes and returns the gradient of tensor `id`.
    pub(crate) fn take_raw(&mut self, id: TensorId) -> Option<RawTensor<D, E>> {
        self.grads.remove(&id)
    }
}
