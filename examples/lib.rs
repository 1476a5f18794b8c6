//! Shared helpers for the examples: where the digits data is, and command-line
//! options. (The digits reader itself is `volta::data::readers::digits`.)

pub mod cli;

/// The committed UCI digits file, `data/digits.csv.gz` at the repository root.
pub fn digits_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/digits.csv.gz")
}

// The README's code blocks run as doctests, so the README cannot drift from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
