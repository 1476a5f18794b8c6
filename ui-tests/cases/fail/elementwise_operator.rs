// `&a + &b` on different shapes ([2, 3] and [2, 4]) is a `cargo check` error naming both shapes.
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank2<2, 3>>::ones();
    let b = Tensor::<Rank2<2, 4>>::ones();
    let _c = &a + &b;
}
