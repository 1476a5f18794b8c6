// Broadcasting a [3] bias to [2, 4] (the kept dim 3 is not 4) is a `cargo check` error naming both shapes.
use volta::prelude::*;

fn main() {
    let bias = Tensor::<Rank1<3>>::ones();
    let _b: Tensor<Rank2<2, 4>> = bias.broadcast::<_, Axis<0>>();
}
