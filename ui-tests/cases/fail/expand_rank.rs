// `expand` keeps the rank: expanding [1, 3] to [2, 2, 3] is a `cargo check` error naming both shapes.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<1, 3>>::ones();
    let _y = x.expand::<Rank3<2, 2, 3>>();
}
