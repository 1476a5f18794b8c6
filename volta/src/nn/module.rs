//! How optimisers reach the parameters of a model.
use crate::autograd::Gradients;
use crate::backend::Backend;
use crate::dtype::Float;
use crate::shape::{Shape, ShapeError};
use crate::tensor::{RawTensor, Tensor};

/// One trainable tensor, seen without its shape type so that an optimiser can update
/// parameters of every shape through one loop.
pub trait Param<D: Backend<E>, E: Float> {
    /// The current value.
    fn value(&self) -> &RawTensor<D, E>;
    /// This parameter's gradient in `grads`; `None` when the loss did not depend on it.
    fn grad(&self, grads: &Gradients<D, E>) -> Option<RawTensor<D, E>>;
    /// Replaces the value with `value` as a new tracked leaf (the next forward pass
    /// records gradients for it). Fails when `value`'s dims differ from the
    /// parameter's type.
    fn update(&mut self, value: RawTensor<D, E>) -> Result<(), ShapeError>;
}

impl<S: Shape, D: Backend<E>, E: Float> Param<D, E> for Tensor<S, D, E> {
    fn value(&self) -> &RawTensor<D, E> {
        self.raw()
    }
    fn grad(&self, grads: &Gradients<D, E>) -> Option<RawTensor<D, E>> {
        grads.get(self).map(|g| g.raw().clone())
    }
    fn update(&mut self, value: RawTensor<D, E>) -> Result<(), ShapeError> {
        *self = Tensor::try_from_raw(value.tracked_leaf())?;
        Ok(())
    }
}

/// A model or layer: something that holds parameters.
///
/// `visit_params` must visit the same parameters in the same order on every call:
/// optimisers keep their per-parameter state (momentum, Adam moments) by position.
/// A struct of layers implements it by visiting each field in turn:
///
/// ```
/// use volta::prelude::*;
/// use volta::nn::{Module, Param};
///
/// struct Mlp {
///     hidden: Linear<4, 8>,
///     out: Linear<8, 2>,
/// }
/// impl Module<Cpu, f32> for Mlp {
///     fn visit_params(&mut self, f: &mut dyn FnMut(&mut dyn Param<Cpu, f32>)) {
///         self.hidden.visit_params(f);
///         self.out.visit_params(f);
///     }
/// }
/// let mut rng = Rng::seed(0);
/// let mut mlp = Mlp { hidden: Linear::new(&mut rng), out: Linear::new(&mut rng) };
/// assert_eq!(mlp.param_count(), 4 * 8 + 8 + 8 * 2 + 2);
/// ```
pub trait Module<D: Backend<E>, E: Float> {
    /// Calls `f` on every parameter, in a fixed order.
    fn visit_params(&mut self, f: &mut dyn FnMut(&mut dyn Param<D, E>));

    /// The number of scalar parameters.
    fn param_count(&mut self) -> usize {
        let mut n = 0;
        self.visit_params(&mut |p| n += p.value().layout().numel());
        n
    }
}

/// A bare tensor is a module with one parameter (a learned embedding, a scale).
impl<S: Shape, D: Backend<E>, E: Float> Module<D, E> for Tensor<S, D, E> {
    fn visit_params(&mut self, f: &mut dyn FnMut(&mut dyn Param<D, E>)) {
        f(self);
    }
}

/// A vector of modules visits each in order.
impl<M: Module<D, E>, D: Backend<E>, E: Float> Module<D, E> for Vec<M> {
    fn visit_params(&mut self, f: &mut dyn FnMut(&mut dyn Param<D, E>)) {
        for m in self {
            m.visit_params(f);
        }
    }
}

macro_rules! tuple_module {
    ($($m:ident $i:tt),*) => {
        /// A tuple of modules visits each element in order.
        impl<D: Backend<E>, E: Float, $($m: Module<D, E>),*> Module<D, E> for ($($m,)*) {
            fn visit_params(&mut self, f: &mut dyn FnMut(&mut dyn Param<D, E>)) {
                $(self.$i.visit_params(f);)*
            }
        }
    };
}
tuple_module!(A 0, B 1);
tuple_module!(A 0, B 1, C 2);
tuple_module!(A 0, B 1, C 2, F 3);
tuple_module!(A 0, B 1, C 2, F 3, G 4);
tuple_module!(A 0, B 1, C 2, F 3, G 4, H 5);
