use volta::prelude::*;

model! {
    /// 28 → 14 → 7: a third 2×2 pooling would drop a row and a column.
    pub struct Net for (B, 1, 28, 28) -> (B, 10) {
        pool1: MaxPool2d<2>,
        pool2: MaxPool2d<2>,
        pool3: MaxPool2d<2>,
        flatten,
        fc: Linear<10>,
    }
}

fn main() {}
