//! Files: [`gguf`] model files (llama.cpp's format, with their [`quant`]ised
//! blocks), and model checkpoints in the [safetensors](https://huggingface.co/docs/safetensors)
//! format, named by the model's parameter paths (`conv1.weight`), so PyTorch's
//! `safetensors.torch.save_file(model.state_dict(), …)` and Volta read each other's
//! files.
//!
//! ```
//! use volta::prelude::*;
//!
//! model! {
//!     /// A tiny classifier.
//!     pub struct Net for (B, 4) -> (B, 2) { fc: Linear<2> }
//! }
//! let dir = std::env::temp_dir().join(format!("volta-io-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("net.safetensors");
//!
//! let mut net = Net::<Cpu>::new(&mut Rng::seed(1));
//! volta::io::save(&path, &mut net).unwrap();
//!
//! let mut other = Net::<Cpu>::new(&mut Rng::seed(2));
//! volta::io::load(&path, &mut other).unwrap();
//! assert_eq!(other.fc.weight.to_vec(), net.fc.weight.to_vec());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod checkpoint;
mod dtype;
mod error;
pub mod gguf;
pub mod quant;

pub use checkpoint::{Metadata, load, load_bytes, load_training, save, save_training};
pub use dtype::FileDtype;
pub use error::{CheckpointError, Mismatch};
