//! The record of how a tensor was computed: the op and its inputs.
use crate::backend::{AttentionSpec, Device, Memory};
use crate::dtype::Element;
use crate::shape::Dims;
use crate::tensor::RawTensor;
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

type T<D, E> = RawTensor<D, E>;

/// One node of the autograd graph. The backward rule of each variant is in
/// `backward.rs`.
pub(crate) enum Op<D: Device + Memory<E>, E: Element> {
    Unary(T<D, E>, UnaryOp),
    Binary(T<D, E>, T<D, E>, BinaryOp),
    BinaryScalar(T<D, E>, BinaryOp, E),
    /// Reduction along an axis, keeping it.
    Reduce(T<D, E>, ReduceOp, usize),
    /// Softmax along an axis (`true`: log-softmax).
    Softmax(T<D, E>, usize, bool),
    /// `(batch, m, k) × (batch, k, n)` after the raw op's normalisation.
    MatMul(T<D, E>, T<D, E>),
    Permute(T<D, E>, Dims),
    Expand(T<D, E>),
    Reshape(T<D, E>),
    /// `narrow(axis, start, len)`.
    Narrow(T<D, E>, usize, usize),
    /// Every `step`-th element along an axis.
    Step(T<D, E>, usize, usize),
    Pad(T<D, E>, Vec<(usize, usize)>),
    Cat(Vec<T<D, E>>, usize),
    /// `select(cond, a, b)`; the condition gets no gradient.
    Select(T<D, E>, T<D, E>, T<D, E>),
    Gather(T<D, E>, usize, T<D, u32>),
    /// im2col of an (N, C, H, W) input over a window.
    Unfold2d(T<D, E>, Window2d),
    /// col2im of (N, OH, OW, C, KH, KW) columns over a window.
    Fold2d(T<D, E>, Window2d),
    /// Normalisation along an axis: `center` (layer norm) or RMS, and `eps`.
    Normalize(T<D, E>, usize, bool, E),
    /// Fused attention of queries, keys and values, with the row log-sum-exp the
    /// forward kept (a detached tensor) for the backward.
    Attention {
        q: T<D, E>,
        k: T<D, E>,
        v: T<D, E>,
        lse: T<D, E>,
        spec: AttentionSpec,
    },
    /// An op whose backward rule was captured where its types are concrete (user
    /// kernels): `rule(inputs, grad)` gives each input's gradient.
    Custom(Vec<T<D, E>>, CustomBackward<D, E>),
}

/// The backward rule of an [`Op::Custom`].
pub(crate) type CustomBackward<D, E> =
    std::sync::Arc<dyn Fn(&[T<D, E>], &T<D, E>) -> Vec<T<D, E>> + Send + Sync>;

impl<D: Device + Memory<E>, E: Element> Op<D, E> {
    /// The op's name in messages, e.g. `Exp`, `Add`, `MatMul`.
    pub(crate) fn name(&self) -> String {
        match self {
            Op::Unary(_, u) => format!("{u:?}"),
            Op::Binary(_, _, b) | Op::BinaryScalar(_, b, _) => format!("{b:?}"),
            Op::Reduce(_, r, axis) => format!("{r:?} along axis {axis}"),
            Op::Softmax(_, axis, log) => {
                format!(
                    "{} along axis {axis}",
                    if *log { "LogSoftmax" } else { "Softmax" }
                )
            }
            Op::MatMul(..) => "MatMul".into(),
            Op::Permute(..) => "Permute".into(),
            Op::Expand(..) => "Expand".into(),
            Op::Reshape(..) => "Reshape".into(),
            Op::Narrow(..) => "Narrow".into(),
            Op::Step(..) => "Step".into(),
            Op::Pad(..) => "Pad".into(),
            Op::Cat(..) => "Cat".into(),
            Op::Select(..) => "Select".into(),
            Op::Gather(..) => "Gather".into(),
            Op::Unfold2d(..) => "Unfold2d".into(),
            Op::Fold2d(..) => "Fold2d".into(),
            Op::Normalize(_, _, center, _) => if *center { "LayerNorm" } else { "RmsNorm" }.into(),
            Op::Attention { .. } => "Attention".into(),
            Op::Custom(..) => "a #[kernel] op".into(),
        }
    }

    /// The inputs gradients flow to (a `Select`'s condition is not one: it is a
    /// detached leaf).
    pub(crate) fn inputs(&self) -> Vec<&T<D, E>> {
        match self {
            Op::Unary(x, _)
            | Op::BinaryScalar(x, _, _)
            | Op::Reduce(x, _, _)
            | Op::Softmax(x, _, _)
            | Op::Permute(x, _)
            | Op::Expand(x)
            | Op::Reshape(x)
            | Op::Narrow(x, _, _)
            | Op::Step(x, _, _)
            | Op::Pad(x, _)
            | Op::Gather(x, _, _)
            | Op::Unfold2d(x, _)
            | Op::Fold2d(x, _)
            | Op::Normalize(x, _, _, _) => vec![x],
            Op::Binary(a, b, _) | Op::MatMul(a, b) | Op::Select(_, a, b) => vec![a, b],
            Op::Attention { q, k, v, .. } => vec![q, k, v],
            Op::Cat(parts, _) | Op::Custom(parts, _) => parts.iter().collect(),
        }
    }
}
