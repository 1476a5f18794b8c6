//! Helpers shared by the test suites: a finite-difference gradient check in f64 and
//! random inputs kept away from the kinks of non-smooth ops.
// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use volta::prelude::*;

/// An f64 tensor on the CPU: gradient checks compute in f64 so that central
/// differences are accurate to ~1e-9.
pub type T<S> = Tensor<S, Cpu, f64>;

/// Step of the central differences.
pub const EPS: f64 = 1e-6;
/// Relative tolerance between analytic and numeric gradients.
pub const RTOL: f64 = 1e-6;
/// Absolute tolerance, for gradient elements near zero (rounding in the loss sum
/// divided by `2·EPS` is ~1e-9 here).
pub const ATOL: f64 = 1e-7;

/// One tensor a gradient check differentiates with respect to.
pub trait GradInput: Clone {
    /// Its elements, row-major.
    fn values(&self) -> Vec<f64>;
    /// A fresh untracked tensor of the same shape holding `values`.
    fn with_values(&self, values: Vec<f64>) -> Self;
    /// The same data as a tracked leaf.
    fn tracked(&self) -> Self;
    /// Its gradient in `grads`, row-major.
    fn grad(&self, grads: &Gradients<Cpu, f64>) -> Option<Vec<f64>>;
}

impl<S: Shape> GradInput for T<S> {
    fn values(&self) -> Vec<f64> {
        self.to_vec()
    }
    fn with_values(&self, values: Vec<f64>) -> Self {
        T::from_vec_shaped(values, self.shape()).expect("same length as the original")
    }
    fn tracked(&self) -> Self {
        self.requires_grad()
    }
    fn grad(&self, grads: &Gradients<Cpu, f64>) -> Option<Vec<f64>> {
        grads.get(self).map(|g| g.to_vec())
    }
}

/// The inputs of a gradient check: one tensor or a tuple of tensors.
pub trait GradInputs: Clone {
    /// Number of tensors.
    fn count(&self) -> usize;
    /// Elements of tensor `i`.
    fn values(&self, i: usize) -> Vec<f64>;
    /// A copy with tensor `i` replaced by `values` (same shape).
    fn with_values(&self, i: usize, values: Vec<f64>) -> Self;
    /// Every tensor as a tracked leaf.
    fn tracked(&self) -> Self;
    /// The gradient of tensor `i`.
    fn grad(&self, i: usize, grads: &Gradients<Cpu, f64>) -> Option<Vec<f64>>;
}

impl<S: Shape> GradInputs for T<S> {
    fn count(&self) -> usize {
        1
    }
    fn values(&self, _: usize) -> Vec<f64> {
        GradInput::values(self)
    }
    fn with_values(&self, _: usize, values: Vec<f64>) -> Self {
        GradInput::with_values(self, values)
    }
    fn tracked(&self) -> Self {
        GradInput::tracked(self)
    }
    fn grad(&self, _: usize, grads: &Gradients<Cpu, f64>) -> Option<Vec<f64>> {
        GradInput::grad(self, grads)
    }
}

macro_rules! tuple_inputs {
    ($n:literal; $($t:ident $i:tt),*) => {
        impl<$($t: GradInput),*> GradInputs for ($($t,)*) {
            fn count(&self) -> usize {
                $n
            }
            fn values(&self, i: usize) -> Vec<f64> {
                match i {
                    $($i => self.$i.values(),)*
                    _ => unreachable!(),
                }
            }
            fn with_values(&self, i: usize, values: Vec<f64>) -> Self {
                let mut out = self.clone();
                match i {
                    $($i => out.$i = self.$i.with_values(values),)*
                    _ => unreachable!(),
                }
                out
            }
            fn tracked(&self) -> Self {
                ($(self.$i.tracked(),)*)
            }
            fn grad(&self, i: usize, grads: &Gradients<Cpu, f64>) -> Option<Vec<f64>> {
                match i {
                    $($i => self.$i.grad(grads),)*
                    _ => unreachable!(),
                }
            }
        }
    };
}
tuple_inputs!(1; A 0);
tuple_inputs!(2; A 0, B 1);
tuple_inputs!(3; A 0, B 1, C 2);
tuple_inputs!(4; A 0, B 1, C 2, F 3);
tuple_inputs!(5; A 0, B 1, C 2, F 3, G 4);

/// Compares the gradient `backward()` computes for `(f(inputs) · r).sum_all()` (with
/// random weights `r`, so every output element matters) against central finite
/// differences, element by element. Panics with the first mismatch.
#[track_caller]
pub fn check_grad<I: GradInputs, S: SameShape<S>>(
    rng: &mut Rng,
    inputs: I,
    f: impl Fn(&I) -> T<S>,
) {
    if let Err(e) = try_check_grad(rng, inputs, f) {
        panic!("gradient check failed: {e}");
    }
}

