//! WGSL helper functions that op expressions may call.

/// `volta_erf(x)`: the error function, with the same Chebyshev fit (|error| <
/// 1.2e-7) and the same series for |x| < 1e-3 (where the fit's error would swamp erf
/// and make erf(0) nonzero) that the CPU uses, so GPU and CPU results agree to f32
/// rounding.
pub const VOLTA_ERF: &str = "
fn volta_erf(x: f32) -> f32 {
    let z = abs(x);
    if (z < 1e-3) {
        return x * (1.1283791671 - 0.3761263890 * x * x);
    }
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277))))))));
    let r = 1.0 - t * exp(poly);
    return select(-r, r, x >= 0.0);
}
";
