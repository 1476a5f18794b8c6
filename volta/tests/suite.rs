//! Volta's integration tests, as one test binary: each file below links volta and
//! wgpu once here instead of once per file, which saved minutes of every fresh
//! build. GPU tests take turns through `support::gpu_shared` / `gpu_alone`, since
//! the GPU's settings, counters and capture are process-wide.
//!
//! Tests that must own the whole process (they set the environment before the GPU
//! opens, limit its memory or lose the device) stay binaries of their own; see
//! `volta/Cargo.toml`.

mod support;

mod adapter_choice;
mod anomaly;
mod async_api;
mod attention_gpu;
mod checkpoint;
mod constructors;
mod data;
mod f16;
mod fuzz_readers;
mod ggml_blocks;
mod gguf;
mod gpu_backward_memory;
mod gpu_bind_groups;
mod gpu_grid;
mod gpu_kernel;
mod gpu_parity;
mod gpu_parity_random;
mod gpu_tensor_cores;
mod inference;
mod kernel;
mod layers_gpu;
mod llama;
// This one, `smollm2` and `tokenizer` read the real model's vocabulary through
// the tokenizer (the `tokenizers` feature).
#[cfg(feature = "tokenizers")]
mod llama_reference;
mod model;
mod model_sequences;
mod optim_gpu;
mod quiet_probe;
mod smoke;
#[cfg(feature = "tokenizers")]
mod smollm2;
#[cfg(feature = "tokenizers")]
mod tokenizer;