/// [`check_grad`] returning the first mismatch instead of panicking.
pub fn try_check_grad<I: GradInputs, S: SameShape<S>>(
    rng: &mut Rng,
    inputs: I,
    f: impl Fn(&I) -> T<S>,
) -> Result<(), String> {
    let weights = {
        let _guard = volta::no_grad();
        T::<S>::randn_shaped(f(&inputs).shape(), rng)
    };
    let loss = |x: &I| f(x).mul(&weights).sum_all();

    let tracked = inputs.tracked();
    let grads = loss(&tracked).backward();

    let _guard = volta::no_grad();
    for i in 0..inputs.count() {
        let analytic = tracked
            .grad(i, &grads)
            .ok_or_else(|| format!("input {i} got no gradient"))?;
        let base = inputs.values(i);
        if analytic.len() != base.len() {
            return Err(format!(
                "input {i}: gradient has {} elements, the input {}",
                analytic.len(),
                base.len()
            ));
        }
        for j in 0..base.len() {
            let at = |x: f64| {
                let mut v = base.clone();
                v[j] = x;
                loss(&inputs.with_values(i, v)).item()
            };
            let numeric = (at(base[j] + EPS) - at(base[j] - EPS)) / (2.0 * EPS);
            let err = (analytic[j] - numeric).abs();
            let tol = RTOL * analytic[j].abs().max(numeric.abs()) + ATOL;
            if err.is_nan() || err > tol {
                return Err(format!(
                    "input {i}, element {j} (value {}): analytic {} vs numeric {} (|diff| {err:.3e} > tol {tol:.3e})",
                    base[j], analytic[j], numeric
                ));
            }
        }
    }
    Ok(())
}

/// A random size in `1..=max`.
pub fn size(rng: &mut Rng, max: usize) -> usize {
    1 + rng.below(max)
}

/// A random `(rows, cols)` shape with sizes in `1..=max`.
pub fn dims2(rng: &mut Rng, max: usize) -> (usize, usize) {
    (size(rng, max), size(rng, max))
}

/// A random rank-3 shape with sizes in `1..=max`.
pub fn dims3(rng: &mut Rng, max: usize) -> (usize, usize, usize) {
    (size(rng, max), size(rng, max), size(rng, max))
}

/// Standard normal values.
pub fn randn<S: Shape>(rng: &mut Rng, shape: S) -> T<S> {
    T::randn_shaped(shape, rng)
}

/// Uniform values in `[lo, hi)`.
pub fn uniform<S: Shape>(rng: &mut Rng, shape: S, lo: f64, hi: f64) -> T<S> {
    T::uniform_shaped(shape, lo, hi, rng)
}

/// Values with `|x| ≥ margin` and random signs (away from the kink of relu/abs at 0).
pub fn away_from_zero<S: Shape>(rng: &mut Rng, shape: S, margin: f64) -> T<S> {
    let data = (0..shape.numel())
        .map(|_| {
            let z = rng.normal();
            z.signum() * (margin + z.abs())
        })
        .collect();
    T::from_vec_shaped(data, shape).unwrap()
}

/// Values in random order that differ pairwise by at least 0.06: each lies in
/// `0.1·k + shift + [0, 0.04)` for a distinct integer `k` (no ties for max/min, even
/// after a finite-difference step). Two tensors with shifts 0 and 0.05 never tie.
pub fn distinct<S: Shape>(rng: &mut Rng, shape: S, shift: f64) -> T<S> {
    let n = shape.numel();
    let mut order: Vec<i64> = (0..n as i64).map(|k| k - n as i64 / 2).collect();
    rng.shuffle(&mut order);
    let data = order
        .iter()
        .map(|&k| k as f64 * 0.1 + shift + 0.04 * rng.uniform())
        .collect();
    T::from_vec_shaped(data, shape).unwrap()
}

/// `b` such that `|a − b| ≥ margin` elementwise (no ties for maximum/minimum).
pub fn apart_from<S: Shape>(rng: &mut Rng, a: &T<S>, margin: f64) -> T<S> {
    let data = a
        .to_vec()
        .iter()
        .map(|&x| {
            let z = rng.normal();
            x + z.signum() * (margin + z.abs())
        })
        .collect();
    T::from_vec_shaped(data, a.shape()).unwrap()
}

/// Random `u32` indices in `0..bound` with the given shape.
pub fn indices<S: Shape>(rng: &mut Rng, shape: S, bound: usize) -> Tensor<S, Cpu, u32> {
    let data = (0..shape.numel())
        .map(|_| rng.below(bound) as u32)
        .collect();
    Tensor::from_vec_shaped(data, shape).unwrap()
}
