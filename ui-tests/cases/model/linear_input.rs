use volta::prelude::*;

model! {
    /// A `Linear<784, 128>` wired into a `Linear<64, 10>`.
    pub struct Mlp for (B, 784) -> (B, 10) {
        fc1: Linear<784, 128>,
        relu,
        fc2: Linear<64, 10>,
    }
}

fn main() {}
