//! Learning-rate schedules: the learning rate as a function of the step.
//!
//! A schedule is a pure function of the step count, so it needs no state to save
//! in a checkpoint (the optimiser's [`state`](super::Optimizer::state) has the step).
//! Set the rate before each step:
//!
//! ```
//! use volta::prelude::*;
//! use volta::optim::{CosineWarmup, LrSchedule};
//!
//! let mut w = Tensor::<Rank1<2>>::from_array([1.0, -1.0]).requires_grad();
//! let mut opt = Sgd::new(0.1);
//! let schedule = CosineWarmup::new(0.1, 10, 100).with_min_lr(1e-3);
//! for step in 0..100 {
//!     schedule.apply(&mut opt, step); // opt.set_lr(schedule.lr(step))
//!     let grads = w.mul(&w).sum_all().backward();
//!     opt.step(&mut w, &grads);
//! }
//! assert_eq!(opt.lr(), schedule.lr(99));
//! ```
use super::{Optimizer, check};
use crate::backend::Backend;
use crate::dtype::Float;
use std::f64::consts::PI;

/// A learning rate for every step.
pub trait LrSchedule {
    /// The learning rate of step `step` (the first optimiser step is step 0).
    fn lr(&self, step: u64) -> f64;

    /// Sets `opt`'s learning rate to that of step `step`.
    fn apply<D: Backend<E>, E: Float, O: Optimizer<D, E> + ?Sized>(&self, opt: &mut O, step: u64)
    where
        Self: Sized,
    {
        opt.set_lr(self.lr(step));
    }
}

/// `base_lr · γ^⌊step / step_size⌋`: the rate decays by `gamma` every `step_size`
/// steps (PyTorch's `StepLR`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepLr {
    base_lr: f64,
    step_size: u64,
    gamma: f64,
}

impl StepLr {
    /// Decays `base_lr` by `gamma` every `step_size` steps.
    ///
    /// # Panics
    /// When `base_lr` or `gamma` is negative or not finite, or `step_size` is 0.
    pub fn new(base_lr: f64, step_size: u64, gamma: f64) -> Self {
        check("StepLr: base_lr", base_lr, base_lr >= 0.0, "≥ 0");
        check("StepLr: gamma", gamma, gamma >= 0.0, "≥ 0");
        assert!(step_size > 0, "StepLr: step_size must be > 0");
        StepLr {
            base_lr,
            step_size,
            gamma,
        }
    }
}

impl LrSchedule for StepLr {
    fn lr(&self, step: u64) -> f64 {
        let k = (step / self.step_size).min(i32::MAX as u64) as i32;
        self.base_lr * self.gamma.powi(k)
    }
}

/// Linear warm-up, then cosine decay: over steps `0..warmup` the rate rises
/// linearly from `start_factor · base_lr` (0 unless set) towards `base_lr`, which
/// step `warmup` reaches; then it follows half a cosine from `base_lr` down to
/// `min_lr` at step `total`, and stays at `min_lr` after.
///
/// `lr(s) = base_lr · (f + (1 − f) · s / warmup)` for `s < warmup`, and
/// `min_lr + (base_lr − min_lr) · (1 + cos(π · (s − warmup) / (total − warmup))) / 2`
/// for `warmup ≤ s ≤ total` (the usual "cosine with warm-up" of transformer
/// training; PyTorch's `LinearLR` followed by `CosineAnnealingLR` with `eta_min`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineWarmup {
    base_lr: f64,
    warmup: u64,
    total: u64,
    min_lr: f64,
    start_factor: f64,
}

impl CosineWarmup {
    /// Warm-up from 0 over `warmup` steps to `base_lr`, then cosine decay to 0 at
    /// step `total`.
    ///
    /// # Panics
    /// When `base_lr` is negative or not finite, or `warmup > total`.
    pub fn new(base_lr: f64, warmup: u64, total: u64) -> Self {
        check("CosineWarmup: base_lr", base_lr, base_lr >= 0.0, "≥ 0");
        assert!(
            warmup <= total,
            "CosineWarmup: warmup ({warmup}) must not exceed total ({total})"
        );
        CosineWarmup {
            base_lr,
            warmup,
            total,
            min_lr: 0.0,
            start_factor: 0.0,
        }
    }

    /// Sets the rate the cosine ends at (default 0).
    ///
    /// # Panics
    /// When `min_lr` is negative, not finite, or above `base_lr`.
    pub fn with_min_lr(mut self, min_lr: f64) -> Self {
        check(
            "CosineWarmup: min_lr",
            min_lr,
            (0.0..=self.base_lr).contains(&min_lr),
            "in [0, base_lr]",
        );
        self.min_lr = min_lr;
        self
    }

