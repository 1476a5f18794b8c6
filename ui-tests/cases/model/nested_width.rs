use volta::prelude::*;

model! {
    /// Ends at 16 features.
    pub struct Body for (B, 8) -> (B, 16) {
        fc: Linear<16>,
    }
}

model! {
    /// A `Linear<32, 10>` after it, which takes 32.
    pub struct Net for (B, 8) -> (B, 10) {
        body: Body,
        fc: Linear<32, 10>,
    }
}

fn main() {}
