//! Elementwise ops: unary math, binary arithmetic, ops with a scalar, select.
use crate::autograd::Op;
use crate::backend::{Backend, Device, Memory};
use crate::dtype::{Element, Float};
use crate::layout::Layout;
use crate::shape::{SameShape, Shape};
use crate::tensor::{RawTensor, Tensor};
use volta_kernels::{BinaryOp, UnaryOp};

impl<D: Backend<E>, E: Float> RawTensor<D, E> {
    /// `op(self)`.
    #[track_caller]
    pub fn unary(&self, op: UnaryOp) -> Self {
        let buf = D::unary(op, self.view());
        let inputs: &[&Self] = if op == UnaryOp::Floor { &[] } else { &[self] };
        Self::from_op(
            buf,
            Layout::contiguous(self.dims()),
            || Op::Unary(self.clone(), op),
            inputs,
        )
    }

    /// `op(self, rhs)`; the dims must be equal (panics otherwise: dynamic dims that
    /// the types could not check).
    #[track_caller]
    pub fn binary(&self, op: BinaryOp, rhs: &Self) -> Self {
        assert_same_dims(op, self.dims(), rhs.dims());
        let buf = D::binary(op, self.view(), rhs.view());
        let inputs: &[&Self] = if op.is_comparison() {
            &[]
        } else {
            &[self, rhs]
        };
        Self::from_op(
            buf,
            Layout::contiguous(self.dims()),
            || Op::Binary(self.clone(), rhs.clone(), op),
            inputs,
        )
    }

    /// `op(self, c)` for a scalar `c`.
    #[track_caller]
    pub fn scalar(&self, op: BinaryOp, c: E) -> Self {
        let buf = D::binary_scalar(op, self.view(), c);
        let inputs: &[&Self] = if op.is_comparison() { &[] } else { &[self] };
        Self::from_op(
            buf,
            Layout::contiguous(self.dims()),
            || Op::BinaryScalar(self.clone(), op, c),
            inputs,
        )
    }

    /// `cond != 0 ? on_true : on_false` elementwise.
    #[track_caller]
    pub fn select(cond: &Self, on_true: &Self, on_false: &Self) -> Self {
        assert_same_dims("select", cond.dims(), on_true.dims());
        assert_same_dims("select", cond.dims(), on_false.dims());
        let buf = D::select(cond.view(), on_true.view(), on_false.view());
        let cond = cond.detach();
        Self::from_op(
            buf,
            Layout::contiguous(on_true.dims()),
            || Op::Select(cond, on_true.clone(), on_false.clone()),
            &[on_true, on_false],
        )
    }

    /// A tensor of `value` with these dims on this device (untracked).
    #[track_caller]
    pub fn full_like_dims(dims: &[usize], value: E) -> Self {
        Self::leaf(
            D::full(dims.iter().product(), value),
            Layout::contiguous(dims),
        )
    }
}

#[track_caller]
pub(crate) fn assert_same_dims(op: impl std::fmt::Debug, a: &[usize], b: &[usize]) {
    assert!(
        a == b,
        "{op:?}: shape mismatch at run time: {a:?} vs {b:?} (a dynamic dim differs from its partner)"
    );
}