    /// Sets the fraction of `base_lr` that warm-up starts from (default 0).
    ///
    /// # Panics
    /// When `start_factor` is outside `[0, 1]`.
    pub fn with_start_factor(mut self, start_factor: f64) -> Self {
        check(
            "CosineWarmup: start_factor",
            start_factor,
            (0.0..=1.0).contains(&start_factor),
            "in [0, 1]",
        );
        self.start_factor = start_factor;
        self
    }
}

impl LrSchedule for CosineWarmup {
    fn lr(&self, step: u64) -> f64 {
        if step < self.warmup {
            let f = self.start_factor;
            return self.base_lr * (f + (1.0 - f) * step as f64 / self.warmup as f64);
        }
        if step >= self.total {
            return self.min_lr;
        }
        let progress = (step - self.warmup) as f64 / (self.total - self.warmup) as f64;
        self.min_lr + (self.base_lr - self.min_lr) * (1.0 + (PI * progress).cos()) / 2.0
    }
}

/// The 1cycle policy (Smith & Topin), PyTorch's `OneCycleLR` with cosine annealing
/// (two phases): the rate rises from `max_lr / div_factor` to `max_lr` over the
/// first `pct_start · total_steps − 1` steps, then falls to
/// `max_lr / (div_factor · final_div_factor)` at step `total_steps − 1`, and stays
/// there. Only the rate is scheduled (not momentum, which `OneCycleLR` also
/// cycles by default).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OneCycle {
    max_lr: f64,
    total_steps: u64,
    pct_start: f64,
    div_factor: f64,
    final_div_factor: f64,
}

impl OneCycle {
    /// PyTorch's defaults: `pct_start = 0.3`, `div_factor = 25`,
    /// `final_div_factor = 1e4`.
    ///
    /// # Panics
    /// When `max_lr` is negative or not finite, or `total_steps` is 0.
    pub fn new(max_lr: f64, total_steps: u64) -> Self {
        check("OneCycle: max_lr", max_lr, max_lr >= 0.0, "≥ 0");
        assert!(total_steps > 0, "OneCycle: total_steps must be > 0");
        OneCycle {
            max_lr,
            total_steps,
            pct_start: 0.3,
            div_factor: 25.0,
            final_div_factor: 1e4,
        }
    }

    /// Sets the fraction of the steps spent rising (default 0.3).
    ///
    /// # Panics
    /// When `pct_start` is outside `(0, 1)`.
    pub fn with_pct_start(mut self, pct_start: f64) -> Self {
        check(
            "OneCycle: pct_start",
            pct_start,
            pct_start > 0.0 && pct_start < 1.0,
            "in (0, 1)",
        );
        self.pct_start = pct_start;
        self
    }

    /// Sets the initial rate to `max_lr / div_factor`.
    ///
    /// # Panics
    /// When `div_factor` is not positive and finite.
    pub fn with_div_factor(mut self, div_factor: f64) -> Self {
        check("OneCycle: div_factor", div_factor, div_factor > 0.0, "> 0");
        self.div_factor = div_factor;
        self
    }

    /// Sets the final rate to `max_lr / (div_factor · final_div_factor)`.
    ///
    /// # Panics
    /// When `final_div_factor` is not positive and finite.
    pub fn with_final_div_factor(mut self, final_div_factor: f64) -> Self {
        check(
            "OneCycle: final_div_factor",
            final_div_factor,
            final_div_factor > 0.0,
            "> 0",
        );
        self.final_div_factor = final_div_factor;
        self
    }

    /// The step where the rise ends (`pct_start · total_steps − 1`, as PyTorch).
    fn up_end(&self) -> f64 {
        self.pct_start * self.total_steps as f64 - 1.0
    }
}

/// Cosine interpolation from `start` (at `pct = 0`) to `end` (at `pct = 1`).
fn anneal_cos(start: f64, end: f64, pct: f64) -> f64 {
    end + (start - end) / 2.0 * ((PI * pct).cos() + 1.0)
}

