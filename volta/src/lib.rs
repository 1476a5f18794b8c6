//! # Volta
//!
//! Typed tensors for Rust: a tensor's **shape** and **device** are part of its type,
//! so shape and device mistakes are compile errors with readable messages.
//!
//! ```
//! use volta::prelude::*;
//!
//! let mut rng = Rng::seed(0);
//! let x = Tensor::<Rank2<4, 3>>::randn(&mut rng);
//! let w = Tensor::<Rank2<3, 2>>::randn(&mut rng).requires_grad();
//! let loss = x.matmul(&w).relu().sum_all();
//! let grads = loss.backward();
//! let gw: Tensor<Rank2<3, 2>> = grads.get(&w).unwrap();
//! # let _ = gw;
//! ```
//!
//! Layers: [`shape`] (type-level shape algebra) → [`tensor`] and [`autograd`] →
//! [`backend`] (devices supply kernels) → ops (written once for all devices).

#![warn(missing_docs)]

// Generated code names `::volta`; this makes those paths work inside the crate too.
extern crate self as volta;

pub mod autograd;
pub mod backend;
pub mod data;
#[cfg(feature = "distributed")]
pub mod distributed;
pub mod dtype;
pub mod io;
pub mod kernel;
pub mod layout;
pub mod models;
pub mod nn;
mod ops;
pub mod optim;
pub mod random;
pub mod shape;
pub mod tensor;

pub use autograd::{Gradients, NoGradGuard, grad_enabled, no_grad};
pub use backend::cpu::Cpu;
pub use backend::gpu::Gpu;
pub use backend::{Backend, Cast, Device, Memory};
pub use ops::SameDevice;
pub use random::Rng;
/// Defines a user kernel from a scalar Rust function (see [`kernel`](mod@kernel)).
pub use volta_macros::kernel;
pub use volta_macros::{Module, model};
// The shape vocabulary at the root: shorter to write, and rustc's messages then name
// `volta::Const<3>` rather than `volta::shape::Const<3>`.
pub use shape::{
    Axes2, Axes3, Axes4, Axes5, Axes6, Axis, Const, Dim, Dyn, Rank0, Rank1, Rank2, Rank3, Rank4,
    Rank5, Rank6, Shape,
};
pub use tensor::{RawTensor, Tensor, TensorId};
// The sliding-window geometry of `RawTensor::unfold2d` and `RawTensor::fold2d`.
pub use volta_kernels::{Window2d, WindowError};

/// Everything a model file needs.
pub mod prelude {
    pub use crate::backend::{Backend, Device};
    pub use crate::dtype::{Element, Float};
    pub use crate::nn::layers::*;
    pub use crate::nn::{Forward, Model, Module, Residual, ToDevice};
    pub use crate::optim::{
        Adam, CosineWarmup, LrSchedule, OneCycle, Optimizer, Sgd, StepLr, clip_grad_norm,
    };
    pub use crate::shape::*;
    pub use crate::{Cpu, Gpu, Gradients, Rng, Tensor, no_grad};
    pub use crate::{Module, model};
}
