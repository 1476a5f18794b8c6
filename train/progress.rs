//! The per-epoch progress bar of a training run (the main job's, and the GPT
//! example's).
use indicatif::{ProgressBar, ProgressStyle};

/// A bar over an epoch's `steps`, labelled `epoch/epochs`; its message slot shows
/// what the caller sets (the main job: the running loss).
pub fn progress(epoch: u64, epochs: u64, steps: u64) -> ProgressBar {
    let bar = ProgressBar::new(steps);
    bar.set_style(
        ProgressStyle::with_template(
            "epoch {prefix} [{bar:30.cyan/blue}] {pos}/{len} steps  {per_sec}  {msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(format!("{epoch:>2}/{epochs}"));
    bar
}
