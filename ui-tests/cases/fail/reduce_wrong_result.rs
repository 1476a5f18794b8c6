// Naming the reduction's result explicitly, [2, 3] summed over axis 1 is [2], not [3]: a `cargo check` error.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _s = x.sum::<Rank1<3>, Axis<1>>();
}
