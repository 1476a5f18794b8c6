// Taking every 2nd element of axis 1 of [2, 5] into a named length 2 (ceil(5 / 2) is 3) fails `cargo build`.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 5>>::ones();
    let _y: Tensor<Rank2<2, 2>> = x.stride::<Axis<1>, 2, _>();
}
