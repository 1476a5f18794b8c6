//! The hyperparameters of the fused optimiser kernels ([`Backend::adam_step`],
//! [`Backend::sgd_step`]).
//!
//! They are host values in `f64` (as PyTorch keeps them): the constants a kernel
//! derives from them (`1 − β₁`, `1 − lr·λ`, …) are computed once per call in `f64`
//! and rounded to the element type, identically on every device. On the GPU they
//! travel in the dispatch's parameter block, so a new learning rate each step
//! reuses the compiled kernel.
//!
//! [`Backend::adam_step`]: super::Backend::adam_step
//! [`Backend::sgd_step`]: super::Backend::sgd_step
use super::{Buf, Memory, View};
use crate::dtype::{Element, Float};

/// One Adam/AdamW step of one parameter, as PyTorch defines it:
///
/// - weight decay: `p ← p·(1 − lr·λ)` when `decoupled` (AdamW), else `g ← g + λ·p`;
/// - `m ← β₁·m + (1 − β₁)·g`, `v ← β₂·v + (1 − β₂)·g²` (`m = v = 0` before the
///   first step);
/// - `p ← p − lr · m̂ / (√v̂ + ε)` with `m̂ = m / bias_correction1` and
///   `v̂ = v / bias_correction2`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamStep {
    /// Learning rate.
    pub lr: f64,
    /// Decay rate of the first moment, `β₁`.
    pub beta1: f64,
    /// Decay rate of the second moment, `β₂`.
    pub beta2: f64,
    /// Added to the denominator, `ε`.
    pub eps: f64,
    /// Weight decay `λ` (0: none).
    pub weight_decay: f64,
    /// `true`: decoupled weight decay (AdamW); `false`: L2, added to the gradient.
    pub decoupled: bool,
    /// `1 − β₁ᵗ` at this parameter's step `t` (counted from 1).
    pub bias_correction1: f64,
    /// `1 − β₂ᵗ` at this parameter's step `t`.
    pub bias_correction2: f64,
}

impl AdamStep {
    /// The hyperparameters with the bias corrections of step `t` (counted from 1).
    pub fn at_step(
        lr: f64,
        (beta1, beta2): (f64, f64),
        eps: f64,
        weight_decay: f64,
        decoupled: bool,
        t: i32,
    ) -> Self {
        AdamStep {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            bias_correction1: 1.0 - beta1.powi(t),
            bias_correction2: 1.0 - beta2.powi(t),
        }
    }

    /// The constants a kernel uses, rounded to `E` (computed in `f64`).
    pub(crate) fn constants<E: Float>(&self) -> AdamConstants<E> {
        let c = E::from_f64;
        let wd = self.weight_decay;
        AdamConstants {
            lr: c(self.lr),
            beta1: c(self.beta1),
            one_minus_beta1: c(1.0 - self.beta1),
            beta2: c(self.beta2),
            one_minus_beta2: c(1.0 - self.beta2),
            eps: c(self.eps),
            l2: (!self.decoupled && wd != 0.0).then(|| c(wd)),
            decay: (self.decoupled && wd != 0.0).then(|| c(1.0 - self.lr * wd)),
            m_scale: c(1.0 / self.bias_correction1),
            v_scale: c(1.0 / self.bias_correction2),
        }
    }
}

/// One parameter's share of [`Backend::adam_steps`](super::Backend::adam_steps):
/// what [`Backend::adam_step`](super::Backend::adam_step) takes.
pub struct AdamInput<'a, D: Memory<E>, E: Element> {
    /// The parameter.
    pub p: View<'a, D, E>,
    /// Its gradient (the parameter's dims).
    pub g: View<'a, D, E>,
    /// Its moments `(m, v)`; `None` before its first step (zero).
    pub moments: Option<(View<'a, D, E>, View<'a, D, E>)>,
    /// The hyperparameters of its step.
    pub hyper: AdamStep,
}

/// A parameter's new `(p, m, v)` from an Adam step, contiguous.
pub type AdamOutput<D, E> = (Buf<D, E>, Buf<D, E>, Buf<D, E>);

/// [`AdamStep`] as the kernels use it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamConstants<E> {
    pub lr: E,
    pub beta1: E,
    pub one_minus_beta1: E,
    pub beta2: E,
    pub one_minus_beta2: E,
    pub eps: E,
    /// `λ` when L2 decay applies.
    pub l2: Option<E>,
    /// `1 − lr·λ` when decoupled decay applies.
    pub decay: Option<E>,
    /// `1 / (1 − β₁ᵗ)`.
    pub m_scale: E,
    /// `1 / (1 − β₂ᵗ)`.
    pub v_scale: E,
}

impl<E: Float> AdamConstants<E> {
    /// The step of one element: `(p', m', v')` from `p`, `g` and the old moments
    /// (`None`: zero, the first step). The order of operations is the kernels'.
    #[inline]
    pub fn update(&self, p: E, g: E, moments: Option<(E, E)>) -> (E, E, E) {
        let mut x = p;
        let mut g = g;
        if let Some(l2) = self.l2 {
            g = g + x * l2;
        }
        if let Some(decay) = self.decay {
            x = x * decay;
        }
        let (m, v) = moments.unwrap_or((E::ZERO, E::ZERO));
        let m = m * self.beta1 + g * self.one_minus_beta1;
        let v = v * self.beta2 + (g * g) * self.one_minus_beta2;
        let denom = (v * self.v_scale).sqrt() + self.eps;
        (x - ((m * self.m_scale) / denom) * self.lr, m, v)
    }
}

/// One SGD step of one parameter, as PyTorch defines it: `g ← g + λ·p`; with
/// momentum `μ > 0`, `b ← μ·b + g` (`b ← g` on the first step) and then
/// `g ← g + μ·b` (Nesterov) or `g ← b`; finally `p ← p − lr·g`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdStep {
    /// Learning rate.
    pub lr: f64,
    /// Momentum `μ` (0: none, and no buffer).
    pub momentum: f64,
    /// Weight decay `λ` (0: none), added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum (needs `momentum > 0`).
    pub nesterov: bool,
}

impl SgdStep {
    /// The constants a kernel uses, rounded to `E`.
    pub(crate) fn constants<E: Float>(&self) -> SgdConstants<E> {
        let c = E::from_f64;
        SgdConstants {
            lr: c(self.lr),
            momentum: (self.momentum != 0.0).then(|| c(self.momentum)),
            l2: (self.weight_decay != 0.0).then(|| c(self.weight_decay)),
            nesterov: self.nesterov,
        }
    }
}

/// [`SgdStep`] as the kernels use it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SgdConstants<E> {
    pub lr: E,
    pub momentum: Option<E>,
    pub l2: Option<E>,
    pub nesterov: bool,
}

impl<E: Float> SgdConstants<E> {
    /// The step of one element: `(p', b')` from `p`, `g` and the old momentum buffer
    /// (`None` on the first step); `b'` is meaningless without momentum.
    #[inline]
    pub fn update(&self, p: E, g: E, buf: Option<E>) -> (E, E) {
        let mut g = g;
        if let Some(l2) = self.l2 {
            g = g + p * l2;
        }
        let mut b = g;
        if let Some(mu) = self.momentum {
            if let Some(old) = buf {
                b = old * mu + g;
            }
            g = if self.nesterov { g + b * mu } else { b };
        }
        (p - g * self.lr, b)
    }
}
