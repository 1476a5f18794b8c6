//! Loops compiled for the widest vector instructions the CPU has. Volta builds for
//! its target's baseline (SSE2 on x86-64), so a loop the compiler vectorises runs
//! four `f32` lanes. Inside [`vectorized`] a loop is compiled again for AVX2 and for
//! AVX-512, and the CPU's best is chosen at run time by pulp's dispatcher (the
//! `gemm` crate's).

/// Runs `f` compiled for the CPU's widest vectors. Only what is inlined into the
/// dispatched function gets its instructions, so `f` is written in place as an
/// always-inlined closure of plain loops, and what it calls is inlined too (the
/// op closures of the elementwise kernels, `Float::exp`):
///
/// ```ignore
/// vectorized(#[inline(always)] || {
///     for (o, &x) in out.iter_mut().zip(src) {
///         *o = x.exp();
///     }
/// });
/// ```
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    pulp::Arch::new().dispatch(f)
}

/// `Σ f(k)` for `k < n`, in eight running sums as [`sum`] (`f` reads slices at
/// `k`: a row's values, or a product of two rows').
#[inline(always)]
pub(crate) fn sum_of<A: crate::dtype::ScalarMath>(n: usize, f: impl Fn(usize) -> A) -> A {
    let mut lanes = [A::ZERO; 8];
    let whole = n - n % 8;
    for k in (0..whole).step_by(8) {
        for (j, lane) in lanes.iter_mut().enumerate() {
            *lane = *lane + f(k + j);
        }
    }
    let tail = (whole..n).fold(A::ZERO, |s, k| s + f(k));
    lanes.iter().fold(tail, |s, &l| s + l)
}

/// The sum of `xs`, in eight running sums so that it vectorises (a single running
/// sum is a chain the compiler may not reorder).
#[inline(always)]
pub(crate) fn sum<T: volta_kernels::Float>(xs: &[T]) -> T {
    let mut lanes = [T::ZERO; 8];
    let chunks = xs.chunks_exact(8);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = *lane + x;
        }
    }
    let mut total = tail.iter().fold(T::ZERO, |a, &x| a + x);
    for lane in lanes {
        total = total + lane;
    }
    total
}
