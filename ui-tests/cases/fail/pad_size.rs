// Padding axis 1 of [2, 3] by 1 + 2 into a named [2, 5] (3 + 1 + 2 is 6) fails `cargo build`.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _y: Tensor<Rank2<2, 5>> = x.pad::<Axis<1>, 1, 2, _>(0.0);
}
