//! See `tests/ui.rs`.
