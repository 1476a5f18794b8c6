//! Anomaly mode: find the op that first produced a NaN or an infinity, as
//! PyTorch's `torch.autograd.detect_anomaly` does.
use std::cell::Cell;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    /// Inside `backward()`: the ops of backward rules are not checked one by
    /// one; the gradients they produce are, and named after the op they belong to.
    static IN_BACKWARD: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with every op checked: each result is read back (a sync per op on the
/// GPU, so this is for debugging, not training) and so is each gradient that
/// `backward()` computes. The first NaN or infinity panics with the op, the dims
/// of its result, and the line of your code that called the op (ops carry
/// `#[track_caller]`); in the backward pass, the op whose backward rule produced it
/// and where its forward ran. Scoped to this thread; nests.
///
/// ```should_panic
/// use volta::prelude::*;
/// let x = Tensor::<Rank1<2>>::from_array([1.0, -1.0]).requires_grad();
/// volta::autograd::detect_anomaly(|| {
///     let y = x.sqrt(); // panics: "detect_anomaly: `Sqrt` at src/main.rs:5:15 ..."
///     y.sum_all().backward();
/// });
/// ```
pub fn detect_anomaly<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ON.with(|on| on.set(self.0));
        }
    }
    let _restore = Restore(ON.with(|on| on.replace(true)));
    f()
}

/// Whether this thread runs in anomaly mode.
pub(crate) fn enabled() -> bool {
    ON.with(Cell::get)
}

/// Whether each op's result is checked as it is recorded (anomaly mode, outside
/// the backward pass).
pub(crate) fn check_forward() -> bool {
    enabled() && !IN_BACKWARD.with(Cell::get)
}

/// Marks the backward pass until it drops.
pub(crate) struct BackwardGuard(bool);

impl BackwardGuard {
    /// Enters the backward pass.
    pub(crate) fn enter() -> Self {
        BackwardGuard(IN_BACKWARD.with(|b| b.replace(true)))
    }
}

impl Drop for BackwardGuard {
    fn drop(&mut self) {
        IN_BACKWARD.with(|b| b.set(self.0));
    }
}

/// The index and value of the first element that is not finite.
pub(crate) fn first_bad<E: crate::dtype::Element>(values: &[E]) -> Option<(usize, E)> {
    values
        .iter()
        .position(|v| !v.is_finite())
        .map(|i| (i, values[i]))
}

type Site = &'static std::panic::Location<'static>;

thread_local! {
    /// The user's call site of the op being recorded, when an op runs its raw ops
    /// inside a closure (closures cannot carry `#[track_caller]`).
    static SITE: Cell<Option<Site>> = const { Cell::new(None) };
}

/// Keeps `site` as the call site of the ops recorded until it drops (the
/// outermost one wins: an op built from other ops reports the user's line).
pub(crate) struct SiteGuard(Option<Option<Site>>);

impl SiteGuard {
    /// Enters `site`; free outside anomaly mode.
    pub(crate) fn enter(site: Site) -> Self {
        if !enabled() {
            return SiteGuard(None);
        }
        SiteGuard(Some(
            SITE.with(|s| s.replace(Some(s.get().unwrap_or(site)))),
        ))
    }
}

impl Drop for SiteGuard {
    fn drop(&mut self) {
        if let Some(prev) = self.0 {
            SITE.with(|s| s.set(prev));
        }
    }
}

/// The call site to record for an op called from `caller`.
pub(crate) fn site(caller: Site) -> Site {
    if enabled() {
        SITE.with(Cell::get).unwrap_or(caller)
    } else {
        caller
    }
}
