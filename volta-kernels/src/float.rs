//! The scalar arithmetic that elementwise ops are written against.

/// A floating-point scalar type kernels can compute in (`f32`, `f64`, and `half::f16`,
/// whose functions compute in `f32` and round the result).
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
    ($t:ident, $exp:path, $erf:path) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INFINITY: Self = $t::NEG_INFINITY;
            const INFINITY: Self = $t::INFINITY;
            #[inline]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            // Always inlined, so that a loop of an op built on them (GELU's
            // gradient holds both) still vectorises.
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline]
            fn ln(self) -> Self {
                $t::ln(self)
            }
            #[inline]
            fn exp2(self) -> Self {
                $t::exp2(self)
            }
            #[inline]
            fn log2(self) -> Self {
                $t::log2(self)
            }
            #[inline]
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            #[inline]
            fn tanh(self) -> Self {
                $t::tanh(self)
            }
            #[inline]
            fn sin(self) -> Self {
                $t::sin(self)
            }
            #[inline]
            fn cos(self) -> Self {
                $t::cos(self)
            }
            #[inline]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline]
            fn floor(self) -> Self {
                $t::floor(self)
            }
            #[inline]
            fn powf(self, e: Self) -> Self {
                $t::powf(self, e)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
        }
    };
}
// f32 uses the same erf fit as the WGSL `volta_erf`, in f32 as the GPU computes it,
// so CPU and GPU agree, and an `exp` that vectorises (within 2 ulp, as GPUs' `exp`);
// f64 (gradient checks, science) needs full precision: the fit's derivative is off
// by ~1e-6.
float_impl!(f32, exp_f32, erf_f32);
float_impl!(f64, f64::exp, libm::erf);

/// erf within 4e-7 (Numerical Recipes' erfc Chebyshev fit, itself within 1.2e-7,
/// evaluated in f32), enough for f32 GELU; the same fit as the GPU's `volta_erf`.
/// Near 0 the fit's error (it gives erf(0) = −3e-8) swamps erf itself, so
/// |x| < 1e-3 takes the series 2/√π·(x − x³/3), exact to f32 there: erf stays odd
/// with erf(0) = 0, as on the GPU. Branch-free, with its own `exp`, so that a loop of GELUs vectorises (as libm's
/// `exp`, a call, does not).
#[inline(always)]
fn erf_f32(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_204
                                + t * (1.488_515_9 + t * (-0.822_152_2 + t * 0.170_872_77))))))));
    let r = 1.0 - t * exp_f32(poly);
    let fit = if x >= 0.0 { r } else { -r };
    let series = x * (std::f32::consts::FRAC_2_SQRT_PI * (1.0 - x * x / 3.0));
    if z < 1e-3 { series } else { fit }
}

/// `eˣ` within 2 ulp (Cephes' `expf`: `x = n·ln 2 + r`, a degree-6 polynomial in
/// `r`, `2ⁿ` from exponent bits), inline and branch-free, so that loops of it
/// vectorise (libm's `expf` is a call). Results below the normal floats are 0, as
/// GPUs flush them: computing a subnormal takes a CPU a microcode assist, ~100
/// cycles (a causal softmax's masked entries ran 5× slower). Past the top it
/// gives ∞; NaN gives NaN.
#[inline(always)]
fn exp_f32(x: f32) -> f32 {
    // e^−87.33655 is about the least normal float; above 88.8 the result is ∞.
    const LEAST: f32 = -87.336_55;
    let flushed = x < LEAST;
    let x = x.clamp(LEAST, 88.8);
    // n = round(x·log₂e) by adding 1.5·2²³: the sum's low mantissa bits hold n,
    // read back as an integer without a float-to-int conversion (Rust's saturating
    // `as i32` does not vectorise; `round` is a libm call).
    const SHIFT: f32 = 12_582_912.0;
    let shifted = x * std::f32::consts::LOG2_E + SHIFT;
    let n = shifted - SHIFT;
    let n_int = (shifted.to_bits() as i32).wrapping_sub(SHIFT.to_bits() as i32);
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let p = p * r * r + r + 1.0;
    // n lies in [−126, 128]; its halves make normal powers of two.
    let pow2 = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
    let half = n_int >> 1;
    let e = p * pow2(half) * pow2(n_int - half);
    if flushed { 0.0 } else { e }
}

