use volta::prelude::*;

model! {
    /// Ends at 16 channels.
    pub struct Block for (B, 8, 4, 4) -> (B, 16, 4, 4) {
        conv: Conv2d<16, kernel = 3, padding = 1>,
    }
}

model! {
    /// Declares 8 channels out.
    pub struct Net for (B, 8, 4, 4) -> (B, 8, 4, 4) {
        block: Block,
    }
}

fn main() {}