impl LrSchedule for OneCycle {
    fn lr(&self, step: u64) -> f64 {
        let initial = self.max_lr / self.div_factor;
        let min = initial / self.final_div_factor;
        let last = (self.total_steps - 1) as f64;
        let s = (step as f64).min(last);
        let up = self.up_end();
        // A rise that ends before step 1 has no step of its own (PyTorch: a rise
        // ending before step 0 is skipped, one ending at step 0 divides by 0).
        if s <= up && up > 0.0 {
            anneal_cos(initial, self.max_lr, s / up)
        } else {
            anneal_cos(self.max_lr, min, (s - up) / (last - up))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::{Adam, Sgd};

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-12), "{a} vs {b}");
    }

    #[test]
    fn step_lr_matches_pytorch() {
        // StepLR(lr=0.1, step_size=3, gamma=0.5): 0.1 for epochs 0–2, 0.05 for 3–5, …
        let s = StepLr::new(0.1, 3, 0.5);
        let got: Vec<f64> = (0..8).map(|t| s.lr(t)).collect();
        let want = [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025];
        for (a, b) in got.iter().zip(want) {
            close(*a, b);
        }
    }

    #[test]
    fn cosine_warmup_rises_linearly_then_follows_the_cosine() {
        let s = CosineWarmup::new(1e-3, 10, 110).with_min_lr(1e-5);
        close(s.lr(0), 0.0);
        close(s.lr(5), 5e-4);
        close(s.lr(10), 1e-3);
        // Half-way through the cosine: the mean of the two ends.
        close(s.lr(60), (1e-3 + 1e-5) / 2.0);
        // A quarter in: min + (base − min)·(1 + cos(π/4))/2.
        close(s.lr(35), 1e-5 + 0.99e-3 * (1.0 + 0.5f64.sqrt()) / 2.0);
        close(s.lr(110), 1e-5);
        close(s.lr(1000), 1e-5);
        let from_a_third = CosineWarmup::new(0.3, 3, 6).with_start_factor(1.0 / 3.0);
        close(from_a_third.lr(0), 0.1);
        close(from_a_third.lr(1), 0.1 + 0.2 / 3.0);
        // No warm-up: the cosine from step 0.
        close(CosineWarmup::new(0.2, 0, 4).lr(0), 0.2);
        close(CosineWarmup::new(0.2, 0, 4).lr(2), 0.1);
    }

    /// PyTorch's `OneCycleLR._get_lr` (two phases, cosine), transcribed.
    fn pytorch_one_cycle(max_lr: f64, total: u64, pct: f64, div: f64, fdiv: f64, t: u64) -> f64 {
        let initial = max_lr / div;
        let min = initial / fdiv;
        let phases = [
            (pct * total as f64 - 1.0, initial, max_lr),
            (total as f64 - 1.0, max_lr, min),
        ];
        let mut start = 0.0;
        for (i, &(end, from, to)) in phases.iter().enumerate() {
            if t as f64 <= end || i == phases.len() - 1 {
                let p = (t as f64 - start) / (end - start);
                return to + (from - to) / 2.0 * ((PI * p).cos() + 1.0);
            }
            start = end;
        }
        unreachable!()
    }

    #[test]
    fn one_cycle_matches_pytorch() {
        // OneCycleLR(max_lr=0.1, total_steps=100): 0.004 at step 0, 0.1 at step 29,
        // 4e-7 at step 99, and half-way down (0.05 + 2e-7) at step 64.
        let s = OneCycle::new(0.1, 100);
        close(s.lr(0), 0.004);
        close(s.lr(29), 0.1);
        close(s.lr(64), (0.1 + 4e-7) / 2.0);
        close(s.lr(99), 4e-7);
        close(s.lr(500), 4e-7);
        for t in 0..100 {
            close(s.lr(t), pytorch_one_cycle(0.1, 100, 0.3, 25.0, 1e4, t));
        }
        let custom = OneCycle::new(2.0, 37)
            .with_pct_start(0.25)
            .with_div_factor(10.0)
            .with_final_div_factor(100.0);
        for t in 0..37 {
            close(
                custom.lr(t),
                pytorch_one_cycle(2.0, 37, 0.25, 10.0, 100.0, t),
            );
        }
    }

    #[test]
    fn one_cycle_with_a_short_rise() {
        // pct_start · total − 1 < 0: PyTorch starts in the fall, from "step −0.4".
        let s = OneCycle::new(1.0, 2);
        close(s.lr(0), pytorch_one_cycle(1.0, 2, 0.3, 25.0, 1e4, 0));
        close(s.lr(1), 1e-4 / 25.0);
        // A rise ending exactly at step 0: max_lr there, then the fall.
        let s = OneCycle::new(1.0, 10).with_pct_start(0.1);
        close(s.lr(0), 1.0);
        close(s.lr(9), 1e-4 / 25.0);
        assert!(OneCycle::new(1.0, 1).lr(0).is_finite());
    }

    #[test]
    fn schedules_drive_every_optimiser() {
        let s = StepLr::new(0.5, 2, 0.1);
        let mut sgd = Sgd::<crate::Cpu, f32>::new(1.0);
        let mut adam = Adam::<crate::Cpu, f64>::new(1.0);
        s.apply(&mut sgd, 3);
        s.apply(&mut adam, 4);
        close(sgd.lr(), 0.05);
        close(adam.lr(), 0.005);
        // Schedules chosen at run time, as trait objects.
        let boxed: Box<dyn LrSchedule> = Box::new(OneCycle::new(0.1, 10));
        sgd.set_lr(boxed.lr(0));
        close(sgd.lr(), 0.004);
    }

    #[test]
    #[should_panic(expected = "warmup (5) must not exceed total (4)")]
    fn rejects_warmup_past_total() {
        let _ = CosineWarmup::new(0.1, 5, 4);
    }
}
