//! Shared helpers for the examples: where the digits data is, command-line
//! options, and the benchmarks' CNN. (The digits reader itself is `volta::data::readers::digits`.)
#![warn(missing_docs)]

pub mod cli;
#[path = "gpt_model.rs"]
pub mod gpt;

use volta::prelude::*;

model! {
    /// The benchmarks' CNN (`torch_peers.py`'s): two 3×3 convolutions with ReLU and
    /// 2×2 max pooling, then a linear classifier over 28×28 images.
    pub struct LeNet for (B, 1, 28, 28) -> (B, 10) {
        conv1: Conv2d<32, kernel = 3, padding = 1>,
        relu,
        pool1: MaxPool2d<2>,
        conv2: Conv2d<64, kernel = 3, padding = 1>,
        relu,
        pool2: MaxPool2d<2>,
        flatten,
        fc: Linear<10>,
    }
}

// Where the bundled digits file is, found at run time: the main job's module.
#[path = "../train/data_path.rs"]
mod data_path;
pub use data_path::{BUNDLED_DIGITS, NotFound, find_digits};

// The README's code blocks run as doctests, so the README cannot drift from the API.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
