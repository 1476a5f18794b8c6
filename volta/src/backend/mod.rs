//! Devices and the kernels they supply.
//!
//! A device is a type (`Cpu`, `Gpu`); tensors carry it as a parameter, so mixing
//! devices is a compile error. Everything above this module (shape logic, autograd,
//! the op set) is written once against [`Backend`]; a device only supplies buffers
//! and kernels. Kernels receive buffers with a [`Layout`] (dims, strides, offset),
//! so views (permute, expand, slices) cost no copy.

mod attention;
pub mod cpu;
mod custom;
pub mod gpu;
pub mod infer;
mod optim;
mod replay;

use crate::dtype::{Element, Float};
pub use crate::layout::Layout;
pub(crate) use attention::AttentionDims;
pub use attention::{AttentionSpec, heads_of_one_projection, packed_like};
pub use custom::KernelBackend;
pub use infer::InferenceBackend;
pub use optim::{AdamInput, AdamOutput, AdamStep, SgdStep};
pub use replay::Replay;
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

/// A device type. Every device can hold `u32` indices.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a Volta device",
    note = "use `Cpu` or `Gpu`"
)]
pub trait Device: 'static + Copy + Default + std::fmt::Debug + Send + Sync + Memory<u32> {
    /// Its name in messages.
    const NAME: &'static str;
}

/// Buffers of `E` on a device.
#[diagnostic::on_unimplemented(
    message = "the device `{Self}` cannot hold `{E}` elements",
    note = "`Gpu` holds `f32`, `f16` and `u32` indices; `f64` tensors are CPU-only"
)]
pub trait Memory<E: Element>: 'static {
    /// A reference-counted buffer handle; cloning it shares the memory.
    type Buffer: Clone + Send + Sync + 'static;
    /// Uploads host data.
    fn from_vec(data: Vec<E>) -> Self::Buffer;
    /// Uploads a copy of host data the caller keeps (a buffer reused every step).
    fn from_slice(data: &[E]) -> Self::Buffer {
        Self::from_vec(data.to_vec())
    }
    /// A buffer of `len` copies of `value`.
    fn full(len: usize, value: E) -> Self::Buffer;
    /// What a read-back can fail with: [`Infallible`](std::convert::Infallible) on
    /// the CPU, [`GpuError`](crate::backend::gpu::GpuError) on the GPU (an error
    /// raised by earlier work, a lost device, out of memory).
    type Error: std::error::Error + Send + Sync + 'static;
    /// Reads the elements of a view back to the host, in row-major order.
    fn try_to_vec(buf: &Self::Buffer, layout: &Layout) -> Result<Vec<E>, Self::Error>;
    /// [`try_to_vec`](Memory::try_to_vec), panicking with the error's text and the
    /// fallible call to use instead.
    fn to_vec(buf: &Self::Buffer, layout: &Layout) -> Vec<E> {
        Self::try_to_vec(buf, layout).unwrap_or_else(|e| {
            panic!("{e} (call `try_to_vec` or `try_item` to handle this error)")
        })
    }
    /// [`try_to_vec`](Memory::try_to_vec) into `out`, replacing its contents and
    /// reusing its allocation: for a buffer read back every step, whose fresh
    /// pages would cost more than the copy.
    fn try_read_into(
        buf: &Self::Buffer,
        layout: &Layout,
        out: &mut Vec<E>,
    ) -> Result<(), Self::Error> {
        *out = Self::try_to_vec(buf, layout)?;
        Ok(())
    }
    /// [`try_read_into`](Memory::try_read_into), started now and finished by
    /// the future, which may run on another thread: the copy is recorded here, in
    /// order with the work recorded before it, so the future waits for that work
    /// only (a thread that recorded the copy itself later could find the rest of
    /// a backward pass recorded before it). The future hands `out` back filled.
    fn read_into_later(
        buf: &Self::Buffer,
        layout: &Layout,
        out: Vec<E>,
    ) -> impl Future<Output = Result<Vec<E>, Self::Error>> + Send + 'static
    where
        E: Send,
    {
        let mut out = out;
        std::future::ready(Self::try_read_into(buf, layout, &mut out).map(|()| out))
    }
    /// [`try_to_vec`](Memory::try_to_vec) without blocking, for the browser: the
    /// read-back is started now and the future completes when the data arrives.
    /// On the CPU it is ready at once.
    fn try_to_vec_async(
        buf: &Self::Buffer,
        layout: &Layout,
    ) -> impl Future<Output = Result<Vec<E>, Self::Error>> + 'static {
        std::future::ready(Self::try_to_vec(buf, layout))
    }
    /// Copies a view into a new contiguous buffer.
    fn contiguous(buf: &Self::Buffer, layout: &Layout) -> Self::Buffer;
    /// Whether `a` and `b` are handles to the same memory, so that a view of one
    /// is a view of the other (`false` where that is unknown).
    fn same_memory(a: &Self::Buffer, b: &Self::Buffer) -> bool;
    /// Computes a value whose computation a device defers (the GPU's fused
    /// expressions), so that the operands it was deferred on can be freed; does not
    /// wait for the device. Nothing to do where every value is computed at once.
    fn compute_deferred(_buf: &Self::Buffer) {}
    /// A gradient that the backward pass hands on whole to several inputs (a
    /// residual connection's add): a device that defers computation computes
    /// it now where the value it defers on would otherwise be computed apart
    /// and read by each consumer (the GPU's norm gradient plus the residual's,
    /// one kernel instead of three). Does not wait for the device.
    fn settle_gradient(_buf: &Self::Buffer) {}
}