/// `Self` is the device `D`. Binary ops take their right operand's device as a
/// separate parameter so that mixing devices reads as a device error.
#[diagnostic::on_unimplemented(
    message = "device mismatch: cannot combine a tensor on `{D}` with a tensor on `{Self}`",
    label = "this tensor is on `{Self}`, expected `{D}`",
    note = "move one of them first, e.g. `.to::<{D}>()`"
)]
pub trait SameDevice<D: Device>: Device {
    /// The same tensor, typed with `D`.
    #[doc(hidden)]
    #[track_caller]
    fn same_device<E: Element>(raw: &RawTensor<Self, E>) -> RawTensor<D, E>
    where
        Self: Memory<E>,
        D: Memory<E>;
}
impl<D: Device> SameDevice<D> for D {
    #[track_caller]
    fn same_device<E: Element>(raw: &RawTensor<D, E>) -> RawTensor<D, E>
    where
        D: Memory<E>,
    {
        raw.clone()
    }
}

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
            $($(#[$doc])* #[track_caller] pub fn $name(&self) -> Self { self.map_raw(|r| r.unary(UnaryOp::$op)) })*
        }
    };
}
unary_methods! {
    /// Elementwise exp. d/dx = exp(x).
    exp => Exp;
    /// Natural log. d/dx = 1/x.
    log => Log;
    /// 2^x. d/dx = 2^x · ln 2.
    exp2 => Exp2;
    /// log2 x. d/dx = 1 / (x ln 2).
    log2 => Log2;
    /// Square root. d/dx = 1 / (2√x).
    sqrt => Sqrt;
    /// 1/x. d/dx = −1/x².
    recip => Recip;
    /// max(x, 0). d/dx = 1 if x > 0 else 0.
    relu => Relu;
    /// 1/(1+e^−x). d/dx = σ(1−σ).
    sigmoid => Sigmoid;
    /// tanh. d/dx = 1 − tanh².
    tanh => Tanh;
    /// sin. d/dx = cos.
    sin => Sin;
    /// cos. d/dx = −sin.
    cos => Cos;
    /// |x|. d/dx = sign(x).
    abs => Abs;
    /// GELU (exact, erf form). d/dx = Φ(x) + x·φ(x).
    gelu => Gelu;
    /// SiLU / swish: x·σ(x). d/dx = σ(1 + x(1−σ)).
    silu => Silu;
    /// ⌊x⌋ (no gradient).
    floor => Floor;
    /// The error function. d/dx = 2/√π · e^(−x²).
    erf => Erf;
}

impl<S: Shape, D: Backend<E>, E: Float> Tensor<S, D, E> {
    /// −x.
    #[track_caller]
    pub fn neg(&self) -> Self {
        self.map_raw(|r| r.unary(UnaryOp::Neg))
    }

    #[track_caller]
    fn zip<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        op: BinaryOp,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        let rhs = D2::same_device(rhs.raw());
        self.map_raw(|r| r.binary(op, &rhs))
    }

    /// Elementwise a + b.
    #[track_caller]
    pub fn add<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Add, rhs)
    }
    /// Elementwise a − b.
    #[track_caller]
    pub fn sub<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Sub, rhs)
    }
    /// Elementwise a · b.
    #[track_caller]
    pub fn mul<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Mul, rhs)
    }
    /// Elementwise a / b.
    #[track_caller]
    pub fn div<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Div, rhs)
    }
    /// Elementwise max(a, b); ties split the gradient evenly.
    #[track_caller]
    pub fn maximum<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Max, rhs)
    }
    /// Elementwise min(a, b); ties split the gradient evenly.
    #[track_caller]
    pub fn minimum<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Min, rhs)
    }
    /// Elementwise a mod b, with the sign of b (Python's `%`).
    #[track_caller]
    pub fn rem<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Mod, rhs)
    }
    /// Elementwise a^b.
    #[track_caller]
    pub fn pow<R: SameShape<S>, D2: SameDevice<D> + Backend<E>>(
        &self,
        rhs: &Tensor<R, D2, E>,
    ) -> Self {
        self.zip(BinaryOp::Pow, rhs)
    }

    /// x + c.
    #[track_caller]
    pub fn add_scalar(&self, c: E) -> Self {
        self.map_raw(|r| r.scalar(BinaryOp::Add, c))
    }
    /// x · c.
    #[track_caller]
    pub fn mul_scalar(&self, c: E) -> Self {
        self.map_raw(|r| r.scalar(BinaryOp::Mul, c))
    }
    /// x / c.
    #[track_caller]
    pub fn div_scalar(&self, c: E) -> Self {
        self.map_raw(|r| r.scalar(BinaryOp::Div, c))
    }
    /// x^c. d/dx = c·x^(c−1).
    #[track_caller]
    pub fn powf(&self, c: E) -> Self {
        self.map_raw(|r| r.scalar(BinaryOp::Pow, c))
    }
    /// max(x, c).
    #[track_caller]
    pub fn max_scalar(&self, c: E) -> Self {
        self.map_raw(|r| r.scalar(BinaryOp::Max, c))
    }
    /// min(x, c).
    #[track_caller]
    pub fn min_scalar(&self, c: E) -> Self {
        self.map_raw(|r| r.scalar(BinaryOp::Min, c))
    }
    /// x mod c (sign of c).
    #[track_caller]
    pub fn rem_scalar(&self, c: E) -> Self {
        self.map_raw(|r| r.scalar(BinaryOp::Mod, c))
    }
    /// x clamped to `[lo, hi]`.
    #[track_caller]
    pub fn clamp(&self, lo: E, hi: E) -> Self {
        self.max_scalar(lo).min_scalar(hi)
    }
    /// x².
    #[track_caller]
    pub fn square(&self) -> Self {
        self.map_raw(|r| r.binary(BinaryOp::Mul, r))
    }

    /// Elementwise `self != 0 ? on_true : on_false` (a mask from a comparison).
    #[track_caller]
    pub fn select<
        R1: SameShape<S>,
        R2: SameShape<S>,
        D2: SameDevice<D> + Backend<E>,
        D3: SameDevice<D> + Backend<E>,
    >(
        &self,
        on_true: &Tensor<R1, D2, E>,
        on_false: &Tensor<R2, D3, E>,
    ) -> Self {
        let (t, f) = (
            D2::same_device(on_true.raw()),
            D3::same_device(on_false.raw()),
        );
        self.map_raw(|c| RawTensor::select(c, &t, &f))
    }
}

