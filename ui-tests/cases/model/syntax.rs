use volta::prelude::*;

model! {
    /// A misspelt option.
    pub struct A for (B, 1, 8, 8) -> (B, 4, 8, 8) {
        conv: Conv2d<4, kernel = 3, paddin = 1>,
    }
}

model! {
    /// An unknown step.
    pub struct C for (B, 4) -> (B, 4) {
        rleu,
    }
}

fn main() {}
