use volta::prelude::*;

model! {
    /// Takes 16 channels.
    pub struct Block for (B, 16, 8, 8) -> (B, 16, 8, 8) {
        conv: Conv2d<16, kernel = 3, padding = 1>,
    }
}

model! {
    /// Feeds it 8 channels.
    pub struct Net for (B, 3, 8, 8) -> (B, 16, 8, 8) {
        stem: Conv2d<8, kernel = 3, padding = 1>,
        block: Block,
    }
}

fn main() {}
