use volta::prelude::*;

model! {
    /// A convolution after `flatten`.
    pub struct Net for (B, 1, 8, 8) -> (B, 4) {
        flatten,
        conv: Conv2d<4, kernel = 3>,
    }
}

fn main() {}
