//! Layers and losses: [`Linear`], the [`Module`] trait through which optimisers
//! reach parameters, and [`loss`] functions.
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

mod linear;
pub mod loss;
mod module;

pub use linear::Linear;
pub use module::{Module, Param};
