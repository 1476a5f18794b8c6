//! No-grad mode for inference: ops record nothing while it is on.
use std::cell::Cell;

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record gradients.
pub fn grad_enabled() -> bool {
    ENABLED.with(|e| e.get())
}

/// Turns gradient recording off on this thread until the guard drops.
///
/// ```
/// let _guard = volta::no_grad();
/// assert!(!volta::grad_enabled());
/// ```
#[must_use = "gradients are off only while the guard lives"]
pub fn no_grad() -> NoGradGuard {
    NoGradGuard {
        previous: ENABLED.with(|e| e.replace(false)),
    }
}

/// Restores the previous gradient mode when dropped (see [`no_grad`]).
pub struct NoGradGuard {
    previous: bool,
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        ENABLED.with(|e| e.set(self.previous));
    }
}
