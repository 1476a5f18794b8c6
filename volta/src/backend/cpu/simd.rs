//! Elementwise loops compiled for the widest vector instructions the CPU has.
//! Volta builds for its target's baseline (SSE2 on x86-64), so a loop the compiler
//! vectorises runs four `f32` lanes. The loops here are compiled again for AVX2 and
//! for AVX-512, and the CPU's best is chosen at run time by pulp's dispatcher (the
//! `gemm` crate's). A loop body must be inlined into the dispatched function to get
//! its instructions: hence the `#[inline(always)]` bodies on named types rather
//! than closures.
use pulp::{Arch, Simd, WithSimd};

/// `out[i] = f(src[i])`.
pub(crate) fn map_into<E: Copy, F: Fn(E) -> E>(out: &mut [E], src: &[E], f: &F) {
    struct Map<'a, E, F> {
        out: &'a mut [E],
        src: &'a [E],
        f: &'a F,
    }
    impl<E: Copy, F: Fn(E) -> E> WithSimd for Map<'_, E, F> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, _: S) {
            for (o, &x) in self.out.iter_mut().zip(self.src) {
                *o = (self.f)(x);
            }
        }
    }
    Arch::new().dispatch(Map { out, src, f });
}

/// `out[i] = f(a[i], b[i])`.
pub(crate) fn zip_into<E: Copy, F: Fn(E, E) -> E>(out: &mut [E], a: &[E], b: &[E], f: &F) {
    struct Zip<'a, E, F> {
        out: &'a mut [E],
        a: &'a [E],
        b: &'a [E],
        f: &'a F,
    }
    impl<E: Copy, F: Fn(E, E) -> E> WithSimd for Zip<'_, E, F> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, _: S) {
            for (o, (&x, &y)) in self.out.iter_mut().zip(self.a.iter().zip(self.b)) {
                *o = (self.f)(x, y);
            }
        }
    }
    Arch::new().dispatch(Zip { out, a, b, f });
}
