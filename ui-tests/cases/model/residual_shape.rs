use volta::prelude::*;

model! {
    /// Doubles the channels, so `x + f(x)` cannot be formed.
    pub struct Widen for (B, 8, 4, 4) -> (B, 16, 4, 4) {
        conv: Conv2d<16, kernel = 3, padding = 1>,
    }
}

model! {
    /// Wraps it in a residual connection.
    pub struct Net for (B, 8, 4, 4) -> (B, 8, 4, 4) {
        block: Residual<Widen>,
    }
}

fn main() {}
