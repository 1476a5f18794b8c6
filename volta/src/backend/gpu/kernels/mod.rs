//! The kernel families: each turns an op on views of device buffers into WGSL
//! launches through the runtime, and knows nothing of tensors, autograd or
//! fusion. A family's source generators live beside its launcher.
//!
//! - `elementwise`: maps, zips, fills, casts and strided copies (generated);
//!   the copy between layouts that other families use to place results.
//! - `rows`: reductions, softmax and normalisation along an axis (generated).
//! - `matmul`: register-tiled (`tiled`) and tensor-core (`coop`) products,
//!   split-K, and the tiles tuned per adapter (`tuning`).
//! - `index`: gather and scatter-add. `window`: im2col and its adjoint, random
//!   fills. `optim`: the fused SGD-momentum and Adam steps. `infer`: quantised
//!   matmul, dequantisation and the language model's attention. `attention`:
//!   fused attention for training, forward and backward; `attention_coop` and
//!   `attention_coop_backward` the same on tensor cores (generated).
//! - `slices`: running any of them in slices when an operand is larger than one
//!   binding; it imports no kernel.
pub(crate) mod attention;
pub(crate) mod attention_coop;
pub(crate) mod attention_coop_backward;
pub(crate) mod elementwise;
pub(crate) mod index;
pub(crate) mod infer;
pub(crate) mod matmul;
pub(crate) mod optim;
pub(crate) mod rows;
pub(crate) mod slices;
pub(crate) mod window;

use crate::backend::gpu::runtime::pool::Pooled;
use crate::layout::Layout;
use smallvec::SmallVec;
use std::sync::Arc;

/// Whether results must repeat bit for bit from run to run
/// ([`Gpu::set_deterministic`](crate::backend::gpu::Gpu::set_deterministic)):
/// kernels that would sum with atomics in whatever order the GPU runs them take
/// a fixed-order path instead.
pub(crate) static DETERMINISTIC: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// A buffer and the layout through which a kernel reads or writes it.
pub(crate) type Operand<'a> = (&'a Arc<Pooled>, &'a Layout);

/// A short list kept inline: recording a small op allocates nothing per view.
pub(crate) type Small<T> = SmallVec<[T; 4]>;

/// The inputs that stand for uniform numbers ([`Pooled::drawing`]), for a
/// kernel to draw rather than load, and `scalars` with each one's seed appended
/// as two words (borrowed as they are when nothing is drawn: most launches);
/// `first` is the index in `scalars` of the expression's first scalar (a row
/// op's own come before it).
pub(crate) fn draws<'a>(
    inputs: &[Operand],
    scalars: &'a [u32],
    first: usize,
) -> (volta_kernels::wgsl::Draws, std::borrow::Cow<'a, [u32]>) {
    let mut drawn = Vec::new();
    let mut all = std::borrow::Cow::Borrowed(scalars);
    for (i, (b, _)) in inputs.iter().enumerate() {
        if let Some(seed) = b.draws() {
            drawn.push((i, all.len() - first));
            all.to_mut().extend([seed as u32, (seed >> 32) as u32]);
        }
    }
    (volta_kernels::wgsl::Draws(drawn), all)
}
