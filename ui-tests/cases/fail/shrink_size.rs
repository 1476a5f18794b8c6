// Shrinking axis 1 of [2, 5] from START = 3 to a named length 4 (3 + 4 > 5) fails `cargo build`.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 5>>::ones();
    let _y: Tensor<Rank2<2, 4>> = x.shrink::<Axis<1>, 3, _>();
}
