use volta::prelude::*;

model! {
    /// Keeps 16 features.
    pub struct Block for (B, 16) -> (B, 16) {
        fc: Linear<16>,
    }
}

model! {
    /// The device written on the nested model.
    pub struct A for (B, 16) -> (B, 16) {
        block: Block<Cpu>,
    }
}

model! {
    /// A built-in layer inside `Residual`.
    pub struct C for (B, 16) -> (B, 16) {
        res: Residual<Linear<16>>,
    }
}

fn main() {}
