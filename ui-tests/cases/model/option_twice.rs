use volta::prelude::*;

model! {
    /// `padding` named twice: PyTorch rejects this ("got multiple values").
    pub struct A for (B, 1, 8, 8) -> (B, 8, 8, 8) {
        conv: Conv2d<8, kernel = 3, padding = 1, stride = 1, padding = 2>,
    }
}

model! {
    /// The kernel given by position, then by name.
    pub struct C for (B, 1, 8, 8) -> (B, 1, 4, 4) {
        pool: MaxPool2d<2, kernel = 4>,
    }
}

model! {
    /// The drop probability given by position, then by name.
    pub struct E2 for (B, 4) -> (B, 4) {
        drop: Dropout<0.5, p = 0.9>,
    }
}

fn main() {}