macro_rules! operator {
    ($tr:ident, $method:ident, $op:ident) => {
        impl<S: Shape, R: SameShape<S>, D: Backend<E>, D2: SameDevice<D> + Backend<E>, E: Float>
            std::ops::$tr<&Tensor<R, D2, E>> for &Tensor<S, D, E>
        {
            type Output = Tensor<S, D, E>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<R, D2, E>) -> Tensor<S, D, E> {
                self.zip(BinaryOp::$op, rhs)
            }
        }
        impl<S: Shape, R: SameShape<S>, D: Backend<E>, D2: SameDevice<D> + Backend<E>, E: Float>
            std::ops::$tr<Tensor<R, D2, E>> for Tensor<S, D, E>
        {
            type Output = Tensor<S, D, E>;
            #[track_caller]
            fn $method(self, rhs: Tensor<R, D2, E>) -> Tensor<S, D, E> {
                self.zip(BinaryOp::$op, &rhs)
            }
        }
        impl<S: Shape, R: SameShape<S>, D: Backend<E>, D2: SameDevice<D> + Backend<E>, E: Float>
            std::ops::$tr<&Tensor<R, D2, E>> for Tensor<S, D, E>
        {
            type Output = Tensor<S, D, E>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<R, D2, E>) -> Tensor<S, D, E> {
                self.zip(BinaryOp::$op, rhs)
            }
        }
        impl<S: Shape, R: SameShape<S>, D: Backend<E>, D2: SameDevice<D> + Backend<E>, E: Float>
            std::ops::$tr<Tensor<R, D2, E>> for &Tensor<S, D, E>
        {
            type Output = Tensor<S, D, E>;
            #[track_caller]
            fn $method(self, rhs: Tensor<R, D2, E>) -> Tensor<S, D, E> {
                self.zip(BinaryOp::$op, &rhs)
            }
        }
        impl<S: Shape, D: Backend<E>, E: Float> std::ops::$tr<E> for &Tensor<S, D, E> {
            type Output = Tensor<S, D, E>;
            fn $method(self, c: E) -> Tensor<S, D, E> {
                self.map_raw(|r| r.scalar(BinaryOp::$op, c))
            }
        }
        impl<S: Shape, D: Backend<E>, E: Float> std::ops::$tr<E> for Tensor<S, D, E> {
            type Output = Tensor<S, D, E>;
            fn $method(self, c: E) -> Tensor<S, D, E> {
                self.map_raw(|r| r.scalar(BinaryOp::$op, c))
            }
        }
    };
}
operator!(Add, add, Add);
operator!(Sub, sub, Sub);
operator!(Mul, mul, Mul);
operator!(Div, div, Div);
operator!(Rem, rem, Mod);

impl<S: Shape, D: Backend<E>, E: Float> std::ops::Neg for &Tensor<S, D, E> {
    type Output = Tensor<S, D, E>;
    #[track_caller]
    fn neg(self) -> Tensor<S, D, E> {
        Tensor::neg(self)
    }
}
impl<S: Shape, D: Backend<E>, E: Float> std::ops::Neg for Tensor<S, D, E> {
    type Output = Tensor<S, D, E>;
    #[track_caller]
    fn neg(self) -> Tensor<S, D, E> {
        Tensor::neg(&self)
    }
}
