//! The data pipeline: datasets, file readers and the batching loader.
//!
//! - [`Dataset`] — indexed labelled samples; [`Labelled`] holds them in memory,
//!   with seeded shuffles and train/test splits.
//! - [`readers`] — the digits CSV, MNIST-style IDX files and generic CSV, with one
//!   typed error, [`DataError`], that names the file and the place in it.
//! - [`DataLoader`] — typed batches (`Const<N>` or `usize` batch dims) on `Cpu` or
//!   `Gpu`, shuffled per epoch from a seed, prepared on a prefetch thread.
//!
//! ```no_run
//! use volta::Rng;
//! use volta::data::{DataLoader, readers::digits};
//! use volta::prelude::*;
//!
//! let data = digits::load("data/digits.csv.gz")?;
//! let (train, _test) = data.split(0.2, &mut Rng::seed(0));
//! let loader = DataLoader::new(train)
//!     .features::<Rank3<1, 8, 8>>()?
//!     .batch::<64>()
//!     .drop_last()
//!     .shuffle(0)
//!     .device::<Gpu>();
//! for epoch in 0..10 {
//!     for batch in loader.epoch(epoch) {
//!         let x: Tensor<Rank4<64, 1, 8, 8>, Gpu> = batch.inputs;
//!         let y: Tensor<Rank1<64>, Gpu, u32> = batch.targets;
//!         # let _ = (x, y);
//!     }
//! }
//! # Ok::<(), volta::data::DataError>(())
//! ```

mod dataset;
mod error;
mod loader;
pub mod readers;

pub use dataset::{Dataset, Labelled, Sample};
pub use error::{DataError, Position};
pub use loader::{Batch, DEFAULT_PREFETCH, DataLoader, Epoch, batching};
