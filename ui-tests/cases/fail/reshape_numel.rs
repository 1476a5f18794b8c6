// Reshaping [2, 3] (6 elements) to [4, 2] (8 elements) fails `cargo build` via a const assert.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _y = x.reshape::<Rank2<4, 2>>();
}
