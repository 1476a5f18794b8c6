use volta::prelude::*;

model! {
    /// Ends at 7×7 maps.
    pub struct Stem for (B, 1, 7, 7) -> (B, 8, 7, 7) {
        conv: Conv2d<8, kernel = 3, padding = 1>,
    }
}

model! {
    /// A 2×2 pooling after it would drop a row and a column.
    pub struct Net for (B, 1, 7, 7) -> (B, 8, 3, 3) {
        stem: Stem,
        pool: MaxPool2d<2>,
    }
}

fn main() {}
