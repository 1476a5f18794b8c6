// Swapping the axes of [2, 3] gives [3, 2]; naming [2, 3] as the result is a `cargo check` error,
// with our message when named in the turbofish and a plain type mismatch when named on the `let`.
use volta::prelude::*;

fn main() {
    let x = Tensor::<Rank2<2, 3>>::ones();
    let _y = x.permute::<Rank2<2, 3>, Axes2<1, 0>>();
    let _z: Tensor<Rank2<2, 3>> = x.permute::<_, Axes2<1, 0>>();
}
