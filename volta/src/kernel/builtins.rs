//! The math functions a `#[kernel]` body may call, with the exact semantics of the
//! op set (so the CPU body, the WGSL and the derivatives agree). Float methods such
//! as `x.exp()`, `x.max(y)` and `x.powf(y)` are accepted too.
use volta_kernels::{BinaryOp, UnaryOp};

macro_rules! unary_builtins {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        $($(#[$doc])* #[inline] pub fn $name(x: f32) -> f32 { UnaryOp::$op.eval(x) })*
    };
}
unary_builtins! {
    /// e^x
    exp => Exp;
    /// Natural logarithm.
    ln => Log;
    /// 2^x
    exp2 => Exp2;
    /// log₂ x
    log2 => Log2;
    /// √x
    sqrt => Sqrt;
    /// 1/x
    recip => Recip;
    /// max(x, 0)
    relu => Relu;
    /// 1/(1+e^−x)
    sigmoid => Sigmoid;
    /// tanh x
    tanh => Tanh;
    /// sin x
    sin => Sin;
    /// cos x
    cos => Cos;
    /// |x|
    abs => Abs;
    /// GELU (erf form)
    gelu => Gelu;
    /// x·σ(x)
    silu => Silu;
    /// ⌊x⌋ (derivative 0)
    floor => Floor;
    /// The error function.
    erf => Erf;
}

/// max(a, b) (ties split the gradient).
#[inline]
pub fn max(a: f32, b: f32) -> f32 {
    BinaryOp::Max.eval(a, b)
}
/// min(a, b) (ties split the gradient).
#[inline]
pub fn min(a: f32, b: f32) -> f32 {
    BinaryOp::Min.eval(a, b)
}
/// a^b
#[inline]
pub fn powf(a: f32, b: f32) -> f32 {
    BinaryOp::Pow.eval(a, b)
}
