//! `f32` products on tensor cores at `f32`'s accuracy ([`MatmulPrecision::Split`]):
//! each operand, scaled by a power of two, is split into two `f16`s and the
//! product is three `f16` products. This file holds what the split adds to the
//! tensor-core kernel of `coop`: the scales from the operands' largest
//! magnitudes (reduced before the product by `scales`) and the split itself.
//!
//! The kernel sums `hi·hi` in one accumulator and the two small terms
//! (`hi·lo`, `lo·hi`, about 2⁻¹¹ of it) in another. NVIDIA's tensor cores add
//! each step to their `f32` accumulator rounding toward zero (Ootomo and Yokota,
//! 2022), so an accumulator that takes every step of a long K drifts from the
//! `f32` sum: the large term's accumulator is added to a sum in registers,
//! rounded to nearest, and cleared after every K tile. On an H100 (2026-12-07)
//! the errors against `f64` were then 0.7–2.0× the FMA kernel's at every K up
//! to 4096; with all three products in one accumulator they were up to 67×,
//! and with only the small terms apart up to 23×
//! (benchmarks/h100-2026-12-07-split-sums).
//!
//! [`MatmulPrecision::Split`]: super::MatmulPrecision::Split

/// What the low halves are multiplied by before they are rounded to `f16`
/// (2¹¹: they stay normal `f16`s down to operands 2²⁸ below the largest), and
/// so what the small terms' sums are divided by.
pub(crate) const LOW_FACTOR: f32 = 2048.0;

/// Partial maxima per operand at most: one per workgroup of the reduction
/// (`scales`).
pub(crate) const SLOTS: usize = 1024;

/// WGSL for the start of a split product (`threads` invocations, `Cs` at least
/// `2·threads` long): the operands' largest magnitudes from their partial
/// maxima (`mxa` and `mxb`, counts in `p[12]` and `p[13]`), and the scales
/// that bring them into `[2¹⁴, 2¹⁵)`: `sa = 2^ea`, `sb = 2^eb`.
pub(crate) fn prologue(threads: u32) -> String {
    assert!(threads.is_power_of_two(), "a tree over {threads} threads");
    format!(
        "    {{
        var la = 0.0; var lb = 0.0;
        for (var i = li; i < p[12]; i += {threads}u) {{ la = max(la, mxa[i]); }}
        for (var i = li; i < p[13]; i += {threads}u) {{ lb = max(lb, mxb[i]); }}
        Cs[li] = la; Cs[{threads}u + li] = lb;
        workgroupBarrier();
        for (var s = {half}u; s > 0u; s >>= 1u) {{
            if (li < s) {{
                Cs[li] = max(Cs[li], Cs[li + s]);
                Cs[{threads}u + li] = max(Cs[{threads}u + li], Cs[{threads}u + li + s]);
            }}
            workgroupBarrier();
        }}
    }}
    let ea = split_exponent(Cs[0]); let eb = split_exponent(Cs[{threads}u]);
    let sa = ldexp(1.0, ea); let sb = ldexp(1.0, eb);
    // Back from the scaled operands: two factors, as their product may leave
    // f32's range where the result does not.
    let ua = ldexp(1.0, -ea); let ub = ldexp(1.0, -eb);
    workgroupBarrier();\n",
        half = threads / 2
    )
}

/// The WGSL function behind [`prologue`]: the exponent that brings `x` into
/// `[2¹⁴, 2¹⁵)` (at most 126). 0 for infinities and NaN, which then reach the
/// product as they are, and for zero and subnormal largest magnitudes, whose
/// products are below `f32`'s smallest normal.
pub(crate) const SPLIT_EXPONENT: &str = "fn split_exponent(x: f32) -> i32 {
    let e = i32((bitcast<u32>(x) >> 23u) & 0xffu);
    if (e == 255 || e == 0) { return 0; }
    return min(14 - (e - 127), 126);
}
";

/// WGSL storing a scaled `f32` load `x` (a `vec4<f32>`) as its two halves at
/// `si` and `si + lo` of the shared array `sh`. The high half is `x` with its
/// 13 low mantissa bits cleared (exact in `f16`: a mask, which no compiler folds
/// away as it may a round trip through `f16`); the low half is the rest, times
/// [`LOW_FACTOR`].
pub(crate) fn store_halves(sh: &str, x: &str, lo: u32) -> String {
    format!(
        "let xh = bitcast<vec4<f32>>(bitcast<vec4<u32>>({x}) & vec4<u32>(0xffffe000u));
        {sh}[si] = vec4<f16>(xh); {sh}[si + {lo}u] = vec4<f16>(({x} - xh) * {LOW_FACTOR:.1});"
    )
}