/// The buffer type of device `D` for elements `E`.
pub type Buf<D, E> = <D as Memory<E>>::Buffer;

/// Read-only view arguments of a kernel: a buffer and its layout.
pub type View<'a, D, E> = (&'a <D as Memory<E>>::Buffer, &'a Layout);

/// The float kernels of a device. Every output is a new contiguous buffer.
#[diagnostic::on_unimplemented(
    message = "the device `{Self}` does not compute in `{E}`",
    note = "the GPU computes on f32 and f16 tensors; f64 is CPU-only"
)]
pub trait Backend<E: Float>: Device + Memory<E> {
    /// `op(x)` elementwise.
    fn unary(op: UnaryOp, x: View<Self, E>) -> Buf<Self, E>;
    /// `op(a, b)` elementwise; `a` and `b` have equal dims (broadcasts are stride-0 views).
    fn binary(op: BinaryOp, a: View<Self, E>, b: View<Self, E>) -> Buf<Self, E>;
    /// `op(x, scalar)` elementwise.
    fn binary_scalar(op: BinaryOp, x: View<Self, E>, scalar: E) -> Buf<Self, E>;
    /// Reduces along `axis`, keeping it with size 1.
    fn reduce(op: ReduceOp, x: View<Self, E>, axis: usize) -> Buf<Self, E>;
    /// Softmax (`log`: log-softmax) of each row along `axis`, shifted by the row's
    /// max for stability; the result has `x`'s dims.
    fn softmax(x: View<Self, E>, axis: usize, log: bool) -> Buf<Self, E>;
    /// Batched product of rank-3 views `(batch, m, k) × (batch, k, n)`; a batch stride
    /// of 0 broadcasts an operand.
    fn matmul(a: View<Self, E>, b: View<Self, E>) -> Buf<Self, E>;
    /// `a × b + c` (`torch.addmm`): [`matmul`](Self::matmul) plus a view `c` of the
    /// product's dims, `(batch, m, n)` — a linear layer's bias, broadcast along the
    /// batch and the rows. By default the sum follows the product; a backend whose
    /// product can start from `c` (its accumulators, or its store) does that
    /// instead, so the product is written once, with its bias.
    fn matmul_add(a: View<Self, E>, b: View<Self, E>, c: View<Self, E>) -> Buf<Self, E> {
        let product = Self::matmul(a, b);
        let dims = Layout::contiguous(&[a.1.dims[0], a.1.dims[1], b.1.dims[2]]);
        Self::binary(BinaryOp::Add, (&product, &dims), c)
    }
    /// Pads each axis with `(before, after)` elements of `value`.
    fn pad(x: View<Self, E>, pads: &[(usize, usize)], value: E) -> Buf<Self, E>;
    /// Concatenates views along `axis`.
    fn cat(parts: &[View<Self, E>], axis: usize) -> Buf<Self, E>;
    /// Writes `src` into the view `dst` of `buf` (same dims), in place: tensors
    /// that view `buf` see the new values (a KV cache appends this way). The CPU
    /// copies `buf` first when another tensor shares it.
    fn write_into(buf: &mut Buf<Self, E>, dst: &Layout, src: View<Self, E>);
    /// `cond != 0 ? a : b` elementwise (all three views have equal dims).
    fn select(cond: View<Self, E>, a: View<Self, E>, b: View<Self, E>) -> Buf<Self, E>;
    /// `out[.., i, ..] = x[.., idx[.., i, ..], ..]` along `axis` (torch.gather); the
    /// output has the dims of `idx`.
    fn gather(x: View<Self, E>, axis: usize, idx: View<Self, u32>) -> Buf<Self, E>;
    /// The adjoint of gather: a zero buffer of `dims` into which each `src` element is
    /// added at the index that `idx` names along `axis`.
    fn scatter_add(
        dims: &[usize],
        axis: usize,
        idx: View<Self, u32>,
        src: View<Self, E>,
    ) -> Buf<Self, E>;
    /// im2col: `x` (N, C, H, W), any strides → contiguous (N, OH, OW, C, KH, KW) with
    /// `out[n, oh, ow, c, kh, kw] = x[n, c, oh·sh − ph + kh·dh, ow·sw − pw + kw·dw]`,
    /// or `pad_value` where that position falls in the padding. The caller has
    /// checked that the window fits (`win.output([H, W])` is `Ok`).
    fn unfold2d(x: View<Self, E>, win: &Window2d, pad_value: E) -> Buf<Self, E>;
    /// col2im, the adjoint of [`unfold2d`](Self::unfold2d): `cols` (N, OH, OW, C, KH,
    /// KW), any strides → contiguous (N, C, H, W) with `[H, W] = input_hw`, where each
    /// input position is the sum of the column entries that read it (entries that
    /// fell in the padding are dropped).
    fn fold2d(cols: View<Self, E>, win: &Window2d, input_hw: [usize; 2]) -> Buf<Self, E>;
    /// Normalises each row along `axis`: `center` → `(x − mean)/√(var + eps)` (biased
    /// variance, computed in two passes: the mean first, then the mean of squared
    /// deviations); `!center` (RMS) → `x/√(mean(x²) + eps)`. The result is contiguous
    /// with `x`'s dims.
    fn normalize(x: View<Self, E>, axis: usize, center: bool, eps: E) -> Buf<Self, E>;
    /// The gradient of [`normalize`](Self::normalize) with respect to `x`, given
    /// the output's gradient `g` (same dims, any strides): with the statistics
    /// recomputed from `x` and `x̂` its normalised row, `rstd·(g − mean(g) −
    /// x̂·mean(g·x̂))` (`center`) or `rstd·(g − x̂·mean(g·x̂))` (RMS), along `axis`.
    /// The result is contiguous with `x`'s dims.
    fn normalize_grad(
        x: View<Self, E>,
        g: View<Self, E>,
        axis: usize,
        center: bool,
        eps: E,
    ) -> Buf<Self, E>;
    /// `len` uniform numbers in `[0, 1)` from a counter-based generator: element `i`
    /// depends only on `(seed, i)`, and every device returns the same values bit for
    /// bit (a `u32` hash `h` of `(seed, i)` from integer ops, then `(h >> 8)·2⁻²⁴` in
    /// `f32`, converted to `E`; see [`uniform_hash`](crate::random::uniform_hash)).
    fn uniform(len: usize, seed: u64) -> Buf<Self, E>;
    /// Fused scaled-dot-product attention (flash attention): queries `q`
    /// `[B, H, T, d]`, keys `k` and values `v` `[B, Hkv, S, d]` with `H` a multiple
    /// of `Hkv` (query head `h` reads key/value head `h / (H/Hkv)`), any strides.
    /// Returns the output `[B, H, T, d]`, laid out as
    /// [`packed_like`]`(q)` (heads split off a projection
    /// come back in its order), and each query row's log-sum-exp of its scaled,
    /// masked scores `[B, H, T]` (the backward's softmax statistics, contiguous),
    /// without storing the `T×S` scores. A row that sees no key gives zeros and a
    /// log-sum-exp of 0, which the backward does not read (it finds the row's
    /// keys hidden too).
    fn attention(
        q: View<Self, E>,
        k: View<Self, E>,
        v: View<Self, E>,
        spec: &AttentionSpec,
    ) -> (Buf<Self, E>, Buf<Self, E>);
    /// The backward of [`attention`](Self::attention): from the gradient `dout` of
    /// its output (any strides), its `lse` and `delta = Σ_c dout·out` per query row
    /// (both `[B, H, T]`, contiguous), recomputes the scores tile by tile and
    /// returns `(dq, dk, dv)` with their layouts: each laid out as `packed_like`
    /// of `q`, `k` or `v`, or, where `q`, `k` and `v` are the heads of one packed
    /// projection ([`heads_of_one_projection`]) and the device can, all three in
    /// one buffer through the views of `q`, `k` and `v` themselves (their
    /// concatenation is then that buffer). `dk` and `dv` sum over the query heads
    /// that share a key/value head.
    #[allow(clippy::too_many_arguments)]
    fn attention_backward(
        q: View<Self, E>,
        k: View<Self, E>,
        v: View<Self, E>,
        dout: View<Self, E>,
        lse: View<Self, E>,
        delta: View<Self, E>,
        spec: &AttentionSpec,
    ) -> [(Buf<Self, E>, Layout); 3];
    /// One Adam/AdamW step of one parameter in one pass (see [`AdamStep`] for the
    /// formulas): reads the parameter `p`, its gradient `g` and its moments
    /// `(m, v)` (`None` before the first step: zero), all with `p`'s dims and any
    /// layout, and returns the new `(p, m, v)`, contiguous.
    fn adam_step(
        p: View<Self, E>,
        g: View<Self, E>,
        moments: Option<(View<Self, E>, View<Self, E>)>,
        hyper: &AdamStep,
    ) -> (Buf<Self, E>, Buf<Self, E>, Buf<Self, E>);
    /// [`adam_step`](Backend::adam_step) for several parameters (an optimiser's
    /// step over a model): the same `(p, m, v)` for each, in order, from as few
    /// kernels as the device allows (PyTorch's multi-tensor `foreach` step).
    /// The default steps them one at a time.
    fn adam_steps(steps: &[AdamInput<'_, Self, E>]) -> Vec<AdamOutput<Self, E>> {
        steps
            .iter()
            .map(|s| Self::adam_step(s.p, s.g, s.moments, &s.hyper))
            .collect()
    }
    /// One SGD step of one parameter in one pass (see [`SgdStep`] for the
    /// formulas): reads `p`, its gradient `g` and its momentum buffer (`None` before
    /// the first step, or without momentum), all with `p`'s dims and any layout, and
    /// returns the new parameter and, with momentum, the new buffer, contiguous.
    fn sgd_step(
        p: View<Self, E>,
        g: View<Self, E>,
        momentum_buffer: Option<View<Self, E>>,
        hyper: &SgdStep,
    ) -> (Buf<Self, E>, Option<Buf<Self, E>>);
}

/// Converting float tensors between element types on one device (see
/// [`Tensor::to_dtype`](crate::Tensor::to_dtype)).
#[diagnostic::on_unimplemented(
    message = "the device `{Self}` cannot convert `{From}` tensors to `{To}`",
    note = "`Cpu` converts between f32, f64 and f16; `Gpu` between f32 and f16"
)]
pub trait Cast<From: Float, To: Float>: Backend<From> + Backend<To> {
    /// Every element of the view converted to `To` (rounded to nearest, ties to
    /// even; values beyond `To`'s range become ±∞), as a new contiguous buffer.
    fn cast(x: View<Self, From>) -> Buf<Self, To>;
}
