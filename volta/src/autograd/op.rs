//! The record of how a tensor was computed: the op and its inputs.
use crate::backend::{AttentionSpec, Device, Memory};
use crate::dtype::Element;
use crate::shape::Dims;
use crate::tensor::RawTensor;
use volta_kernels::{BinaryOp, ReduceOp, UnaryOp, Window2d};

type T<D, E> = RawTensor<D, E>;

/// One node of the autograd graph. The backward rule of each variant is in
/// `backward.rs`. Cloning shares the inputs (a graph edge holds a clone).
#[derive(Clone)]
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
    /// `a × b + c`, `c` of the product's dims (a bias broadcast along its rows).
    MatMulAdd(T<D, E>, T<D, E>, T<D, E>),
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

/// A product's operands, each as a graph edge unless the other is tracked: `a`'s
/// values serve only `b`'s gradient (`g·b` and `aᵀ·g` alike), and the reverse.
fn unless_other_tracked<D: Device + Memory<E>, E: Element>(
    a: RawTensor<D, E>,
    b: RawTensor<D, E>,
) -> (RawTensor<D, E>, RawTensor<D, E>) {
    let keep_a = b.is_tracked();
    let keep_b = a.is_tracked();
    (
        if keep_a { a } else { a.edge() },
        if keep_b { b } else { b.edge() },
    )
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
            Op::MatMulAdd(..) => "MatMulAdd".into(),
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

    /// The op with every input whose values its backward rule does not read
    /// replaced by that input's graph edge ([`RawTensor::edge`]), so that the
    /// graph does not keep the input's data alive: an addition's rule passes the
    /// gradient on, a reshape's reshapes it, a sum's expands it; they need only
    /// their inputs' dims. Keep this in step with the rules in `backward.rs`.
    pub(crate) fn release_unread(self) -> Self {
        let e = |t: T<D, E>| t.edge();
        let all = |ts: Vec<T<D, E>>| ts.iter().map(T::edge).collect();
        match self {
            // These rules read the output or nothing.
            Op::Unary(
                x,
                u @ (UnaryOp::Neg
                | UnaryOp::Exp
                | UnaryOp::Exp2
                | UnaryOp::Sqrt
                | UnaryOp::Recip
                | UnaryOp::Sigmoid
                | UnaryOp::Tanh),
            ) => Op::Unary(e(x), u),
            Op::Softmax(x, axis, log) => Op::Softmax(e(x), axis, log),
            Op::Binary(a, b, op @ (BinaryOp::Add | BinaryOp::Sub)) => Op::Binary(e(a), e(b), op),
            // A factor's values serve only the other factor's gradient: dropout's
            // `x · mask` keeps the mask, not `x`. A quotient's rule reads the
            // divisor and the output.
            Op::Binary(a, b, BinaryOp::Mul) => {
                let (a, b) = unless_other_tracked(a, b);
                Op::Binary(a, b, BinaryOp::Mul)
            }
            Op::Binary(a, b, BinaryOp::Div) => Op::Binary(e(a), b, BinaryOp::Div),
            Op::MatMul(a, b) => {
                let (a, b) = unless_other_tracked(a, b);
                Op::MatMul(a, b)
            }
            Op::MatMulAdd(a, b, c) => {
                let (a, b) = unless_other_tracked(a, b);
                Op::MatMulAdd(a, b, e(c))
            }
            Op::BinaryScalar(
                x,
                op
                @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod),
                c,
            ) => Op::BinaryScalar(e(x), op, c),
            Op::Reduce(x, ReduceOp::Sum, axis) => Op::Reduce(e(x), ReduceOp::Sum, axis),
            Op::Permute(x, perm) => Op::Permute(e(x), perm),
            Op::Expand(x) => Op::Expand(e(x)),
            Op::Reshape(x) => Op::Reshape(e(x)),
            Op::Narrow(x, axis, start) => Op::Narrow(e(x), axis, start),
            Op::Step(x, axis, step) => Op::Step(e(x), axis, step),
            Op::Pad(x, pads) => Op::Pad(e(x), pads),
            Op::Cat(parts, axis) => Op::Cat(all(parts), axis),
            Op::Select(cond, a, b) => Op::Select(cond, e(a), e(b)),
            Op::Gather(x, axis, idx) => Op::Gather(e(x), axis, idx),
            Op::Unfold2d(x, win) => Op::Unfold2d(e(x), win),
            Op::Fold2d(x, win) => Op::Fold2d(e(x), win),
            op => op,
        }
    }

    /// Whether the op keeps values for its rule (beyond the graph edges of its
    /// inputs): a backward pass that has run it releases them.
    pub(crate) fn saves_values(&self) -> bool {
        matches!(
            self,
            Op::Attention { .. } | Op::Select(..) | Op::Gather(..) | Op::Custom(..)
        ) || self.inputs().iter().any(|t| t.has_data())
    }

    /// Whether the backward rule reads the op's own output (`exp`'s gradient is
    /// its output): a graph edge of such a tensor keeps its data.
    pub(crate) fn reads_output(&self) -> bool {
        match self {
            Op::Unary(_, u) => matches!(
                u,
                UnaryOp::Exp
                    | UnaryOp::Exp2
                    | UnaryOp::Sqrt
                    | UnaryOp::Recip
                    | UnaryOp::Sigmoid
                    | UnaryOp::Tanh
            ),
            Op::Binary(_, _, b) => matches!(b, BinaryOp::Div | BinaryOp::Pow),
            Op::Reduce(_, r, _) => matches!(r, ReduceOp::Max | ReduceOp::Min),
            Op::Softmax(..) | Op::Attention { .. } => true,
            _ => false,
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
            Op::MatMulAdd(a, b, c) => vec![a, b, c],
            Op::Attention { q, k, v, .. } => vec![q, k, v],
            Op::Cat(parts, _) | Op::Custom(parts, _) => parts.iter().collect(),
        }
    }
}