/// `f16` through `f32`: each function converts its operands to `f32`, computes there
/// (with `f32`'s `exp` and erf fit) and rounds the result once, as a GPU kernel that loads `f16`
/// and computes in `f32` does. `half`'s operators (`+`, `*`, …) do the same.
impl Float for half::f16 {
    const ZERO: Self = half::f16::ZERO;
    const ONE: Self = half::f16::ONE;
    const NEG_INFINITY: Self = half::f16::NEG_INFINITY;
    const INFINITY: Self = half::f16::INFINITY;
    fn from_f64(v: f64) -> Self {
        half::f16::from_f64(v)
    }
    fn to_f64(self) -> f64 {
        half::f16::to_f64(self)
    }
    fn exp(self) -> Self {
        via_f32(self, <f32 as Float>::exp)
    }
    fn ln(self) -> Self {
        via_f32(self, f32::ln)
    }
    fn exp2(self) -> Self {
        via_f32(self, f32::exp2)
    }
    fn log2(self) -> Self {
        via_f32(self, f32::log2)
    }
    fn sqrt(self) -> Self {
        via_f32(self, f32::sqrt)
    }
    fn tanh(self) -> Self {
        via_f32(self, f32::tanh)
    }
    fn sin(self) -> Self {
        via_f32(self, f32::sin)
    }
    fn cos(self) -> Self {
        via_f32(self, f32::cos)
    }
    fn abs(self) -> Self {
        via_f32(self, f32::abs)
    }
    fn floor(self) -> Self {
        via_f32(self, f32::floor)
    }
    fn powf(self, e: Self) -> Self {
        half::f16::from_f32(self.to_f32().powf(e.to_f32()))
    }
    fn erf(self) -> Self {
        via_f32(self, <f32 as Float>::erf)
    }
}

/// `f(x)` in `f32`, rounded to `f16`.
#[inline]
fn via_f32(x: half::f16, f: impl Fn(f32) -> f32) -> half::f16 {
    half::f16::from_f32(f(x.to_f32()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f32 erf against libm's f64 one over [−6, 6] (and exactly odd, 0 at 0).
    #[test]
    fn f32_erf_and_its_exp_are_accurate() {
        for i in -60_000..=60_000 {
            let x = i as f32 * 1e-4;
            let err = (erf_f32(x) as f64 - libm::erf(x as f64)).abs();
            assert!(err < 4e-7, "erf({x}) is off by {err}");
            assert_eq!(erf_f32(-x), -erf_f32(x));
        }
        assert_eq!(erf_f32(0.0), 0.0);
        assert_eq!((erf_f32(40.0), erf_f32(-40.0)), (1.0, -1.0));
    }

    /// The f32 exp against f64's: within 2.5e-7 of itself where the result is a
    /// normal float, 0 below, and ∞, 0 and NaN at the ends.
    #[test]
    fn f32_exp_is_accurate_over_the_whole_range() {
        for i in -1_040_000..=887_200 {
            let x = i as f32 * 1e-4;
            let (got, want) = (exp_f32(x) as f64, (x as f64).exp());
            if want >= f32::MIN_POSITIVE as f64 {
                let rel = ((got - want) / want).abs();
                assert!(rel < 2.5e-7, "exp({x}) is off by {rel} of itself");
            } else {
                assert_eq!(got, 0.0, "exp({x}) is not flushed");
            }
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(88.8), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(-105.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(f32::NAN).is_nan());
    }
}
