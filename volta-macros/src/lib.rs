//! Procedural macros for Volta.
//!
//! # `#[kernel]`
//!
//! Turns a scalar Rust function into a tensor op with autograd on every device (a
//! runnable example is in the docs of `volta::kernel`):
//!
//! ```text
//! #[kernel]
//! fn swish(x: f32, #[scalar] beta: f32) -> f32 {
//!     x * sigmoid(beta * x)
//! }
//! let y = swish(&t, 1.5); // any shape, Cpu or Gpu, differentiable
//! ```
//!
//! Arguments are `f32`: plain ones are tensors (several tensors must share a shape
//! and device: broadcast explicitly, as for built-in binary ops); `#[scalar]` ones are
//! plain numbers passed as uniforms. The body may use: `let` bindings; float
//! literals; `+ - * / %` and unary `-`; comparisons, `&&`, `||`, `!` inside
//! `if … { … } else { … }` conditions (lowered to `select`); the built-ins `exp ln
//! exp2 log2 sqrt recip relu sigmoid tanh sin cos abs gelu silu floor erf max min
//! powf` as functions, or as float methods (`x.exp()`, `x.max(y)`, `x.powf(y)`,
//! `x.powi(2)`, `x.clamp(a, b)`); `std::f32::consts::*`; and calls of other `#[kernel]`
//! functions. Anything else is a compile error at the offending token.
//!
//! The macro (1) keeps the body as the CPU implementation, so rustc type-checks it;
//! (2) lowers it to the `volta-kernels` IR; (3) derives the partial derivative with
//! respect to every argument symbolically (simplified, shared subexpressions computed
//! once); (4) emits WGSL for the value and each partial, and Rust for the partials;
//! (5) parses and validates that WGSL with naga, reporting any error at the Rust
//! tokens that produced it. `#[kernel(backward = [dx, dy])]` supplies the partials
//! for the tensor arguments by hand, as other `#[kernel]` functions with the same
//! arguments. Non-differentiable pieces follow fixed rules: comparisons, `floor` and
//! `%`'s quotient have derivative 0, `if` routes the gradient to the branch taken,
//! `max`/`min` split it on ties.
#![warn(missing_docs)]

mod kernel;
mod model;
mod module;

use proc_macro::TokenStream;

/// Defines a tensor op from a scalar Rust function; see the crate docs.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    kernel::expand(attr.into(), item.into())
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

/// Defines a typed model struct from a block of layers.
///
/// ```text
/// model! {
///     /// docs
///     pub struct Name for (B, 1, 28, 28) -> (B, 10) {
///         conv1: Conv2d<32, kernel = 3, padding = 1>,  // a layer: a field
///         relu,                                          // a stateless step
///         block: Residual<Block>,                        // another model! struct
///         ...
///     }
/// }
/// ```
///
/// `B` names the batch dim; the other dims are per sample. Layers and their options:
/// `Linear<out, bias>` or `Linear<in, out, bias>`; `Conv2d<out, kernel = k | (kh, kw),
/// stride, padding, dilation, groups, bias>`; `MaxPool2d<k, stride, padding>` and
/// `AvgPool2d<…>` (stride defaults to `k`; the windows must tile the input);
/// `GlobalAvgPool2d`; `BatchNorm2d<eps, momentum>`; `LayerNorm<eps, bias>` and
/// `RmsNorm<eps>` (over the last axis); `Dropout<p>`; `Flatten`; `Relu`, `Gelu`,
/// `Silu`, `Sigmoid`, `Tanh`.
///
/// Over sequences `(B, T, C)`, `T` a name for a dim known at run time or a number
/// (after `to_sequence`): `Embedding<vocabulary, width>` (first, reading token ids
/// `(B, T)`), `PositionalEmbedding<max_positions>`, `MultiHeadAttention<heads,
/// kv_heads, causal, rope, bias, dropout>`, `TransformerBlock<heads, ff, kv_heads,
/// causal, rope, rms, swiglu, dropout, bias>` (`[TransformerBlock<…>; n]`: `n`
/// blocks), `Linear` at each position, and `Tied<wte>`: logits against the table of
/// the block's `Embedding` `wte` (weight tying, as GPT-2's head; no weights of its
/// own). `bias = false` leaves a layer's biases out (nanoGPT's `bias = False`,
/// Llama's layers).
///
/// Any other type is a nested model (a `model!` struct,
/// or `Residual<M>` of one, written without `<D, E>`: it gets the outer model's),
/// checked against the shapes it declares. An option is given once, by name or (the
/// pools' `k`, `Dropout`'s `p`) by position. Bare steps:
/// `relu gelu silu sigmoid tanh flatten`, `to_sequence` (`[B, C, H, W]` →
/// `[B, H·W, C]`: feature maps as tokens) and `mean_pool` (`[B, T, C]` → `[B, C]`).
///
/// The macro computes every shape (with the runtime's window formula), checks every
/// layer, and emits `struct Name<D = Cpu, E = f32>` with one typed public field per
/// layer, `new(&mut Rng)`, `forward` for any batch dim, `summary()`, and the impls of
/// `Module` (named parameters, train/eval), `ToDevice` (`.to::<Gpu>()`), `Model` and
/// `Forward`. Errors point at the offending tokens and name both shapes, after a
/// nested model too (whose output only rustc knows: it reports those, one error per
/// mistake).
#[proc_macro]
pub fn model(input: TokenStream) -> TokenStream {
    model::expand(input.into())
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}

/// Implements `volta::nn::Module` (and `ToDevice`, for structs generic over a
/// `D: Backend<…>`) by visiting every field under its name; `#[module(skip)]`
/// leaves a field out.
#[proc_macro_derive(Module, attributes(module))]
pub fn derive_module(input: TokenStream) -> TokenStream {
    module::expand(input.into())
        .unwrap_or_else(|e| e.to_compile_error())
        .into()
}
