//! The layer set. Each layer is generic over device and float type, holds its
//! parameters as typed tensors, and is a [`Module`](super::Module).

mod activation;
mod attention;
mod conv;
mod dropout;
mod embedding;
mod flatten;
mod linear;
mod norm;
mod pool;
mod positional;
mod transformer;

pub use activation::{Gelu, Relu, Sigmoid, Silu, Tanh};
pub use attention::{AttentionCache, MultiHeadAttention};
pub use conv::{Conv2d, Conv2dOptions};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use flatten::Flatten;
pub use linear::Linear;
pub use norm::{BatchNorm2d, LayerNorm, RmsNorm};
pub use pool::{AvgPool2d, GlobalAvgPool2d, MaxPool2d};
pub use positional::PositionalEmbedding;
pub use transformer::{
    BlockNorm, BlockOptions, FeedForward, FeedForwardKind, NormKind, TransformerBlock,
};
pub use volta_kernels::{Window2d, WindowError};

/// A sequence `(B, T, C)`, as the sequence layers take and return it.
type Sequence<B, T, const C: usize, D, E> =
    crate::tensor::Tensor<(B, T, crate::shape::Const<C>), D, E>;
