// Flattening [2, 3, 4] (24 elements) to [20] fails `cargo build` via a const assert.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank3<2, 3, 4>>::ones();
    let _y = x.flatten::<Rank1<20>>();
}
