use volta::prelude::*;

model! {
    /// Ends flat: 64 features.
    pub struct Head for (B, 1, 8, 8) -> (B, 64) {
        flatten,
    }
}

model! {
    /// A convolution after it, which takes images.
    pub struct Net for (B, 1, 8, 8) -> (B, 4, 6, 6) {
        head: Head,
        conv: Conv2d<4, kernel = 3>,
    }
}

fn main() {}
