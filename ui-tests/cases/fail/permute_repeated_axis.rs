// `Axes2<0, 0>` names axis 0 twice, so it is not a permutation: a `cargo check` error.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _y = x.permute::<_, Axes2<0, 0>>();
}
