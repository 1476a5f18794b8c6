//! Language-model support: the pieces that sit around a network's tensors.
//!
//! [`chat`]: the ChatML prompt format that SmolLM2-Instruct's GGUF declares.
//! [`sampler`]: the next token from the logits (greedy, temperature, top-k, top-p).
#![cfg_attr(
    feature = "tokenizers",
    doc = "[`tokenizer`]: text ↔ token ids for byte-level BPE vocabularies (GGUF `gpt2` models
such as SmolLM2), built from plain vocabulary data with the `tokenizers` crate (the
`tokenizers` feature, on by default)."
)]
#![cfg_attr(
    not(feature = "tokenizers"),
    doc = "`tokenizer` (text ↔ token ids) needs the `tokenizers` feature."
)]

pub mod chat;
mod kv_batch;
mod kv_cache;
pub mod llama;
pub mod sampler;
#[cfg(feature = "tokenizers")]
pub mod tokenizer;

pub use chat::{ChatTemplate, Message, Role};
pub use kv_batch::KvBatch;
pub use kv_cache::KvCache;
pub use sampler::{Sampler, SamplerConfig, SamplerError};
#[cfg(feature = "tokenizers")]
pub use tokenizer::{
    DecodeState, DecodeStream, PreTokenizer, Tokenizer, TokenizerError, TokenizerSpec,
};
