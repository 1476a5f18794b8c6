//! The scalar arithmetic that elementwise ops are written against.

/// A floating-point scalar type kernels can compute in (`f32`, `f64`).
pub trait Float:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::fmt::Debug
    + std::fmt::Display
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::Rem<Output = Self>
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// −∞ (identity of `max`).
    const NEG_INFINITY: Self;
    /// +∞ (identity of `min`).
    const INFINITY: Self;
    /// Converts from `f64`, rounding.
    fn from_f64(v: f64) -> Self;
    /// Converts to `f64`.
    fn to_f64(self) -> f64;
    /// e^x.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// 2^x.
    fn exp2(self) -> Self;
    /// Base-2 logarithm.
    fn log2(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Floor.
    fn floor(self) -> Self;
    /// `self` raised to `e`.
    fn powf(self, e: Self) -> Self;
    /// The error function.
    fn erf(self) -> Self;
}

macro_rules! float_impl {
    ($t:ident, $erf:path) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            const INFINITY: Self = $t::INFINITY;
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn exp(self) -> Self {
                $t::exp(self)
            }
            fn ln(self) -> Self {
                $t::ln(self)
            }
            fn exp2(self) -> Self {
                $t::exp2(self)
            }
            fn log2(self) -> Self {
                $t::log2(self)
            }
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            fn tanh(self) -> Self {
                $t::tanh(self)
            }
            fn sin(self) -> Self {
                $t::sin(self)
            }
            fn cos(self) -> Self {
                $t::cos(self)
            }
            fn abs(self) -> Self {
                $t::abs(self)
            }
            fn floor(self) -> Self {
                $t::floor(self)
            }
            fn powf(self, e: Self) -> Self {
                $t::powf(self, e)
            }
            fn erf(self) -> Self {
                $erf(self as f64) as $t
            }
        }
    };
}
// f32 uses the same fit as the WGSL `volta_erf`, so CPU and GPU agree; f64 (gradient
// checks, science) needs full precision: the fit's derivative is off by ~1e-6.
float_impl!(f32, erf_f64);
float_impl!(f64, libm::erf);

/// erf with |error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit), enough for f32
/// GELU; the same fit as the GPU's `volta_erf`.
fn erf_f64(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = 1.0 - t * poly.exp();
    if x >= 0.0 { r } else { -r }
}
