// `a.add(&b)` on different shapes ([2, 3] and [3, 2]) is a `cargo check` error naming both shapes.
use volta::prelude::*;

fn main() {
    let a = Tensor::<Rank2<2, 3>>::ones();
    let b = Tensor::<Rank2<3, 2>>::ones();
    let _c = a.add(&b);
}
