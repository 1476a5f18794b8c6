//! Shared helpers for the examples: the digits dataset and command-line options.

pub mod cli;
pub mod dataset;

// The README's code blocks run as doctests, so the README cannot drift from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
