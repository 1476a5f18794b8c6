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
//!
//! Each parameter's update is one fused pass ([`Backend::adam_step`],
//! [`Backend::sgd_step`]): it reads the parameter, its gradient and its state once
//! and writes them anew, with the hyperparameters ([`AdamStep`], [`SgdStep`]) as
//! run-time arguments, so a changing learning rate compiles nothing. SGD records
//! one dispatch per parameter; Adam steps a model's parameters together
//! ([`Backend::adam_steps`]), up to 32 to a dispatch on the GPU where the adapter
//! binds enough buffers to one kernel (PyTorch's multi-tensor `foreach` step).
//!
//! Around the step:
//!
//! - [`LrSchedule`]s ([`StepLr`], [`CosineWarmup`], [`OneCycle`]) give the learning
//!   rate of each step; set it with [`Optimizer::set_lr`] or
//!   [`LrSchedule::apply`].
//! - [`clip_grad_norm`] scales the gradients to a maximal global norm, on the
//!   device (no read-back).
//!
//! ```
//! use volta::prelude::*;
//! use volta::optim::{LrSchedule, OneCycle, clip_grad_norm};
//!
//! let mut w = Tensor::<Rank1<3>>::from_array([1.0, -2.0, 3.0]).requires_grad();
//! let mut opt = Adam::adamw(1e-2, 0.01);
//! let schedule = OneCycle::new(1e-2, 50);
//! for step in 0..50 {
//!     let mut grads = w.mul(&w).sum_all().backward();
//!     let _norm = clip_grad_norm(&mut grads, 1.0);
//!     schedule.apply(&mut opt, step);
//!     opt.step(&mut w, &grads);
//! }
//! ```

mod adam;
mod clip;
mod schedule;
mod sgd;

pub use crate::backend::{AdamInput, AdamStep, SgdStep};
pub use adam::Adam;
pub use clip::clip_grad_norm;
pub use schedule::{CosineWarmup, LrSchedule, OneCycle, StepLr};
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

    /// The learning rate the next step uses.
    fn lr(&self) -> f64;

    /// Changes the learning rate (what a [schedule](crate::optim) does each step).
    ///
    /// # Panics
    /// When `lr` is negative or not finite.
    fn set_lr(&mut self, lr: f64);

    /// The state a resumed run needs to continue exactly: the step count and the
    /// per-parameter tensors (momentum, moments), for checkpoints.
    fn state(&self) -> OptimizerState<D, E>;

    /// Restores a state [`state`](Self::state) returned, checking it against this
    /// optimiser's kind before anything changes.
    fn load_state(&mut self, state: OptimizerState<D, E>) -> Result<(), StateError>;
}

/// An optimiser's saved state.
#[derive(Clone, Debug)]
pub struct OptimizerState<D: Backend<E>, E: Float> {
    /// Which optimiser wrote it (`"adam"`, `"sgd"`): loading into another kind fails.
    pub kind: String,
    /// Steps taken.
    pub step: u64,
    /// Per-parameter tensors named `"{position}.{slot}"` (`"3.exp_avg"`), where
    /// `position` counts the model's parameters in visiting order.
    pub tensors: Vec<(String, RawTensor<D, E>)>,
}

/// Why an optimiser state could not be loaded.
#[derive(Clone, Debug, PartialEq)]
pub enum StateError {
    /// The state was written by another kind of optimiser.
    Kind {
        /// This optimiser's kind.
        expected: String,
        /// The state's kind.
        found: String,
    },
    /// A tensor name this optimiser does not know (`"3.bogus"`).
    UnknownTensor(String),
    /// A per-parameter step count (`"3.step"`) that is not a whole number in
    /// `0..2³¹ − 1`.
    Step {
        /// The tensor's name.
        name: String,
        /// The value found.
        found: f64,
    },
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::Kind { expected, found } => {
                write!(
                    f,
                    "optimiser state of kind `{found}` cannot load into `{expected}`"
                )
            }
            StateError::UnknownTensor(name) => {
                write!(f, "optimiser state holds an unknown tensor `{name}`")
            }
            StateError::Step { name, found } => write!(
                f,
                "optimiser state `{name}` is {found}, not a step count (a whole number in 0..2^31-1)"
            ),
        }
    }
}

impl std::error::Error for StateError {}

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

/// Fails unless `state` was written by an optimiser of kind `kind`.
fn check_kind<D: Backend<E>, E: Float>(
    kind: &str,
    state: &OptimizerState<D, E>,
) -> Result<(), StateError> {
    if state.kind == kind {
        Ok(())
    } else {
        Err(StateError::Kind {
            expected: kind.to_string(),
            found: state.kind.clone(),
        })
    }
}

/// Splits a state tensor name `"{position}.{slot}"`.
fn split_name(name: &str) -> Result<(usize, &str), StateError> {
    name.split_once('.')
        .and_then(|(p, slot)| Some((p.parse().ok()?, slot)))
        .ok_or_else(|| StateError::UnknownTensor(name.to_string()))
}
