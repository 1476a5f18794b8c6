// Expanding [2, 3] to [2, 4] (3 is neither 4 nor 1) fails `cargo build` via a const assert.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _y = x.expand::<Rank2<2, 4>>();
}
