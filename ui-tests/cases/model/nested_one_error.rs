use volta::prelude::*;

model! {
    /// Ends flat: 16 features.
    pub struct Flat for (B, 8) -> (B, 16) {
        fc: Linear<16>,
    }
}

model! {
    /// Takes 8 maps of 4×4.
    pub struct Maps for (B, 8, 4, 4) -> (B, 8, 4, 4) {
        conv: Conv2d<8, kernel = 1>,
    }
}

model! {
    /// One mistake (a convolution after flat features): one error, not one more
    /// for each layer after it, whose shapes it leaves unknown.
    pub struct Net for (B, 8) -> (B, 10) {
        flat: Flat,
        conv: Conv2d<8, kernel = 3, padding = 1>,
        pool: MaxPool2d<2>,
        maps: Maps,
        flatten,
        fc: Linear<7, 10>,
    }
}

fn main() {}
