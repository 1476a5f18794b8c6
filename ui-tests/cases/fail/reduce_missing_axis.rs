// Summing a rank-2 tensor over `Axis<3>` (which does not exist) is a `cargo check` error.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _s = x.sum::<_, Axis<3>>();
}
