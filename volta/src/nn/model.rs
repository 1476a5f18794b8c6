//! What a `model!` struct promises to the code around it: its per-sample input and
//! output shapes ([`Model`]) and a typed forward pass for any batch ([`Forward`]).
//! An outer `model!` checks an inner one through these traits, so a block that
//! feeds an inner model the wrong shape fails `cargo check`.
use crate::backend::Backend;
use crate::dtype::Float;
use crate::nn::{Module, ToDevice, Visitor};
use crate::random::Rng;
use crate::shape::{ConstShape, SameShape, Shape};
use crate::tensor::Tensor;

/// A layer whose forward pass maps `In` to [`Output`](Self::Output).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot take an input of shape `{In}`",
    label = "this layer is given `{In}`",
    note = "a layer built by `model!` takes the input shape its `for (...)` declares, with any batch dim"
)]
pub trait Forward<In: Shape, D: Backend<E>, E: Float> {
    /// The result's shape.
    type Output: Shape;
    /// Applies the layer.
    fn forward(&self, x: &Tensor<In, D, E>) -> Tensor<Self::Output, D, E>;
}

/// The per-sample shapes (without the batch dim) a `model!` struct declares, and
/// its constructor.
pub trait Model: Sized {
    /// The shape of one input sample (`(Const<1>, Const<28>, Const<28>)`).
    type Input: ConstShape;
    /// The shape of one output sample.
    type Output: ConstShape;
    /// A model with freshly initialised layers.
    fn new(rng: &mut Rng) -> Self;
}

/// `x + f(x)`: a residual connection around a model that keeps its input's shape
/// (checked at compile time).
///
/// ```
/// use volta::prelude::*;
///
/// model! {
///     /// Two 3×3 convolutions that keep 8 channels of 6×6.
///     pub struct Block for (B, 8, 6, 6) -> (B, 8, 6, 6) {
///         conv1: Conv2d<8, kernel = 3, padding = 1>,
///         relu,
///         conv2: Conv2d<8, kernel = 3, padding = 1>,
///     }
/// }
/// let block = Residual(Block::new(&mut Rng::seed(0)));
/// let x = Tensor::<Rank4<2, 8, 6, 6>>::ones();
/// let y = block.forward(&x);
/// assert_eq!(y.dims(), &[2, 8, 6, 6]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Residual<M>(pub M);

/// The shape a residual block must return: its input's.
#[diagnostic::on_unimplemented(
    message = "a residual block must keep its input's shape, but it maps `{In}` to `{Self}`",
    label = "`x + f(x)` needs `f(x)` shaped like `x`"
)]
pub trait ResidualShape<In: Shape>: Shape {}
#[diagnostic::do_not_recommend]
impl<In: Shape, Out: SameShape<In>> ResidualShape<In> for Out {}

// The shape check is in `Forward`, where the block is applied: one error, at it.
impl<M: Model> Model for Residual<M> {
    type Input = M::Input;
    type Output = M::Input;
    fn new(rng: &mut Rng) -> Self {
        Residual(M::new(rng))
    }
}

impl<M> Residual<M> {
    /// `x + inner(x)`.
    pub fn forward<S: Shape, D: Backend<E>, E: Float>(&self, x: &Tensor<S, D, E>) -> Tensor<S, D, E>
    where
        M: Forward<S, D, E>,
        M::Output: ResidualShape<S>,
    {
        let fx = self.0.forward(x);
        x.map_raw(|r| r.binary(volta_kernels::BinaryOp::Add, fx.raw()))
    }
}

impl<M, S: Shape, D: Backend<E>, E: Float> Forward<S, D, E> for Residual<M>
where
    M: Forward<S, D, E>,
    M::Output: ResidualShape<S>,
{
    type Output = S;
    fn forward(&self, x: &Tensor<S, D, E>) -> Tensor<S, D, E> {
        Residual::forward(self, x)
    }
}

impl<M: Module<D, E>, D: Backend<E>, E: Float> Module<D, E> for Residual<M> {
    fn visit(&mut self, v: &mut Visitor<'_, D, E>) {
        v.module("0", &mut self.0);
    }
}

impl<M: ToDevice<E>, E: Float> ToDevice<E> for Residual<M> {
    type On<D2: Backend<E>> = Residual<M::On<D2>>;
    fn to<D2: Backend<E>>(&self) -> Self::On<D2> {
        Residual(self.0.to::<D2>())
    }
}
