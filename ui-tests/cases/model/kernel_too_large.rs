use volta::prelude::*;

model! {
    /// Two 2×2 poolings leave 2×2 maps; a 5×5 kernel cannot fit them.
    pub struct Net for (B, 1, 8, 8) -> (B, 10) {
        pool1: MaxPool2d<2>,
        pool2: MaxPool2d<2>,
        conv: Conv2d<8, kernel = 5>,
        flatten,
        fc: Linear<10>,
    }
}

fn main() {}
