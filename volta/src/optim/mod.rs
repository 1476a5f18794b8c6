//! Optimisers: update a model's parameters from the gradients of `loss.backward()`.
//!
//! ```
//! use volta::prelude::*;
//! use volta::nn::loss::mse;
//!
//! let mut rng = Rng::seed(0);
//! let mut layer = Linear::<2, 1>::new(&mut rng);
//! let mut opt = Sgd::new(0.1);
//! let x = Tensor::<Rank2<4, 2>>::randn(&mut rng);
//! let y = Tensor::<Rank2<4, 1>>::zeros();
//! let before = mse(&layer.forward(&x), &y).item();
//! for _ in 0..20 {
//!     let grads = mse(&layer.forward(&x), &y).backward();
//!     opt.step(&mut layer, &grads);
//! }
//! assert!(mse(&layer.forward(&x), &y).item() < before);
//! ```
//!
//! Updates run under [`no_grad`] and replace each parameter with a
//! new tracked leaf, so no autograd graph grows across steps. Per-parameter state
//! (momentum, moments) is kept by the parameter's position in
//! [`Module::visit_params`]: one optimiser serves one model.

mod adam;
mod sgd;

pub use adam::Adam;
pub use sgd::Sgd;

use crate::autograd::{Gradients, no_grad};
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::{Module, Param};
use crate::tensor::RawTensor;

/// Something that updates parameters from gradients.
pub trait Optimizer<D: Backend<E>, E: Float> {
    /// Updates every parameter of `model` that has a gradient in `grads`; parameters
    /// without one (unused by the loss, or frozen) are left as they are.
    ///
    /// # Panics
    /// When `model` is not the model this optimiser has stepped before (its
    /// parameter dims differ from the stored state).
    fn step<M: Module<D, E> + ?Sized>(&mut self, model: &mut M, grads: &Gradients<D, E>);
}

/// Calls `f(position, parameter, gradient)` for each parameter with a gradient,
/// with gradient recording off.
fn for_each_grad<D: Backend<E>, E: Float, M: Module<D, E> + ?Sized>(
    model: &mut M,
    grads: &Gradients<D, E>,
    mut f: impl FnMut(usize, &mut dyn Param<D, E>, RawTensor<D, E>),
) {
    let _guard = no_grad();
    let mut position = 0;
    model.visit_params(&mut |p| {
        if let Some(g) = p.grad(grads) {
            f(position, p, g);
        }
        position += 1;
    });
}

/// The state slot of the parameter at `position` (grown on first use), checked
/// against the parameter's dims.
fn slot<'a, T>(
    states: &'a mut Vec<Option<T>>,
    position: usize,
    dims: &[usize],
    state_dims: impl Fn(&T) -> &[usize],
) -> &'a mut Option<T> {
    if states.len() <= position {
        states.resize_with(position + 1, || None);
    }
    if let Some(s) = &states[position] {
        assert_eq!(
            state_dims(s),
            dims,
            "optimiser state for parameter #{position} does not fit it: \
             an optimiser serves the one model it was first stepped with"
        );
    }
    &mut states[position]
}

/// Panics unless `value` is finite and within `range` (hyperparameter checks).
#[track_caller]
fn check(name: &str, value: f64, ok: bool, expected: &str) {
    assert!(
        value.is_finite() && ok,
        "{name} must be {expected}, got {value}"
    );
}
