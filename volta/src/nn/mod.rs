//! Layers, models and losses: the [`layers`] (each a [`Module`]), the traits a
//! `model!` struct implements ([`Model`], [`Forward`]), named parameters and
//! train/eval modes ([`Module`], [`Visitor`]), device moves ([`ToDevice`]),
//! [`Summary`] tables, [`loss`] functions and classification [`metrics`].
//!
//! Layer sizes are const generics, so wiring a layer's output into a layer that
//! expects another width is a compile error:
//!
//! ```compile_fail
//! use volta::prelude::*;
//! let mut rng = Rng::seed(0);
//! let first = Linear::<784, 128>::new(&mut rng);
//! let second = Linear::<64, 10>::new(&mut rng);
//! let x = Tensor::<Rank2<32, 784>>::zeros();
//! let _ = second.forward(&first.forward(&x)); // 128 outputs into 64 inputs
//! ```

pub mod functional;
mod kv_store;
pub mod layers;
pub mod loss;
pub mod metrics;
mod model;
mod module;
mod padding;
mod summary;

pub use crate::ops::attention::{attention, causal_attention, padded_attention};
pub use kv_store::KvStore;
pub use layers::*;
pub use model::{Forward, Model, Residual, ResidualShape};
pub use module::{Entry, Module, Param, ToDevice, Visitor};
pub use padding::padded_mean_pool;
pub use summary::{Summary, SummaryRow, sample_shape};
